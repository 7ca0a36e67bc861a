import Foundation
import RainAuthority
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainStore

/// The `AuthorityStore` implementations the conformance suite runs against.
package enum StoreKind: String, CaseIterable, Sendable {
    /// `SQLiteAuthorityStore` in a temporary directory.
    case sqlite
    /// `PostgresAuthorityStore` on a fresh database of the shared test cluster.
    case postgres
}

/// One or more stores of one kind on the same database (instances sharing state, as several
/// authority processes do), each with its authority, a manual clock, a capturing sender and the
/// same keys.
package struct StoreFixture {
    package let kind: StoreKind
    package let stores: [any AuthorityStore]
    package let authorities: [EmbeddedAuthority]
    package let clock: ManualClock
    package let sender: CapturingCodeSender
    package let keys: AuthorityKeys
    /// Opens one more store on the same database.
    package let reopen: @Sendable () async throws -> any AuthorityStore

    package var store: any AuthorityStore { stores[0] }
    package var authority: EmbeddedAuthority { authorities[0] }

    package static let app = AuthorityFixture.app
    package static let email = AuthorityFixture.email
    package static let phone = AuthorityFixture.phone

    /// Runs `body` with `instances` stores of `kind` on one fresh database, closing them afterwards.
    package static func with(
        _ kind: StoreKind, instances: Int = 1, settings: AuthoritySettings = AuthoritySettings(),
        _ body: (StoreFixture) async throws -> Void
    ) async throws {
        let (reopen, cleanup) = try await opener(kind)
        defer { cleanup() }
        var stores: [any AuthorityStore] = []
        for _ in 0..<max(1, instances) { stores.append(try await reopen()) }
        let clock = ManualClock()
        let sender = CapturingCodeSender()
        let keys = try AuthorityKeys(masterKey: SymmetricKey(bytes: Array(repeating: 7, count: 32)))
        let authorities = stores.map {
            EmbeddedAuthority(
                store: $0, keys: keys, settings: settings, clock: clock, sender: sender, outbox: nil,
                logger: Logger(label: "test.conformance", sink: CapturingLogSink()))
        }
        let fixture = StoreFixture(
            kind: kind, stores: stores, authorities: authorities, clock: clock, sender: sender, keys: keys,
            reopen: reopen)
        do {
            try await body(fixture)
        } catch {
            for s in stores { await s.close() }
            throw error
        }
        for s in stores { await s.close() }
    }

    /// A function that opens a store of `kind` on one new, empty database (each call another
    /// instance on the same one), and the cleanup to run after the last one is closed.
    package static func opener(_ kind: StoreKind) async throws
        -> (open: @Sendable () async throws -> any AuthorityStore, cleanup: () -> Void)
    {
        switch kind {
        case .sqlite:
            let directory = try makeTemporaryDirectory()
            return (
                { try await SQLiteAuthorityStore.open(stateDirectory: directory) },
                { try? FileManager.default.removeItem(atPath: directory) }
            )
        case .postgres:
            let url = try await PostgresTestCluster.freshDatabaseURL(label: "conformance")
            return ({ try await PostgresAuthorityStore.open(url: url, connections: 3) }, {})
        }
    }

    /// The store's consistency violations (accounts without wallets, two pending codes on one
    /// device, two live sessions on one account, …); empty when consistent.
    package func violations() async throws -> [String] {
        switch store {
        case let sqlite as SQLiteAuthorityStore: return try await sqlite.consistencyViolations()
        case let postgres as PostgresAuthorityStore: return try await postgres.consistencyViolations()
        default: throw HarnessError("no consistency check for \(type(of: store))")
        }
    }

    /// A challenge to insert, created now on the fixture's clock, expiring in 5 minutes.
    package func newChallenge(
        _ contact: RainWalletContact = StoreFixture.email, device: String = "device-a", app: String = StoreFixture.app,
        code: String = "123456", purpose: ChallengePurpose = .login, target: String? = nil, id: String? = nil
    ) throws -> NewChallenge {
        let id = try id ?? SecureRandom.identifier(prefix: "chl")
        let now = Date(unixMilliseconds: clock.now.unixMilliseconds)
        return NewChallenge(
            id: id, appID: app, deviceID: device, contact: contact, codeHash: keys.codeHash(challengeID: id, code: code),
            createdAt: now, expiresAt: now.addingTimeInterval(300), purpose: purpose, targetAccountID: target)
    }

    /// Inserts without limits and expects it to be stored.
    @discardableResult
    package func insert(_ challenge: NewChallenge, maxActive: Int = 3, store: (any AuthorityStore)? = nil) async throws
        -> ChallengeInsertion
    {
        let outcome = try await (store ?? self.store).insertChallenge(
            challenge, maxActivePerAccount: maxActive, limits: .unlimited)
        guard case .inserted(let insertion) = outcome else {
            throw HarnessError("expected the challenge to be inserted, got \(outcome)")
        }
        return insertion
    }

    /// A new session with random token hashes, bound to `key` when given.
    package func newSession(key: [UInt8]? = nil) throws -> NewSession {
        NewSession(
            id: try SecureRandom.identifier(prefix: "ses"), accessHash: try SecureRandom.bytes(count: 32),
            refreshHash: try SecureRandom.bytes(count: 32),
            accessExpiresAt: Date(unixMilliseconds: clock.now.unixMilliseconds).addingTimeInterval(900),
            devicePublicKey: key)
    }

    /// Inserts a challenge for `contact` on `device` and completes its login; returns the record
    /// and the session stored.
    package func storeLogin(
        _ contact: RainWalletContact = StoreFixture.email, device: String = "device-a",
        keys walletKeys: WalletKeyMaterial? = nil, store: (any AuthorityStore)? = nil
    ) async throws -> (record: LoginRecord, session: NewSession) {
        let store = store ?? self.store
        let challenge = try newChallenge(contact, device: device)
        try await insert(challenge, store: store)
        let session = try newSession(key: Array(repeating: 9, count: 32))
        let outcome = try await store.completeLogin(
            LoginCompletion(
                challengeID: challenge.id, appID: challenge.appID, deviceID: device, contact: contact,
                newAccountID: try SecureRandom.identifier(prefix: "acct"),
                newWalletID: try SecureRandom.identifier(prefix: "wal"), newWalletKeys: walletKeys, session: session,
                now: Date(unixMilliseconds: clock.now.unixMilliseconds)))
        guard case .loggedIn(let record) = outcome else {
            throw HarnessError("expected a login, got \(outcome)")
        }
        return (record, session)
    }
}
