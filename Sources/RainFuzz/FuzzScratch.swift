import Foundation
#if canImport(Glibc)
    import Glibc
#endif
import RainCore
import RainCrypto
import RainDevice
import RainSystem

/// A private temporary directory for targets that must read their input from a file, as the
/// daemon does. Removed when the value is released.
package final class FuzzScratch: Sendable {
    /// The directory (0700), under `$TMPDIR` or `/tmp`.
    package let directory: String
    /// Session storage over the directory, keyed with ``storageKey``.
    let storage: EncryptedFileStorage
    /// A logger that drops everything (readers log corrupt input; the fuzzer does not care).
    let logger: Logger

    /// The fixed storage key of the fuzzed session files: 32 bytes 0x01…0x20. Fuzzing only.
    static let storageKey: [UInt8] = (1...32).map { UInt8($0) }

    /// Creates the directory and writes the fixed storage key into it.
    /// - Throws: RAIN_502 when the directory or the key file cannot be made.
    package init() throws(RainError) {
        let base = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        var template = Array("\(base)/rainfuzz-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { buf -> Bool in
            guard let base = buf.baseAddress else { return false }
            return mkdtemp(base) != nil
        }
        guard made else { throw AtomicFile.ioError("create the fuzzing directory in", base) }
        directory = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        try AtomicFile.write(Self.storageKey, to: "\(directory)/storage.key", mode: 0o600)
        try AtomicFile.makeDirectory("\(directory)/identity")
        let logger = Logger(label: "fuzz", minimumLevel: .error, sink: DiscardingSink())
        self.logger = logger
        storage = try EncryptedFileStorage(stateDirectory: directory, logger: logger)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Writes `bytes` to `name` inside the directory, mode 0600, without fsync (a fuzzer writes
    /// one file per input; durability does not matter here).
    /// - Returns: the file's path.
    /// - Throws: RAIN_502 when the file cannot be written.
    @discardableResult
    package func write(_ bytes: [UInt8], to name: String) throws(RainError) -> String {
        let path = "\(directory)/\(name)"
        // A fresh file each time: ext4 flushes a file truncated and rewritten in place at close
        // (auto_da_alloc), which made every input wait for the disk.
        try Syscall.removeFile(path)
        let fd = try Syscall.open(path, .writeOnly, options: [.create, .exclusive], mode: 0o600)
        defer { Syscall.closeUnchecked(fd, because: .scratch) }
        try bytes.withUnsafeBytes { buffer in
            Result { () throws(RainError) in try Syscall.writeAll(fd, buffer, path: path) }
        }.get()
        return path
    }
}

/// Drops every log line.
struct DiscardingSink: LogSink {
    func write(_ line: String) {}
}
