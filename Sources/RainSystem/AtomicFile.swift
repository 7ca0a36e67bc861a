import FoundationEssentials
import Glibc
import RainCore

/// Durable file writes: a temp file in the same directory, `fsync`, `rename`, then `fsync` of the
/// directory, so a crash leaves either the old or the new content, never a mix. Every call goes
/// through `Syscall` (EINTR retried, every result checked).
public enum AtomicFile {
    /// Replaces `path` with `bytes`, creating it with `mode`.
    /// - Throws: RAIN_502 naming the path and the failing step.
    public static func write(_ bytes: [UInt8], to path: String, mode: mode_t = 0o600) throws(RainError) {
        try bytes.withUnsafeBytes { buffer in
            Result { () throws(RainError) in try write(buffer, to: path, mode: mode) }
        }.get()
    }

    /// Replaces `path` with the bytes of `buffer` (a key's zeroed memory, say: they never pass
    /// through an ordinary array), creating it with `mode`.
    /// - Throws: RAIN_502 naming the path and the failing step.
    public static func write(_ buffer: UnsafeRawBufferPointer, to path: String, mode: mode_t = 0o600) throws(RainError) {
        let dir = PathText.deletingLastComponent(path)
        let tmp = "\(path).tmp-\(getpid())-\(UInt64.random(in: 0...UInt64.max))"
        let fd = try Syscall.open(tmp, .writeOnly, options: [.create, .exclusive, .noControllingTerminal], mode: mode)
        do throws(RainError) {
            do throws(RainError) {
                try Syscall.writeAll(fd, buffer, path: tmp)
                try Syscall.setMode(fd, mode, path: tmp)
                try Syscall.fsync(fd, path: tmp)
            } catch {
                Syscall.closeUnchecked(fd, because: .failurePath)
                throw error
            }
            // The data is on disk (fsync above): a failed close loses nothing.
            Syscall.closeUnchecked(fd, because: .synced)
            try Syscall.call("rename", path: path) { rename(tmp, path) }
        } catch {
            // The temp file is ours (created exclusively); leaving it would only waste space.
            _ = try? Syscall.removeFile(tmp)
            throw error
        }
        try syncDirectory(dir.isEmpty ? "." : dir)
    }

    /// Appends `bytes` to `path` (created with `mode`) and fsyncs it.
    ///
    /// The file is private to this user: a symbolic link at `path` is never followed (`O_NOFOLLOW`),
    /// and an existing file that is not a regular file owned by this uid with no access for group
    /// or others is refused before anything is written (what is appended may be secret, like the
    /// codes of the outbox).
    /// - Throws: RAIN_102 naming the file and the fix when it is refused; RAIN_502 when a call fails.
    public static func append(_ bytes: [UInt8], to path: String, mode: mode_t = 0o600) throws(RainError) {
        let existed = access(path, F_OK) == 0
        let fd = try Syscall.openOwnFile(
            path, .writeOnly, options: [.create, .append, .nonBlocking], mode: mode, isPrivate: true, name: "file",
            field: "path", fix: "remove it, or run chmod 600 \(path) if it is yours")
        do throws(RainError) {
            try Syscall.setNonBlocking(fd, false)
            try writeAll(fd: fd, bytes, path: path)
            try Syscall.fsync(fd, path: path)
        } catch {
            Syscall.closeUnchecked(fd, because: .failurePath)
            throw error
        }
        Syscall.closeUnchecked(fd, because: .synced)
        if !existed { try syncDirectory(PathText.deletingLastComponent(path)) }
    }

    /// Reads a whole file; nil when it does not exist.
    /// - Parameter options: more `open` options (`.noFollow` to refuse a symbolic link: `ELOOP`).
    public static func read(_ path: String, limit: Int = 64 << 20, options: OpenOptions = []) throws(RainError) -> [UInt8]? {
        let fd: Int32
        do throws(RainError) {
            fd = try Syscall.open(path, .readOnly, options: options)
        } catch {
            if error.errno == ENOENT { return nil }
            throw error
        }
        defer { Syscall.closeUnchecked(fd, because: .readOnly) }
        return try readAll(fd: fd, path: path, limit: limit)
    }

    /// Reads what is left of an open file, at most `limit` bytes.
    /// - Throws: RAIN_502 when a read fails or the file is larger than `limit`.
    public static func readAll(fd: Int32, path: String, limit: Int) throws(RainError) -> [UInt8] {
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16384)
        while true {
            let n = try chunk.withUnsafeMutableBytes { buffer in
                Result { () throws(RainError) in try Syscall.read(fd, into: buffer, path: path) }
            }.get()
            if n == 0 { break }
            out.append(contentsOf: chunk[0..<n])
            if out.count > limit { throw RainError(.internalError, "\(path) is larger than \(limit) bytes") }
        }
        return out
    }

    /// Creates a directory (and parents) with `mode` if missing.
    public static func makeDirectory(_ path: String, mode: mode_t = 0o700) throws(RainError) {
        var isDir = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDir) {
            if !isDir { throw RainError(.invalidArgument, "\(path) exists and is not a directory") }
            return
        }
        do {
            try FileManager.default.createDirectory(
                atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: Int(mode)])
        } catch {
            throw RainError(.internalError, "cannot create directory \(path): \(ErrorText.describe(error))")
        }
    }

    /// fsyncs a directory so a rename or create in it is durable.
    public static func syncDirectory(_ dir: String) throws(RainError) {
        let path = dir.isEmpty ? "." : dir
        let fd = try Syscall.open(path, .readOnly, options: [.directory])
        defer { Syscall.closeUnchecked(fd, because: .readOnly) }
        try Syscall.fsync(fd, path: path)
    }

    static func writeAll(fd: Int32, _ bytes: [UInt8], path: String) throws(RainError) {
        try bytes.withUnsafeBytes { buffer in
            Result { () throws(RainError) in try Syscall.writeAll(fd, buffer, path: path) }
        }.get()
    }

    /// RAIN_502 for a failed file operation, with errno's text (for callers that made the call
    /// themselves; prefer `Syscall.call`).
    public static func ioError(_ step: String, _ path: String) -> RainError {
        Syscall.error(step, path: path, ErrnoError(code: errno))
    }
}
