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

/// An authority that signs, then keeps the answer to its first signature back until `release()`:
/// the signature was made and recorded, and the device hears nothing. Every other call, and every
/// later signature, passes straight on.
final class AnswerHoldingAuthority: ForwardingAuthority {
    private struct State {
        var signRequests = 0
        var heldAnswer: SignResponse?
    }

    let forwarded: any Authority
    private let state = Mutex(State())
    private let released: AsyncStream<Void>
    private let releasing: AsyncStream<Void>.Continuation

    init(_ forwarded: any Authority) {
        self.forwarded = forwarded
        (released, releasing) = AsyncStream<Void>.makeStream()
    }

    /// How many `SignWithWallet` requests reached this authority.
    var signRequests: Int { state.withLock { $0.signRequests } }
    /// The signature the authority made for the first request, once it made it.
    var heldAnswer: SignResponse? { state.withLock { $0.heldAnswer } }

    /// Lets the held answer go (to a connection the device may have closed meanwhile).
    func release() { releasing.finish() }

    func signWithWallet(_ request: AuthoritySignRequest, caller: AuthorityCaller) async throws(RainError) -> SignResponse {
        let isFirst = state.withLock { s in
            s.signRequests += 1
            return s.signRequests == 1
        }
        let response = try await forwarded.signWithWallet(request, caller: caller)
        guard isFirst else { return response }
        state.withLock { $0.heldAnswer = response }
        for await _ in released {}
        return response
    }
}

/// `Authority/SignWithWallet` through `RemoteAuthority`, TLS and `AuthorityService` to the embedded
/// authority: the signatures are the wallet's, and the authority's rules (the confirmed bytes, one
/// signature per idempotency key, a send never retried) hold across the hop.
@Suite("Signatures across the authority hop (TLS)")
struct RemoteSigningTests {
    /// An unsigned EIP-1559 USDC transfer on Base (chain 8453, nonce 7).
    static let baseTransfer =
        Hex.decode(
            "02f86d82210507830f424084b2d05e0082fde894833589fcd6edb6e08f4c7c32d4f71b54bda0291380b844a9059cbb"
                + "000000000000000000000000ab5801a7d398351b8be11c439e05c5b3259aec9b000000000000000000000000000000"
                + "00000000000000000000000000004c4b40c0") ?? []
    /// The EIP-155 example's unsigned legacy transaction (chain 1).
    static let eip155Example =
        Hex.decode("ec098504a817c800825208943535353535353535353535353535353535353535880de0b6b3a764000080018080") ?? []

    /// The bytes a Solana off-chain message signs, built by hand from solana-sdk's version 0 layout
    /// (signing domain, header version 0, format 0 for printable ASCII, u16 LE length, text), not
    /// by the code under test.
    static func offchainEnvelope(ascii text: String) -> [UInt8] {
        let count = text.utf8.count
        return [0xff] + Array("solana offchain".utf8) + [0, 0, UInt8(count & 0xff), UInt8(count >> 8)] + Array(text.utf8)
    }

    /// A request as a device sends it: the app's request and the SHA-256 its prompt showed.
    static func request(_ kind: String, _ app: SignRequest, token: String, confirmed: [UInt8]) -> AuthoritySignRequest {
        AuthoritySignRequest(
            appID: RemoteFixture.app, accessToken: token, kind: kind, request: app, confirmedSha256: confirmed)
    }

    /// The authority's `wallet.signed` lines: one per signature it made (a repeat answered from its
    /// idempotency record makes none).
    static func signatures(_ f: RemoteFixture) -> Int {
        f.logSink.captured.filter { $0.contains("wallet.signed") }.count
    }

    /// Runs `body` with a `RemoteFixture` served over TLS, its certificates, and the access token of
    /// a login bound to the fixture device's key.
    static func withTLS(_ body: (RemoteFixture, TestCertificates, String) async throws -> Void) async throws {
        try await TestCertificates.withTemporaryDirectory { c in
            try await RemoteFixture.with(
                serverTLS: try TestCertificates.serverContext(c),
                clientTLS: try TLSContext.client(trustedCertificatesFile: c.caPath)
            ) { f in
                try await body(f, c, try await f.login().tokens.accessToken)
            }
        }
    }

    static func sign(_ remote: RemoteAuthority, _ request: AuthoritySignRequest) async throws(RainError) -> SignResponse {
        // The caller is not sent: what counts is the connection's proof of the fixture device's key.
        try await remote.signWithWallet(request, caller: AuthorityCaller(proof: FixtureDevice.proof))
    }

    @Test("an EVM transaction and a Solana off-chain message are signed across TLS by the wallet's keys; the log names no key")
    func signsWithTheWalletsKeys() async throws {
        try await Self.withTLS { f, _, token in
            let wallet = try await f.remote.wallet(appID: RemoteFixture.app, accessToken: token)
            let address = try #require(Hex.decode(String(wallet.ethereumAddress.dropFirst(2))))

            let tx = try await Self.sign(
                f.remote,
                Self.request(
                    "transaction", SignRequest(chain: .ethereum, chainID: 8453, payload: Self.baseTransfer), token: token,
                    confirmed: SHA256.hash(Self.baseTransfer)))
            #expect(tx.chain == .ethereum)
            #expect(tx.address == wallet.ethereumAddress)
            #expect(tx.signedBytesSha256 == SHA256.hash(Self.baseTransfer))
            try #require(tx.signature.count == 65)
            let recovered = try Secp256k1Recovery.recoverAddress(
                digest: Keccak256.hash(Self.baseTransfer), r: Array(tx.signature[0..<32]), s: Array(tx.signature[32..<64]),
                recoveryID: tx.signature[64] - 27)
            #expect(recovered == address)
            #expect(tx.signedTransaction.first == 0x02)
            #expect(tx.transactionHash == Keccak256.hash(tx.signedTransaction))

            let text = "gm from across the authority hop"
            let envelope = Self.offchainEnvelope(ascii: text)
            let message = try await Self.sign(
                f.remote,
                Self.request(
                    "message", SignRequest(chain: .solana, payload: Array(text.utf8)), token: token,
                    confirmed: SHA256.hash(envelope)))
            #expect(message.chain == .solana)
            #expect(message.address == wallet.solanaAddress)
            #expect(message.signedBytesSha256 == SHA256.hash(envelope))
            #expect(message.signature.count == 64)
            let key = try Ed25519PublicKey(rawRepresentation: try #require(Base58.decode(wallet.solanaAddress)))
            #expect(key.isValidSignature(message.signature, for: envelope))
            // The check can fail: one changed byte of the text and the signature no longer verifies.
            #expect(!key.isValidSignature(message.signature, for: envelope.dropLast() + [0x21]))

            // The authority logged each signature and no key, not even after the wallet's export.
            #expect(Self.signatures(f) == 2)
            let secrets = try await f.remote.exportWallet(appID: RemoteFixture.app, accessToken: token)
            var scanner = SecretScanner()
            scanner.addPhrase(secrets.mnemonic)
            scanner.addKey(try #require(Hex.decode(String(secrets.ethereumPrivateKeyHex.dropFirst(2)))), label: "ethereum key")
            let keypair = try #require(Base58.decode(secrets.solanaKeypairBase58))
            scanner.addKey(keypair, label: "solana keypair")
            scanner.addKey(Array(keypair.prefix(32)), label: "solana seed")
            let findings = scanner.findings(in: [f.logSink.captured.joined(separator: "\n")])
            #expect(findings.isEmpty, "\(findings)")
            #expect(!scanner.findings(in: [secrets.ethereumPrivateKeyHex, secrets.solanaKeypairBase58]).isEmpty)
        }
    }

    @Test("bytes other than the confirmed ones, or none confirmed, are RAIN_102 confirmation_mismatch across the hop")
    func confirmationMismatch() async throws {
        try await Self.withTLS { f, _, token in
            // The user confirmed the Base transfer; the request asks for another transaction.
            let other = SignRequest(chain: .ethereum, chainID: 1, payload: Self.eip155Example)
            for confirmed in [SHA256.hash(Self.baseTransfer), []] {
                let error = await rainError {
                    _ = try await Self.sign(f.remote, Self.request("transaction", other, token: token, confirmed: confirmed))
                }
                #expect(error?.code == .invalidArgument)
                #expect(error?.details.reason == "confirmation_mismatch")
                #expect(error?.details.field == "confirmedSha256")
            }
            #expect(Self.signatures(f) == 0, "the authority signed bytes nobody confirmed")
            // The same request with the hash of its own bytes is signed.
            let signed = try await Self.sign(
                f.remote, Self.request("transaction", other, token: token, confirmed: SHA256.hash(Self.eip155Example)))
            #expect(signed.signedBytesSha256 == SHA256.hash(Self.eip155Example))
        }
    }

    @Test("one idempotency key answers its first signature to the same request, and RAIN_102 idempotency_key_reused to another")
    func idempotencyKey() async throws {
        try await Self.withTLS { f, _, token in
            let key = (0..<32).map { _ in UInt8.random(in: 0...255) }
            let app = SignRequest(chain: .ethereum, chainID: 8453, payload: Self.baseTransfer, idempotencyKey: key)
            let request = Self.request("transaction", app, token: token, confirmed: SHA256.hash(Self.baseTransfer))
            let first = try await Self.sign(f.remote, request)
            let again = try await Self.sign(f.remote, request)
            #expect(again == first)
            // Signatures are deterministic (RFC 6979), so equal answers alone do not show a repeat:
            // the authority signed once and answered the repeat from its record.
            #expect(Self.signatures(f) == 1)

            let text = "another request, the same key"
            let other = SignRequest(chain: .solana, payload: Array(text.utf8), idempotencyKey: key)
            let error = await rainError {
                _ = try await Self.sign(
                    f.remote,
                    Self.request("message", other, token: token, confirmed: SHA256.hash(Self.offchainEnvelope(ascii: text))))
            }
            #expect(error?.code == .invalidArgument)
            #expect(error?.details.reason == "idempotency_key_reused")
            #expect(Self.signatures(f) == 1)
        }
    }

    /// The device's deadline runs on its own manual clock, moved by hand once the authority made
    /// the signature, so the outcome does not depend on how busy the machine is.
    @Test(
        "a SignWithWallet not answered in time is RAIN_501 outcome_unknown, sent once; the same key later answers the signature made",
        .timeLimit(.minutes(2)))
    func unansweredSignature() async throws {
        try await Self.withTLS { f, c, token in
            let holding = AnswerHoldingAuthority(f.embedded)
            let service = AuthorityService(authority: holding, version: "held", logger: f.logger.child("held"))
            let server = try RunningTCPServer(
                handler: service, tls: try TestCertificates.serverContext(c), logger: f.logger.child("held-loop"))
            let clock = ManualClock()
            let deadlines = AuthorityDeadlines(read: .seconds(5), send: .seconds(10), refresh: .seconds(5))
            let remote = try RemoteAuthority(
                address: server.address, tls: try TLSContext.client(trustedCertificatesFile: c.caPath),
                device: FixtureDevice.keys, connectTimeout: .seconds(10), deadlines: deadlines,
                // No probe within the test: the clock moves only for the deadline.
                linkProbeInterval: .seconds(3600), clock: clock, logger: f.logger.child("device"))
            defer { remote.close() }
            do {
                // A proven connection first: the signature's request is the one call that follows.
                _ = try await remote.wallet(appID: RemoteFixture.app, accessToken: token)
                let key = (0..<32).map { _ in UInt8.random(in: 0...255) }
                let request = Self.request(
                    "transaction",
                    SignRequest(chain: .ethereum, chainID: 8453, payload: Self.baseTransfer, idempotencyKey: key),
                    token: token, confirmed: SHA256.hash(Self.baseTransfer))

                async let lost = rainError { _ = try await Self.sign(remote, request) }
                let signedBy = ContinuousClock.now + .seconds(60)
                while holding.heldAnswer == nil && ContinuousClock.now < signedBy {
                    try await Task.sleep(for: .milliseconds(5))
                }
                let made = try #require(holding.heldAnswer, "the authority never signed")
                clock.advance(by: deadlines.send)
                let error = await lost
                #expect(error?.code == .provider)
                #expect(error?.details.reason == "outcome_unknown")
                #expect(holding.signRequests == 1, "a send was retried")

                // The authority answers again: the same key and request get the signature it made.
                holding.release()
                let again = try await Self.sign(remote, request)
                #expect(again == made)
                #expect(holding.signRequests == 2)
                #expect(Self.signatures(f) == 1, "the repeat was signed again instead of answered from the record")
            } catch {
                holding.release()
                try? await server.stop()
                throw error
            }
            try await server.stop()
        }
    }
}
