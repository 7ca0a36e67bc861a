import Foundation
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainTestSupport
import RainWire
import Testing

@testable import RainAuthority
@testable import RainStore

/// A device that could not save a refreshed pair (a full disk) and restarted
/// repeats the previous refresh token long after the grace window. While the current pair was never
/// used, the authority hands it back; once any call used it, or its refresh token was presented, a
/// repeat revokes the family as before. Run on every store (SQLite and PostgreSQL).
@Suite("Refresh repeated after a pair the device could not save")
struct UnsavedRefreshTests {
    static let kinds = StoreKind.allCases
    static let app = StoreFixture.app

    /// A call that presents the current access token.
    enum Use: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case account, wallet, export, contactVerification
        var testDescription: String { rawValue }

        func run(_ f: StoreFixture, token: String) async throws {
            let a = f.authority
            switch self {
            case .account: _ = try await a.accountInfo(appID: UnsavedRefreshTests.app, accessToken: token)
            case .wallet: _ = try await a.wallet(appID: UnsavedRefreshTests.app, accessToken: token)
            case .export: _ = try await a.exportWallet(appID: UnsavedRefreshTests.app, accessToken: token)
            case .contactVerification:
                _ = try await a.sendContactVerificationCode(
                    appID: UnsavedRefreshTests.app, deviceID: "device-a", accessToken: token,
                    contact: .phone("+15557654321"))
            }
        }
    }

    static func login(_ f: StoreFixture, key: Ed25519PrivateKey) async throws -> LoginResult {
        let challenge = try await f.authority.sendLoginCode(
            SendCodeRequest(appID: app, deviceID: "device-a", contact: StoreFixture.email))
        let code = try f.sender.lastCode(to: StoreFixture.email)
        return try await f.authority.confirmLoginCode(
            ConfirmCodeRequest(
                appID: app, deviceID: "device-a", challengeID: challenge.challengeID, code: code,
                devicePublicKey: key.publicKey.rawRepresentation))
    }

    static func refresh(_ f: StoreFixture, _ token: String, key: Ed25519PrivateKey) async throws -> SessionTokens {
        try await f.authority.refreshSession(
            RefreshRequest(appID: app, deviceID: "device-a", refreshToken: token),
            proof: DeviceProof(deviceID: "device-a", keys: [.ed25519(key.publicKey)]))
    }

    static func session(_ f: StoreFixture, _ accountID: String) async throws -> SessionRecord {
        try #require(try await f.store.sessions(appID: app, accountID: accountID).last)
    }

    @Test("a repeat of the previous token outside the grace window gets the current pair while it is unused", arguments: kinds)
    func unusedPairIsReturned(kind: StoreKind) async throws {
        try await StoreFixture.with(kind) { f in
            let key = FixtureDevice.key
            let login = try await Self.login(f, key: key)
            let first = try await Self.refresh(f, login.tokens.refreshToken, key: key)
            #expect(try await Self.session(f, login.accountID).isPairUsed == false)

            // The device lost the pair and comes back long after the grace window (a restart).
            f.clock.advance(by: .seconds(600))
            let repeated = try await Self.refresh(f, login.tokens.refreshToken, key: key)
            #expect(repeated.accessToken == first.accessToken)
            #expect(repeated.refreshToken == first.refreshToken)
            #expect(repeated.accessLifetime == .seconds(300))
            var record = try await Self.session(f, login.accountID)
            #expect(record.revokedAt == nil)
            #expect(record.refreshGeneration == 1)
            #expect(record.refreshHash == f.keys.tokenHash(first.refreshToken))

            // Twice is fine as long as the pair stays unused; then the device uses it.
            f.clock.advance(by: .seconds(60))
            _ = try await Self.refresh(f, login.tokens.refreshToken, key: key)
            _ = try await f.authority.accountInfo(appID: Self.app, accessToken: first.accessToken)
            record = try await Self.session(f, login.accountID)
            #expect(record.isPairUsed)
            #expect(record.revokedAt == nil)

            // Used: the same repeat is reuse now, and burns the family.
            let reason = await sessionRefusal { _ = try await Self.refresh(f, login.tokens.refreshToken, key: key) }
            #expect(reason == "refresh_token_reused")
            #expect(try await Self.session(f, login.accountID).revokeReason == SessionRevokeReason.reused)
            let newest = await sessionRefusal { _ = try await Self.refresh(f, first.refreshToken, key: key) }
            #expect(newest == "refresh_token_reused")
        }
    }

    @Test(
        "once the current access token was used by any call, a repeat outside the grace window revokes", arguments: kinds,
        Use.allCases)
    func usedPairRevokes(kind: StoreKind, use: Use) async throws {
        try await StoreFixture.with(kind) { f in
            let key = FixtureDevice.key
            let login = try await Self.login(f, key: key)
            let first = try await Self.refresh(f, login.tokens.refreshToken, key: key)
            try await use.run(f, token: first.accessToken)
            #expect(try await Self.session(f, login.accountID).isPairUsed, "marked before the call answered")
            f.clock.advance(by: .seconds(11))
            let reason = await sessionRefusal { _ = try await Self.refresh(f, login.tokens.refreshToken, key: key) }
            #expect(reason == "refresh_token_reused")
            let record = try await Self.session(f, login.accountID)
            #expect(record.revokeReason == SessionRevokeReason.reused)
            let access = await sessionRefusal {
                _ = try await f.authority.accountInfo(appID: Self.app, accessToken: first.accessToken)
            }
            #expect(access == "revoked")
        }
    }

    @Test("once the current refresh token was presented, a repeat of the one before revokes", arguments: kinds)
    func usedRefreshTokenRevokes(kind: StoreKind) async throws {
        try await StoreFixture.with(kind) { f in
            let key = FixtureDevice.key
            let login = try await Self.login(f, key: key)
            let first = try await Self.refresh(f, login.tokens.refreshToken, key: key)
            f.clock.advance(by: .seconds(30))
            let second = try await Self.refresh(f, first.refreshToken, key: key)
            // The rotation leaves the new pair unused…
            #expect(try await Self.session(f, login.accountID).isPairUsed == false)
            f.clock.advance(by: .seconds(600))
            let reason = await sessionRefusal { _ = try await Self.refresh(f, login.tokens.refreshToken, key: key) }
            #expect(reason == "refresh_token_reused")
            #expect(try await Self.session(f, login.accountID).revokeReason == SessionRevokeReason.reused)
            let newest = await sessionRefusal { _ = try await Self.refresh(f, second.refreshToken, key: key) }
            #expect(newest == "refresh_token_reused")
        }
    }

    @Test("a rotation clears the mark: the next pair is recoverable again until it is used", arguments: kinds)
    func rotationClearsTheMark(kind: StoreKind) async throws {
        try await StoreFixture.with(kind) { f in
            let key = FixtureDevice.key
            let login = try await Self.login(f, key: key)
            _ = try await f.authority.accountInfo(appID: Self.app, accessToken: login.tokens.accessToken)
            #expect(try await Self.session(f, login.accountID).isPairUsed)
            let first = try await Self.refresh(f, login.tokens.refreshToken, key: key)
            #expect(try await Self.session(f, login.accountID).isPairUsed == false)
            _ = try await f.authority.wallet(appID: Self.app, accessToken: first.accessToken)
            let second = try await Self.refresh(f, first.refreshToken, key: key)
            #expect(try await Self.session(f, login.accountID).isPairUsed == false)
            f.clock.advance(by: .seconds(3600))
            let repeated = try await Self.refresh(f, first.refreshToken, key: key)
            #expect(repeated.refreshToken == second.refreshToken)
            // What is left of an access token issued an hour ago: nothing; the device refreshes with
            // the current token next, which rotates normally.
            #expect(repeated.accessLifetime == .zero)
            let third = try await Self.refresh(f, second.refreshToken, key: key)
            _ = try await f.authority.accountInfo(appID: Self.app, accessToken: third.accessToken)
        }
    }

    @Test("markPairUsed writes only on the pair's first use, and never marks a pair rotated in since", arguments: kinds)
    func markOnce(kind: StoreKind) async throws {
        try await StoreFixture.with(kind) { f in
            let (login, session) = try await f.storeLogin()
            let id = try #require(try await f.store.sessions(appID: Self.app, accountID: login.accountID).first).id
            #expect(try await f.store.markPairUsed(sessionID: id, accessHash: session.accessHash))
            #expect(try await f.store.markPairUsed(sessionID: id, accessHash: session.accessHash) == false)
            let rotation = SessionRotation(
                accessHash: [7, 7], refreshHash: [8, 8], accessExpiresAt: f.clock.now, rotatedAt: f.clock.now)
            try await f.store.refreshSession(appID: Self.app, refreshHash: session.refreshHash, now: f.clock.now) { _ in
                (.rotate(rotation), ())
            }
            // A late mark with the old access hash leaves the new pair unused.
            #expect(try await f.store.markPairUsed(sessionID: id, accessHash: session.accessHash) == false)
            var record = try #require(try await f.store.sessions(appID: Self.app, accountID: login.accountID).first)
            #expect(record.isPairUsed == false)
            #expect(try await f.store.markPairUsed(sessionID: id, accessHash: [7, 7]))
            record = try #require(try await f.store.sessions(appID: Self.app, accountID: login.accountID).first)
            #expect(record.isPairUsed)
        }
    }

    // MARK: - The rule as a pure function

    @Test(
        "decideRefresh: the previous token outside the grace window replays an unused pair, revokes a used one",
        arguments: [false, true])
    func decideRefreshPrevious(isUsed: Bool) throws {
        let keys = try AuthorityKeys(masterKey: SymmetricKey(bytes: Array(repeating: 7, count: 32)))
        let key = try Ed25519PrivateKey()
        let previous = "rwr_previous"
        let current = keys.rotatedTokens(from: previous)
        let rotatedAt = Date(unixMilliseconds: 1_800_000_000_000)
        let now = rotatedAt.adding(.seconds(3600))
        let session = SessionRecord(
            id: "ses_1", appID: "app", accountID: "acct_1", deviceID: "device-a",
            accessHash: keys.tokenHash(current.accessToken), refreshHash: keys.tokenHash(current.refreshToken),
            accessExpiresAt: rotatedAt.adding(.seconds(900)), createdAt: rotatedAt.adding(.seconds(-900)), revokedAt: nil,
            revokeReason: nil, devicePublicKey: key.publicKey.rawRepresentation,
            previousRefreshHash: keys.tokenHash(previous), rotatedAt: rotatedAt, refreshGeneration: 1, isPairUsed: isUsed)
        let request = RefreshRequest(appID: "app", deviceID: "device-a", refreshToken: previous)
        let (change, verdict) = EmbeddedAuthority.decideRefresh(
            RefreshCandidate(session: session, generation: .previous), request: request,
            proof: DeviceProof(deviceID: "device-a", keys: [.ed25519(key.publicKey)]), now: now, keys: keys,
            settings: AuthoritySettings())
        if isUsed {
            #expect(change == .revoke(reason: SessionRevokeReason.reused))
            guard case .refused(let reason, let revoked) = verdict.outcome else {
                Issue.record("expected a refusal, got \(verdict.outcome)")
                return
            }
            #expect(reason == "refresh_token_reused")
            #expect(revoked == SessionRevokeReason.reused)
        } else {
            #expect(change == SessionRefreshChange.none)
            guard case .replayed(let tokens, let generation) = verdict.outcome else {
                Issue.record("expected the current pair, got \(verdict.outcome)")
                return
            }
            #expect(tokens.accessToken == current.accessToken)
            #expect(tokens.refreshToken == current.refreshToken)
            #expect(generation == 1)
        }
    }

    @Test("decideRefresh: an unused pair re-derived under another master key is not handed out")
    func decideRefreshOtherMasterKey() throws {
        let keys = try AuthorityKeys(masterKey: SymmetricKey(bytes: Array(repeating: 7, count: 32)))
        let key = try Ed25519PrivateKey()
        let rotatedAt = Date(unixMilliseconds: 1_800_000_000_000)
        let now = rotatedAt.adding(.seconds(3600))
        let session = SessionRecord(
            id: "ses_1", appID: "app", accountID: "acct_1", deviceID: "device-a", accessHash: [1], refreshHash: [2],
            accessExpiresAt: rotatedAt.adding(.seconds(900)), createdAt: rotatedAt, revokedAt: nil, revokeReason: nil,
            devicePublicKey: key.publicKey.rawRepresentation, previousRefreshHash: keys.tokenHash("rwr_previous"),
            rotatedAt: rotatedAt, refreshGeneration: 1, isPairUsed: false)
        let request = RefreshRequest(appID: "app", deviceID: "device-a", refreshToken: "rwr_previous")
        let (change, _) = EmbeddedAuthority.decideRefresh(
            RefreshCandidate(session: session, generation: .previous), request: request,
            proof: DeviceProof(deviceID: "device-a", keys: [.ed25519(key.publicKey)]), now: now, keys: keys,
            settings: AuthoritySettings())
        #expect(change == .revoke(reason: SessionRevokeReason.reused))
    }
}
