import FoundationEssentials
import Glibc
import RainClientTransport
import RainCore
import RainCrypto
import RainSystem
import RainWire

/// RainCrypto's TLS session as a `ClientConnection`'s cipher: the connection lives in
/// `RainClientTransport`, which does not link OpenSSL, and gets TLS only from here.
final class TLSConnectionCipher: ConnectionCipher {
    let session: TLSSession

    init(_ session: TLSSession) { self.session = session }

    func write(_ plaintext: [UInt8]) throws(RainError) { try session.write(plaintext) }
    func takeOutput() -> [UInt8] { session.takeOutput() }
    var pendingOutputCount: Int { session.pendingOutputCount }
    func receive(_ bytes: UnsafeRawBufferPointer) { session.receive(bytes) }
    func readPlaintext(into buffer: UnsafeMutableRawBufferPointer) throws(RainError) -> ConnectionCipherRead {
        switch try session.readPlaintext(into: buffer) {
        case .bytes(let n): .bytes(n)
        case .needsMoreInput: .needsMoreInput
        case .closed: .closed
        }
    }
}

extension ClientConnection {
    /// Connects over TCP to `address`, with `TCP_NODELAY`, and with `tls` completes a TLS 1.3
    /// handshake that verifies the server's certificate against the context's CAs and against
    /// `address.host`. Blocks for up to `connectTimeout` in all: call it off the Swift concurrency
    /// pool. A connection lost later fails the calls in flight with RAIN_301.
    /// - Parameter tls: a client `TLSContext`; nil for plain TCP (then `address` must be loopback,
    ///   which `TCPAddress` parsing ensures unless told otherwise).
    /// - Throws: RAIN_301 when nothing accepts the connection, or the handshake does not finish,
    ///   within `connectTimeout`; RAIN_501 with a `TLSSession.FailureReason` when the handshake
    ///   fails (certificate not trusted, host name mismatch, expired, not TLS 1.3); RAIN_102 for
    ///   port 0.
    public convenience init(
        tcp address: TCPAddress, tls: TLSContext? = nil, connectTimeout: Duration = .seconds(5),
        maximumFrameLength: Int = Frame.defaultMaximumLength
    ) throws(RainError) {
        let deadline = ContinuousClock.now + connectTimeout
        let fd = try TCPSocket.connect(address, timeout: connectTimeout)
        var cipher: TLSConnectionCipher?
        var binding: [UInt8]?
        if let tls {
            do throws(RainError) {
                let s = try tls.makeClientSession(serverName: address.host)
                try Self.handshake(s, fd: fd, deadline: deadline, address: address)
                binding = try s.channelBinding()
                cipher = TLSConnectionCipher(s)
            } catch {
                Syscall.closeUnchecked(fd, because: .failurePath)
                throw error
            }
        }
        self.init(
            fd: fd, path: address.description, peerName: "the server", lostCode: .network,
            maximumFrameLength: maximumFrameLength, tls: cipher, channelBinding: binding)
    }

    /// Runs the client side of a TLS handshake on the blocking socket `fd`, waiting for the server
    /// with `poll` so the whole handshake ends by `deadline`.
    /// - Throws: RAIN_501 from the session when the handshake fails (the certificate does not
    ///   verify, the server does not speak TLS 1.3, …), with `address` in the message; RAIN_301
    ///   when the server closes the connection or does not answer in time.
    static func handshake(_ session: TLSSession, fd: Int32, deadline: ContinuousClock.Instant, address: TCPAddress)
        throws(RainError)
    {
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
            var p = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0)]
            let n: Int
            do throws(RainError) {
                // An interrupted poll counts as a timeout: the loop works out the time left.
                if try Syscall.poll(&p, timeoutMilliseconds: Int32(clamping: max(1, left.milliseconds))) == 0 { continue }
                n = try buffer.withUnsafeMutableBytes { buf in
                    Result { () throws(RainError) in try Syscall.read(fd, into: buf) }
                }.get()
            } catch {
                let e = error.errno ?? 0
                throw unreachable("\(ErrnoError(code: e))", e)
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
        let sent = bytes.withUnsafeBytes { buf in Result { () throws(RainError) in try Syscall.sendAll(fd, buf) } }
        guard case .failure(let error) = sent else { return nil }
        return error.errno ?? EIO
    }
}
