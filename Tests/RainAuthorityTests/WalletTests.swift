import Foundation
import RainCore
import RainCrypto
import RainTestSupport
import RainWire
import Testing

@testable import RainAuthority
@testable import RainStore

/// Checks that `address` is `0x` + 40 hex digits in EIP-55 case.
func isEIP55(_ address: String) -> Bool {
    address.hasPrefix("0x") && address.count == 42
        && EthereumAddress.checksummed(address.lowercased()) == address
}

/// Checks that `address` is base58 of a 32-byte key.
func isSolanaAddress(_ address: String) -> Bool {
    Base58.decode(address)?.count == 32
}

/// `0x` + 64 lowercase hex digits.
func isEthereumPrivateKey(_ key: String) -> Bool {
    key.hasPrefix("0x") && key.count == 66 && key.dropFirst(2).allSatisfy { "0123456789abcdef".contains($0) }
}

/// Runs raw SQL on the fixture's database (a second connection; WAL lets it write beside the store).
func withRawDatabase(_ directory: String, _ body: (SQLiteConnection) throws -> Void) throws {
    let db = try SQLiteConnection(path: directory + "/authority.sqlite3")
    try body(db)
}

@Suite("Wallets: creation, keys at rest, backfill, reads and export")
struct WalletTests {
    @Test("a first login creates a wallet with valid addresses, and its exported phrase re-derives both")
    func firstLoginCreatesWallet() async throws {
        try await AuthorityFixture.with { f in
            let login = try await f.login()
            #expect(login.accountCreated)
            let token = login.tokens.accessToken
            let wallet = try await f.authority.wallet(appID: AuthorityFixture.app, accessToken: token)
            #expect(wallet.walletID == login.walletID)
            #expect(wallet.walletID.hasPrefix("wal_"))
            #expect(isEIP55(wallet.ethereumAddress), "\(wallet.ethereumAddress)")
            #expect(isSolanaAddress(wallet.solanaAddress), "\(wallet.solanaAddress)")
            #expect(wallet.createdAt.unixMilliseconds == f.clock.now.unixMilliseconds)

            let secrets = try await f.authority.exportWallet(appID: AuthorityFixture.app, accessToken: token)
            #expect(secrets.mnemonic.count == 12)
            let rederived = try WalletKeys.derive(entropy: try BIP39.entropy(fromMnemonic: secrets.mnemonic))
            #expect(rederived.ethereumAddress == wallet.ethereumAddress)
            #expect(rederived.solanaAddress == wallet.solanaAddress)
            #expect(rederived.ethereumPrivateKeyHex == secrets.ethereumPrivateKeyHex)
            #expect(isEthereumPrivateKey(secrets.ethereumPrivateKeyHex))
            let keypair = try #require(Base58.decode(secrets.solanaKeypairBase58))
            #expect(keypair.count == 64)
            #expect(Array(keypair.suffix(32)) == Base58.decode(wallet.solanaAddress))

            // Nothing secret in the description or the log.
            #expect(!"\(secrets)".contains(secrets.mnemonic[0] + " " + secrets.mnemonic[1]))
            #expect(!"\(secrets)".contains(secrets.ethereumPrivateKeyHex))
            let log = f.logSink.captured.joined(separator: "\n")
            #expect(!log.contains(secrets.mnemonic.joined(separator: " ")))
            #expect(!log.contains(String(secrets.ethereumPrivateKeyHex.dropFirst(2))))
            #expect(!log.contains(secrets.solanaKeypairBase58))
        }
    }

    @Test("a second login returns the same wallet, with the same keys")
    func secondLoginSameWallet() async throws {
        try await AuthorityFixture.with { f in
            let first = try await f.login()
            let before = try await f.authority.wallet(appID: AuthorityFixture.app, accessToken: first.tokens.accessToken)
            let phrase = try await f.authority.exportWallet(
                appID: AuthorityFixture.app, accessToken: first.tokens.accessToken
            ).mnemonic
            let second = try await f.login(device: "device-b")
            #expect(!second.accountCreated)
            #expect(second.walletID == first.walletID)
            let after = try await f.authority.wallet(appID: AuthorityFixture.app, accessToken: second.tokens.accessToken)
            #expect(after == before)
            #expect(
                try await f.authority.exportWallet(appID: AuthorityFixture.app, accessToken: second.tokens.accessToken)
                    .mnemonic == phrase)
        }
    }

    @Test("two accounts get different wallets")
    func accountsGetDifferentWallets() async throws {
        try await AuthorityFixture.with { f in
            let a = try await f.login(AuthorityFixture.email)
            let b = try await f.login(AuthorityFixture.phone, device: "device-b")
            let wa = try await f.authority.wallet(appID: AuthorityFixture.app, accessToken: a.tokens.accessToken)
            let wb = try await f.authority.wallet(appID: AuthorityFixture.app, accessToken: b.tokens.accessToken)
            #expect(wa.walletID != wb.walletID)
            #expect(wa.ethereumAddress != wb.ethereumAddress)
            #expect(wa.solanaAddress != wb.solanaAddress)
        }
    }

    @Test("the entropy is stored encrypted under the master key's id; neither it nor the phrase is in the files")
    func entropyEncryptedAtRest() async throws {
        try await AuthorityFixture.with { f in
            let login = try await f.login()
            let secrets = try await f.authority.exportWallet(
                appID: AuthorityFixture.app, accessToken: login.tokens.accessToken)
            let entropy = try BIP39.entropy(fromMnemonic: secrets.mnemonic)
            #expect(entropy.count == 16)
            let record = try #require(try await f.store.wallet(accountID: login.accountID))
            let ciphertext = try #require(record.entropyCiphertext)
            #expect(record.entropyKeyID == f.keys.masterKeyID)
            #expect(ciphertext.count == 12 + 16 + 16)
            #expect(ciphertext != entropy)
            #expect(!ciphertext.contains(entropy))
            // Sealed to this wallet: the same bytes do not open for another wallet id.
            #expect(throws: RainError.self) {
                try AESGCM.open(
                    AESGCM.SealedBox(combined: ciphertext), using: f.keys.walletKey,
                    authenticating: EmbeddedAuthority.walletAssociatedData(walletID: "wal_other"))
            }
            #expect(
                try AESGCM.open(
                    AESGCM.SealedBox(combined: ciphertext), using: f.keys.walletKey,
                    authenticating: EmbeddedAuthority.walletAssociatedData(walletID: record.id)) == entropy)

            var bytes: [UInt8] = []
            for suffix in ["", "-wal"] {
                if let data = FileManager.default.contents(atPath: f.directory + "/authority.sqlite3" + suffix) {
                    bytes += Array(data)
                }
            }
            #expect(!bytes.isEmpty)
            #expect(!bytes.contains(entropy))
            #expect(!bytes.contains(Array(secrets.mnemonic.joined(separator: " ").utf8)))
            #expect(!bytes.contains(Array(Hex.encode(entropy).utf8)))
            #expect(!bytes.contains(Array(secrets.ethereumPrivateKeyHex.dropFirst(2).utf8)))
            #expect(!bytes.contains(Array(secrets.solanaKeypairBase58.utf8)))
        }
    }

    @Test("a version-2 database with a keyless wallet is backfilled when the authority opens")
    func backfillAtOpen() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let clock = ManualClock()
        let now = clock.now.unixMilliseconds
        do {
            let db = try SQLiteConnection(path: directory + "/authority.sqlite3")
            for statement in try ReleasedSQLiteSchema.v1() { try db.execute(statement, operation: "create v1") }
            let v2 = try #require(SQLiteAuthorityStore.migrations.first { $0.version == 2 })
            for statement in v2.statements { try db.execute(statement, operation: "create v2") }
            try db.execute("INSERT INTO schema_version (version, applied_at) VALUES (2, 0)", operation: "v2")
            try db.execute(
                "INSERT INTO accounts (id, app_id, created_at) VALUES ('acct_old', 'app', ?)", [.integer(now)],
                operation: "insert")
            try db.execute(
                "INSERT INTO contacts VALUES ('app', 'email', 'old@example.com', 'acct_old', ?)", [.integer(now)],
                operation: "insert")
            try db.execute(
                "INSERT INTO wallets (id, account_id, created_at) VALUES ('wal_old', 'acct_old', ?)", [.integer(now)],
                operation: "insert")
        }

        // The master key its sessions were hashed with: a store with data never gets a new one.
        _ = try KeyFile.loadOrCreate(at: directory + "/authority.key")

        let sender = CapturingCodeSender()
        let authority = try await EmbeddedAuthority(
            stateDirectory: directory, clock: clock, sender: sender, logger: Logger(label: "test", sink: CapturingLogSink()))
        #expect(try await authority.store.schemaVersion() == SQLiteAuthorityStore.latestSchemaVersion)
        let record = try #require(try await authority.store.wallet(accountID: "acct_old"))
        #expect(record.hasAllKeys)
        #expect(record.id == "wal_old")
        #expect(try await authority.store.walletsMissingKeys().isEmpty)

        // The old account logs in to the same wallet, whose phrase gives the stored addresses.
        let challenge = try await authority.sendLoginCode(
            SendCodeRequest(appID: "app", deviceID: "dev", contact: .email("old@example.com")))
        let login = try await authority.confirmLoginCode(
            ConfirmCodeRequest(
                appID: "app", deviceID: "dev", challengeID: challenge.challengeID,
                code: try sender.lastCode(to: .email("old@example.com")),
                devicePublicKey: FixtureDevice.key.publicKey.rawRepresentation))
        #expect(login.walletID == "wal_old")
        let wallet = try await authority.wallet(appID: "app", accessToken: login.tokens.accessToken)
        #expect(wallet.ethereumAddress == record.ethereumAddress)
        #expect(wallet.solanaAddress == record.solanaAddress)
        let phrase = try await authority.exportWallet(appID: "app", accessToken: login.tokens.accessToken).mnemonic
        let keys = try WalletKeys.derive(entropy: try BIP39.entropy(fromMnemonic: phrase))
        #expect(keys.ethereumAddress == wallet.ethereumAddress)
        #expect(keys.solanaAddress == wallet.solanaAddress)
        await authority.store.close()
    }

    @Test("a wallet missing its Solana address gets it, from the same entropy, at the next login")
    func missingChainBackfilledAtLogin() async throws {
        try await AuthorityFixture.with { f in
            let first = try await f.login()
            let before = try #require(try await f.store.wallet(accountID: first.accountID))
            try withRawDatabase(f.directory) { db in
                try db.execute(
                    "UPDATE wallets SET solana_address = NULL WHERE id = ?", [.text(before.id)], operation: "drop solana")
            }
            #expect(try await f.store.wallet(accountID: first.accountID)?.solanaAddress == nil)
            _ = try await f.login()
            let after = try #require(try await f.store.wallet(accountID: first.accountID))
            #expect(after == before)
        }
    }

    @Test("a wallet without entropy gets new entropy and both addresses at the next login")
    func missingEntropyBackfilledAtLogin() async throws {
        try await AuthorityFixture.with { f in
            let first = try await f.login()
            let before = try #require(try await f.store.wallet(accountID: first.accountID))
            try withRawDatabase(f.directory) { db in
                try db.execute(
                    """
                    UPDATE wallets SET entropy_ciphertext = NULL, entropy_key_id = NULL, ethereum_address = NULL,
                                       solana_address = NULL WHERE id = ?
                    """, [.text(before.id)], operation: "drop keys")
            }
            let second = try await f.login()
            let after = try #require(try await f.store.wallet(accountID: first.accountID))
            #expect(after.hasAllKeys)
            #expect(after.id == before.id)
            #expect(after.ethereumAddress != before.ethereumAddress)
            let phrase = try await f.authority.exportWallet(
                appID: AuthorityFixture.app, accessToken: second.tokens.accessToken
            ).mnemonic
            #expect(try WalletKeys.derive(entropy: try BIP39.entropy(fromMnemonic: phrase)).solanaAddress == after.solanaAddress)
        }
    }

    @Test("wallet and export refuse a revoked, an expired and an unknown token with RAIN_201")
    func refusedTokens() async throws {
        try await AuthorityFixture.with { f in
            let a = try await f.login(device: "device-a")
            _ = try await f.login(device: "device-b")
            #expect(
                await sessionRefusal {
                    _ = try await f.authority.exportWallet(appID: AuthorityFixture.app, accessToken: a.tokens.accessToken)
                } == "revoked_elsewhere")
            #expect(
                await sessionRefusal {
                    _ = try await f.authority.wallet(appID: AuthorityFixture.app, accessToken: a.tokens.accessToken)
                } == "revoked_elsewhere")
            #expect(
                await sessionRefusal {
                    _ = try await f.authority.exportWallet(appID: AuthorityFixture.app, accessToken: "rwa_unknown")
                } == "invalid_token")
            let c = try await f.login(device: "device-c")
            f.clock.advance(by: .seconds(901))
            #expect(
                await sessionRefusal {
                    _ = try await f.authority.exportWallet(appID: AuthorityFixture.app, accessToken: c.tokens.accessToken)
                } == "access_expired")
        }
    }

    @Test("an account without a wallet: wallet and export are RAIN_404")
    func noWallet() async throws {
        try await AuthorityFixture.with { f in
            let login = try await f.login()
            try withRawDatabase(f.directory) { db in
                try db.execute("DELETE FROM wallets WHERE id = ?", [.text(login.walletID)], operation: "delete wallet")
            }
            let token = login.tokens.accessToken
            #expect(
                await rainError { _ = try await f.authority.wallet(appID: AuthorityFixture.app, accessToken: token) }?.code
                    == .unavailable)
            #expect(
                await rainError { _ = try await f.authority.exportWallet(appID: AuthorityFixture.app, accessToken: token) }?
                    .code == .unavailable)
        }
    }

    @Test("a wallet sealed under another master key is not completed with it (RAIN_502)")
    func otherMasterKey() async throws {
        try await AuthorityFixture.with { f in
            let login = try await f.login()
            let record = try #require(try await f.store.wallet(accountID: login.accountID))
            #expect(record.entropyKeyID == f.keys.masterKeyID)
            try withRawDatabase(f.directory) { db in
                try db.execute(
                    "UPDATE wallets SET ethereum_address = NULL WHERE id = ?", [.text(record.id)], operation: "drop eth")
            }
            let other = EmbeddedAuthority(
                store: f.store, keys: try AuthorityKeys(masterKey: SymmetricKey(bytes: Array(repeating: 8, count: 32))),
                clock: f.clock, sender: f.sender, outbox: nil, logger: Logger(label: "test", sink: CapturingLogSink()))
            #expect(await rainError { try await other.backfillWallets() }?.code == .internalError)
            // The entropy is untouched; the right key completes it.
            #expect(try await f.authority.backfillWallets() == 1)
            #expect(try await f.store.wallet(accountID: login.accountID) == record)
        }
    }
}
