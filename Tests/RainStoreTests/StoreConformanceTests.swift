import Foundation
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainTestSupport
import RainWire
import Synchronization
import Testing

@testable import RainStore

/// The `AuthorityStore` contract, run against every store (SQLite in a temporary directory,
/// PostgreSQL on a fresh database of the shared test cluster). SQLite-only behaviour (file modes,
/// WAL, its migrations from older files) stays in `SQLiteAuthorityStoreTests`.
@Suite("Authority store conformance")
struct StoreConformanceTests {
    static let kinds = StoreKind.allCases
    static let app = StoreFixture.app
    static let email = StoreFixture.email
    static let phone = StoreFixture.phone

    // MARK: Schema and life cycle

    @Test("a new store is at its latest schema version; reopening keeps the data and migrates nothing again", arguments: kinds)
    func reopen(kind: StoreKind) async throws {
        try await StoreFixture.with(kind) { f in
            let latest = kind == .sqlite ? SQLiteAuthorityStore.latestSchemaVersion : PostgresAuthorityStore.latestSchemaVersion
            #expect(try await f.store.schemaVersion() == latest)
            let (login, _) = try await f.storeLogin()
            await f.store.close()
            let closed = try #require(await rainError { _ = try await f.store.schemaVersion() })
            #expect(closed.code == .internalError)

            let reopened = try await f.reopen()
            #expect(try await reopened.schemaVersion() == latest)
            let account = try #require(try await reopened.account(appID: Self.app, contact: Self.email))
            #expect(account.id == login.accountID)
            #expect(account.walletID == login.walletID)
            #expect(try await reopened.sessions(appID: Self.app, accountID: login.accountID).count == 1)
            await reopened.close()
        }
    }

    @Test("only SQLite, written by this process alone, counts its writes for read leases; PostgreSQL does not", arguments: kinds)
    func soleWriter(kind: StoreKind) async throws {
        try await StoreFixture.with(kind) { f in
            #expect((f.store.soleWriterChanges != nil) == (kind == .sqlite))
        }
    }

    @Test("several instances opening one new database together migrate it exactly once", arguments: kinds)
    func concurrentOpen(kind: StoreKind) async throws {
        let (open, cleanup) = try await StoreFixture.opener(kind)
        defer { cleanup() }
        let stores = try await withThrowingTaskGroup(of: (any AuthorityStore).self) { group in
            for _ in 0..<4 { group.addTask { try await open() } }
            return try await group.reduce(into: [any AuthorityStore]()) { $0.append($1) }
        }
        let latest = kind == .sqlite ? SQLiteAuthorityStore.latestSchemaVersion : PostgresAuthorityStore.latestSchemaVersion
        for s in stores {
            #expect(try await s.schemaVersion() == latest)
            await s.close()
        }
    }

    // MARK: Accounts and challenges

    @Test("account(appID:contact:) finds the owner's account and wallet within its app only", arguments: kinds)
    func accountLookup(kind: StoreKind) async throws {
        try await StoreFixture.with(kind) { f in
            #expect(try await f.store.account(appID: Self.app, contact: Self.email) == nil)
            let (login, _) = try await f.storeLogin()
            let account = try #require(try await f.store.account(appID: Self.app, contact: Self.email))
            #expect(
                account == AccountRecord(id: login.accountID, appID: Self.app, walletID: login.walletID, createdAt: f.clock.now))
            #expect(try await f.store.account(appID: "other-app", contact: Self.email) == nil)
            #expect(try await f.store.account(appID: Self.app, contact: Self.phone) == nil)
            #expect(try await f.store.contactOwner(appID: Self.app, contact: Self.email) == login.accountID)
            #expect(try await f.store.contactOwner(appID: "other-app", contact: Self.email) == nil)
        }
    }

    @Test("a challenge round-trips exactly; unknown ids are nil", arguments: kinds)
    func challengeRoundTrip(kind: StoreKind) async throws {
        try await StoreFixture.with(kind) { f in
            let c = try f.newChallenge(Self.phone)
            let insertion = try await f.insert(c)
            #expect(insertion.accountKey == "contact:phone:+15551234567")
            #expect(insertion.retiredChallengeIDs.isEmpty)
            let stored = try #require(try await f.store.challenge(id: c.id))
            #expect(
                stored
                    == ChallengeRecord(
                        id: c.id, appID: c.appID, deviceID: c.deviceID, contact: c.contact, accountKey: insertion.accountKey,
                        codeHash: c.codeHash, createdAt: c.createdAt, expiresAt: c.expiresAt, wrongAttempts: 0,
                        state: .pending))
            #expect(try await f.store.challenge(id: "chl_missing") == nil)
        }
    }

    @Test("a resend on the device retires its pending code of that purpose; other devices keep theirs", arguments: kinds)
    func resendRetires(kind: StoreKind) async throws {
        try await StoreFixture.with(kind) { f in
            let first = try f.newChallenge()
            try await f.insert(first)
            let other = try f.newChallenge(device: "device-b")
            try await f.insert(other)
            let second = try f.newChallenge(Self.phone)
            let insertion = try await f.insert(second)
            #expect(insertion.retiredChallengeIDs == [first.id])
            #expect(try await f.store.challenge(id: first.id)?.state == .retired)
            #expect(try await f.store.challenge(id: other.id)?.state == .pending)
            // A verification does not retire the device's pending login code.
            let (login, _) = try await f.storeLogin(device: "device-c")
            let verify = try f.newChallenge(Self.phone, device: "device-c", purpose: .verifyContact, target: login.accountID)
            let verifyInsertion = try await f.insert(verify)
            #expect(verifyInsertion.accountKey == login.accountID)
            #expect(verifyInsertion.retiredChallengeIDs.isEmpty)
        }
    }

    @Test("at most maxActivePerAccount live codes per account across devices: the oldest is retired", arguments: kinds)
    func activeLimit(kind: StoreKind) async throws {
        try await StoreFixture.with(kind) { f in
            var ids: [String] = []
            for device in ["d1", "d2", "d3"] {
                let c = try f.newChallenge(device: device)
                #expect(try await f.insert(c).retiredChallengeIDs.isEmpty)
                ids.append(c.id)
                f.clock.advance(by: .seconds(1))
            }
            let fourth = try f.newChallenge(device: "d4")
            #expect(try await f.insert(fourth).retiredChallengeIDs == [ids[0]])
            #expect(try await f.store.challenge(id: ids[0])?.state == .retired)
            #expect(try await f.store.challenge(id: ids[1])?.state == .pending)
        }
    }

    @Test(
        "send limits: cooldown, contact window and account window refuse with the right retry time and store nothing",
        arguments: kinds)
    func sendLimits(kind: StoreKind) async throws {
        try await StoreFixture.with(kind) { f in
            let limits = CodeSendLimits(
                contactCooldown: .seconds(30), contactWindow: .seconds(900), contactMaxSends: 2,
                accountWindow: .seconds(3600), accountMaxSends: 3)
            let start = f.clock.now
            let first = try f.newChallenge()
            guard case .inserted = try await f.store.insertChallenge(first, maxActivePerAccount: 3, limits: limits) else {
                throw HarnessError("first send refused")
            }
            let tooSoon = try f.newChallenge()
            let refused = try await f.store.insertChallenge(tooSoon, maxActivePerAccount: 3, limits: limits)
            #expect(refused == .limited(.contactCooldown, retryAfter: Date(unixMilliseconds: start.unixMilliseconds + 30_000)))
            #expect(try await f.store.challenge(id: tooSoon.id) == nil)
            #expect(try await f.store.challenge(id: first.id)?.state == .pending)

            f.clock.advance(by: .seconds(30))
            guard case .inserted = try await f.store.insertChallenge(try f.newChallenge(), maxActivePerAccount: 3, limits: limits)
            else { throw HarnessError("second send refused") }
            f.clock.advance(by: .seconds(60))
            let third = try await f.store.insertChallenge(try f.newChallenge(), maxActivePerAccount: 3, limits: limits)
            #expect(third == .limited(.contactWindow, retryAfter: Date(unixMilliseconds: start.unixMilliseconds + 900_000)))

            // The account (key) window counts across the account's contacts.
            let (login, _) = try await f.storeLogin(Self.phone, device: "dx")
            let lots = CodeSendLimits(
                contactCooldown: .zero, contactWindow: .zero, contactMaxSends: .max, accountWindow: .seconds(3600),
                accountMaxSends: 2)
            let v1 = try f.newChallenge(.email("b@example.com"), device: "dv", purpose: .verifyContact, target: login.accountID)
            // The login's own code was keyed by the contact: the account's count starts at zero.
            guard case .inserted = try await f.store.insertChallenge(v1, maxActivePerAccount: 3, limits: lots) else {
                throw HarnessError("v1 refused")
            }
            let at = f.clock.now
            f.clock.advance(by: .seconds(1))
            let v2 = try f.newChallenge(.email("c@example.com"), device: "dw", purpose: .verifyContact, target: login.accountID)
            guard case .inserted = try await f.store.insertChallenge(v2, maxActivePerAccount: 3, limits: lots) else {
                throw HarnessError("v2 refused")
            }
            let v3 = try f.newChallenge(.email("d@example.com"), device: "dz", purpose: .verifyContact, target: login.accountID)
            #expect(
                try await f.store.insertChallenge(v3, maxActivePerAccount: 3, limits: lots)
                    == .limited(.accountWindow, retryAfter: Date(unixMilliseconds: at.unixMilliseconds + 3_600_000)))
        }
    }

    @Test("retireChallenge retires a pending challenge only", arguments: kinds)
    func retire(kind: StoreKind) async throws {
        try await StoreFixture.with(kind) { f in
            let c = try f.newChallenge()
            try await f.insert(c)
            try await f.store.retireChallenge(id: c.id)
            #expect(try await f.store.challenge(id: c.id)?.state == .retired)
            let locked = try f.newChallenge(device: "device-b")
            try await f.insert(locked)
            _ = try await f.store.recordWrongAttempt(challengeID: locked.id, maxWrongAttempts: 1, now: f.clock.now)
            try await f.store.retireChallenge(id: locked.id)
            #expect(try await f.store.challenge(id: locked.id)?.state == .locked)
            try await f.store.retireChallenge(id: "chl_missing")
        }
    }

    @Test("wrong attempts are counted on pending, unexpired challenges and lock at the limit", arguments: kinds)
    func wrongAttempts(kind: StoreKind) async throws {
        try await StoreFixture.with(kind) { f in
            let c = try f.newChallenge()
            try await f.insert(c)
            let now = f.clock.now
            #expect(try await f.store.recordWrongAttempt(challengeID: c.id, maxWrongAttempts: 3, now: now)?.wrongAttempts == 1)
            #expect(try await f.store.recordWrongAttempt(challengeID: c.id, maxWrongAttempts: 3, now: now)?.state == .pending)
            let locked = try #require(try await f.store.recordWrongAttempt(challengeID: c.id, maxWrongAttempts: 3, now: now))
            #expect(locked.state == .locked)
            #expect(locked.wrongAttempts == 3)
            let after = try #require(try await f.store.recordWrongAttempt(challengeID: c.id, maxWrongAttempts: 3, now: now))
            #expect(after.wrongAttempts == 3, "a locked challenge counts nothing more")
            #expect(try await f.store.recordWrongAttempt(challengeID: "chl_missing", maxWrongAttempts: 3, now: now) == nil)

            let expiring = try f.newChallenge(device: "device-b")
            try await f.insert(expiring)
            let late = expiring.expiresAt.addingTimeInterval(1)
            let unchanged = try #require(
                try await f.store.recordWrongAttempt(challengeID: expiring.id, maxWrongAttempts: 3, now: late))
            #expect(unchanged.wrongAttempts == 0)
            #expect(unchanged.state == .pending)
        }
    }

    // MARK: Logins and sessions

    @Test(
        "completeLogin creates the account, contact, wallet with keys and session; pending codes move to the account",
        arguments: kinds)
    func firstLogin(kind: StoreKind) async throws {
        try await StoreFixture.with(kind) { f in
            let waiting = try f.newChallenge(device: "device-z")
            try await f.insert(waiting)
            let keys = WalletKeyMaterial(
                entropyCiphertext: [1, 2, 3, 0, 255], entropyKeyID: "k1", ethereumAddress: "0xabc", solanaAddress: "So1")
            let (login, session) = try await f.storeLogin(keys: keys)
            #expect(login.accountCreated)
            #expect(login.revokedElsewhereCount == 0)
            let wallet = try #require(try await f.store.wallet(accountID: login.accountID))
            #expect(
                wallet
                    == WalletRecord(
                        id: login.walletID, accountID: login.accountID, createdAt: f.clock.now,
                        entropyCiphertext: [1, 2, 3, 0, 255],
                        entropyKeyID: "k1", ethereumAddress: "0xabc", solanaAddress: "So1"))
            let stored = try #require(try await f.store.sessions(appID: Self.app, accountID: login.accountID).first)
            #expect(stored.id == session.id)
            #expect(stored.accessHash == session.accessHash)
            #expect(stored.refreshHash == session.refreshHash)
            #expect(stored.accessExpiresAt == session.accessExpiresAt)
            #expect(stored.devicePublicKey == session.devicePublicKey)
            #expect(stored.revokedAt == nil)
            #expect(stored.refreshGeneration == 0)
            #expect(try await f.store.challenge(id: waiting.id)?.accountKey == login.accountID)
        }
    }

    @Test("a returning login finds the account, revokes other devices (revoked_elsewhere) and replaces its own", arguments: kinds)
    func returningLogin(kind: StoreKind) async throws {
        try await StoreFixture.with(kind) { f in
            let (first, _) = try await f.storeLogin(device: "device-a")
            let (again, _) = try await f.storeLogin(device: "device-a")
            #expect(!again.accountCreated)
            #expect(again.accountID == first.accountID)
            #expect(again.walletID == first.walletID)
            #expect(again.revokedElsewhereCount == 0)
            #expect(again.revokedDeviceIDs.isEmpty)
            let (other, _) = try await f.storeLogin(device: "device-b")
            #expect(other.revokedElsewhereCount == 1)
            // The devices whose sessions the login revoked, each once, are pushed to.
            #expect(other.revokedDeviceIDs == ["device-a"])
            let sessions = try await f.store.sessions(appID: Self.app, accountID: first.accountID)
            #expect(sessions.map(\.revokeReason) == ["replaced", "revoked_elsewhere", nil])
            #expect(sessions.map(\.deviceID) == ["device-a", "device-a", "device-b"])
        }
    }

    @Test(
        "completeLogin refuses a used, expired, other-device or verification challenge and reports it as it is", arguments: kinds)
    func loginUnavailable(kind: StoreKind) async throws {
        try await StoreFixture.with(kind) { f in
            let c = try f.newChallenge()
            try await f.insert(c)
            func complete(_ id: String, device: String = "device-a", at now: Date? = nil) async throws -> LoginCompletionOutcome {
                try await f.store.completeLogin(
                    LoginCompletion(
                        challengeID: id, appID: Self.app, deviceID: device, contact: Self.email,
                        newAccountID: "acct_\(UUID().uuidString)",
                        newWalletID: "wal_\(UUID().uuidString)", session: try f.newSession(), now: now ?? f.clock.now))
            }
            guard case .challengeUnavailable(let other) = try await complete(c.id, device: "device-b") else {
                throw HarnessError("another device used the challenge")
            }
            #expect(other?.state == .pending)
            guard case .challengeUnavailable(let late) = try await complete(c.id, at: c.expiresAt) else {
                throw HarnessError("an expired challenge was used")
            }
            #expect(late?.id == c.id)
            guard case .loggedIn = try await complete(c.id) else { throw HarnessError("login failed") }
            guard case .challengeUnavailable(let used) = try await complete(c.id) else { throw HarnessError("used twice") }
            #expect(used?.state == .used)
            guard case .challengeUnavailable(nil) = try await complete("chl_missing") else { throw HarnessError("missing") }
        }
    }

    @Test(
        "refreshSession finds current, previous and older tokens, rotates, revokes, and refuses bad rotations", arguments: kinds)
    func refresh(kind: StoreKind) async throws {
        try await StoreFixture.with(kind) { f in
            let (login, session) = try await f.storeLogin()
            let calls = Mutex(0)
            func rotation() throws -> SessionRotation {
                SessionRotation(
                    accessHash: try SecureRandom.bytes(count: 32), refreshHash: try SecureRandom.bytes(count: 32),
                    accessExpiresAt: f.clock.now.addingTimeInterval(900), rotatedAt: f.clock.now)
            }
            func find(_ hash: [UInt8], change: SessionRefreshChange = .none) async throws -> RefreshCandidate? {
                try await f.store.refreshSession(appID: Self.app, refreshHash: hash, now: f.clock.now) { candidate in
                    calls.withLock { $0 += 1 }
                    return (change, candidate)
                }
            }
            #expect(try await find(session.refreshHash)?.generation == .current)
            #expect(calls.withLock { $0 } == 1)
            #expect(try await find([1, 2, 3]) == nil)
            #expect(try await find(session.refreshHash, change: .none)?.session.refreshGeneration == 0)

            let r1 = try rotation()
            _ = try await find(session.refreshHash, change: .rotate(r1))
            let afterFirst = try #require(try await find(r1.refreshHash))
            #expect(afterFirst.generation == .current)
            #expect(afterFirst.session.refreshGeneration == 1)
            #expect(afterFirst.session.previousRefreshHash == session.refreshHash)
            #expect(afterFirst.session.accessHash == r1.accessHash)
            #expect(afterFirst.session.rotatedAt == r1.rotatedAt)
            #expect(try await find(session.refreshHash)?.generation == .previous)

            f.clock.advance(by: .seconds(5))
            let r2 = try rotation()
            _ = try await find(r1.refreshHash, change: .rotate(r2))
            #expect(try await find(session.refreshHash)?.generation == .older)
            #expect(try await find(r1.refreshHash)?.generation == .previous)

            // Rotating anything but a live current token is a store error.
            let bad = try #require(await rainError { _ = try await find(r1.refreshHash, change: .rotate(try rotation())) })
            #expect(bad.code == .internalError)

            _ = try await find(session.refreshHash, change: .revoke(reason: SessionRevokeReason.reused))
            let revoked = try #require(try await f.store.sessions(appID: Self.app, accountID: login.accountID).first)
            #expect(revoked.revokeReason == "reused")
            #expect(revoked.revokedAt == f.clock.now)
            // In another app the token finds nothing.
            let foundInOtherApp = try await f.store.refreshSession(appID: "other", refreshHash: r2.refreshHash, now: f.clock.now)
            {
                (.none, $0)
            }
            #expect(foundInOtherApp == nil)
        }
    }

    @Test("revokeSession revokes by the current or the previous refresh hash, once", arguments: kinds)
    func revoke(kind: StoreKind) async throws {
        try await StoreFixture.with(kind) { f in
            let (login, session) = try await f.storeLogin()
            #expect(
                try await f.store.revokeSession(
                    appID: "other", refreshHash: session.refreshHash, reason: "logout", now: f.clock.now) == false)
            #expect(
                try await f.store.revokeSession(
                    appID: Self.app, refreshHash: session.refreshHash, reason: "logout", now: f.clock.now))
            #expect(
                try await f.store.revokeSession(
                    appID: Self.app, refreshHash: session.refreshHash, reason: "logout", now: f.clock.now) == false)
            #expect(try await f.store.sessions(appID: Self.app, accountID: login.accountID).first?.revokeReason == "logout")

            let (_, second) = try await f.storeLogin(device: "device-b")
            let rotation = SessionRotation(
                accessHash: [7], refreshHash: [8], accessExpiresAt: f.clock.now, rotatedAt: f.clock.now)
            try await f.store.refreshSession(appID: Self.app, refreshHash: second.refreshHash, now: f.clock.now) { _ in
                (.rotate(rotation), ())
            }
            #expect(
                try await f.store.revokeSession(
                    appID: Self.app, refreshHash: second.refreshHash, reason: "logout", now: f.clock.now))
        }
    }

    @Test("accountAccess finds the session by access hash with account, wallet and contacts (emails first)", arguments: kinds)
    func accountAccess(kind: StoreKind) async throws {
        try await StoreFixture.with(kind) { f in
            let (login, session) = try await f.storeLogin(Self.phone)
            let v = try f.newChallenge(Self.email, device: "device-a", purpose: .verifyContact, target: login.accountID)
            try await f.insert(v)
            let outcome = try await f.store.completeContactVerification(
                ContactVerificationCompletion(
                    challengeID: v.id, appID: Self.app, deviceID: "device-a", accountID: login.accountID, contact: Self.email,
                    now: f.clock.now))
            #expect(outcome == .verified(wasAlreadyAttached: false))
            let access = try #require(try await f.store.accountAccess(appID: Self.app, accessHash: session.accessHash))
            #expect(access.session.id == session.id)
            #expect(
                access.account
                    == AccountRecord(id: login.accountID, appID: Self.app, walletID: login.walletID, createdAt: f.clock.now))
            #expect(access.contacts == [Self.email, Self.phone])
            #expect(try await f.store.accountAccess(appID: Self.app, accessHash: [0]) == nil)
            #expect(try await f.store.accountAccess(appID: "other", accessHash: session.accessHash) == nil)
        }
    }

    @Test("the one-trip reads return what accountAccess, passkeyCredentials and wallet return", arguments: kinds)
    func oneTripReads(kind: StoreKind) async throws {
        try await StoreFixture.with(kind) { f in
            let (login, session) = try await f.storeLogin(Self.email)
            let access = try #require(try await f.store.accountAccess(appID: Self.app, accessHash: session.accessHash))
            let withPasskeys = try #require(
                try await f.store.accountAccessWithPasskeys(appID: Self.app, accessHash: session.accessHash))
            #expect(withPasskeys.access == access)
            #expect(withPasskeys.passkeys == (try await f.store.passkeyCredentials(accountID: login.accountID)))
            let withWallet = try #require(
                try await f.store.accountAccessWithWallet(appID: Self.app, accessHash: session.accessHash))
            #expect(withWallet.access == access)
            let wallet = try #require(try await f.store.wallet(accountID: login.accountID))
            #expect(withWallet.wallet == wallet)
            #expect(withWallet.wallet?.id == login.walletID)
            #expect(try await f.store.accountAccessWithPasskeys(appID: Self.app, accessHash: [0]) == nil)
            #expect(try await f.store.accountAccessWithWallet(appID: "other", accessHash: session.accessHash) == nil)
        }
    }

    @Test("contact verification: attaches a free contact, re-verifies its own, refuses another account's", arguments: kinds)
    func contactVerification(kind: StoreKind) async throws {
        try await StoreFixture.with(kind) { f in
            let (mine, _) = try await f.storeLogin(Self.email, device: "device-a")
            let (theirs, _) = try await f.storeLogin(Self.phone, device: "device-b")
            func verify(_ contact: RainWalletContact, account: String, device: String) async throws -> (
                ContactVerificationOutcome, String
            ) {
                let c = try f.newChallenge(contact, device: device, purpose: .verifyContact, target: account)
                try await f.insert(c)
                let outcome = try await f.store.completeContactVerification(
                    ContactVerificationCompletion(
                        challengeID: c.id, appID: Self.app, deviceID: device, accountID: account, contact: contact,
                        now: f.clock.now))
                return (outcome, c.id)
            }
            #expect(
                try await verify(Self.email, account: mine.accountID, device: "device-a").0 == .verified(wasAlreadyAttached: true)
            )
            let (refused, refusedID) = try await verify(Self.phone, account: mine.accountID, device: "device-a")
            #expect(refused == .ownedByAnotherAccount)
            #expect(try await f.store.challenge(id: refusedID)?.state == .retired)
            #expect(try await f.store.contactOwner(appID: Self.app, contact: Self.phone) == theirs.accountID)
            let extra = RainWalletContact.email("second@example.com")
            #expect(
                try await verify(extra, account: mine.accountID, device: "device-a").0 == .verified(wasAlreadyAttached: false))
            #expect(try await f.store.contactOwner(appID: Self.app, contact: extra) == mine.accountID)
            // A login challenge is not a verification.
            let login = try f.newChallenge(.email("x@example.com"), device: "device-c")
            try await f.insert(login)
            let unavailable = try await f.store.completeContactVerification(
                ContactVerificationCompletion(
                    challengeID: login.id, appID: Self.app, deviceID: "device-c", accountID: mine.accountID,
                    contact: login.contact, now: f.clock.now))
            #expect(unavailable == .challengeUnavailable(try await f.store.challenge(id: login.id)))
        }
    }

    @Test("wallet keys: missing keys are listed oldest first and stored only over the expected ciphertext", arguments: kinds)
    func walletKeys(kind: StoreKind) async throws {
        try await StoreFixture.with(kind) { f in
            let (a, _) = try await f.storeLogin(Self.email)
            f.clock.advance(by: .seconds(1))
            let (b, _) = try await f.storeLogin(Self.phone, device: "device-b")
            #expect(try await f.store.walletsMissingKeys().map(\.id) == [a.walletID, b.walletID])
            let keys = WalletKeyMaterial(
                entropyCiphertext: [9, 9], entropyKeyID: "k", ethereumAddress: "0x1", solanaAddress: "S")
            #expect(try await f.store.storeWalletKeys(walletID: a.walletID, keys: keys, expectedCiphertext: nil))
            #expect(try await f.store.storeWalletKeys(walletID: a.walletID, keys: keys, expectedCiphertext: nil) == false)
            var newer = keys
            newer.entropyCiphertext = [1]
            #expect(try await f.store.storeWalletKeys(walletID: a.walletID, keys: newer, expectedCiphertext: [2]) == false)
            #expect(try await f.store.storeWalletKeys(walletID: a.walletID, keys: newer, expectedCiphertext: [9, 9]))
            #expect(try await f.store.wallet(accountID: a.accountID)?.entropyCiphertext == [1])
            #expect(try await f.store.walletsMissingKeys().map(\.id) == [b.walletID])
            #expect(try await f.store.wallet(accountID: "acct_missing") == nil)
        }
    }

    @Test("prune deletes expired challenges and ceremonies, old revoked sessions and old retired hashes", arguments: kinds)
    func prune(kind: StoreKind) async throws {
        try await StoreFixture.with(kind) { f in
            let (login, session) = try await f.storeLogin()
            let rotation = { (n: UInt8) in
                SessionRotation(accessHash: [n], refreshHash: [n, n], accessExpiresAt: f.clock.now, rotatedAt: f.clock.now)
            }
            let first = rotation(1)
            let second = rotation(2)
            try await f.store.refreshSession(appID: Self.app, refreshHash: session.refreshHash, now: f.clock.now) { _ in
                (.rotate(first), ())
            }
            try await f.store.refreshSession(appID: Self.app, refreshHash: [1, 1], now: f.clock.now) { _ in (.rotate(second), ())
            }
            try await f.store.insertPasskeyCeremony(
                NewPasskeyCeremony(
                    id: "pk1", appID: Self.app, deviceID: "d", kind: .login, rpID: "example.com",
                    origins: ["https://example.com"],
                    challenge: [1], userHandle: nil, accountID: nil, createdAt: f.clock.now,
                    expiresAt: f.clock.now.addingTimeInterval(60)))
            let (_, other) = try await f.storeLogin(Self.phone, device: "device-b")
            #expect(
                try await f.store.revokeSession(
                    appID: Self.app, refreshHash: other.refreshHash, reason: "logout", now: f.clock.now))
            let later = f.clock.now.addingTimeInterval(3600)
            let result = try await f.store.prune(
                challengesExpiredBefore: later, sessionsRevokedBefore: later, refreshTokensRetiredBefore: later)
            #expect(
                result
                    == PruneResult(
                        challengesDeleted: 2, sessionsDeleted: 1, retiredRefreshTokensDeleted: 1, passkeyCeremoniesDeleted: 1))
            #expect(try await f.store.sessions(appID: Self.app, accountID: login.accountID).count == 1)
            let foundAfterPrune = try await f.store.refreshSession(
                appID: Self.app, refreshHash: session.refreshHash, now: f.clock.now
            ) {
                (.none, $0)
            }
            #expect(foundAfterPrune == nil)
        }
    }

    // MARK: Wrong-guess budgets

    @Test(
        "wrong-guess budgets: 500 per source and 20 per device key within the hour, whatever the app; a given-back slot and the hour make room; prune removes old guesses",
        arguments: kinds)
    func guessBudgets(kind: StoreKind) async throws {
        try await StoreFixture.with(kind) { f in
            let limits = CodeSendLimits()
            let start = f.clock.now
            var next = 0
            func guess(key: String, source: String, at: Date? = nil) async throws -> (String, CodeGuessReservation) {
                next += 1
                let id = "gss_\(next)"
                let outcome = try await f.store.reserveCodeGuess(
                    NewCodeGuess(id: id, deviceKey: key, source: source, guessedAt: at ?? f.clock.now), limits: limits)
                return (id, outcome)
            }
            // 500 from one source: 25 device keys of 20 guesses each.
            for n in 0..<500 {
                let (_, outcome) = try await guess(key: "key:\(n / 20)", source: "ip:192.0.2.7")
                #expect(outcome == .reserved, "guess \(n)")
            }
            let (_, spent) = try await guess(key: "key:fresh", source: "ip:192.0.2.7")
            #expect(spent == .limited(.sourceGuessWindow, retryAfter: start.adding(.seconds(3600))))
            // Another source is not held back; one key's 21st guess is, from any source.
            #expect(try await guess(key: "key:fresh", source: "ip:198.51.100.1").1 == .reserved)
            let (_, keySpent) = try await guess(key: "key:0", source: "ip:198.51.100.1")
            #expect(keySpent == .limited(.deviceKeyGuessWindow, retryAfter: start.adding(.seconds(3600))))

            // A slot given back (a right code) makes room for one more.
            f.clock.advance(by: .seconds(10))
            let (freeID, free) = try await guess(key: "key:right", source: "ip:203.0.113.9")
            #expect(free == .reserved)
            for n in 0..<19 { #expect(try await guess(key: "key:right", source: "ip:203.0.113.\(n)").1 == .reserved) }
            #expect(try await guess(key: "key:right", source: "ip:203.0.113.99").1 != .reserved)
            try await f.store.releaseCodeGuess(id: freeID)
            #expect(try await guess(key: "key:right", source: "ip:203.0.113.99").1 == .reserved)

            // An hour after the first guesses, the source has room again.
            f.clock.advance(by: .seconds(3590))
            #expect(try await guess(key: "key:later", source: "ip:192.0.2.7").1 == .reserved)

            // Pruning with the challenges' cutoff removes the guesses made before it.
            let result = try await f.store.prune(
                challengesExpiredBefore: start.adding(.seconds(1)), sessionsRevokedBefore: start,
                refreshTokensRetiredBefore: start)
            #expect(result.codeGuessesDeleted == 501)
        }
    }

    // MARK: Passkeys

    @Test("passkey ceremonies are taken once, by their app and device, before they expire", arguments: kinds)
    func ceremonies(kind: StoreKind) async throws {
        try await StoreFixture.with(kind) { f in
            let ceremony = NewPasskeyCeremony(
                id: "pkc_1", appID: Self.app, deviceID: "d", kind: .signUp, rpID: "example.com",
                origins: ["https://example.com", "android:apk-key-hash:abc"], challenge: [0, 1, 2], userHandle: [5, 5],
                accountID: nil, createdAt: f.clock.now, expiresAt: f.clock.now.addingTimeInterval(60))
            try await f.store.insertPasskeyCeremony(ceremony)
            #expect(
                try await f.store.takePasskeyCeremony(id: "pkc_1", appID: Self.app, deviceID: "other", now: f.clock.now)
                    == .unknown)
            #expect(
                try await f.store.takePasskeyCeremony(id: "pkc_1", appID: Self.app, deviceID: "d", now: ceremony.expiresAt)
                    == .expired)
            #expect(
                try await f.store.takePasskeyCeremony(id: "pkc_1", appID: Self.app, deviceID: "d", now: f.clock.now)
                    == .taken(ceremony))
            #expect(try await f.store.takePasskeyCeremony(id: "pkc_1", appID: Self.app, deviceID: "d", now: f.clock.now) == .used)
        }
    }

    @Test(
        "passkey sign-up, add and login: credentials round-trip, duplicates and counter regressions are refused", arguments: kinds
    )
    func passkeys(kind: StoreKind) async throws {
        try await StoreFixture.with(kind) { f in
            let credential = PasskeyCredentialRecord(
                credentialID: [1, 2, 3], accountID: "", appID: Self.app, rpID: "example.com", publicKey: [4, 5], algorithm: -7,
                signCount: 0, isBackupEligible: true, isBackedUp: false, userHandle: [6], createdAt: f.clock.now, lastUsedAt: nil)
            let keys = WalletKeyMaterial(entropyCiphertext: [1], entropyKeyID: "k", ethereumAddress: "0x", solanaAddress: "S")
            let signUp = PasskeySignUpCompletion(
                appID: Self.app, deviceID: "d", accountID: "acct_pk", walletID: "wal_pk", walletKeys: keys,
                credential: credential,
                session: try f.newSession(), now: f.clock.now)
            let record = try await f.store.completePasskeySignUp(signUp)
            #expect(
                record == LoginRecord(accountID: "acct_pk", walletID: "wal_pk", accountCreated: true, revokedElsewhereCount: 0))
            var expected = credential
            expected.accountID = "acct_pk"
            #expect(try await f.store.passkeyCredential(id: [1, 2, 3], appID: Self.app, rpID: "example.com") == expected)
            #expect(try await f.store.passkeyCredential(id: [1, 2, 3], appID: Self.app, rpID: "other.com") == nil)
            // The domains a credential is registered for, whatever the ceremony's: how a passkey of the
            // domain an app moved away from is told from an unknown one.
            #expect(try await f.store.passkeyCredentialDomains(id: [1, 2, 3], appID: Self.app) == ["example.com"])
            #expect(try await f.store.passkeyCredentialDomains(id: [1, 2, 3], appID: "another-app").isEmpty)
            #expect(try await f.store.passkeyCredentialDomains(id: [4, 5, 6], appID: Self.app).isEmpty)

            var again = signUp
            again.accountID = "acct_pk2"
            again.walletID = "wal_pk2"
            again.session = try f.newSession()
            let duplicate = try #require(await rainError { _ = try await f.store.completePasskeySignUp(again) })
            #expect(duplicate.code == .invalidArgument)
            #expect(try await f.store.wallet(accountID: "acct_pk2") == nil, "nothing stored")

            f.clock.advance(by: .seconds(1))
            var second = credential
            second.credentialID = [9]
            second.accountID = "acct_pk"
            second.rpID = "example.org"
            second.createdAt = f.clock.now
            try await f.store.addPasskeyCredential(second)
            #expect(await rainError { try await f.store.addPasskeyCredential(second) }?.code == .invalidArgument)
            #expect(try await f.store.passkeyCredentials(accountID: "acct_pk").map(\.credentialID) == [[1, 2, 3], [9]])

            let login = PasskeyLoginCompletion(
                appID: Self.app, deviceID: "d2", credentialID: [1, 2, 3], rpID: "example.com", signCount: 5, isBackedUp: true,
                session: try f.newSession(), now: f.clock.now)
            let loggedIn = try await f.store.completePasskeyLogin(login)
            #expect(
                loggedIn
                    == LoginRecord(
                        accountID: "acct_pk", walletID: "wal_pk", accountCreated: false, revokedElsewhereCount: 1,
                        revokedDeviceIDs: ["d"])
            )
            let updated = try #require(try await f.store.passkeyCredential(id: [1, 2, 3], appID: Self.app, rpID: "example.com"))
            #expect(updated.signCount == 5)
            #expect(updated.isBackedUp)
            #expect(updated.lastUsedAt == f.clock.now)
            var replay = login
            replay.session = try f.newSession()
            #expect(
                await rainError { _ = try await f.store.completePasskeyLogin(replay) }?.details.reason == "sign_count_regression")
            var unknown = login
            unknown.credentialID = [0]
            #expect(
                await rainError { _ = try await f.store.completePasskeyLogin(unknown) }?.details.reason == "credential_unknown")
        }
    }

    @Test(
        "a passkey keeps its kind; removal takes the account's own only, never its last way to log in, and a contact counts",
        arguments: kinds)
    func passkeyRemoval(kind: StoreKind) async throws {
        try await StoreFixture.with(kind) { f in
            let credential = PasskeyCredentialRecord(
                credentialID: [7, 7], accountID: "", appID: Self.app, rpID: "example.com", publicKey: [4, 5], algorithm: -7,
                signCount: 0, isBackupEligible: false, isBackedUp: false, userHandle: [6], createdAt: f.clock.now,
                lastUsedAt: nil, kind: "security-key")
            let keys = WalletKeyMaterial(entropyCiphertext: [1], entropyKeyID: "k", ethereumAddress: "0x", solanaAddress: "S")
            _ = try await f.store.completePasskeySignUp(
                PasskeySignUpCompletion(
                    appID: Self.app, deviceID: "d", accountID: "acct_only", walletID: "wal_only", walletKeys: keys,
                    credential: credential, session: try f.newSession(), now: f.clock.now))
            #expect(try await f.store.passkeyCredentials(accountID: "acct_only").map(\.kind) == ["security-key"])

            // A passkey-only account's one passkey stays.
            #expect(try await f.store.removePasskeyCredential(id: [7, 7], accountID: "acct_only") == .lastLoginMethod)
            #expect(try await f.store.passkeyCredentials(accountID: "acct_only").count == 1)
            // Another account cannot remove it, nor an id nobody holds.
            let (other, _) = try await f.storeLogin()
            #expect(try await f.store.removePasskeyCredential(id: [7, 7], accountID: other.accountID) == .unknown)
            #expect(try await f.store.removePasskeyCredential(id: [0], accountID: "acct_only") == .unknown)

            // With a second passkey (another domain), the first goes; the second is then the last.
            var second = credential
            second.credentialID = [8]
            second.accountID = "acct_only"
            second.rpID = "example.org"
            second.kind = ""
            try await f.store.addPasskeyCredential(second)
            #expect(try await f.store.removePasskeyCredential(id: [7, 7], accountID: "acct_only") == .removed)
            #expect(try await f.store.passkeyCredentials(accountID: "acct_only").map(\.credentialID) == [[8]])
            #expect(try await f.store.removePasskeyCredential(id: [8], accountID: "acct_only") == .lastLoginMethod)

            // An account with a contact may remove its only passkey.
            var withContact = credential
            withContact.credentialID = [9]
            withContact.accountID = other.accountID
            try await f.store.addPasskeyCredential(withContact)
            #expect(try await f.store.removePasskeyCredential(id: [9], accountID: other.accountID) == .removed)
            #expect(try await f.store.passkeyCredentials(accountID: other.accountID).isEmpty)
        }
    }

    // MARK: Races (two store instances on one database, as two authority processes)

    @Test(
        "parallel wrong confirmations on two instances never count more than 3 guesses; the right code is then refused",
        arguments: kinds)
    func parallelWrongGuesses(kind: StoreKind) async throws {
        try await StoreFixture.with(kind, instances: 2) { f in
            let sent = try await f.authority.sendLoginCode(
                SendCodeRequest(appID: Self.app, deviceID: "device-a", contact: Self.email))
            let code = try f.sender.lastCode(to: Self.email)
            let reasons = try await withThrowingTaskGroup(of: String?.self) { group in
                for i in 0..<10 {
                    let authority = f.authorities[i % 2]
                    group.addTask {
                        await rainError {
                            _ = try await authority.confirmLoginCode(
                                ConfirmCodeRequest(
                                    appID: Self.app, deviceID: "device-a", challengeID: sent.challengeID,
                                    code: wrongCode(for: code), devicePublicKey: []))
                        }?.details.reason
                    }
                }
                return try await group.reduce(into: [String?]()) { $0.append($1) }
            }
            #expect(reasons.filter { $0 == "wrong" }.count == 2)
            #expect(reasons.allSatisfy { $0 == "wrong" || $0 == "locked" })
            let challenge = try #require(try await f.store.challenge(id: sent.challengeID))
            #expect(challenge.wrongAttempts == 3)
            #expect(challenge.state == .locked)
            let late = await rainError {
                _ = try await f.authorities[1].confirmLoginCode(
                    ConfirmCodeRequest(
                        appID: Self.app, deviceID: "device-a", challengeID: sent.challengeID, code: code, devicePublicKey: []))
            }
            #expect(late?.code == .invalidLoginCode)
            #expect(late?.details.reason == "locked")
            let violations = try await f.violations()
            #expect(violations.isEmpty, "\(violations)")
        }
    }

    @Test("parallel first logins of one contact on two instances create exactly one account", arguments: kinds)
    func parallelFirstLogins(kind: StoreKind) async throws {
        var settings = AuthoritySettings()
        settings.sendLimits = .unlimited
        settings.maxActiveCodesPerAccount = 10
        try await StoreFixture.with(kind, instances: 2, settings: settings) { f in
            var pending: [(device: String, challenge: String, code: String)] = []
            for i in 0..<6 {
                let device = "device-\(i)"
                let sent = try await f.authority.sendLoginCode(
                    SendCodeRequest(appID: Self.app, deviceID: device, contact: Self.email))
                pending.append((device, sent.challengeID, try f.sender.lastCode(to: Self.email)))
            }
            let results = try await withThrowingTaskGroup(of: LoginResult.self) { group in
                for (i, p) in pending.enumerated() {
                    let authority = f.authorities[i % 2]
                    group.addTask {
                        try await authority.confirmLoginCode(
                            ConfirmCodeRequest(
                                appID: Self.app, deviceID: p.device, challengeID: p.challenge, code: p.code, devicePublicKey: []))
                    }
                }
                return try await group.reduce(into: [LoginResult]()) { $0.append($1) }
            }
            #expect(results.count == 6)
            #expect(results.filter(\.accountCreated).count == 1)
            #expect(Set(results.map(\.accountID)).count == 1)
            #expect(Set(results.map(\.walletID)).count == 1)
            let accountID = try #require(results.first?.accountID)
            // One device at a time: exactly one session is live.
            let sessions = try await f.store.sessions(appID: Self.app, accountID: accountID)
            #expect(sessions.count == 6)
            #expect(sessions.filter { $0.revokedAt == nil }.count == 1)
            let violations = try await f.violations()
            #expect(violations.isEmpty, "\(violations)")
        }
    }

    @Test(
        "parallel logins of one account by two contacts on two instances: one device at a time stays live",
        arguments: kinds)
    func parallelLoginsOneAccount(kind: StoreKind) async throws {
        try await StoreFixture.with(kind, instances: 2) { f in
            let keys = WalletKeyMaterial(
                entropyCiphertext: [1], entropyKeyID: "k", ethereumAddress: "0x", solanaAddress: "S")
            let (first, _) = try await f.storeLogin(Self.email, device: "device-0", keys: keys)
            let v = try f.newChallenge(Self.phone, device: "device-0", purpose: .verifyContact, target: first.accountID)
            try await f.insert(v)
            #expect(
                try await f.store.completeContactVerification(
                    ContactVerificationCompletion(
                        challengeID: v.id, appID: Self.app, deviceID: "device-0", accountID: first.accountID,
                        contact: Self.phone, now: f.clock.now)) == .verified(wasAlreadyAttached: false))
            for round in 0..<5 {
                f.clock.advance(by: .seconds(1))
                // One login by email on instance 0 and one by phone on instance 1, on two devices.
                let email = try f.newChallenge(Self.email, device: "mail-\(round)")
                try await f.insert(email, store: f.stores[0])
                let phone = try f.newChallenge(Self.phone, device: "phone-\(round)")
                try await f.insert(phone, store: f.stores[1])
                let logins = [(email, f.stores[0]), (phone, f.stores[1])]
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for (challenge, store) in logins {
                        let session = try f.newSession()
                        let completion = LoginCompletion(
                            challengeID: challenge.id, appID: Self.app, deviceID: challenge.deviceID,
                            contact: challenge.contact, newAccountID: "acct_unused", newWalletID: "wal_unused",
                            session: session, now: f.clock.now)
                        group.addTask {
                            guard case .loggedIn = try await store.completeLogin(completion) else {
                                throw HarnessError("login refused")
                            }
                        }
                    }
                    try await group.waitForAll()
                }
                let live = try await f.store.sessions(appID: Self.app, accountID: first.accountID).filter {
                    $0.revokedAt == nil
                }
                #expect(live.count == 1, "round \(round): \(live.map(\.deviceID))")
            }
            let violations = try await f.violations()
            #expect(violations.isEmpty, "\(violations)")
        }
    }

    @Test(
        "parallel refreshes of one token on two instances: one rotation, every repeat within grace gets the same pair",
        arguments: kinds)
    func parallelRefreshes(kind: StoreKind) async throws {
        try await StoreFixture.with(kind, instances: 2) { f in
            let key = FixtureDevice.key
            let sent = try await f.authority.sendLoginCode(
                SendCodeRequest(appID: Self.app, deviceID: "device-a", contact: Self.email))
            let login = try await f.authority.confirmLoginCode(
                ConfirmCodeRequest(
                    appID: Self.app, deviceID: "device-a", challengeID: sent.challengeID,
                    code: try f.sender.lastCode(to: Self.email),
                    devicePublicKey: key.publicKey.rawRepresentation))
            let request = RefreshRequest(appID: Self.app, deviceID: "device-a", refreshToken: login.tokens.refreshToken)
            let pairs = try await withThrowingTaskGroup(of: SessionTokens.self) { group in
                for i in 0..<8 {
                    let authority = f.authorities[i % 2]
                    group.addTask { try await authority.refreshSession(request) }
                }
                return try await group.reduce(into: [SessionTokens]()) { $0.append($1) }
            }
            #expect(Set(pairs.map(\.refreshToken)).count == 1)
            #expect(Set(pairs.map(\.accessToken)).count == 1)
            let session = try #require(try await f.store.sessions(appID: Self.app, accountID: login.accountID).first)
            #expect(session.refreshGeneration == 1)
            #expect(session.revokedAt == nil)

            // Once the new pair was used, outside the grace window the old token is reuse: the
            // family is revoked (an unused pair would be handed back).
            _ = try await f.authority.accountInfo(appID: Self.app, accessToken: try #require(pairs.first).accessToken)
            f.clock.advance(by: .seconds(60))
            let reuse = RefreshRequest(appID: Self.app, deviceID: "device-a", refreshToken: login.tokens.refreshToken)
            #expect(await rainError { _ = try await f.authorities[1].refreshSession(reuse) }?.code == .sessionExpired)
            #expect(try await f.store.sessions(appID: Self.app, accountID: login.accountID).first?.revokeReason == "reused")
            let violations = try await f.violations()
            #expect(violations.isEmpty, "\(violations)")
        }
    }

    @Test("parallel sends to one contact on two instances: the cooldown lets exactly one through", arguments: kinds)
    func parallelSends(kind: StoreKind) async throws {
        try await StoreFixture.with(kind, instances: 2) { f in
            let outcomes = try await withThrowingTaskGroup(of: ChallengeInsertionOutcome.self) { group in
                for i in 0..<6 {
                    let store = f.stores[i % 2]
                    let challenge = try f.newChallenge(device: "device-\(i)")
                    group.addTask { try await store.insertChallenge(challenge, maxActivePerAccount: 3, limits: CodeSendLimits()) }
                }
                return try await group.reduce(into: [ChallengeInsertionOutcome]()) { $0.append($1) }
            }
            #expect(outcomes.filter { if case .inserted = $0 { true } else { false } }.count == 1)
            #expect(outcomes.filter { if case .limited(.contactCooldown, _) = $0 { true } else { false } }.count == 5)
            let violations = try await f.violations()
            #expect(violations.isEmpty, "\(violations)")
        }
    }

    @Test(
        "parallel sends for one account from many devices on two instances never leave more than 3 codes live", arguments: kinds)
    func parallelActiveLimit(kind: StoreKind) async throws {
        try await StoreFixture.with(kind, instances: 2) { f in
            try await withThrowingTaskGroup(of: Void.self) { group in
                for i in 0..<8 {
                    let store = f.stores[i % 2]
                    let challenge = try f.newChallenge(device: "device-\(i)")
                    group.addTask { _ = try await store.insertChallenge(challenge, maxActivePerAccount: 3, limits: .unlimited) }
                }
                try await group.waitForAll()
            }
            // Every device's code was inserted; exactly 3 are still pending.
            let probe = try f.newChallenge(device: "probe")
            let insertion = try await f.insert(probe)
            #expect(insertion.retiredChallengeIDs.count == 1)
            let violations = try await f.violations()
            #expect(violations.isEmpty, "\(violations)")
        }
    }
}
