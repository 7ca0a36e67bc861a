import Foundation
import RainCore
import RainCrypto

extension ClientConnection {
    /// Runs the client side of a TLS handshake on the blocking socket `fd`, waiting for the server
    /// with `poll` so the whole handshake ends by `deadline`.
    /// - Throws: RAIN_501 from the session when the handshake fails (the certificate does not
    ///   verify, the server does not speak TLS 1.3, …), with `address` in the message; RAIN_301
    ///   when the server closes the connection or does not answer in time.
    static func handshake(_ session: TLSSession, fd: Int32, deadline: ContinuousClock.Instant, address: TCPAddress) throws(RainError) {
        func unreachable(_ why: String, _ errnoCode: Int32? = nil) -> RainError {
            RainError(.network, "TLS handshake with \(address): \(why)", underlying: errnoCode.map { ErrnoError(code: $0) })
        }
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let isComplete: Bool
            do throws(RainError) {
                isComplete = try session.handshake()
            } catch {
                // Tell the server why (the alert), best effort, then report.
                _ = sendBlocking(fd, session.takeOutput())
                var failure = error
                failure.message = "TLS handshake with \(address) failed: \(error.message)"
                throw failure
            }
            if let e = sendBlocking(fd, session.takeOutput()) {
                throw unreachable("sending failed: \(String(cString: strerror(e)))", e)
            }
            if isComplete { return }
            let left = deadline - ContinuousClock.now
            if left <= .zero { throw unreachable("no answer within the connect timeout", ETIMEDOUT) }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&p, 1, Int32(clamping: max(1, left.milliseconds)))
            if ready < 0 {
                if errno == EINTR { continue }
                throw unreachable(String(cString: strerror(errno)), errno)
            }
            if ready == 0 { continue }
            let n = buffer.withUnsafeMutableBytes { Foundation.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw unreachable(String(cString: strerror(errno)), errno)
            }
            if n == 0 {
                // A server that refuses the handshake sends an alert first; the session reports it
                // on the next round when it did. A bare close is a network failure.
                do throws(RainError) {
                    _ = try session.handshake()
                } catch {
                    var failure = error
                    failure.message = "TLS handshake with \(address) failed: \(error.message)"
                    throw failure
                }
                throw unreachable("the server closed the connection during the handshake")
            }
            buffer.withUnsafeBytes { session.receive(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
        }
    }

    /// Sends all of `bytes` on a blocking socket; returns errno on failure.
    private static func sendBlocking(_ fd: Int32, _ bytes: [UInt8]) -> Int32? {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { buf -> Int in
                guard let base = buf.baseAddress else { return 0 }
                return send(fd, base + offset, buf.count - offset, Int32(MSG_NOSIGNAL))
            }
            if n < 0 {
                if errno == EINTR { continue }
                return errno
            }
            offset += n
        }
        return nil
    }
}
