import Foundation
import RainCore
import RainSystem

/// Unix-domain socket helpers: the only place (with the event loop) that makes socket syscalls.
public enum UnixSocket {
    /// The longest socket path (sun_path holds 108 bytes including the NUL).
    public static let maximumPathLength = 107

    static func withAddress<R>(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> R) throws(RainError) -> R {
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, bytes.count <= maximumPathLength else {
            throw RainError.invalid(
                "socket path is \(bytes.count) bytes; it must be 1 to \(maximumPathLength) bytes: \(path)", field: "socket")
        }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { buf in
            for (i, b) in bytes.enumerated() { buf[i] = b }
            buf[bytes.count] = 0
        }
        return withUnsafePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }

    /// Creates a non-blocking, close-on-exec stream socket.
    static func makeSocket(blocking: Bool) throws(RainError) -> Int32 {
        var type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        if !blocking { type |= Int32(SOCK_NONBLOCK.rawValue) }
        return try Syscall.socket(family: AF_UNIX, type: type)
    }

    /// Connects a blocking client socket.
    /// - Throws: RAIN_101 when nothing listens at `path` (missing file, refused).
    public static func connect(path: String) throws(RainError) -> Int32 {
        let fd = try makeSocket(blocking: true)
        let connected: Result<Void, RainError>
        do throws(RainError) {
            connected = try withAddress(path) { addr, len in
                Result { () throws(RainError) in try Syscall.connect(fd, to: addr, length: len) }
            }
        } catch {
            Syscall.closeUnchecked(fd, because: .failurePath)
            throw error
        }
        if case .failure(let error) = connected {
            Syscall.closeUnchecked(fd, because: .failurePath)
            let r = ErrnoError(code: error.errno ?? 0)
            throw RainError(
                .notInitialized,
                "cannot reach rainwalletd at \(path): \(r); is the daemon running? (start it with scripts/run or rainwalletd)",
                underlying: r)
        }
        return fd
    }

    /// True when a daemon accepts connections at `path`.
    public static func isAnswering(path: String) -> Bool {
        guard let fd = try? connect(path: path) else { return false }
        Syscall.closeUnchecked(fd, because: .socket)
        return true
    }

    /// Binds and listens on `path`, then sets the socket file's mode.
    ///
    /// A socket file left by a dead daemon is removed; one a live daemon answers on is refused
    /// (RAIN_102), as is any other kind of file at the path.
    public static func listen(path: String, mode: mode_t, backlog: Int32 = 512) throws(RainError) -> Int32 {
        var st = stat()
        if lstat(path, &st) == 0 {
            guard (st.st_mode & S_IFMT) == S_IFSOCK else {
                throw RainError.invalid(
                    "\(path) exists and is not a socket; remove it or choose another --socket", field: "socket")
            }
            if isAnswering(path: path) {
                throw RainError.invalid("another rainwalletd is already serving \(path)", field: "socket")
            }
            try Syscall.removeFile(path)  // stale: nothing answers
        }
        let fd = try makeSocket(blocking: false)
        do throws(RainError) {
            let bound = try withAddress(path) { addr, len in
                Result { () throws(RainError) in try Syscall.bind(fd, to: addr, length: len) }
            }
            if case .failure(let error) = bound {
                let rc = ErrnoError(code: error.errno ?? 0)
                throw RainError(.internalError, "cannot bind \(path): \(rc)", underlying: rc)
            }
            // fchmod on a socket fd does not apply to the path: chmod the file after bind.
            try Syscall.call("chmod \(path)") { chmod(path, mode) }
            try Syscall.listen(fd, backlog: backlog)
        } catch {
            Syscall.closeUnchecked(fd, because: .failurePath)
            throw error
        }
        return fd
    }

    /// Makes sure the socket directory exists with `mode`, owned by this uid; repairs the mode of
    /// a directory we own; refuses one owned by someone else.
    public static func prepareDirectory(_ dir: String, mode: mode_t) throws(RainError) {
        var st = stat()
        if stat(dir, &st) != 0 {
            try AtomicFile.makeDirectory(dir, mode: mode)
            guard stat(dir, &st) == 0 else { throw AtomicFile.ioError("stat", dir) }
        }
        guard (st.st_mode & S_IFMT) == S_IFDIR else {
            throw RainError.invalid("\(dir) is not a directory", field: "socket")
        }
        guard st.st_uid == getuid() else {
            throw RainError(
                .unauthorized, "socket directory \(dir) is owned by uid \(st.st_uid), not \(getuid()); refusing to use it")
        }
        if st.st_mode & 0o777 != mode {
            try Syscall.call("chmod \(dir)") { chmod(dir, mode) }
        }
    }
}
