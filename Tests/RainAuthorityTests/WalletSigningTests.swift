import Foundation
import RainAuthority
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainSigning
import RainTestSupport
import RainWire
import Testing

/// The authority signs what the device's user confirmed, with keys it derives for one signature.
@Suite("Wallet signatures at the authority: what was confirmed, once per key, no key out")
struct WalletSigningTests {
    /// The EIP-155 example's unsigned transaction (chain 1).
    static let eip155 =
        Hex.decode(
            "ec098504a817c800825208943535353535353535353535353535353535353535880de0b6b3a764000080018080") ?? []

    /// A request as a device sends it, with the SHA-256 its prompt showed (computed as the device does).
    static func request(
        _ kind: SigningRequest.Kind, _ app: SignRequest, token: String, wallet: WalletInfo, confirmed: [UInt8]? = nil
    ) throws -> AuthoritySignRequest {
        let signing = SigningWallet(
            ethereumAddress: Hex.decode(String(wallet.ethereumAddress.dropFirst(2))) ?? [],
            solanaPublicKey: Base58.decode(wallet.solanaAddress) ?? [])
        let prepared = try SigningPreparation.prepare(
            SigningRequest(
                kind: kind, chain: app.chain ?? .ethereum, chainID: app.chainID, payload: app.payload, from: app.from),
            wallet: signing)
        return AuthoritySignRequest(
            appID: AuthorityFixture.app, accessToken: token, kind: kind.rawValue, request: app,
            confirmedSha256: confirmed ?? prepared.signedBytesHash)
    }

    static func sign(_ f: AuthorityFixture, _ request: AuthoritySignRequest) async throws(RainError) -> SignResponse {
        try await f.authority.signWithWallet(request, caller: AuthorityCaller(proof: FixtureDevice.proof))
    }

    @Test("an EVM transaction and message are signed by the wallet's key: the signatures recover to its address")
    func evmSignaturesRecoverToTheWallet() async throws {
        try await AuthorityFixture.with { f in
            let login = try await f.login()
            let token = login.tokens.accessToken
            let wallet = try await f.authority.wallet(appID: AuthorityFixture.app, accessToken: token)
            let address = try #require(Hex.decode(String(wallet.ethereumAddress.dropFirst(2))))

            let tx = try await Self.sign(
                f,
                try Self.request(
                    .transaction, SignRequest(chain: .ethereum, chainID: 1, payload: Self.eip155), token: token, wallet: wallet))
            #expect(tx.address == wallet.ethereumAddress)
            #expect(tx.signedBytesSha256 == SHA256.hash(Self.eip155))
            #expect(tx.transactionHash == Keccak256.hash(tx.signedTransaction))
            let signature = tx.signature
            #expect(signature.count == 65)
            let recovered = try Secp256k1Recovery.recoverAddress(
                digest: Keccak256.hash(Self.eip155), r: Array(signature[0..<32]), s: Array(signature[32..<64]),
                recoveryID: signature[64] - 27)
            #expect(recovered == address)

            let message = try await Self.sign(
                f,
                try Self.request(
                    .message, SignRequest(chain: .ethereum, payload: Array("hello".utf8)), token: token, wallet: wallet))
            let digest = Keccak256.hash(Array("\u{19}Ethereum Signed Message:\n5hello".utf8))
            let fromMessage = try Secp256k1Recovery.recoverAddress(
                digest: digest, r: Array(message.signature[0..<32]), s: Array(message.signature[32..<64]),
                recoveryID: message.signature[64] - 27)
            #expect(fromMessage == address)

            // The log says a signature happened, never the key.
            let secrets = try await f.authority.exportWallet(appID: AuthorityFixture.app, accessToken: token)
            let log = f.logSink.captured.joined(separator: "\n")
            #expect(log.contains("wallet.signed"))
            #expect(!log.contains(String(secrets.ethereumPrivateKeyHex.dropFirst(2))))
        }
    }

    @Test("a Solana off-chain message is signed by the wallet's Ed25519 key")
    func solanaSignatureVerifies() async throws {
        try await AuthorityFixture.with { f in
            let token = try await f.login().tokens.accessToken
            let wallet = try await f.authority.wallet(appID: AuthorityFixture.app, accessToken: token)
            let request = try Self.request(
                .message, SignRequest(chain: .solana, payload: Array("gm".utf8)), token: token, wallet: wallet)
            let response = try await Self.sign(f, request)
            let key = try Ed25519PublicKey(rawRepresentation: try #require(Base58.decode(wallet.solanaAddress)))
            #expect(response.signature.count == 64)
            let signed = try SigningPreparation.prepare(
                SigningRequest(kind: .message, chain: .solana, payload: Array("gm".utf8)),
                wallet: SigningWallet(ethereumAddress: [], solanaPublicKey: try #require(Base58.decode(wallet.solanaAddress))))
            #expect(signed.signedBytes.starts(with: [0xff] + Array("solana offchain".utf8)))
            #expect(key.isValidSignature(response.signature, for: signed.signedBytes))
        }
    }

    @Test("bytes other than the confirmed ones, or none confirmed, are refused: RAIN_102 confirmation_mismatch")
    func confirmationMustMatch() async throws {
        try await AuthorityFixture.with { f in
            let token = try await f.login().tokens.accessToken
            let wallet = try await f.authority.wallet(appID: AuthorityFixture.app, accessToken: token)
            let app = SignRequest(chain: .ethereum, chainID: 1, payload: Self.eip155)
            for confirmed in [[UInt8](), SHA256.hash(Array("something else".utf8))] {
                let error = await #expect(throws: RainError.self) {
                    _ = try await Self.sign(
                        f, try Self.request(.transaction, app, token: token, wallet: wallet, confirmed: confirmed))
                }
                #expect(error?.code == .invalidArgument)
                #expect(error?.details.reason == "confirmation_mismatch")
            }
        }
    }

    @Test("one idempotency key answers the first signature to the same request, and refuses another request")
    func idempotencyKey() async throws {
        try await AuthorityFixture.with { f in
            let token = try await f.login().tokens.accessToken
            let wallet = try await f.authority.wallet(appID: AuthorityFixture.app, accessToken: token)
            let key = [UInt8](repeating: 0x5a, count: 16)
            let app = SignRequest(chain: .ethereum, chainID: 1, payload: Self.eip155, idempotencyKey: key)
            let first = try await Self.sign(f, try Self.request(.transaction, app, token: token, wallet: wallet))
            let again = try await Self.sign(f, try Self.request(.transaction, app, token: token, wallet: wallet))
            #expect(first == again)
            let other = SignRequest(chain: .ethereum, payload: Array("other".utf8), idempotencyKey: key)
            let error = await #expect(throws: RainError.self) {
                _ = try await Self.sign(f, try Self.request(.message, other, token: token, wallet: wallet))
            }
            #expect(error?.details.reason == "idempotency_key_reused")
            // A key of the wrong size.
            let short = SignRequest(chain: .ethereum, payload: [1], idempotencyKey: [1, 2, 3])
            let sizeError = await #expect(throws: RainError.self) {
                _ = try await Self.sign(f, try Self.request(.message, short, token: token, wallet: wallet))
            }
            #expect(sizeError?.details.field == "idempotencyKey")
        }
    }

    @Test("no session, another device's proof and an unknown kind are refused before any key is derived")
    func refusals() async throws {
        try await AuthorityFixture.with { f in
            let token = try await f.login().tokens.accessToken
            let wallet = try await f.authority.wallet(appID: AuthorityFixture.app, accessToken: token)
            let app = SignRequest(chain: .ethereum, payload: Array("x".utf8))
            let good = try Self.request(.message, app, token: token, wallet: wallet)
            var bad = good
            bad.accessToken = "not-a-token"
            let noSession = await #expect(throws: RainError.self) { _ = try await Self.sign(f, bad) }
            #expect(noSession?.code == .sessionExpired)
            // A chain the wallet does not support: the EIP-155 example's transaction on chain 56.
            let onBSC =
                Hex.decode(
                    "ec098504a817c800825208943535353535353535353535353535353535353535880de0b6b3a764000080388080") ?? []
            let bsc = SignRequest(chain: .ethereum, payload: onBSC)
            let chainError = await #expect(throws: RainError.self) {
                _ = try await Self.sign(
                    f,
                    AuthoritySignRequest(
                        appID: AuthorityFixture.app, accessToken: token, kind: "transaction", request: bsc,
                        confirmedSha256: SHA256.hash(onBSC)))
            }
            #expect(chainError?.code == .chainNotSupported)
            var kind = good
            kind.kind = "eth_sign"
            let unknown = await #expect(throws: RainError.self) { _ = try await Self.sign(f, kind) }
            #expect(unknown?.details.field == "kind")
            // Last: a proof of another key ends the session (the token was copied).
            let thief = TestDeviceKeys(
                deviceID: "device-b", keys: [try Ed25519PrivateKey(rawRepresentation: Array(repeating: 7, count: 32))])
            let stolen = await #expect(throws: RainError.self) {
                _ = try await f.authority.signWithWallet(good, caller: AuthorityCaller(proof: thief.proof))
            }
            #expect(stolen?.code == .sessionExpired)
        }
    }
}
