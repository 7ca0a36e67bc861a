import Foundation
import RainCrypto
import RainTestSupport
import RainWallet
import RainWire
import Testing

/// The daemon config that lets the default profile export.
let exportAllowedConfig = #"{"profiles": {"default": {"allowExport": true}}}"#

extension DaemonHarness {
    /// Logs `email` in with the CLI (`code send`, then `code confirm`).
    func cliLogIn(_ email: String) async throws {
        let before = try await outbox().filter { $0.contact?.value == email }.count
        let sent = try await runCLI(["code", "send", "--email", email])
        #expect(sent.status == 0, "\(sent)")
        let code = try await waitForCode(for: email, count: before + 1)
        let confirmed = try await runCLI(["code", "confirm", code])
        #expect(confirmed.status == 0, "\(confirmed)")
    }

    /// `rainwallet account --json`'s "wallet" object.
    func cliWallet() async throws -> [String: Any] {
        let r = try await runCLI(["account", "--json"])
        #expect(r.status == 0, "\(r)")
        return try #require(try jsonObject(r.stdout)["wallet"] as? [String: Any], "\(r.stdout)")
    }
}

@Suite("Wallets end to end: rainwallet account and export")
struct WalletIntegrationTests {
    @Test("a first code login creates a wallet with both addresses; logging in again returns the same one")
    func firstLoginCreatesWallet() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        try await h.cliLogIn("wallet@example.com")
        let account = try jsonObject(try await h.runCLI(["account", "--json"]).stdout)
        let wallet = try await h.cliWallet()
        let id = try #require(wallet["id"] as? String)
        #expect(id.hasPrefix("wal_"))
        #expect(account["walletId"] as? String == id)
        let ethereum = try #require(wallet["ethereumAddress"] as? String)
        let solana = try #require(wallet["solanaAddress"] as? String)
        #expect(EthereumAddress.checksummed(ethereum.lowercased()) == ethereum)
        #expect(Base58.decode(solana)?.count == 32)
        #expect(parseRFC3339UTC(try #require(wallet["createdAt"] as? String)) != nil)

        let human = try await h.runCLI(["account"])
        #expect(human.status == 0, "\(human)")
        #expect(human.stdout.contains(id))
        #expect(human.stdout.contains(ethereum))
        #expect(human.stdout.contains(solana))

        let logout = try await h.runCLI(["logout"])
        #expect(logout.status == 0, "\(logout)")
        try await h.cliLogIn("wallet@example.com")
        let again = try await h.cliWallet()
        #expect(again["id"] as? String == id)
        #expect(again["ethereumAddress"] as? String == ethereum)
        #expect(again["solanaAddress"] as? String == solana)

        // Another account gets another wallet.
        try await h.cliLogIn("other@example.com")
        let other = try await h.cliWallet()
        #expect(other["id"] as? String != id)
        #expect(other["ethereumAddress"] as? String != ethereum)
    }

    @Test("export is refused with exit 5 without allowExport, even with a session")
    func exportRefusedWithoutSetting() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        try await h.cliLogIn("noexport@example.com")
        let phrase = try await h.runCLI(["export", "phrase", "--yes"])
        #expect(phrase.status == 5, "\(phrase)")
        #expect(phrase.stderr.contains("RAIN_202"), "\(phrase)")
        let key = try await h.runCLI(["export", "key", "--chain", "ethereum", "--yes"])
        #expect(key.status == 5, "\(key)")
        let library = await rainError { _ = try await h.provider().exportRecoveryPhrase() }
        #expect(library?.code == .unauthorized)
    }

    @Test("export without a session exits 4")
    func exportWithoutSession() async throws {
        let h = try await DaemonHarness.start(config: exportAllowedConfig)
        defer { h.shutdown() }
        let phrase = try await h.runCLI(["export", "phrase", "--yes"])
        #expect(phrase.status == 4, "\(phrase)")
        let key = try await h.runCLI(["export", "key", "--chain", "solana", "--yes"])
        #expect(key.status == 4, "\(key)")
    }

    @Test("export phrase --yes prints 12 words that re-derive both addresses; keys have their formats; nothing is logged")
    func exportPhraseAndKeys() async throws {
        let h = try await DaemonHarness.start(config: exportAllowedConfig)
        defer { h.shutdown() }
        try await h.cliLogIn("export@example.com")
        let wallet = try await h.cliWallet()

        let phrase = try await h.runCLI(["export", "phrase", "--yes"])
        #expect(phrase.status == 0, "\(phrase)")
        let words = phrase.stdout.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: " ").map(String.init)
        #expect(words.count == 12)
        let keys = try WalletKeys.derive(entropy: try BIP39.entropy(fromMnemonic: words))
        #expect(keys.ethereumAddress == wallet["ethereumAddress"] as? String)
        #expect(keys.solanaAddress == wallet["solanaAddress"] as? String)

        let ethereum = try await h.runCLI(["export", "key", "--chain", "ethereum", "--yes"])
        #expect(ethereum.status == 0, "\(ethereum)")
        let ethereumKey = ethereum.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(ethereumKey.hasPrefix("0x") && ethereumKey.count == 66)
        #expect(ethereumKey.dropFirst(2).allSatisfy { "0123456789abcdef".contains($0) })
        #expect(ethereumKey == keys.ethereumPrivateKeyHex)

        let solana = try await h.runCLI(["--json", "export", "key", "--chain", "solana", "--yes"])
        #expect(solana.status == 0, "\(solana)")
        let solanaJSON = try jsonObject(solana.stdout)
        #expect(solanaJSON["chain"] as? String == "solana")
        let solanaKey = try #require(solanaJSON["privateKey"] as? String)
        #expect(Base58.decode(solanaKey)?.count == 64)
        #expect(solanaKey == keys.solanaKeypairBase58)

        // The client library gives the same.
        #expect(try await h.provider().exportRecoveryPhrase() == words)
        #expect(try await h.provider().exportPrivateKey(chain: .ethereum) == ethereumKey)

        let log = h.log
        #expect(!log.isEmpty)
        #expect(!log.contains(words.joined(separator: " ")))
        #expect(!log.contains(String(ethereumKey.dropFirst(2))))
        #expect(!log.contains(solanaKey))
    }

    @Test("export without --yes refuses to print to a pipe with exit 64, before asking the daemon")
    func exportToPipeNeedsYes() async throws {
        let h = try await DaemonHarness.start(config: exportAllowedConfig)
        defer { h.shutdown() }
        try await h.cliLogIn("pipe@example.com")
        let phrase = try await h.runCLI(["export", "phrase"], stdin: "YES\n")
        #expect(phrase.status == 64, "\(phrase)")
        #expect(phrase.stdout.isEmpty)
        let key = try await h.runCLI(["export", "key", "--chain", "ethereum"], stdin: "YES\n")
        #expect(key.status == 64, "\(key)")
        #expect(key.stdout.isEmpty)
        let noChain = try await h.runCLI(["export", "key", "--yes"])
        #expect(noChain.status == 64, "\(noChain)")
        let badChain = try await h.runCLI(["export", "key", "--chain", "bitcoin", "--yes"])
        #expect(badChain.status == 64, "\(badChain)")
        for args in [["export", "phrase", "--help"], ["export", "key", "--help"]] {
            let help = try await h.runCLI(args)
            #expect(help.status == 0, "\(help)")
            #expect(help.stdout.contains("usage: rainwallet export"), "\(help)")
        }
    }

    @Test("GetInfo lists the wallet and export capabilities")
    func capabilities() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let info = try await h.provider().daemonInfo()
        #expect(info.capabilities.contains("wallet"))
        #expect(info.capabilities.contains("export"))
    }
}
