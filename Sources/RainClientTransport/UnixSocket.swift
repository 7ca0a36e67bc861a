import FoundationEssentials
import Glibc
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

    /// Connects a blocking client socket, whoever listens there (clients of the daemon use
    /// `connect(path:daemonUID:)`, which checks who that is).
    /// - Throws: RAIN_101 `daemon_not_running` when nothing listens at `path` (missing file,
    ///   refused), saying how to start the daemon where this program was installed.
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
                "cannot reach rainwalletd at \(path): \(r); the wallet service is not running: "
                    + DaemonInstallation.current.startAdvice,
                details: .init(reason: daemonNotRunningReason), underlying: r)
        }
        return fd
    }

    /// RAIN_101's reason when nothing listens at the socket: no daemon runs there.
    public static let daemonNotRunningReason = "daemon_not_running"

    /// Connects to the daemon at `path` and makes sure it is the one the caller means:
    /// the socket's directory must be a real directory owned by `daemonUID` (or root) that group
    /// and others cannot write, and the process listening must run as `daemonUID` (`SO_PEERCRED`).
    /// - Parameter daemonUID: the uid the daemon must run as: the caller's own unless the caller
    ///   named another (`--daemon-uid`).
    /// - Throws: RAIN_101 when no daemon answers, or when the directory or the daemon's uid is not
    ///   what was expected, naming the owner found and what to do.
    public static func connect(path: String, daemonUID: uid_t) throws(RainError) -> Int32 {
        let dir = OwnedPath.parent(of: path)
        // A missing directory is left to connect, which reports "cannot reach".
        if let status = try? Syscall.linkStatus(dir) {
            try checkClientDirectory(status, dir: dir, daemonUID: daemonUID)
        }
        let fd = try connect(path: path)
        let peer: SocketPeer
        do throws(RainError) {
            peer = try Syscall.peerCredentials(fd)
        } catch {
            Syscall.closeUnchecked(fd, because: .failurePath)
            throw RainError(.notInitialized, "cannot tell who serves \(path): \(error.message)", underlying: error)
        }
        guard peer.uid == daemonUID else {
            Syscall.closeUnchecked(fd, because: .failurePath)
            throw RainError(
                .notInitialized,
                "the daemon at \(path) runs as uid \(peer.uid) (pid \(peer.pid)), not as uid \(daemonUID)"
                    + (daemonUID == geteuid() ? " (you)" : "") + ": it may be another user's program posing as rainwalletd. "
                    + Self.daemonUIDAdvice(owner: peer.uid))
        }
        return fd
    }

    static func daemonUIDAdvice(owner: uid_t) -> String {
        "If you mean to use the daemon of uid \(owner), pass --daemon-uid \(owner) (RAINWALLET_DAEMON_UID, "
            + "RainWalletConfig.daemonUID); otherwise stop it and start your own rainwalletd (see rainwalletd --help)"
    }

    /// The client's check of the socket directory: no symbolic link, owned by the daemon's uid or
    /// root, not writable by group or others (whoever can write it can put their own socket there).
    static func checkClientDirectory(_ status: FileStatus, dir: String, daemonUID: uid_t) throws(RainError) {
        if status.isSymbolicLink {
            throw RainError(
                .notInitialized,
                "the socket directory \(dir) is a symbolic link; rainwallet does not follow one to its daemon: "
                    + "give the real path with --socket")
        }
        guard status.isDirectory else {
            throw RainError(.notInitialized, "cannot reach rainwalletd: \(dir) is \(status.typeName), not a directory")
        }
        guard status.uid == daemonUID || status.uid == 0 else {
            throw RainError(
                .notInitialized,
                "the socket directory \(dir) is owned by uid \(status.uid), not by uid \(daemonUID)"
                    + (daemonUID == geteuid() ? " (you)" : "") + ": another user may be posing as rainwalletd. "
                    + daemonUIDAdvice(owner: status.uid))
        }
        if status.isWritableByOthers {
            throw RainError(
                .notInitialized,
                "the socket directory \(dir) has mode \(status.octalPermissions): other users could replace the socket "
                    + "in it; run the daemon with a socket in a directory only its user can write (the default)")
        }
    }

    /// True when a daemon accepts connections at `path` (whoever runs it).
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

    /// Makes sure the socket directory exists with `mode` and belongs to this uid.
    ///
    /// A directory made here gets `mode`. One that was there already must be a real directory
    /// (never a symbolic link) owned by this uid that group and others cannot write. Its mode is
    /// changed only when `isDaemonsOwn` (the default socket directory, which only rainwalletd makes):
    /// a directory given with `--socket` is never changed (a root daemon once turned a shared 1777
    /// directory into 0700); when the uids allowed need to traverse it (`mode` 0711) and cannot,
    /// the daemon refuses and says how to fix it.
    /// - Throws: RAIN_102 naming the directory, what is wrong and the fix.
    public static func prepareDirectory(_ dir: String, mode: mode_t, isDaemonsOwn: Bool) throws(RainError) {
        let isCreated = try OwnedPath.makeOrCheckDirectory(dir, mode: mode, name: "socket directory", field: "socket")
        guard !isCreated, let status = try Syscall.linkStatus(dir), status.permissions != mode else { return }
        if isDaemonsOwn {
            try OwnedPath.setDirectoryMode(dir, mode)
            return
        }
        if mode & 0o001 != 0, status.permissions & 0o001 == 0 {
            throw RainError.invalid(
                "socket directory \(dir) has mode \(status.octalPermissions), so the uids the config allows cannot reach "
                    + "the socket; rainwalletd does not change the mode of a directory it did not create: run chmod 711 \(dir)",
                field: "socket")
        }
    }
}
