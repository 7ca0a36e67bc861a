import FoundationEssentials
import Glibc
import RainCore
import RainSystem

/// A listening socket handed over by a service manager (systemd socket activation).
public struct ActivatedSocket: Sendable, Equatable {
    /// The descriptor, now non-blocking and close-on-exec.
    public var descriptor: Int32
    /// The socket's bound address: a path, `@name` for an abstract address, or `(unnamed)`.
    public var address: String
}

/// Socket activation as `sd_listen_fds(3)` documents it, without libsystemd: systemd passes
/// listening sockets as descriptors 3, 4, … and says so in `LISTEN_PID`, `LISTEN_FDS` and
/// `LISTEN_FDNAMES`.
///
/// A socket taken this way belongs to the service manager's socket unit: the daemon never unlinks
/// or chmods its file (its mode comes from the unit's `SocketMode=`), and it keeps working across
/// daemon restarts because systemd holds it open.
public enum SocketActivation {
    /// The first passed descriptor (`SD_LISTEN_FDS_START`).
    public static let firstDescriptor: Int32 = 3
    /// The environment variables of the protocol, unset once read so no child inherits them.
    public static let environmentVariables = ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"]

    /// Which passed descriptor to use, from the environment alone.
    ///
    /// - Parameters:
    ///   - environment: the process environment.
    ///   - pid: this process's id: the variables apply only when `LISTEN_PID` equals it.
    ///   - name: the descriptor name to pick when several are passed (the socket unit's
    ///     `FileDescriptorName=`).
    /// - Returns: the descriptor and how many were passed, or nil when nothing was passed to this
    ///   process (no `LISTEN_PID`, another process's pid, no `LISTEN_FDS` or `LISTEN_FDS=0`).
    /// - Throws: RAIN_102 when the variables are malformed, or when several descriptors are
    ///   passed and `LISTEN_FDNAMES` does not name exactly one of them `name`.
    public static func selectDescriptor(
        environment: [String: String], pid: Int32, name: String
    ) throws(RainError) -> (descriptor: Int32, count: Int)? {
        guard let pidText = environment["LISTEN_PID"] else { return nil }
        guard let listenPID = Int32(pidText), listenPID > 0 else {
            throw RainError.invalid(
                "LISTEN_PID=\(pidText) is not a process id; socket activation is misconfigured", field: "LISTEN_PID")
        }
        guard listenPID == pid else { return nil }  // meant for another process (our parent)
        guard let countText = environment["LISTEN_FDS"] else { return nil }
        guard let count = Int(countText), count >= 0, count <= 1024 else {
            throw RainError.invalid(
                "LISTEN_FDS=\(countText) is not a descriptor count; socket activation is misconfigured", field: "LISTEN_FDS")
        }
        guard count > 0 else { return nil }
        if count == 1 { return (firstDescriptor, 1) }
        guard let namesText = environment["LISTEN_FDNAMES"] else {
            throw RainError.invalid(
                "the service manager passed \(count) sockets without LISTEN_FDNAMES; pass one socket, or name the daemon's FileDescriptorName=\(name) in the socket unit",
                field: "LISTEN_FDNAMES")
        }
        let names = namesText.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        guard names.count == count else {
            throw RainError.invalid(
                "LISTEN_FDNAMES has \(names.count) names for LISTEN_FDS=\(count) sockets; socket activation is misconfigured",
                field: "LISTEN_FDNAMES")
        }
        let matches = names.indices.filter { names[$0] == name }
        guard matches.count == 1, let index = matches.first else {
            throw RainError.invalid(
                "the service manager passed \(count) sockets (\(names.joined(separator: ", "))) and \(matches.isEmpty ? "none" : "more than one") is named \(name); set FileDescriptorName=\(name) on exactly one of them",
                field: "LISTEN_FDNAMES")
        }
        return (firstDescriptor + Int32(index), count)
    }

    /// Takes the listening socket the service manager passed, if any.
    ///
    /// Every passed descriptor is marked close-on-exec and `LISTEN_PID`, `LISTEN_FDS` and
    /// `LISTEN_FDNAMES` are removed from the environment, so programs the daemon starts inherit
    /// neither. Call it before any other thread reads the environment.
    /// - Parameter name: the descriptor name to pick when several are passed.
    /// - Returns: the socket, non-blocking and close-on-exec; nil when none was passed.
    /// - Throws: RAIN_102 when the variables are malformed or the chosen descriptor is not a
    ///   listening `AF_UNIX` `SOCK_STREAM` socket.
    public static func takeListeningSocket(
        environment: [String: String] = ProcessInfo.processInfo.environment, name: String
    ) throws(RainError) -> ActivatedSocket? {
        let selected: (descriptor: Int32, count: Int)?
        do {
            selected = try selectDescriptor(environment: environment, pid: getpid(), name: name)
        } catch {
            unsetEnvironment()
            throw error
        }
        if environment["LISTEN_PID"] != nil { unsetEnvironment() }
        guard let (fd, count) = selected else { return nil }
        for other in firstDescriptor..<(firstDescriptor + Int32(count)) {
            do {
                try Syscall.setCloseOnExec(other)
            } catch {
                // Only a descriptor the manager counted but did not pass fails (EBADF): there is
                // nothing open to leak into a child, so nothing to report.
            }
        }
        try checkListeningUnixStream(fd)
        do throws(RainError) {
            try Syscall.setNonBlocking(fd, true)
            try Syscall.setCloseOnExec(fd)
        } catch {
            throw RainError(
                .internalError, "cannot make the passed socket (fd \(fd)) non-blocking: \(ErrnoError(code: error.errno ?? 0))")
        }
        return ActivatedSocket(descriptor: fd, address: boundAddress(fd))
    }

    private static func unsetEnvironment() {
        for variable in environmentVariables { unsetenv(variable) }
    }

    /// Refuses anything but a listening Unix stream socket, naming what was found instead.
    static func checkListeningUnixStream(_ fd: Int32) throws(RainError) {
        let hint = "check the socket unit (ListenStream= with a path)"
        var st = stat()
        guard fstat(fd, &st) == 0 else {
            throw RainError.invalid(
                "LISTEN_FDS says descriptor \(fd) was passed, but it is not open (\(String(cString: strerror(errno)))); \(hint)",
                field: "LISTEN_FDS")
        }
        guard (st.st_mode & S_IFMT) == S_IFSOCK else {
            throw RainError.invalid("the passed descriptor \(fd) is not a socket; \(hint)", field: "LISTEN_FDS")
        }
        let kind: SocketKind
        do throws(RainError) {
            kind = try Syscall.socketKind(fd)
        } catch {
            throw RainError.invalid(
                "cannot inspect the passed socket (fd \(fd)): \(ErrnoError(code: error.errno ?? 0)); \(hint)",
                field: "LISTEN_FDS")
        }
        let domain = kind.family
        let type = kind.type
        let accepting: Int32 = kind.isListening ? 1 : 0
        guard domain == AF_UNIX else {
            throw RainError.invalid(
                "the passed socket (fd \(fd)) is not a Unix socket (address family \(domain)); \(hint)", field: "LISTEN_FDS")
        }
        guard type == Int32(SOCK_STREAM.rawValue) else {
            throw RainError.invalid(
                "the passed socket (fd \(fd)) is not a stream socket (type \(type)); use ListenStream=, not ListenDatagram= or ListenSequentialPacket=",
                field: "LISTEN_FDS")
        }
        guard accepting != 0 else {
            throw RainError.invalid(
                "the passed socket (fd \(fd)) is not listening; use Accept=no in the socket unit", field: "LISTEN_FDS")
        }
    }

    /// The socket's own address, for logs.
    static func boundAddress(_ fd: Int32) -> String {
        var addr = sockaddr_un()
        var len = socklen_t(MemoryLayout<sockaddr_un>.size)
        let rc = withUnsafeMutablePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        let offset = MemoryLayout<sockaddr_un>.offset(of: \sockaddr_un.sun_path) ?? 2
        guard rc == 0, Int(len) > offset else { return "(unnamed)" }
        let bytes = withUnsafeBytes(of: &addr.sun_path) { Array($0.prefix(Int(len) - offset)) }
        if bytes.first == 0 { return "@" + String(decoding: bytes.dropFirst(), as: UTF8.self) }
        return String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
    }
}
