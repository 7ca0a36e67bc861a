#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif
import RainCore
import RainSystem

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

    /// Loads a 32-byte key file with the checks of ``loadOrCreate(at:byteCount:)``; nil when it does
    /// not exist.
    /// - Throws: RAIN_102 naming the path and the fix (mode, owner, size, type); RAIN_502 on I/O.
    public static func load(at path: String) throws(RainError) -> SymmetricKey? {
        try load(at: path, byteCount: 32)
    }

    /// Replaces the key file at `path` with `key`: a 0600 temp file beside it, fsync, rename, fsync
    /// of the directory, so a crash leaves the old key or the new one. The key's bytes go from its
    /// zeroed memory to the file without passing through an ordinary array.
    /// - Throws: RAIN_502 naming the path and the failing step.
    public static func write(_ key: SymmetricKey, to path: String) throws(RainError) {
        try key.withUnsafeBytes { buffer in
            Result { () throws(RainError) in try AtomicFile.write(buffer, to: path, mode: 0o600) }
        }.get()
    }

    /// Loads and checks the key file; nil when it does not exist.
    static func load(at path: String, byteCount: Int) throws(RainError) -> SymmetricKey? {
        let fd: Int32
        do throws(RainError) {
            fd = try openPrivate(path)
        } catch {
            if error.errno == ENOENT { return nil }
            throw error
        }
        defer { Syscall.closeUnchecked(fd, because: .readOnly) }
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
        let fd: Int32
        do throws(RainError) {
            fd = try openPrivate(path)
        } catch {
            if error.errno == ENOENT { throw refusal("key file \(path) does not exist", reason: "key_file_missing") }
            throw error
        }
        defer { Syscall.closeUnchecked(fd, because: .readOnly) }
        let info = try checkOwnerOnly(fd: fd, path: path)
        guard info.st_size > 0, Int(info.st_size) <= maximumByteCount else {
            throw refusal(
                "key file \(path) is \(info.st_size) bytes long; expected 1 to \(maximumByteCount) bytes", reason: "key_file_size"
            )
        }
        return try withSecretScratch(byteCount: Int(info.st_size)) { (buffer) throws(RainError) -> R in
            try readExactly(fd: fd, into: buffer, path: path)
            return try body(UnsafeRawBufferPointer(buffer))
        }
    }

    /// Opens a key file for reading. O_NONBLOCK: opening a FIFO planted at the path must not hang;
    /// fstat then refuses it.
    /// O_NOFOLLOW: a symbolic link planted at the path is refused, never followed.
    private static func openPrivate(_ path: String) throws(RainError) -> Int32 {
        do throws(RainError) {
            return try Syscall.open(path, .readOnly, options: [.noControllingTerminal, .nonBlocking, .noFollow])
        } catch {
            guard error.errno == ELOOP else { throw error }
            throw refusal(
                "key file \(path) is a symbolic link; refusing to follow it: replace it with the file", reason: "key_file_type")
        }
    }

    /// Checks that the open file is a regular file owned by the effective uid that neither group nor
    /// others may access, and returns its status.
    private static func checkOwnerOnly(fd: Int32, path: String) throws(RainError) -> stat {
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw AtomicFile.ioError("stat", path) }
        try requireOwnerOnly(info, path: path, name: "key file", reasonPrefix: "key_file")
        return info
    }

    /// Refuses a file that must be private to this user unless its status `info` shows a regular
    /// file owned by the effective uid that neither group nor others may access.
    /// - Parameters:
    ///   - name: what the messages call the file (`"key file"`).
    ///   - reasonPrefix: the start of `details.reason` (`key_file` gives `key_file_type`,
    ///     `key_file_owner` or `key_file_mode`).
    ///   - notRegularAdvice: said after "is not a regular file".
    /// - Throws: RAIN_102 (`details.field` `path`) naming the file and the fix.
    package static func requireOwnerOnly(
        _ info: stat, path: String, name: String, reasonPrefix: String, notRegularAdvice: String = ""
    ) throws(RainError) {
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw refusal("\(name) \(path) is not a regular file\(notRegularAdvice)", reason: "\(reasonPrefix)_type")
        }
        let uid = geteuid()
        guard info.st_uid == uid else {
            throw refusal(
                "\(name) \(path) is owned by uid \(info.st_uid), not by the current user (uid \(uid)); "
                    + "run chown \(uid) \(path)", reason: "\(reasonPrefix)_owner")
        }
        guard info.st_mode & 0o077 == 0 else {
            throw refusal(
                "\(name) \(path) has mode \(octal(info.st_mode & 0o7777)), which lets other users read it; "
                    + "run chmod 600 \(path)", reason: "\(reasonPrefix)_mode")
        }
    }

    /// Creates the key file with a new random key; nil when the file already exists.
    static func create(at path: String, byteCount: Int) throws(RainError) -> SymmetricKey? {
        // O_EXCL also refuses to follow a symbolic link, even a dangling one.
        let fd: Int32
        do throws(RainError) {
            fd = try Syscall.open(
                path, .writeOnly, options: [.create, .exclusive, .noControllingTerminal], mode: 0o600)
        } catch {
            if error.errno == EEXIST { return nil }
            throw error
        }
        var isComplete = false
        defer {
            // A failure is being reported: the half-made file goes, best effort (a later run
            // refuses it by its size and says so).
            if !isComplete { _ = try? Syscall.removeFile(path) }
        }
        let key: SymmetricKey
        do {
            var isSynced = false
            defer { Syscall.closeUnchecked(fd, because: isSynced ? .synced : .failurePath) }
            // The umask may have narrowed the mode; 0600 exactly is what load() expects.
            try Syscall.setMode(fd, 0o600, path: path)
            key = try SymmetricKey.random(byteCount: byteCount)
            let written = key.withUnsafeBytes { buffer in
                Result { () throws(RainError) in try Syscall.writeAll(fd, buffer, path: path) }
            }
            try written.get()
            try Syscall.fsync(fd, path: path)
            isSynced = true
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

    private static func readExactly(
        fd: Int32, into buffer: UnsafeMutableRawBufferPointer, path: String
    ) throws(RainError) {
        guard try Syscall.readExactly(fd, into: buffer, path: path) else {
            throw RainError(.internalError, "key file \(path) became shorter while it was read")
        }
    }
}
