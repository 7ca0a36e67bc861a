import Foundation
import RainCore
import RainCrypto
import RainTestSupport
import Testing

/// `TLSSession` between two memory-BIO sessions, no sockets: the bytes one side emits are fed to
/// the other all at once or one byte at a time, as a non-blocking loop may see them.
@Suite("TLS sessions")
struct TLSSessionTests {
    enum Feeding: String, CaseIterable, Sendable {
        case allAtOnce
        case byteByByte
    }

    static func withContexts(_ body: (TLSContext, TLSContext, TestCertificates) async throws -> Void) async throws {
        let directory = "/tmp/rain-tls-" + UUID().uuidString.lowercased().prefix(12)
        try FileManager.default.createDirectory(
            atPath: directory, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let c = try await TestCertificates.make(in: directory)
        let server = try TLSContext.server(certificateChainFile: c.serverCertificatePath, privateKeyFile: c.serverKeyPath)
        let client = try TLSContext.client(trustedCertificatesFile: c.caPath)
        try await body(server, client, c)
    }

    /// Moves `from`'s output into `to`, whole or byte by byte.
    static func move(_ from: TLSSession, _ to: TLSSession, _ feeding: Feeding) -> Int {
        let bytes = from.takeOutput()
        switch feeding {
        case .allAtOnce: to.receive(bytes)
        case .byteByByte: for b in bytes { to.receive([b]) }
        }
        return bytes.count
    }

    /// Runs both handshakes to completion; at most 20 rounds.
    static func handshake(_ client: TLSSession, _ server: TLSSession, _ feeding: Feeding) throws {
        for _ in 0..<20 {
            let clientDone = try client.handshake()
            _ = move(client, server, feeding)
            let serverDone = try server.handshake()
            _ = move(server, client, feeding)
            if clientDone && serverDone { return }
        }
        Issue.record("the handshake did not finish in 20 rounds")
    }

    static func readAll(_ session: TLSSession) throws -> [UInt8] {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1024)
        while true {
            let r = try buffer.withUnsafeMutableBytes { try session.readPlaintext(into: $0) }
            guard case .bytes(let n) = r else { return out }
            out += buffer[0..<n]
        }
    }

    @Test("handshake and records both ways, fed whole or byte by byte", arguments: Feeding.allCases)
    func roundTrip(feeding: Feeding) async throws {
        try await Self.withContexts { serverContext, clientContext, _ in
            let server = try serverContext.makeServerSession()
            let client = try clientContext.makeClientSession(serverName: "localhost")
            try Self.handshake(client, server, feeding)
            #expect(client.isHandshakeComplete && server.isHandshakeComplete)
            let request = Array("a framed request".utf8) + [UInt8](repeating: 7, count: 40_000)
            try client.write(request)
            #expect(Self.move(client, server, feeding) > request.count)  // encrypted and framed in records
            #expect(try Self.readAll(server) == request)
            let reply = Array("the reply".utf8)
            try server.write(reply)
            _ = Self.move(server, client, feeding)
            #expect(try Self.readAll(client) == reply)
        }
    }

    @Test("a flipped bit in a record is refused, never returned as plaintext")
    func tamperedRecord() async throws {
        try await Self.withContexts { serverContext, clientContext, _ in
            let server = try serverContext.makeServerSession()
            let client = try clientContext.makeClientSession(serverName: "127.0.0.1")
            try Self.handshake(client, server, .allAtOnce)
            try client.write(Array("secret request".utf8))
            var record = client.takeOutput()
            record[record.count - 3] ^= 0x01
            server.receive(record)
            var buffer = [UInt8](repeating: 0, count: 256)
            let error = buffer.withUnsafeMutableBytes { buf -> RainError? in
                do throws(RainError) {
                    _ = try server.readPlaintext(into: buf)
                    return nil
                } catch {
                    return error
                }
            }
            #expect(error?.code == .provider)
        }
    }

    @Test("bytes that are not TLS end the server's handshake with RAIN_501 tls_not_tls")
    func notTLS() async throws {
        try await Self.withContexts { serverContext, _, _ in
            let server = try serverContext.makeServerSession()
            server.receive([0, 0, 0, 12] + Array("hello server".utf8))
            var caught: RainError?
            do throws(RainError) {
                _ = try server.handshake()
            } catch {
                caught = error
            }
            #expect(caught?.code == .provider)
            #expect(caught?.details.reason == TLSSession.FailureReason.notTLS)
        }
    }

    @Test("writing before the handshake is refused; roles cannot be mixed")
    func misuse() async throws {
        try await Self.withContexts { serverContext, clientContext, _ in
            let client = try clientContext.makeClientSession(serverName: "localhost")
            #expect(throws: RainError.self) { try client.write([1, 2, 3]) }
            #expect(throws: RainError.self) { _ = try clientContext.makeServerSession() }
            #expect(throws: RainError.self) { _ = try serverContext.makeClientSession(serverName: "localhost") }
            #expect(throws: RainError.self) { _ = try clientContext.makeClientSession(serverName: "") }
        }
    }
}
