import Foundation
#if canImport(Glibc)
    import Glibc
#endif
import RainCore
import RainCrypto
import RainDevice

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
        unlink(path)
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw AtomicFile.ioError("open", path) }
        defer { close(fd) }
        var written = 0
        while written < bytes.count {
            let n = bytes[written...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw AtomicFile.ioError("write", path) }
            written += n
        }
        return path
    }
}

/// Drops every log line.
struct DiscardingSink: LogSink {
    func write(_ line: String) {}
}
