import Foundation
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainTestSupport
import RainWire
import Testing

@testable import RainAuthority
@testable import RainStore

@Suite("Accounts and sessions")
struct AccountsAndSessionsTests {
    @Test("email and phone are separate accounts with separate wallets")
    func emailAndPhoneSeparate() async throws {
        try await AuthorityFixture.with { f in
            let byEmail = try await f.login(AuthorityFixture.email)
            let byPhone = try await f.login(AuthorityFixture.phone)
            #expect(byEmail.accountCreated)
            #expect(byPhone.accountCreated)
            #expect(byEmail.accountID != byPhone.accountID)
            #expect(byEmail.walletID != byPhone.walletID)
        }
    }

    @Test("the same contact in two apps makes two accounts")
    func twoApps() async throws {
        try await AuthorityFixture.with { f in
            let one = try await f.login(app: "app-one")
            let two = try await f.login(app: "app-two")
            #expect(one.accountCreated)
            #expect(two.accountCreated)
            #expect(one.accountID != two.accountID)
            #expect(try await f.store.account(appID: "app-one", contact: AuthorityFixture.email)?.id == one.accountID)
            #expect(try await f.store.account(appID: "app-two", contact: AuthorityFixture.email)?.id == two.accountID)
        }
    }

    @Test("a login on device B revokes device A's session; a new login on A replaces A's older one")
    func oneDeviceAtATime() async throws {
        try await AuthorityFixture.with { f in
            let onA = try await f.login(device: "device-a")
            f.clock.advance(by: .seconds(10))
            let onB = try await f.login(device: "device-b")
            #expect(onB.accountID == onA.accountID)
            var sessions = try await f.store.sessions(appID: AuthorityFixture.app, accountID: onA.accountID)
            #expect(sessions.count == 2)
            let a = try #require(sessions.first { $0.deviceID == "device-a" })
            let b = try #require(sessions.first { $0.deviceID == "device-b" })
            #expect(a.revokedAt == f.clock.now)
            #expect(a.revokeReason == SessionRevokeReason.revokedElsewhere)
            #expect(a.refreshHash == f.keys.tokenHash(onA.tokens.refreshToken))
            #expect(b.revokedAt == nil)
            #expect(b.accessHash == f.keys.tokenHash(onB.tokens.accessToken))
            #expect(b.accessExpiresAt == f.clock.now.adding(.seconds(900)))

            f.clock.advance(by: .seconds(10))
            let againOnB = try await f.login(device: "device-b")
            sessions = try await f.store.sessions(appID: AuthorityFixture.app, accountID: onA.accountID)
            #expect(sessions.count == 3)
            #expect(
                sessions.filter { $0.revokedAt == nil }.map(\.refreshHash) == [
                    f.keys.tokenHash(againOnB.tokens.refreshToken)
                ])
            #expect(
                sessions.first { $0.refreshHash == f.keys.tokenHash(onB.tokens.refreshToken) }?.revokeReason
                    == "replaced")
        }
    }

    @Test("a login does not touch another account's sessions or another app's")
    func revocationIsScoped() async throws {
        try await AuthorityFixture.with { f in
            let email = try await f.login(AuthorityFixture.email, device: "device-a")
            let otherApp = try await f.login(AuthorityFixture.email, device: "device-c", app: "app-two")
            _ = try await f.login(AuthorityFixture.phone, device: "device-b")
            let emailSessions = try await f.store.sessions(appID: AuthorityFixture.app, accountID: email.accountID)
            #expect(emailSessions.allSatisfy { $0.revokedAt == nil })
            let appTwo = try await f.store.sessions(appID: "app-two", accountID: otherApp.accountID)
            #expect(appTwo.allSatisfy { $0.revokedAt == nil })
        }
    }

    @Test("revokeSession marks the session revoked for logout; unknown tokens succeed silently")
    func logout() async throws {
        try await AuthorityFixture.with { f in
            let login = try await f.login()
            try await f.authority.revokeSession(appID: AuthorityFixture.app, refreshToken: login.tokens.refreshToken)
            let sessions = try await f.store.sessions(appID: AuthorityFixture.app, accountID: login.accountID)
            #expect(sessions.count == 1)
            #expect(sessions.first?.revokeReason == SessionRevokeReason.logout)
            #expect(sessions.first?.revokedAt == f.clock.now)
            try await f.authority.revokeSession(appID: AuthorityFixture.app, refreshToken: "rwr_unknown")
            try await f.authority.revokeSession(appID: AuthorityFixture.app, refreshToken: login.tokens.refreshToken)
            // Another app cannot revoke it either way; the reason stays logout.
            #expect(
                try await f.store.sessions(appID: AuthorityFixture.app, accountID: login.accountID).first?.revokeReason
                    == SessionRevokeReason.logout)
        }
    }

    @Test("the log never holds a code or a token, and shows the contact redacted")
    func logHasNoSecrets() async throws {
        try await AuthorityFixture.with { f in
            let (challenge, code) = try await f.send()
            _ = await rainError { _ = try await f.confirm(challenge, code: wrongCode(for: code)) }
            let login = try await f.confirm(challenge, code: code)
            let (phoneChallenge, phoneCode) = try await f.send(AuthorityFixture.phone)
            let phoneLogin = try await f.confirm(phoneChallenge, code: phoneCode)
            try await f.authority.revokeSession(appID: AuthorityFixture.app, refreshToken: login.tokens.refreshToken)
            let log = f.logSink.captured.joined(separator: "\n")
            #expect(!log.isEmpty)
            for secret in [
                code, wrongCode(for: code), phoneCode, login.tokens.accessToken, login.tokens.refreshToken,
                phoneLogin.tokens.accessToken, phoneLogin.tokens.refreshToken,
            ] {
                #expect(!log.contains(secret))
            }
            #expect(!log.contains("user@example.com"))
            #expect(!log.contains("+15551234567"))
            #expect(log.contains("u***@example.com"))
            #expect(log.contains("+1555***67"))
            #expect(log.contains(login.accountID))
            #expect(log.contains(challenge.challengeID))
        }
    }

    @Test("pruneExpired deletes challenges expired over a day ago and sessions revoked over a day ago")
    func prune() async throws {
        try await AuthorityFixture.with { f in
            let onA = try await f.login(device: "device-a")
            _ = try await f.login(device: "device-b")  // revokes A's session
            let (pending, _) = try await f.send(device: "device-c")
            f.clock.advance(by: .seconds(86_400 - 1))
            var result = try await f.authority.pruneExpired()
            #expect(result == PruneResult(challengesDeleted: 0, sessionsDeleted: 0))
            f.clock.advance(by: .seconds(302))
            result = try await f.authority.pruneExpired()
            #expect(result.challengesDeleted == 3)
            #expect(result.sessionsDeleted == 1)
            #expect(try await f.store.challenge(id: pending.challengeID) == nil)
            let sessions = try await f.store.sessions(appID: AuthorityFixture.app, accountID: onA.accountID)
            #expect(sessions.map(\.deviceID) == ["device-b"])
        }
    }

    @Test("the development outbox is RAIN_202 when disabled or when codes go elsewhere")
    func outboxDisabled() async throws {
        try await AuthorityFixture.with { f in
            let error = try #require(await rainError { _ = try await f.authority.listOutbox() })
            #expect(error.code == .unauthorized)
        }
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let outbox = OutboxCodeSender(
            stateDirectory: directory, logger: Logger(label: "test", sink: CapturingLogSink()))
        try await AuthorityFixture.with(
            settings: AuthoritySettings(isDevOutboxEnabled: false, sendLimits: .unlimited), outbox: outbox
        ) { f in
            let error = try #require(await rainError { _ = try await f.authority.listOutbox() })
            #expect(error.code == .unauthorized)
        }
    }

    @Test("with the outbox sender, the delivery lands in outbox.jsonl and listOutbox reads it back")
    func outboxDelivery() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let outbox = OutboxCodeSender(
            stateDirectory: directory, logger: Logger(label: "test", sink: CapturingLogSink()))
        try await AuthorityFixture.with(outbox: outbox) { f in
            let challenge = try await f.authority.sendLoginCode(
                SendCodeRequest(appID: AuthorityFixture.app, deviceID: "device-a", contact: AuthorityFixture.phone))
            let entries = try await f.authority.listOutbox()
            #expect(entries.count == 1)
            let entry = try #require(entries.first)
            #expect(entry.appID == AuthorityFixture.app)
            #expect(entry.kind == "phone")
            #expect(entry.contact == "+15551234567")
            #expect(entry.sentAt == f.clock.now)
            #expect(EmbeddedAuthority.isWellFormedCode(entry.code))
            #expect(try await outbox.entries() == entries)
            let login = try await f.confirm(challenge, code: entry.code)
            #expect(login.accountCreated)
        }
        var info = stat()
        #expect(stat(outbox.path, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
    }

    @Test("an authority on a state directory keeps its key, database and outbox there")
    func stateDirectoryAuthority() async throws {
        let directory = try makeTemporaryDirectory() + "/state"
        defer { try? FileManager.default.removeItem(atPath: (directory as NSString).deletingLastPathComponent) }
        let clock = ManualClock()
        let logger = Logger(label: "test", sink: CapturingLogSink())
        let authority = try await EmbeddedAuthority(stateDirectory: directory, clock: clock, logger: logger)
        let challenge = try await authority.sendLoginCode(
            SendCodeRequest(appID: "app", deviceID: "dev", contact: .email("a@example.com")))
        let code = try #require(try await authority.listOutbox().last?.code)
        let first = try await authority.confirmLoginCode(
            ConfirmCodeRequest(appID: "app", deviceID: "dev", challengeID: challenge.challengeID, code: code))
        #expect(first.accountCreated)
        for (name, mode) in [("authority.key", 0o600), ("authority.sqlite3", 0o600), ("outbox.jsonl", 0o600)] {
            var info = stat()
            #expect(stat(directory + "/" + name, &info) == 0, "\(name) exists")
            #expect(Int(info.st_mode & 0o777) == mode, "\(name) mode")
        }
        var info = stat()
        #expect(stat(directory, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o700)
        await authority.store.close()

        // Reopened: same key (the hash of the old code still matches), same account.
        let reopened = try await EmbeddedAuthority(stateDirectory: directory, clock: clock, logger: logger)
        #expect(reopened.keys.masterKeyID == authority.keys.masterKeyID)
        clock.advance(by: .seconds(30))  // the send limits (default here) are stored: wait out the cooldown
        let again = try await reopened.sendLoginCode(
            SendCodeRequest(appID: "app", deviceID: "dev", contact: .email("a@example.com")))
        let code2 = try #require(try await reopened.listOutbox().last?.code)
        let second = try await reopened.confirmLoginCode(
            ConfirmCodeRequest(appID: "app", deviceID: "dev", challengeID: again.challengeID, code: code2))
        #expect(second.accountID == first.accountID)
        #expect(!second.accountCreated)
        await reopened.store.close()
    }
}
