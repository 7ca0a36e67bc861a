import Foundation
import RainAuthorityAPI
import RainAuthorityServer
import RainCore
import RainCrypto
import RainTestSupport
import RainTransport
import RainWire
import Synchronization
import Testing

/// TLS 1.3 between a `RemoteAuthority` and an `EventLoopServer` serving `AuthorityService`, with
/// certificates made by `openssl` at test time.
@Suite("Remote authority over TLS")
struct RemoteTLSTests {
    static func logger() -> Logger { Logger(label: "test", minimumLevel: .debug, sink: CapturingLogSink()) }

    /// A TLS server answering GetInfo (version `tls`), stopped after `body`.
    static func withServer(
        certificate: String? = nil, host: String = "127.0.0.1", handshakeTimeout: Duration = .seconds(10),
        _ c: TestCertificates, _ body: (RunningTCPServer) async throws -> Void
    ) async throws {
        let logger = logger()
        let service = AuthorityService(authority: SlowAuthority(delay: .zero), version: "tls", logger: logger)
        let server = try RunningTCPServer(
            handler: service, host: host, tls: try TestCertificates.serverContext(c, certificate: certificate),
            handshakeTimeout: handshakeTimeout,
            logger: logger)
        do {
            try await body(server)
        } catch {
            try await server.stop()
            throw error
        }
        try await server.stop()
    }

    static func client(_ caPath: String, _ address: String) throws -> RemoteAuthority {
        try RemoteAuthority(
            address: address, tls: TLSContext.client(trustedCertificatesFile: caPath), device: FixtureDevice.keys,
            connectTimeout: .seconds(10), deadlines: .forTests, logger: logger())
    }

    @Test("a device logs in by code through a TLS authority, by name and by IP address")
    func loginOverTLS() async throws {
        try await TestCertificates.withTemporaryDirectory { c in
            try await RemoteFixture.with(
                serverTLS: try TestCertificates.serverContext(c),
                clientTLS: try TLSContext.client(trustedCertificatesFile: c.caPath)
            ) { f in
                let login = try await f.login()
                #expect(!login.accountID.isEmpty)
                #expect(f.logSink.captured.contains { $0.contains("authority.connected") && $0.contains("tls=true") })
                // The same server by name: localhost is in the certificate too.
                let byName = try Self.client(c.caPath, "localhost:\(f.server.port)")
                #expect(try await byName.getInfo().daemonVersion == "test")
                byName.close()
            }
        }
    }

    @Test("TLS handshake time (connect + TLS 1.3 handshake, 20 fresh connections; printed, not asserted)")
    func handshakeTime() async throws {
        try await TestCertificates.withTemporaryDirectory { c in
            try await Self.withServer(c) { server in
                let context = try TLSContext.client(trustedCertificatesFile: c.caPath)
                let address = try TCPAddress(parsing: "127.0.0.1:\(server.port)")
                var samples: [Double] = []
                for _ in 0..<20 {
                    let start = ContinuousClock.now
                    let connection = try await DispatchQueue.global().runBlocking { () throws(RainError) -> ClientConnection in
                        try ClientConnection(tcp: address, tls: context, connectTimeout: .seconds(10))
                    }
                    samples.append(Double((ContinuousClock.now - start) / .microseconds(1)) / 1000)
                    let info = try await connection.call(method: AuthorityMethod.getInfo, payload: try GetInfoRequest().encode())
                    #expect(try GetInfoResponse.decode(info).daemonVersion == "tls")
                    connection.close()
                }
                samples.sort()
                print(
                    "TLS handshake (connect + handshake) over 20 connections: median \(String(format: "%.2f", samples[10])) ms, "
                        + "min \(String(format: "%.2f", samples[0])) ms, max \(String(format: "%.2f", samples[19])) ms")
            }
        }
    }

    @Test("a server certificate from an unknown CA is refused with RAIN_501 tls_unknown_ca; the server keeps serving")
    func wrongCA() async throws {
        try await TestCertificates.withTemporaryDirectory { c in
            try await Self.withServer(c) { server in
                let wrong = try Self.client(c.otherCAPath, server.address)
                let error = await rainError { _ = try await wrong.getInfo() }
                #expect(error?.code == .provider)
                #expect(error?.details.reason == TLSSession.FailureReason.unknownCA)
                #expect(error?.message.contains("--authority-ca") == true)
                wrong.close()
                let right = try Self.client(c.caPath, server.address)
                #expect(try await right.getInfo().daemonVersion == "tls")
                right.close()
            }
        }
    }

    @Test(
        "a certificate that does not name the host is refused with RAIN_501 tls_host_mismatch",
        arguments: ["localhost", "127.0.0.1"])
    func hostMismatch(host: String) async throws {
        try await TestCertificates.withTemporaryDirectory { c in
            try await Self.withServer(certificate: c.wrongNameCertificatePath, c) { server in
                let client = try Self.client(c.caPath, "\(host):\(server.port)")
                let error = await rainError { _ = try await client.getInfo() }
                #expect(error?.code == .provider)
                #expect(error?.details.reason == TLSSession.FailureReason.hostMismatch)
                client.close()
            }
        }
    }

    @Test("an expired server certificate is refused with RAIN_501 tls_certificate_expired")
    func expired() async throws {
        try await TestCertificates.withTemporaryDirectory { c in
            try await Self.withServer(certificate: c.expiredCertificatePath, c) { server in
                let client = try Self.client(c.caPath, server.address)
                let error = await rainError { _ = try await client.getInfo() }
                #expect(error?.code == .provider)
                #expect(error?.details.reason == TLSSession.FailureReason.certificateExpired)
                client.close()
            }
        }
    }

    @Test("a TLS client against a plain-TCP authority gets RAIN_501 tls_not_tls")
    func tlsClientPlainServer() async throws {
        try await TestCertificates.withTemporaryDirectory { c in
            let logger = Self.logger()
            let service = AuthorityService(authority: SlowAuthority(delay: .zero), version: "plain", logger: logger)
            let server = try RunningTCPServer(handler: service, logger: logger)
            let client = try Self.client(c.caPath, server.address)
            let error = await rainError { _ = try await client.getInfo() }
            #expect(error?.code == .provider)
            #expect(error?.details.reason == TLSSession.FailureReason.notTLS)
            client.close()
            try await server.stop()
        }
    }

    @Test("a plain-TCP client on the TLS port gets no answer, only an alert and the close; the server keeps serving")
    func plainClientOnTLSPort() async throws {
        try await TestCertificates.withTemporaryDirectory { c in
            try await Self.withServer(c) { server in
                let fd = try TCPSocket.connect(TCPAddress(parsing: server.address), timeout: .seconds(10))
                defer { close(fd) }
                let frame = try Envelope(
                    requestID: 1,
                    kind: .request(WireRequest(method: AuthorityMethod.getInfo, payload: try GetInfoRequest().encode()))
                ).encodeFrame()
                #expect(frame.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == frame.count)
                let (received, isClosed) = readUntilClosed(fd, deadline: .seconds(20))
                #expect(isClosed, "the server did not close the plain-TCP connection")
                // Nothing but a TLS alert record (content type 21), never a frame.
                #expect(received.isEmpty || received[0] == 21)
                var decoder = FrameDecoder(maximumLength: Frame.defaultMaximumLength)
                try? decoder.append(received)
                let envelopeRead = (try? decoder.nextFrame()).flatMap { $0.flatMap { try? Envelope.decode($0) } }
                #expect(envelopeRead == nil)
                let client = try Self.client(c.caPath, server.address)
                #expect(try await client.getInfo().daemonVersion == "tls")
                client.close()
            }
        }
    }

    @Test("a client offering only TLS 1.2 is refused; the same client with TLS 1.3 connects")
    func tls12Refused() async throws {
        try await TestCertificates.withTemporaryDirectory { c in
            try await Self.withServer(c) { server in
                let old = await c.sClient(port: server.port, ["-tls1_2"])
                #expect(old.status != 0, "a TLS 1.2 client was served: \(old.output)")
                let current = await c.sClient(port: server.port, ["-tls1_3"])
                #expect(current.status == 0, "the TLS 1.3 control failed: \(current.output)")
                #expect(current.output.contains("TLSv1.3"))
            }
        }
    }

    @Test("a connection that does not finish its handshake in time is closed; others are served meanwhile")
    func handshakeDeadline() async throws {
        try await TestCertificates.withTemporaryDirectory { c in
            try await Self.withServer(handshakeTimeout: .milliseconds(1500), c) { server in
                let address = try TCPAddress(parsing: server.address)
                // A peer that sends half a ClientHello header and stalls.
                let stalled = try TCPSocket.connect(address, timeout: .seconds(10))
                defer { close(stalled) }
                let partial: [UInt8] = [22, 3, 1]
                _ = partial.withUnsafeBytes { send(stalled, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                let client = try Self.client(c.caPath, server.address)
                #expect(try await client.getInfo().daemonVersion == "tls")
                client.close()
                let (_, isClosed) = readUntilClosed(stalled, deadline: .seconds(30))
                #expect(isClosed, "the stalled handshake was never dropped")
            }
        }
    }

    // MARK: - Addresses and files

    @Test(
        "with TLS, non-loopback addresses and host names parse; without it they are refused",
        arguments: ["0.0.0.0:7420", "192.0.2.1:7420", "[2001:db8::1]:7420", "[::]:7420", "authority.example.com:7420"])
    func nonLoopbackWithTLS(text: String) async throws {
        let address = try TCPAddress(parsing: text, field: "authority", allowsNonLoopback: true)
        #expect(!address.isLoopback)
        let refused = await rainError { _ = try TCPAddress(parsing: text, field: "authority") }
        #expect(refused?.details.reason == TCPAddress.nonLoopbackReason)
        try await TestCertificates.withTemporaryDirectory { c in
            let context = try TLSContext.client(trustedCertificatesFile: c.caPath)
            // Accepted with TLS (no connection is made yet) …
            _ = try RemoteAuthority(address: text, tls: context, logger: Self.logger())
            // … and refused without it, even when handed an already parsed address.
            let plain = await rainError { _ = try RemoteAuthority(address: address, logger: Self.logger()) }
            #expect(plain?.code == .invalidArgument)
            #expect(plain?.details.reason == TCPAddress.nonLoopbackReason)
        }
    }

    @Test("a TLS server listens on 0.0.0.0 and serves a client on 127.0.0.1")
    func listenOnAllAddresses() async throws {
        try await TestCertificates.withTemporaryDirectory { c in
            try await Self.withServer(host: "0.0.0.0", c) { server in
                let client = try Self.client(c.caPath, "127.0.0.1:\(server.port)")
                #expect(try await client.getInfo().daemonVersion == "tls")
                client.close()
            }
        }
    }

    @Test("listening on a host name is refused: the authority listens on IP addresses")
    func listenOnNameRefused() async throws {
        let address = try TCPAddress(parsing: "authority.example.com:0", allowsNonLoopback: true)
        let error = await rainError { _ = try TCPSocket.listen(address) }
        #expect(error?.code == .invalidArgument)
    }

    @Test("a TLS private key that others can read is refused with RAIN_102 key_file_mode")
    func keyFileMode() async throws {
        try await TestCertificates.withTemporaryDirectory { c in
            #expect(chmod(c.serverKeyPath, 0o644) == 0)
            let error = await rainError { _ = try TestCertificates.serverContext(c) }
            #expect(error?.code == .invalidArgument)
            #expect(error?.details.reason == "key_file_mode")
            #expect(error?.details.field == "privateKey")
            #expect(chmod(c.serverKeyPath, 0o600) == 0)
            _ = try TestCertificates.serverContext(c)
        }
    }

    @Test("a key that does not match the certificate, a missing certificate or a CA file without certificates is RAIN_102")
    func badFiles() async throws {
        try await TestCertificates.withTemporaryDirectory { c in
            let otherKey = "\(c.directory)/other-ca.key"
            #expect(chmod(otherKey, 0o600) == 0)
            let mismatch = await rainError {
                _ = try TLSContext.server(certificateChainFile: c.serverCertificatePath, privateKeyFile: otherKey)
            }
            #expect(mismatch?.details.reason == "key_mismatch")
            let missing = await rainError {
                _ = try TLSContext.server(certificateChainFile: "\(c.directory)/nope.pem", privateKeyFile: c.serverKeyPath)
            }
            #expect(missing?.code == .invalidArgument)
            #expect(missing?.details.field == "certificate")
            let notPEM = "\(c.directory)/garbage.pem"
            try "not a certificate\n".write(toFile: notPEM, atomically: true, encoding: .utf8)
            let ca = await rainError { _ = try TLSContext.client(trustedCertificatesFile: notPEM) }
            #expect(ca?.code == .invalidArgument)
            #expect(ca?.details.field == "trustedCertificates")
        }
    }
}

/// Reads from a blocking socket until the peer closes it or `deadline` passes; returns what was
/// read and whether the close was seen.
func readUntilClosed(_ fd: Int32, deadline: Duration) -> ([UInt8], Bool) {
    let end = ContinuousClock.now + deadline
    var received: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while ContinuousClock.now < end {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ready = poll(&p, 1, 100)
        if ready <= 0 { continue }
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n <= 0 { return (received, true) }
        received += buffer[0..<n]
    }
    return (received, false)
}
