import Foundation
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainSoftAuthenticator
import RainTestSupport
import RainWire
import Testing

@testable import RainStore

/// Backup contacts at the embedded authority: verification codes follow the login-code rules, a
/// verified contact becomes a login method of the same account, and a contact is never moved
/// between accounts.
@Suite("Backup contacts at the authority")
struct ContactVerificationTests {
    static let backup = RainWalletContact.email("backup@example.com")

    /// Sends a verification code to `contact` for the session of `token`; returns it with its code.
    static func send(
        _ f: AuthorityFixture, token: String, _ contact: RainWalletContact = backup, device: String = "device-a"
    ) async throws -> (challenge: SendCodeResult, code: String) {
        let result = try await f.authority.sendContactVerificationCode(
            appID: AuthorityFixture.app, deviceID: device, accessToken: token, contact: contact)
        return (result, try f.sender.lastCode(to: contact))
    }

    static func confirm(
        _ f: AuthorityFixture, token: String, _ challenge: SendCodeResult, code: String, device: String = "device-a"
    ) async throws -> AccountInfo {
        try await f.authority.confirmContactVerification(
            appID: AuthorityFixture.app, deviceID: device, accessToken: token, challengeID: challenge.challengeID,
            code: code)
    }

    /// A code that differs from `code`.
    static func wrong(_ code: String) -> String { code == "000000" ? "111111" : "000000" }

    @Test("a passkey-only account needs a backup email; a verified email logs in to the same account and wallet")
    func passkeyAccountGetsBackupEmail() async throws {
        try await PasskeyAuthorityTests.with { f, authenticator in
            let signUp = try await PasskeyAuthorityTests.signUp(f, authenticator)
            let token = signUp.tokens.accessToken
            let before = try await f.authority.accountInfo(appID: AuthorityFixture.app, accessToken: token)
            #expect(before.needsBackupEmail)
            #expect(before.contacts.isEmpty)
            #expect(before.passkeys.count == 1)
            #expect(before.passkeys.first?.rpID == PasskeyAuthorityTests.domain)
            #expect(before.passkeys.first?.lastUsedAt == nil)
            let wallet = try await f.authority.wallet(appID: AuthorityFixture.app, accessToken: token)

            let (challenge, code) = try await Self.send(f, token: token)
            #expect(challenge.contact == Self.backup)
            let after = try await Self.confirm(f, token: token, challenge, code: code)
            #expect(!after.needsBackupEmail)
            #expect(after.contacts == [Self.backup])
            #expect(after.accountID == signUp.accountID)

            // The contact now logs in by code, to the same account and wallet (on another device).
            let login = try await f.login(Self.backup, device: "device-b")
            #expect(!login.accountCreated)
            #expect(login.accountID == signUp.accountID)
            #expect(login.walletID == signUp.walletID)
            let walletAgain = try await f.authority.wallet(
                appID: AuthorityFixture.app, accessToken: login.tokens.accessToken)
            #expect(walletAgain.ethereumAddress == wallet.ethereumAddress)
            #expect(walletAgain.solanaAddress == wallet.solanaAddress)
        }
    }

    @Test("a wrong verification code is RAIN_203 with the attempts left; the third locks it")
    func wrongCodesLock() async throws {
        try await AuthorityFixture.with { f in
            let token = try await f.login().tokens.accessToken
            let (challenge, code) = try await Self.send(f, token: token)
            for left in [2, 1] {
                let error = await rainError { _ = try await Self.confirm(f, token: token, challenge, code: Self.wrong(code)) }
                #expect(error?.code == .invalidLoginCode)
                #expect(error?.details.reason == "wrong")
                #expect(error?.details.attemptsRemaining == UInt32(left))
            }
            let third = await rainError { _ = try await Self.confirm(f, token: token, challenge, code: Self.wrong(code)) }
            #expect(third?.code == .invalidLoginCode)
            #expect(third?.details.reason == "locked")
            // Locked: even the right code no longer works, and nothing was attached.
            let right = await rainError { _ = try await Self.confirm(f, token: token, challenge, code: code) }
            #expect(right?.details.reason == "locked")
            let info = try await f.authority.accountInfo(appID: AuthorityFixture.app, accessToken: token)
            #expect(info.contacts == [AuthorityFixture.email])
        }
    }

    @Test("a verification code expires after 5 minutes, and a resend replaces it")
    func expiryAndResend() async throws {
        try await AuthorityFixture.with { f in
            let token = try await f.login().tokens.accessToken
            let (first, firstCode) = try await Self.send(f, token: token)
            f.clock.advance(by: .seconds(301))
            let expired = await rainError { _ = try await Self.confirm(f, token: token, first, code: firstCode) }
            #expect(expired?.code == .invalidLoginCode)
            #expect(expired?.details.reason == "expired")

            // A fresh session (the access token lives 15 minutes), then a resend retires the older code.
            let fresh = try await f.login().tokens.accessToken
            let (second, secondCode) = try await Self.send(f, token: fresh)
            let (third, thirdCode) = try await Self.send(f, token: fresh)
            let retired = await rainError { _ = try await Self.confirm(f, token: fresh, second, code: secondCode) }
            #expect(retired?.details.reason == "retired")
            let info = try await Self.confirm(f, token: fresh, third, code: thirdCode)
            #expect(info.contacts.contains(Self.backup))
        }
    }

    @Test("verification needs a live access token (RAIN_201)")
    func needsLiveSession() async throws {
        try await AuthorityFixture.with { f in
            let reason = await sessionRefusal {
                _ = try await Self.send(f, token: "rwa_unknown")
            }
            #expect(reason == "invalid_token")
            let login = try await f.login()
            let (challenge, code) = try await Self.send(f, token: login.tokens.accessToken)
            try await f.authority.revokeSession(appID: AuthorityFixture.app, refreshToken: login.tokens.refreshToken)
            let revoked = await sessionRefusal {
                _ = try await Self.confirm(f, token: login.tokens.accessToken, challenge, code: code)
            }
            #expect(revoked == "revoked")
        }
    }

    @Test(
        "a send to a contact another account owns answers like any other: the code is delivered and counted; only the right code learns the owner"
    )
    func ownedContactAnsweredLikeAnyOther() async throws {
        let limits = CodeSendLimits(
            contactCooldown: .zero, contactWindow: .zero, contactMaxSends: .max, accountWindow: .seconds(3600),
            accountMaxSends: 2, contactAllAppsWindow: .zero, contactAllAppsMaxSends: .max, sourceWindow: .zero,
            sourceMaxSends: .max)
        try await AuthorityFixture.with(settings: AuthoritySettings(sendLimits: limits)) { f in
            let owner = try await f.login(Self.backup, device: "device-b")
            let other = try await f.login(AuthorityFixture.email)
            let token = other.tokens.accessToken
            let delivered = f.sender.deliveries.count
            // Sent, as to a free contact: the contact's owner receives the code.
            let (challenge, code) = try await Self.send(f, token: token)
            #expect(challenge.contact == Self.backup)
            #expect(f.sender.deliveries.count == delivered + 1)
            #expect(f.sender.deliveries.last?.contact == Self.backup.value)
            // A wrong code learns nothing about the owner: RAIN_203 as for any contact.
            let wrong = await rainError { _ = try await Self.confirm(f, token: token, challenge, code: Self.wrong(code)) }
            #expect(wrong?.code == .invalidLoginCode)
            #expect(wrong?.details.reason == "wrong")
            // Only the right code says another account owns it.
            let error = await rainError { _ = try await Self.confirm(f, token: token, challenge, code: code) }
            #expect(error?.code == .refused)
            #expect(error?.details.reason == "contact_owned_by_another_account")
            // The send counted against the account's send limit (2 an hour): the next one is refused.
            _ = try await Self.send(f, token: token, .email("third@example.com"))
            let limited = await rainError { _ = try await Self.send(f, token: token, .email("fourth@example.com")) }
            #expect(limited?.code == .refused)
            #expect(limited?.details.limit == "account_window")
            // Never moved: the contact still logs in to its own account.
            let again = try await f.login(Self.backup, device: "device-c")
            #expect(again.accountID == owner.accountID)
            let info = try await f.authority.accountInfo(appID: AuthorityFixture.app, accessToken: token)
            #expect(info.contacts == [AuthorityFixture.email])
        }
    }

    @Test("a contact taken by another account between send and confirm is refused with RAIN_302 at the confirm")
    func ownedContactRefusedAtConfirm() async throws {
        try await AuthorityFixture.with { f in
            let mine = try await f.login(AuthorityFixture.email)
            let (challenge, code) = try await Self.send(f, token: mine.tokens.accessToken)
            // Meanwhile someone logs in with the contact: a new account owns it.
            let taker = try await f.login(Self.backup, device: "device-b")
            #expect(taker.accountCreated)
            let error = await rainError { _ = try await Self.confirm(f, token: mine.tokens.accessToken, challenge, code: code) }
            #expect(error?.code == .refused)
            #expect(error?.details.reason == "contact_owned_by_another_account")
            let info = try await f.authority.accountInfo(appID: AuthorityFixture.app, accessToken: mine.tokens.accessToken)
            #expect(info.contacts == [AuthorityFixture.email])
            let again = try await f.login(Self.backup, device: "device-c")
            #expect(again.accountID == taker.accountID)
        }
    }

    @Test("a second email is added beside the first; verifying one already attached succeeds again")
    func secondEmailAdds() async throws {
        try await AuthorityFixture.with { f in
            let first = try await f.login(AuthorityFixture.email)
            let token = first.tokens.accessToken
            let (challenge, code) = try await Self.send(f, token: token)
            let info = try await Self.confirm(f, token: token, challenge, code: code)
            #expect(
                info.contacts == [Self.backup, AuthorityFixture.email] || info.contacts == [AuthorityFixture.email, Self.backup])
            #expect(Set(info.contacts) == [AuthorityFixture.email, Self.backup])
            // Both log in to the same account.
            let viaFirst = try await f.login(AuthorityFixture.email, device: "device-b")
            #expect(viaFirst.accountID == first.accountID)
            let viaBackup = try await f.login(Self.backup, device: "device-c")
            #expect(viaBackup.accountID == first.accountID)
            // Idempotent: the account's own contact verifies again without change.
            let (again, againCode) = try await Self.send(
                f, token: viaBackup.tokens.accessToken, AuthorityFixture.email, device: "device-c")
            let same = try await Self.confirm(f, token: viaBackup.tokens.accessToken, again, code: againCode, device: "device-c")
            #expect(Set(same.contacts) == [AuthorityFixture.email, Self.backup])
            #expect(same.contacts.count == 2)
        }
    }

    @Test("login challenges and verification challenges never cross")
    func challengesDoNotCross() async throws {
        try await AuthorityFixture.with { f in
            let login = try await f.login(AuthorityFixture.email)
            let token = login.tokens.accessToken
            let (verification, verificationCode) = try await Self.send(f, token: token)
            // The verification's challenge does not log in, even with its right code.
            let asLogin = await rainError { _ = try await f.confirm(verification, code: verificationCode) }
            #expect(asLogin?.code == .invalidArgument)
            #expect(asLogin?.details.reason == "no_pending_code")
            // A login challenge does not verify a contact.
            let (loginChallenge, loginCode) = try await f.send(Self.backup)
            let asVerification = await rainError {
                _ = try await Self.confirm(f, token: token, loginChallenge, code: loginCode)
            }
            #expect(asVerification?.code == .invalidArgument)
            #expect(asVerification?.details.reason == "no_pending_code")
            // Neither was used up by the wrong path: each still works where it belongs.
            let verified = try await Self.confirm(f, token: token, verification, code: verificationCode)
            #expect(verified.contacts.contains(Self.backup))
            let loggedIn = try await f.confirm(loginChallenge, code: loginCode)
            #expect(loggedIn.accountID == login.accountID)
        }
    }

    @Test("an account created by a code login has its email and needs no backup")
    func codeAccountHasEmail() async throws {
        try await AuthorityFixture.with { f in
            let login = try await f.login(AuthorityFixture.email)
            let info = try await f.authority.accountInfo(appID: AuthorityFixture.app, accessToken: login.tokens.accessToken)
            #expect(!info.needsBackupEmail)
            let phone = try await f.login(AuthorityFixture.phone, device: "device-b")
            let phoneInfo = try await f.authority.accountInfo(
                appID: AuthorityFixture.app, accessToken: phone.tokens.accessToken)
            #expect(phoneInfo.needsBackupEmail)
        }
    }

    @Test("the schema is at version 5 with the challenge purpose")
    func schemaVersion() async throws {
        try await AuthorityFixture.with { f in
            let version = try await f.store.schemaVersion()
            #expect(version >= 5)
            #expect(SQLiteAuthorityStore.migrations.contains { $0.version == 5 })
        }
    }
}
