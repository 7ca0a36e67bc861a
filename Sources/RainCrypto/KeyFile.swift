#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import RainCore

/// A raw key stored in a file of its own, readable by its owner only.
public enum KeyFile {
    /// The largest key file accepted; keys are 32 bytes, this only bounds a mistake.
    static let maximumByteCount = 4096

    /// Loads a 32-byte key file, or creates it (random, mode 0600, O_EXCL, fsync file and directory)
    /// when missing.
    ///
    /// Creation uses `O_CREAT | O_EXCL` and does not follow a symbolic link; when another process
    /// creates the file first, its key is loaded instead. The directory must already exist.
    /// - Parameters:
    ///   - path: the key file.
    ///   - byteCount: the key length the file must have.
    /// - Returns: the key.
    /// - Throws: RAIN_102 naming the path and the fix (for example `chmod 600 <path>`) when the file
    ///   allows group or other access, has the wrong size, is not owned by the current (effective)
    ///   uid or is not a regular file; `details.field` is `"path"` and `details.reason` one of
    ///   `key_file_mode`, `key_file_size`, `key_file_owner`, `key_file_type`.
    ///   RAIN_502 when a system call fails.
    public static func loadOrCreate(at path: String, byteCount: Int = 32) throws(RainError) -> SymmetricKey {
        guard byteCount > 0, byteCount <= maximumByteCount else {
            throw RainError.invalid("key length must be between 1 and \(maximumByteCount) bytes", field: "byteCount")
        }
        guard !path.isEmpty else { throw RainError.invalid("key file path is empty", field: "path") }
        if let key = try load(at: path, byteCount: byteCount) { return key }
        if let key = try create(at: path, byteCount: byteCount) { return key }
        // Another process created the file between our open and our create: use its key.
        guard let key = try load(at: path, byteCount: byteCount) else {
            throw RainError(.internalError, "key file \(path) disappeared while it was being created")
        }
        return key
    }

    /// Loads and checks the key file; nil when it does not exist.
    static func load(at path: String, byteCount: Int) throws(RainError) -> SymmetricKey? {
        // O_NONBLOCK: opening a FIFO planted at the path must not hang; fstat then refuses it.
        let fd = retryingEINTR { open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK) }
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw AtomicFile.ioError("open", path)
        }
        defer { close(fd) }
        let info = try checkOwnerOnly(fd: fd, path: path)
        guard Int(info.st_size) == byteCount else {
            throw refusal(
                "key file \(path) is \(info.st_size) bytes long, expected \(byteCount); "
                    + "it is not a key file of this kind", reason: "key_file_size")
        }
        return try SymmetricKey(byteCount: byteCount) { (buffer) throws(RainError) in
            try readExactly(fd: fd, into: buffer, path: path)
        }
    }

    /// Reads a private file (a TLS private key in PEM, for example) that must pass the same checks
    /// as a key file, into zeroed scratch memory that is cleansed when `body` returns.
    /// - Parameters:
    ///   - path: the file.
    ///   - maximumByteCount: the largest size accepted.
    ///   - body: gets the file's bytes; they must not escape it.
    /// - Throws: RAIN_102 (`details.field` `"path"`, reasons as for `loadOrCreate`, plus
    ///   `key_file_missing` and `key_file_size` for an empty or too large file) naming the path and
    ///   the fix; RAIN_502 when a system call fails.
    static func withPrivateFile<R>(
        at path: String, maximumByteCount: Int, _ body: (UnsafeRawBufferPointer) throws(RainError) -> R
    ) throws(RainError) -> R {
        let fd = retryingEINTR { open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK) }
        if fd < 0 {
            if errno == ENOENT { throw refusal("key file \(path) does not exist", reason: "key_file_missing") }
            throw AtomicFile.ioError("open", path)
        }
        defer { close(fd) }
        let info = try checkOwnerOnly(fd: fd, path: path)
        guard info.st_size > 0, Int(info.st_size) <= maximumByteCount else {
            throw refusal(
                "key file \(path) is \(info.st_size) bytes long; expected 1 to \(maximumByteCount) bytes", reason: "key_file_size")
        }
        return try withSecretScratch(byteCount: Int(info.st_size)) { (buffer) throws(RainError) -> R in
            try readExactly(fd: fd, into: buffer, path: path)
            return try body(UnsafeRawBufferPointer(buffer))
        }
    }

    /// Checks that the open file is a regular file owned by the effective uid that neither group nor
    /// others may access, and returns its status.
    private static func checkOwnerOnly(fd: Int32, path: String) throws(RainError) -> stat {
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw AtomicFile.ioError("stat", path) }

        guard info.st_mode & S_IFMT == S_IFREG else {
            throw refusal("key file \(path) is not a regular file", reason: "key_file_type")
        }
        let uid = geteuid()
        guard info.st_uid == uid else {
            throw refusal(
                "key file \(path) is owned by uid \(info.st_uid), not by the current user (uid \(uid)); "
                    + "run chown \(uid) \(path)", reason: "key_file_owner")
        }
        guard info.st_mode & 0o077 == 0 else {
            throw refusal(
                "key file \(path) has mode \(octal(info.st_mode & 0o7777)), which lets other users read it; "
                    + "run chmod 600 \(path)", reason: "key_file_mode")
        }
        return info
    }

    /// Creates the key file with a new random key; nil when the file already exists.
    static func create(at path: String, byteCount: Int) throws(RainError) -> SymmetricKey? {
        // O_EXCL also refuses to follow a symbolic link, even a dangling one.
        let fd = retryingEINTR { open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0o600) }
        if fd < 0 {
            if errno == EEXIST { return nil }
            throw AtomicFile.ioError("create", path)
        }
        var isComplete = false
        defer {
            if !isComplete { unlink(path) }
        }
        let key: SymmetricKey
        do {
            defer { close(fd) }
            // The umask may have narrowed the mode; 0600 exactly is what load() expects.
            guard fchmod(fd, 0o600) == 0 else { throw AtomicFile.ioError("chmod", path) }
            key = try SymmetricKey.random(byteCount: byteCount)
            let written = key.withUnsafeBytes { buffer in
                Result { () throws(RainError) in try writeAll(fd: fd, buffer, path: path) }
            }
            try written.get()
            guard fsync(fd) == 0 else { throw AtomicFile.ioError("fsync", path) }
        }
        isComplete = true
        try AtomicFile.syncDirectory(directory(of: path))
        return key
    }

    private static func refusal(_ message: String, reason: String) -> RainError {
        RainError.invalid(message, field: "path", reason: reason)
    }

    private static func octal(_ mode: mode_t) -> String {
        let digits = String(mode, radix: 8)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }

    static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        let directory = String(path[..<slash])
        return directory.isEmpty ? "/" : directory
    }

    /// Calls a system call again while it fails with EINTR.
    private static func retryingEINTR<T: BinaryInteger>(_ call: () -> T) -> T {
        while true {
            let result = call()
            if result < 0, errno == EINTR { continue }
            return result
        }
    }

    private static func readExactly(
        fd: Int32, into buffer: UnsafeMutableRawBufferPointer, path: String
    ) throws(RainError) {
        guard let base = buffer.baseAddress else { return }
        var offset = 0
        while offset < buffer.count {
            let count = retryingEINTR { read(fd, base + offset, buffer.count - offset) }
            if count < 0 { throw AtomicFile.ioError("read", path) }
            if count == 0 { throw RainError(.internalError, "key file \(path) became shorter while it was read") }
            offset += count
        }
    }

    private static func writeAll(fd: Int32, _ buffer: UnsafeRawBufferPointer, path: String) throws(RainError) {
        guard let base = buffer.baseAddress else { return }
        var offset = 0
        while offset < buffer.count {
            let count = retryingEINTR { write(fd, base + offset, buffer.count - offset) }
            if count < 0 { throw AtomicFile.ioError("write", path) }
            offset += count
        }
    }
}
