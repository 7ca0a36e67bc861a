import Foundation
import RainCore
import RainSystem
import RainTransport

/// A loopback TCP port where connections are refused at once, for as long as the value lives: a
/// socket bound to it that never listens. Taking an ephemeral port from a listener and closing it
/// instead let a test running alongside be given the same port for its own server, which then
/// answered the connection that was meant to be refused.
public final class RefusedPort: Sendable {
    /// The port (on 127.0.0.1).
    public let port: UInt16
    private let fd: Int32

    /// Binds a socket to an ephemeral port of 127.0.0.1 (without `SO_REUSEADDR`: no other socket
    /// can be bound to the port while it is held).
    /// - Throws: RAIN_502 when a socket call fails.
    public init() throws(RainError) {
        let fd = try Syscall.call("socket") { socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = UInt32(INADDR_LOOPBACK).bigEndian
        do throws(RainError) {
            try withUnsafePointer(to: &address) { p throws(RainError) in
                try p.withMemoryRebound(to: sockaddr.self, capacity: 1) { a throws(RainError) in
                    try Syscall.bind(fd, to: a, length: socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            port = try TCPSocket.localPort(of: fd)
        } catch {
            Syscall.closeUnchecked(fd, because: .failurePath)
            throw error
        }
        self.fd = fd
    }

    deinit { Syscall.closeUnchecked(fd, because: .socket) }
}
