import RainCore
import RainCrypto
import RainTestSupport
import Testing

@Suite("Wallets over the remote authority")
struct RemoteWalletTests {
    @Test("wallet and export round-trip over TCP, errors keep their codes, the service logs no secret")
    func roundTrip() async throws {
        try await RemoteFixture.with { f in
            let login = try await f.login()
            let remoteWallet = try await f.remote.wallet(appID: RemoteFixture.app, accessToken: login.tokens.accessToken)
            let local = try await f.embedded.wallet(appID: RemoteFixture.app, accessToken: login.tokens.accessToken)
            #expect(remoteWallet == local)
            let secrets = try await f.remote.exportWallet(appID: RemoteFixture.app, accessToken: login.tokens.accessToken)
            #expect(
                secrets == (try await f.embedded.exportWallet(appID: RemoteFixture.app, accessToken: login.tokens.accessToken)))
            let keys = try WalletKeys.derive(entropy: try BIP39.entropy(fromMnemonic: secrets.mnemonic))
            #expect(keys.ethereumAddress == remoteWallet.ethereumAddress)
            #expect(keys.solanaAddress == remoteWallet.solanaAddress)

            let refused = await rainError {
                _ = try await f.remote.exportWallet(appID: RemoteFixture.app, accessToken: "rwa_nope")
            }
            #expect(refused?.code == .sessionExpired)
            #expect(refused?.details.reason == "invalid_token")

            let log = f.logSink.captured.joined(separator: "\n")
            #expect(!log.contains(secrets.mnemonic.joined(separator: " ")))
            #expect(!log.contains(String(secrets.ethereumPrivateKeyHex.dropFirst(2))))
            #expect(!log.contains(secrets.solanaKeypairBase58))
        }
    }
}
