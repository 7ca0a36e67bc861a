internal import CSystem
import Glibc
import RainCore

extension Syscall {
    /// A pidfd of the process at the other end of a Unix socket (`getsockopt(SO_PEERPIDFD)`, Linux
    /// 6.5): it names the process that connected, even if its pid is reused later.
    /// - Returns: the pidfd (close-on-exec), or nil when the kernel has no `SO_PEERPIDFD`
    ///   (`ENOPROTOOPT`); the caller then falls back to `openProcessDescriptor(pid:)`.
    /// - Throws: RAIN_502 naming `getsockopt SO_PEERPIDFD`; `error.errno` is `ESRCH` when the peer
    ///   has exited and was reaped already.
    public static func peerProcessDescriptor(_ fd: Int32) throws(RainError) -> Int32? {
        var pidfd: Int32 = -1
        switch retrying({ rain_peer_pidfd(fd, &pidfd) }) {
        case .success: return pidfd
        case .failure(let e) where e.code == ENOPROTOOPT: return nil
        case .failure(let e): throw error("getsockopt SO_PEERPIDFD", e)
        }
    }

    /// A pidfd of the process `pid` (`pidfd_open`, Linux 5.3), close-on-exec.
    /// - Throws: RAIN_502 naming `pidfd_open`; `error.errno` is `ESRCH` when no such process exists.
    public static func openProcessDescriptor(pid: Int32) throws(RainError) -> Int32 {
        try call("pidfd_open(\(pid))") { rain_pidfd_open(pid) }
    }

    /// Whether the process behind a pidfd has exited (a zombie counts as exited): a pidfd becomes
    /// readable when its process ends (`poll` with no wait).
    /// - Throws: RAIN_502 naming `poll`.
    public static func hasExited(processDescriptor fd: Int32) throws(RainError) -> Bool {
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ready = try call("poll pidfd") { Glibc.poll(&descriptor, 1, 0) }
        return ready > 0 && descriptor.revents & Int16(POLLIN | POLLHUP | POLLERR | POLLNVAL) != 0
    }

    /// Opens `name` relative to the directory `dirfd` (`openat`), close-on-exec.
    /// - Parameters:
    ///   - path: the full path, for messages (`/proc/123/status`).
    /// - Throws: RAIN_502 `cannot open <path>: <strerror>`; `error.errno` tells `ENOENT`, `EACCES`, ….
    public static func open(
        at dirfd: Int32, _ name: String, _ access: FileAccess, options: OpenOptions = [], path: String
    ) throws(RainError) -> Int32 {
        let flags = access.flags | options.rawValue | O_CLOEXEC
        return try call("open", path: path) { Glibc.openat(dirfd, name, flags, 0) }
    }

    /// The target of the symbolic link `name` in the directory `dirfd` (`readlinkat`), at most
    /// `limit` bytes of it.
    /// - Throws: RAIN_502 `cannot readlink <path>: <strerror>`, or when the target is longer than `limit`.
    public static func readLink(at dirfd: Int32, _ name: String, path: String, limit: Int = 4096) throws(RainError) -> String {
        var buffer = [CChar](repeating: 0, count: limit + 1)
        let count = try buffer.withUnsafeMutableBufferPointer { p in
            Result { () throws(RainError) in
                try call("readlink", path: path) { rain_readlinkat(dirfd, name, p.baseAddress, UInt(p.count)) }
            }
        }.get()
        guard count <= limit else {
            throw RainError(.internalError, "the link \(path) points to a path longer than \(limit) bytes")
        }
        return String(decoding: buffer[0..<Int(count)].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Reads at most `limit` bytes of the file `name` in the directory `dirfd`: memory stays bounded
    /// whatever the file's size (a process's `environ` or `cmdline` can be megabytes).
    /// - Returns: the bytes read, and whether the file went on beyond `limit`.
    /// - Throws: RAIN_502 naming `open` or `read` and `path`.
    public static func readPrefix(
        at dirfd: Int32, _ name: String, path: String, limit: Int
    ) throws(RainError) -> (bytes: [UInt8], isTruncated: Bool) {
        let fd = try open(at: dirfd, name, .readOnly, options: [.noControllingTerminal, .nonBlocking], path: path)
        defer { closeUnchecked(fd, because: .readOnly) }
        // Grown as the file turns out larger (most are a few hundred bytes): no 64 KiB buffer per
        // small file read.
        var bytes = [UInt8](repeating: 0, count: min(limit + 1, 4096))
        var count = 0
        while true {
            if count == bytes.count {
                if bytes.count >= limit + 1 { break }
                bytes.append(contentsOf: repeatElement(0, count: min(bytes.count, limit + 1 - bytes.count)))
            }
            let n = try bytes.withUnsafeMutableBytes { buffer in
                Result { () throws(RainError) in
                    try read(fd, into: UnsafeMutableRawBufferPointer(rebasing: buffer[count...]), path: path)
                }
            }.get()
            if n == 0 { break }
            count += n
        }
        bytes.removeSubrange(min(count, limit)...)
        return (bytes, count > limit)
    }

    /// The names in the directory `name` of `dirfd` (without `.` and `..`), at most `limit` of them.
    /// - Throws: RAIN_502 naming `open`, `opendir` or `readdir` and `path`.
    public static func directoryEntries(at dirfd: Int32, _ name: String, path: String, limit: Int) throws(RainError) -> [String] {
        let fd = try open(at: dirfd, name, .readOnly, options: [.directory], path: path)
        guard let directory = fdopendir(fd) else {
            let e = ErrnoError(code: errno)
            closeUnchecked(fd, because: .failurePath)
            throw error("opendir", path: path, e)
        }
        // closedir closes fd too; it fails only for a bad handle.
        defer { _ = closedir(directory) }
        var names: [String] = []
        while names.count < limit {
            errno = 0
            guard let entry = readdir(directory) else {
                if errno != 0 { throw error("readdir", path: path, ErrnoError(code: errno)) }
                break
            }
            let entryName = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if entryName != "." && entryName != ".." { names.append(entryName) }
        }
        return names
    }
}
