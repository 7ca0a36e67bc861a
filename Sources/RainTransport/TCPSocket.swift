import FoundationEssentials
import Glibc
import RainCore
import RainSystem

/// A TCP address (`HOST:PORT`) for the authority hop.
///
/// Without TLS only loopback addresses exist: parsing refuses any other unless the caller says the
/// connection is protected by TLS (`allowsNonLoopback`), so no plain-TCP socket is ever opened
/// towards (or on) a non-loopback address. Loopback forms: `127.0.0.1:7000` (any of 127.0.0.0/8),
/// `[::1]:7000` (also `[::ffff:127.x.y.z]`) and `localhost:7000`, which means 127.0.0.1 (never
/// resolved). With TLS, any IPv4 address, bracketed IPv6 address or host name (resolved when
/// connecting) is accepted. The port is 0–65535; 0 asks `TCPSocket.listen` for an ephemeral port
/// and is refused by `TCPSocket.connect`.
public struct TCPAddress: Sendable, Hashable, CustomStringConvertible {
    /// The host as written: an IP literal (without brackets) or `localhost`.
    public let host: String
    /// The port.
    public let port: UInt16
    /// AF_INET or AF_INET6; AF_UNSPEC for a host name resolved when connecting.
    let family: Int32
    /// The address in network byte order: 4 or 16 bytes; empty for a host name.
    let addressBytes: [UInt8]
    /// True for a loopback address (and `localhost`).
    public let isLoopback: Bool
    /// True when `host` is a name to resolve, not an IP literal or `localhost`.
    public var isHostName: Bool { family == AF_UNSPEC }

    /// The reason of the RAIN_102 for a non-loopback address.
    public static let nonLoopbackReason = "non_loopback"
    /// The reason of the RAIN_102 for text that is not `HOST:PORT`.
    public static let malformedReason = "malformed_address"

    /// Parses `HOST:PORT`.
    ///
    /// - Parameters:
    ///   - text: for example `127.0.0.1:7000`, `[::1]:7000` or `localhost:7000`.
    ///   - field: the option or setting named in errors (for example `listen` or `authority`).
    ///   - allowsNonLoopback: true when the connection uses TLS: then any address or host name is
    ///     accepted.
    /// - Throws: RAIN_102 with reason `malformed_address` for text that is not `HOST:PORT` (missing
    ///   or bad port, an IPv6 literal without brackets, a bad host); RAIN_102 with reason
    ///   `non_loopback` when `allowsNonLoopback` is false for any address that is not loopback,
    ///   host names other than `localhost` included: non-loopback addresses need TLS.
    public init(parsing text: String, field: String = "address", allowsNonLoopback: Bool = false) throws(RainError) {
        func malformed(_ why: String) -> RainError {
            .invalid(
                "invalid address \"\(text)\": \(why); use HOST:PORT, like 127.0.0.1:7000, [::1]:7000 or localhost:7000",
                field: field, reason: Self.malformedReason)
        }
        let hostPart: Substring
        let portPart: Substring
        let isBracketed: Bool
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { throw malformed("a [ without its ]") }
            hostPart = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { throw malformed("the port is missing after ]") }
            portPart = rest.dropFirst()
            isBracketed = true
        } else {
            guard let colon = text.lastIndex(of: ":") else { throw malformed("the port is missing") }
            hostPart = text[..<colon]
            portPart = text[text.index(after: colon)...]
            if hostPart.contains(":") { throw malformed("an IPv6 address needs brackets, like [::1]:7000") }
            isBracketed = false
        }
        guard !hostPart.isEmpty else { throw malformed("the host is missing") }
        guard !portPart.isEmpty, portPart.utf8.count <= 5,
            portPart.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
            let portNumber = Int(portPart), portNumber <= 65535
        else { throw malformed("the port must be a number from 0 to 65535") }

        let host = String(hostPart)
        let nonLoopback = RainError.invalid(
            "\(text) is not a loopback address: without TLS only 127.0.0.1, [::1] or localhost are allowed; "
                + "turn TLS on (the authority's --tls-cert and --tls-key, the device's --authority-ca) to use it",
            field: field, reason: Self.nonLoopbackReason)
        let port = UInt16(portNumber)
        if isBracketed {
            guard let bytes = Self.parseIP(host, family: AF_INET6) else { throw malformed("\(host) is not an IPv6 address") }
            let isLoopback = Self.isLoopbackIPv6(bytes)
            guard isLoopback || allowsNonLoopback else { throw nonLoopback }
            self.init(host: host, port: port, family: AF_INET6, addressBytes: bytes, isLoopback: isLoopback)
        } else if host.lowercased() == "localhost" {
            self.init(host: host, port: port, family: AF_INET, addressBytes: [127, 0, 0, 1], isLoopback: true)
        } else if let bytes = Self.parseIP(host, family: AF_INET) {
            let isLoopback = bytes[0] == 127
            guard isLoopback || allowsNonLoopback else { throw nonLoopback }
            self.init(host: host, port: port, family: AF_INET, addressBytes: bytes, isLoopback: isLoopback)
        } else if host.utf8.allSatisfy({ Self.isHostNameByte($0) }) && !host.utf8.allSatisfy({ Self.isDigitOrDot($0) })
            && !host.hasPrefix("-") && !host.hasPrefix(".") && host.utf8.count <= 253
        {
            // A name we would have to resolve: it cannot be known to stay on this machine.
            guard allowsNonLoopback else { throw nonLoopback }
            self.init(host: host, port: port, family: AF_UNSPEC, addressBytes: [], isLoopback: false)
        } else {
            throw malformed("\(host) is not an IPv4 address, a bracketed IPv6 address or localhost")
        }
    }

    private init(host: String, port: UInt16, family: Int32, addressBytes: [UInt8], isLoopback: Bool) {
        self.host = host
        self.port = port
        self.family = family
        self.addressBytes = addressBytes
        self.isLoopback = isLoopback
    }

    /// The same address with another port (for example the one `listen` picked for port 0).
    public func withPort(_ port: UInt16) -> TCPAddress {
        TCPAddress(host: host, port: port, family: family, addressBytes: addressBytes, isLoopback: isLoopback)
    }

    /// The IP addresses of a host name (`getaddrinfo`; blocks), or this address itself.
    /// - Throws: RAIN_301 when the name does not resolve.
    func resolved() throws(RainError) -> [TCPAddress] {
        guard isHostName else { return [self] }
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, nil, &hints, &list)
        guard rc == 0, let first = list else {
            throw RainError(.network, "cannot resolve \(host): \(String(cString: gai_strerror(rc)))")
        }
        defer { freeaddrinfo(first) }
        var found: [TCPAddress] = []
        var next: UnsafeMutablePointer<addrinfo>? = first
        while let item = next {
            next = item.pointee.ai_next
            guard let sa = item.pointee.ai_addr else { continue }
            switch item.pointee.ai_family {
            case AF_INET:
                var a = sa.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
                let bytes = withUnsafeBytes(of: &a) { Array($0) }
                found.append(
                    TCPAddress(host: host, port: port, family: AF_INET, addressBytes: bytes, isLoopback: bytes[0] == 127))
            case AF_INET6:
                var a = sa.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_addr }
                let bytes = withUnsafeBytes(of: &a) { Array($0) }
                found.append(
                    TCPAddress(
                        host: host, port: port, family: AF_INET6, addressBytes: bytes, isLoopback: Self.isLoopbackIPv6(bytes)))
            default: continue
            }
        }
        guard !found.isEmpty else { throw RainError(.network, "cannot resolve \(host): no IPv4 or IPv6 address") }
        return found
    }

    /// `HOST:PORT`, with brackets around an IPv6 literal.
    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    private static func parseIP(_ text: String, family: Int32) -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: 16)
        let ok = buffer.withUnsafeMutableBytes { inet_pton(family, text, $0.baseAddress) }
        guard ok == 1 else { return nil }
        return Array(buffer.prefix(family == AF_INET ? 4 : 16))
    }

    private static func isLoopbackIPv6(_ b: [UInt8]) -> Bool {
        if b[0..<15].allSatisfy({ $0 == 0 }) && b[15] == 1 { return true }  // ::1
        // ::ffff:127.x.y.z, an IPv4 loopback address mapped into IPv6.
        return b[0..<10].allSatisfy({ $0 == 0 }) && b[10] == 0xff && b[11] == 0xff && b[12] == 127
    }

    private static func isHostNameByte(_ c: UInt8) -> Bool {
        (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z")) || (c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z"))
            || isDigitOrDot(c) || c == UInt8(ascii: "-")
    }

    private static func isDigitOrDot(_ c: UInt8) -> Bool {
        (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) || c == UInt8(ascii: ".")
    }

    /// Calls `body` with this address as a `sockaddr`.
    func withSocketAddress<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        if family == AF_INET6 {
            var addr = sockaddr_in6()
            addr.sin6_family = sa_family_t(AF_INET6)
            addr.sin6_port = port.bigEndian
            copyAddressBytes(into: &addr.sin6_addr)
            return Self.withGenericAddress(addr, body)
        }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        copyAddressBytes(into: &addr.sin_addr)
        return Self.withGenericAddress(addr, body)
    }

    /// Copies `addressBytes` (network order) into a `in_addr` or `in6_addr`.
    private func copyAddressBytes<Address>(into address: inout Address) {
        withUnsafeMutableBytes(of: &address) { buf in
            for (i, b) in addressBytes.enumerated() { buf[i] = b }
        }
    }

    /// Calls `body` with a `sockaddr_in` or `sockaddr_in6` seen as a `sockaddr`, and its size.
    private static func withGenericAddress<Address, R>(
        _ address: Address, _ body: (UnsafePointer<sockaddr>, socklen_t) -> R
    ) -> R {
        withUnsafePointer(to: address) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<Address>.size)) }
        }
    }
}

/// TCP socket helpers for the authority hop (loopback only without TLS; see `TCPAddress`).
public enum TCPSocket {
    /// Binds and listens on `address`: non-blocking, close-on-exec, `SO_REUSEADDR` (a restarted
    /// authority gets its port back at once), IPv6 sockets IPv6-only. Hand the descriptor to
    /// `EventLoopServer` with `ServerOptions.isTCP` set. Read the port picked for port 0 with
    /// `localPort(of:)`.
    /// - Throws: RAIN_102 (field `listen`) when the address is in use or is a host name; RAIN_502
    ///   when another socket call fails.
    public static func listen(_ address: TCPAddress, backlog: Int32 = 512) throws(RainError) -> Int32 {
        guard !address.isHostName else {
            throw RainError.invalid(
                "cannot listen on \(address): give an IP address to listen on (0.0.0.0 or :: for all), not a host name",
                field: "listen", reason: TCPAddress.malformedReason)
        }
        let fd = try makeSocket(family: address.family)
        do throws(RainError) {
            try setOption(fd, level: SOL_SOCKET, name: SO_REUSEADDR, "SO_REUSEADDR")
            if address.family == AF_INET6 {
                try setOption(fd, level: Int32(IPPROTO_IPV6), name: IPV6_V6ONLY, "IPV6_V6ONLY")
            }
            let bound = address.withSocketAddress { addr, len in
                Result { () throws(RainError) in try Syscall.bind(fd, to: addr, length: len) }
            }
            let rc: Int32
            if case .failure(let error) = bound { rc = error.errno ?? EIO } else { rc = 0 }
            if rc == EADDRINUSE {
                throw RainError(
                    .invalidArgument, "cannot listen on \(address): the address is already in use",
                    details: .init(field: "listen"), underlying: ErrnoError(code: rc))
            }
            if rc != 0 {
                throw RainError(
                    .internalError, "cannot bind \(address): \(ErrnoError(code: rc))", underlying: ErrnoError(code: rc))
            }
            try Syscall.listen(fd, backlog: backlog)
        } catch {
            Syscall.closeUnchecked(fd, because: .failurePath)
            throw error
        }
        return fd
    }

    /// The local port a socket is bound to (the ephemeral port after listening on port 0).
    /// - Throws: RAIN_502 when `getsockname` fails.
    public static func localPort(of fd: Int32) throws(RainError) -> UInt16 {
        var storage = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        try withUnsafeMutablePointer(to: &storage) { p throws(RainError) in
            try p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa throws(RainError) in
                _ = try Syscall.call("getsockname") { getsockname(fd, sa, &len) }
            }
        }
        switch Int32(storage.ss_family) {
        case AF_INET:
            return withUnsafeBytes(of: &storage) { $0.load(as: sockaddr_in.self).sin_port.bigEndian }
        case AF_INET6:
            return withUnsafeBytes(of: &storage) { $0.load(as: sockaddr_in6.self).sin6_port.bigEndian }
        default:
            throw RainError(.internalError, "socket \(fd) is not a TCP socket")
        }
    }

    /// Connects to `address` (each address of a host name in turn), waiting at most `timeout` in
    /// all, and returns a **blocking** socket with `TCP_NODELAY` set (for `ClientConnection`'s
    /// reader thread). Blocks the calling thread: call it off the Swift concurrency pool.
    /// - Throws: RAIN_102 for port 0; RAIN_301 when the name does not resolve, or the connection is
    ///   refused, times out or fails otherwise; RAIN_502 when a socket cannot be created.
    public static func connect(_ address: TCPAddress, timeout: Duration) throws(RainError) -> Int32 {
        guard address.port != 0 else {
            throw RainError.invalid("cannot connect to \(address): port 0 is not a port one can connect to", field: "address")
        }
        let deadline = ContinuousClock.now + timeout
        var lastError: RainError?
        for candidate in try address.resolved() {
            let left = deadline - ContinuousClock.now
            if left <= .zero { break }
            do throws(RainError) {
                return try connectOne(candidate, timeout: left)
            } catch {
                if error.code != .network { throw error }
                lastError = error
            }
        }
        throw lastError ?? RainError(.network, "cannot connect to \(address): no answer within \(timeout.milliseconds) ms")
    }

    private static func connectOne(_ address: TCPAddress, timeout: Duration) throws(RainError) -> Int32 {
        let fd = try makeSocket(family: address.family)
        func fail(_ why: String, _ e: Int32?) -> RainError {
            Syscall.closeUnchecked(fd, because: .failurePath)
            return RainError(.network, "cannot connect to \(address): \(why)", underlying: e.map { ErrnoError(code: $0) })
        }
        func fail(_ error: RainError) -> RainError {
            let e = error.errno ?? EIO
            return fail("\(ErrnoError(code: e))", e)
        }
        let started = address.withSocketAddress { addr, len in
            Result { () throws(RainError) in try Syscall.connectNonBlocking(fd, to: addr, length: len) }
        }
        switch started {
        case .failure(let error):
            throw fail(error)
        case .success(.connected):
            break
        case .success(.inProgress):
            let deadline = ContinuousClock.now + timeout
            while true {
                let left = deadline - ContinuousClock.now
                if left <= .zero { throw fail("no answer within \(timeout.milliseconds) ms", ETIMEDOUT) }
                var p = [pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)]
                do throws(RainError) {
                    // An interrupted poll counts as a timeout: the loop works out the time left.
                    if try Syscall.poll(&p, timeoutMilliseconds: Int32(clamping: max(1, left.milliseconds))) > 0 { break }
                } catch {
                    throw fail(error)
                }
            }
            let soError: Int32
            do throws(RainError) {
                soError = try Syscall.pendingError(fd)
            } catch {
                throw fail(error)
            }
            if soError != 0 { throw fail("\(ErrnoError(code: soError))", soError) }
        }
        do throws(RainError) {
            try Syscall.setNonBlocking(fd, false)
        } catch {
            throw fail("fcntl failed: \(ErrnoError(code: error.errno ?? EIO))", error.errno)
        }
        setNoDelay(fd)
        return fd
    }

    /// Sets `TCP_NODELAY`: frames are small request/response messages, so Nagle's delay only adds
    /// latency. Best effort: a failure changes timing, not behaviour, so it is not reported.
    static func setNoDelay(_ fd: Int32) {
        do {
            try Syscall.setOption(fd, level: Int32(IPPROTO_TCP), name: TCP_NODELAY, value: 1, label: "TCP_NODELAY")
        } catch {
            // Best effort; see above.
        }
    }

    private static func makeSocket(family: Int32) throws(RainError) -> Int32 {
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
        return try Syscall.socket(family: family, type: type)
    }

    private static func setOption(_ fd: Int32, level: Int32, name: Int32, _ label: String) throws(RainError) {
        try Syscall.setOption(fd, level: level, name: name, value: 1, label: label)
    }
}
