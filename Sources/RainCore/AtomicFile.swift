import Foundation

/// Durable file writes: a temp file in the same directory, `fsync`, `rename`, then `fsync` of the
/// directory, so a crash leaves either the old or the new content, never a mix.
public enum AtomicFile {
    /// Replaces `path` with `bytes`, creating it with `mode`.
    /// - Throws: RAIN_502 naming the path and the failing step.
    public static func write(_ bytes: [UInt8], to path: String, mode: mode_t = 0o600) throws(RainError) {
        let dir = (path as NSString).deletingLastPathComponent
        let tmp = "\(path).tmp-\(getpid())-\(UInt64.random(in: 0...UInt64.max))"
        let fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard fd >= 0 else { throw ioError("create", tmp) }
        var ok = false
        defer {
            if !ok { unlink(tmp) }
        }
        do {
            defer { close(fd) }
            try writeAll(fd: fd, bytes, path: tmp)
            guard fchmod(fd, mode) == 0 else { throw ioError("chmod", tmp) }
            guard fsync(fd) == 0 else { throw ioError("fsync", tmp) }
        }
        guard rename(tmp, path) == 0 else { throw ioError("rename", path) }
        ok = true
        try syncDirectory(dir.isEmpty ? "." : dir)
    }

    /// Appends `bytes` to `path` (created with `mode`) and fsyncs it.
    public static func append(_ bytes: [UInt8], to path: String, mode: mode_t = 0o600) throws(RainError) {
        let existed = access(path, F_OK) == 0
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, mode)
        guard fd >= 0 else { throw ioError("open", path) }
        defer { close(fd) }
        try writeAll(fd: fd, bytes, path: path)
        guard fsync(fd) == 0 else { throw ioError("fsync", path) }
        if !existed { try syncDirectory((path as NSString).deletingLastPathComponent) }
    }

    /// Reads a whole file; nil when it does not exist.
    public static func read(_ path: String, limit: Int = 64 << 20) throws(RainError) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw ioError("open", path)
        }
        defer { close(fd) }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16384)
        while true {
            let n = chunk.withUnsafeMutableBytes { Foundation.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw ioError("read", path)
            }
            if n == 0 { break }
            out.append(contentsOf: chunk[0..<n])
            if out.count > limit { throw RainError(.internalError, "\(path) is larger than \(limit) bytes") }
        }
        return out
    }

    /// Creates a directory (and parents) with `mode` if missing.
    public static func makeDirectory(_ path: String, mode: mode_t = 0o700) throws(RainError) {
        var isDir: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDir) {
            if !isDir.boolValue { throw RainError(.invalidArgument, "\(path) exists and is not a directory") }
            return
        }
        do {
            try FileManager.default.createDirectory(
                atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: Int(mode)])
        } catch {
            throw RainError(.internalError, "cannot create directory \(path): \(error.localizedDescription)")
        }
    }

    /// fsyncs a directory so a rename or create in it is durable.
    public static func syncDirectory(_ dir: String) throws(RainError) {
        let fd = open(dir.isEmpty ? "." : dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw ioError("open directory", dir) }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw ioError("fsync directory", dir) }
    }

    static func writeAll(fd: Int32, _ bytes: [UInt8], path: String) throws(RainError) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { buf -> Int in
                guard let base = buf.baseAddress else { return 0 }
                return Foundation.write(fd, base + offset, buf.count - offset)
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw ioError("write", path)
            }
            offset += n
        }
    }

    /// RAIN_502 for a failed file operation, with errno's text.
    public static func ioError(_ step: String, _ path: String) -> RainError {
        let e = errno
        return RainError(.internalError, "cannot \(step) \(path): \(String(cString: strerror(e)))")
    }
}
