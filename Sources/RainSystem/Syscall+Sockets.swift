internal import CSystem
import Glibc
import RainCore

/// How a non-blocking `connect` went.
public enum ConnectResult: Sendable, Equatable {
    /// The connection is made.
    case connected
    /// The connection is being made (`EINPROGRESS`, or `EINTR`, after which it goes on in the
    /// background): wait until the socket is writable, then read `Syscall.pendingError`.
    case inProgress
}

/// What a descriptor handed over by a service manager is (`Syscall.socketKind`).
public struct SocketKind: Sendable, Equatable {
    /// The address family (`SO_DOMAIN`): `AF_UNIX`, `AF_INET`, ….
    public var family: Int32
    /// The socket type (`SO_TYPE`): `SOCK_STREAM`, ….
    public var type: Int32
    /// True for a listening socket (`SO_ACCEPTCONN`).
    public var isListening: Bool
}

/// The process at the other end of a Unix socket (`SO_PEERCRED`).
public struct SocketPeer: Sendable, Equatable {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32
}

extension Syscall {
    /// Creates a socket.
    /// - Parameters:
    ///   - family: `AF_UNIX`, `AF_INET`, `AF_INET6`.
    ///   - type: `SOCK_STREAM` or `SOCK_DGRAM`, with `SOCK_CLOEXEC` / `SOCK_NONBLOCK` or'ed in.
    /// - Throws: RAIN_502 naming `socket`.
    public static func socket(family: Int32, type: Int32) throws(RainError) -> Int32 {
        try call("socket") { Glibc.socket(family, type, 0) }
    }

    /// Binds a socket to an address.
    /// - Throws: RAIN_502 naming `bind`; `error.errno` tells `EADDRINUSE`.
    public static func bind(_ fd: Int32, to address: UnsafePointer<sockaddr>, length: socklen_t) throws(RainError) {
        try call("bind") { Glibc.bind(fd, address, length) }
    }

    /// Makes a bound socket listen.
    /// - Throws: RAIN_502 naming `listen`.
    public static func listen(_ fd: Int32, backlog: Int32) throws(RainError) {
        try call("listen") { Glibc.listen(fd, backlog) }
    }

    /// Connects a blocking socket, calling again when interrupted.
    /// - Throws: RAIN_502 naming `connect`; `error.errno` tells `ENOENT`, `ECONNREFUSED`, ….
    public static func connect(_ fd: Int32, to address: UnsafePointer<sockaddr>, length: socklen_t) throws(RainError) {
        try call("connect") { Glibc.connect(fd, address, length) }
    }

    /// Starts connecting a non-blocking socket. Not called again after `EINTR`: the connection
    /// goes on in the background, as after `EINPROGRESS`.
    /// - Throws: RAIN_502 naming `connect`; `error.errno` tells `ECONNREFUSED`, ….
    public static func connectNonBlocking(
        _ fd: Int32, to address: UnsafePointer<sockaddr>, length: socklen_t
    ) throws(RainError) -> ConnectResult {
        guard Glibc.connect(fd, address, length) != 0 else { return .connected }
        let e = ErrnoError(code: errno)
        if e.code == EINPROGRESS || e.code == EINTR { return .inProgress }
        throw error("connect", e)
    }

    /// The error a non-blocking connect ended with (`SO_ERROR`), 0 when it succeeded.
    /// - Throws: RAIN_502 naming `getsockopt SO_ERROR`.
    public static func pendingError(_ fd: Int32) throws(RainError) -> Int32 {
        var value: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        try call("getsockopt SO_ERROR") { getsockopt(fd, SOL_SOCKET, SO_ERROR, &value, &length) }
        return value
    }

    /// Accepts a connection on a non-blocking listening socket; the new socket is non-blocking
    /// and close-on-exec (`accept4`).
    /// - Returns: the descriptor, or `.wouldBlock` when no connection is waiting.
    /// - Throws: RAIN_502 naming `accept4`; `error.errno` tells `EMFILE` / `ENFILE`.
    public static func accept(_ fd: Int32) throws(RainError) -> IOResult<Int32> {
        try callNonBlocking("accept4") { rain_accept4(fd) }
    }

    /// Sends up to `bytes.count` bytes on a blocking socket, with `MSG_NOSIGNAL` (a closed peer is
    /// `EPIPE`, not a `SIGPIPE` that kills the process).
    /// - Returns: the count sent.
    /// - Throws: RAIN_502 naming `send`.
    public static func send(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(RainError) -> Int {
        try call("send") { rain_send(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Sends all of `bytes` on a blocking socket (`send` as many times as it takes).
    /// - Throws: RAIN_502 naming `send`.
    public static func sendAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(RainError) {
        var offset = 0
        while offset < bytes.count {
            offset += try send(fd, UnsafeRawBufferPointer(rebasing: bytes[offset...]))
        }
    }

    /// `read(2)` as a plain system call (`rain_read`: not glibc's cancellation point).
    static func plainRead(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
        rain_read(fd, buffer, count)
    }

    /// Sends up to `bytes.count` bytes on a non-blocking socket, with `MSG_NOSIGNAL`.
    /// - Returns: the count sent, or `.wouldBlock` when the send buffer is full.
    /// - Throws: RAIN_502 naming `send`.
    public static func sendNonBlocking(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(RainError) -> IOResult<Int> {
        try callNonBlocking("send") { rain_send(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Copies up to `buffer.count` bytes waiting on a socket without taking them from its
    /// queue and without blocking (`MSG_PEEK | MSG_DONTWAIT`).
    /// - Returns: the count copied (0 at end of stream), or `.wouldBlock` when nothing waits.
    /// - Throws: RAIN_502 naming `recv`.
    public static func peekNonBlocking(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(RainError) -> IOResult<Int>
    {
        try callNonBlocking("recv") { Glibc.recv(fd, buffer.baseAddress, buffer.count, Int32(MSG_PEEK | MSG_DONTWAIT)) }
    }

    /// Sends one datagram to `address` without blocking (`MSG_DONTWAIT | MSG_NOSIGNAL`).
    /// - Returns: the count sent, or `.wouldBlock` when the receiver's queue is full.
    /// - Throws: RAIN_502 naming `sendto`.
    public static func sendDatagram(
        _ fd: Int32, _ bytes: UnsafeRawBufferPointer, to address: UnsafePointer<sockaddr>, length: socklen_t
    ) throws(RainError) -> IOResult<Int> {
        try callNonBlocking("sendto") {
            sendto(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT), address, length)
        }
    }

    /// Shuts down both directions of a connected socket, which wakes a thread blocked reading it.
    /// Never fails for a reason the caller could act on: `ENOTCONN` means the peer already ended
    /// the connection (the state asked for), and `EBADF` / `ENOTSOCK` cannot happen for a socket
    /// its owner still holds.
    public static func shutdown(_ fd: Int32) {
        // The result is ignored on purpose; see above.
        _ = Glibc.shutdown(fd, Int32(SHUT_RDWR))
    }

    /// Waits until one of `descriptors` is ready or `timeoutMilliseconds` pass (-1: no limit).
    /// An interrupted wait returns 0, as a timeout does, so the caller's loop works out the time
    /// left and waits again.
    /// - Returns: the count of descriptors with events (their `revents`), 0 on timeout.
    /// - Throws: RAIN_502 naming `poll`.
    public static func poll(_ descriptors: inout [pollfd], timeoutMilliseconds: Int32) throws(RainError) -> Int {
        let result = descriptors.withUnsafeMutableBufferPointer {
            Glibc.poll($0.baseAddress, nfds_t($0.count), timeoutMilliseconds)
        }
        if result >= 0 { return Int(result) }
        let e = ErrnoError(code: errno)
        if e.code == EINTR { return 0 }
        throw error("poll", e)
    }

    /// Switches `O_NONBLOCK` on or off.
    /// - Throws: RAIN_502 naming `fcntl`.
    public static func setNonBlocking(_ fd: Int32, _ isNonBlocking: Bool) throws(RainError) {
        let flags = try call("fcntl F_GETFL") { fcntl(fd, F_GETFL) }
        let wanted = isNonBlocking ? flags | O_NONBLOCK : flags & ~O_NONBLOCK
        if wanted != flags { try call("fcntl F_SETFL") { fcntl(fd, F_SETFL, wanted) } }
    }

    /// Sets `FD_CLOEXEC`.
    /// - Throws: RAIN_502 naming `fcntl`.
    public static func setCloseOnExec(_ fd: Int32) throws(RainError) {
        let flags = try call("fcntl F_GETFD") { fcntl(fd, F_GETFD) }
        try call("fcntl F_SETFD") { fcntl(fd, F_SETFD, flags | FD_CLOEXEC) }
    }

    /// Sets an integer socket option (`setsockopt`).
    /// - Parameter label: the option's name, for the message (`"SO_REUSEADDR"`).
    /// - Throws: RAIN_502 naming `setsockopt <label>`.
    public static func setOption(_ fd: Int32, level: Int32, name: Int32, value: Int32, label: String) throws(RainError) {
        var value = value
        try call("setsockopt \(label)") { setsockopt(fd, level, name, &value, socklen_t(MemoryLayout<Int32>.size)) }
    }

    /// Sets how long a blocking read of socket `fd` waits before it fails with `EAGAIN`
    /// (`SO_RCVTIMEO`; 0: for ever).
    /// - Throws: RAIN_502 naming `setsockopt SO_RCVTIMEO`.
    public static func setReceiveTimeout(_ fd: Int32, milliseconds: Int32) throws(RainError) {
        var timeout = timeval(tv_sec: Int(milliseconds / 1000), tv_usec: Int(milliseconds % 1000) * 1000)
        try call("setsockopt SO_RCVTIMEO") {
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        }
    }

    /// Bounds how long a send on the blocking socket `fd` waits for room (`SO_SNDTIMEO`): a peer
    /// that stops reading then fails the send with `EAGAIN` instead of holding the thread.
    /// - Throws: RAIN_502 naming `setsockopt SO_SNDTIMEO`.
    public static func setSendTimeout(_ fd: Int32, milliseconds: Int32) throws(RainError) {
        var timeout = timeval(tv_sec: Int(milliseconds / 1000), tv_usec: Int(milliseconds % 1000) * 1000)
        try call("setsockopt SO_SNDTIMEO") {
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        }
    }

    /// Makes the kernel stamp every write on the Unix socket `fd` with its writer's pid
    /// (`SO_PASSCRED`), read back by `readNonBlockingWithWriter`. On a listening socket, the
    /// sockets it accepts inherit it, and writes made before the accept are stamped too.
    /// - Throws: RAIN_502 naming `setsockopt SO_PASSCRED`.
    public static func setPassCredentials(_ fd: Int32) throws(RainError) {
        try call("setsockopt SO_PASSCRED") { rain_set_pass_credentials(fd) }
    }

    /// Reads what is available from a non-blocking Unix socket with `SO_PASSCRED` set, with the
    /// pid of the process that wrote it: the kernel never joins two writers' bytes in one read.
    /// - Returns: the count read (0 at end of input) and the writer's pid (in this process's pid
    ///   namespace; 0 when the writer is outside it, -1 when the kernel attached none).
    /// - Throws: RAIN_502 naming `recvmsg`.
    public static func readNonBlockingWithWriter(
        _ fd: Int32, into buffer: UnsafeMutableRawBufferPointer
    ) throws(RainError) -> IOResult<(count: Int, writer: Int32)> {
        var writer: pid_t = -1
        switch try callNonBlocking("recvmsg", { rain_read_with_writer(fd, buffer.baseAddress, buffer.count, &writer) }) {
        case .processed(let count): return .processed((count, writer))
        case .wouldBlock: return .wouldBlock
        }
    }

    /// The bytes queued for reading on socket `fd`, not read yet (`SIOCINQ`).
    /// - Throws: RAIN_502 naming `ioctl SIOCINQ`.
    public static func queuedInput(_ fd: Int32) throws(RainError) -> Int {
        var count: Int32 = 0
        try call("ioctl SIOCINQ") { rain_socket_queued_input(fd, &count) }
        return Int(count)
    }

    /// The credentials of the process at the other end of a Unix socket.
    /// - Throws: RAIN_502 naming `getsockopt SO_PEERCRED`.
    public static func peerCredentials(_ fd: Int32) throws(RainError) -> SocketPeer {
        var pid: pid_t = 0
        var uid: uid_t = 0
        var gid: gid_t = 0
        try call("getsockopt SO_PEERCRED") { rain_peer_credentials(fd, &pid, &uid, &gid) }
        return SocketPeer(pid: pid, uid: uid, gid: gid)
    }

    /// The IP address of the peer of a TCP socket (`getpeername`), in network byte order: 4 bytes
    /// for IPv4 (an IPv4 address mapped into IPv6, `::ffff:a.b.c.d`, is given as its 4 bytes, so
    /// one host counts once), 16 for IPv6; empty for any other family (a Unix socket).
    /// - Throws: RAIN_502 naming `getpeername`; `error.errno` is `ENOTCONN` when the peer is gone.
    public static func peerAddress(_ fd: Int32) throws(RainError) -> [UInt8] {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        try withUnsafeMutablePointer(to: &storage) { p throws(RainError) in
            try p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa throws(RainError) in
                _ = try call("getpeername") { getpeername(fd, sa, &length) }
            }
        }
        switch Int32(storage.ss_family) {
        case AF_INET:
            var address = withUnsafeBytes(of: &storage) { $0.load(as: sockaddr_in.self).sin_addr }
            return withUnsafeBytes(of: &address) { Array($0) }
        case AF_INET6:
            var address = withUnsafeBytes(of: &storage) { $0.load(as: sockaddr_in6.self).sin6_addr }
            let bytes = withUnsafeBytes(of: &address) { Array($0) }
            let isMapped = bytes[0..<10].allSatisfy { $0 == 0 } && bytes[10] == 0xff && bytes[11] == 0xff
            return isMapped ? Array(bytes[12..<16]) : bytes
        default:
            return []
        }
    }

    /// The address family, type and listening state of a socket.
    /// - Throws: RAIN_502 naming `getsockopt`; `error.errno` is `ENOTSOCK` for a descriptor that
    ///   is not a socket.
    public static func socketKind(_ fd: Int32) throws(RainError) -> SocketKind {
        var family: Int32 = 0
        var type: Int32 = 0
        var accepting: Int32 = 0
        try call("getsockopt") { rain_socket_kind(fd, &family, &type, &accepting) }
        return SocketKind(family: family, type: type, isListening: accepting != 0)
    }
}
