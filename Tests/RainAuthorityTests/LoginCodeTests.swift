import Foundation
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainTestSupport
import RainWire
import Testing

@testable import RainStore

@Suite("Login codes")
struct LoginCodeTests {
    @Test("a code is 6 ASCII digits and expires after the code lifetime")
    func codeShape() async throws {
        try await AuthorityFixture.with { f in
            let (challenge, code) = try await f.send()
            #expect(code.utf8.count == 6)
            #expect(code.utf8.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
            #expect(challenge.expiresAt == f.clock.now.adding(.seconds(300)))
            #expect(challenge.contact == AuthorityFixture.email)
            #expect(challenge.challengeID.hasPrefix("chl_"))
            let delivery = try #require(f.sender.deliveries.last)
            #expect(delivery.appID == AuthorityFixture.app)
            #expect(delivery.kind == "email")
            #expect(delivery.contact == "user@example.com")
            #expect(delivery.sentAt == f.clock.now)
        }
    }

    @Test("the code is stored only as HMAC(code-hash key, challenge id ‖ 0 ‖ code)")
    func storedHashed() async throws {
        try await AuthorityFixture.with { f in
            let (challenge, code) = try await f.send()
            let record = try #require(try await f.store.challenge(id: challenge.challengeID))
            #expect(record.codeHash.count == 32)
            #expect(record.codeHash == f.keys.codeHash(challengeID: challenge.challengeID, code: code))
            #expect(
                record.codeHash
                    == HMACSHA256.authenticate(
                        Array(challenge.challengeID.utf8) + [0] + Array(code.utf8), key: f.keys.codeHashKey))
            // No cell of any table holds the code, as text or as bytes.
            let tables = try await f.store.dumpAllRows()
            for (table, rows) in tables {
                for row in rows {
                    for value in row.values {
                        #expect(value != .text(code), "table \(table) holds the code")
                        #expect(value != .blob(Array(code.utf8)), "table \(table) holds the code")
                        if case .integer(let n) = value, n >= 10 { #expect(n != Int64(code)) }
                    }
                }
            }
        }
    }

    @Test("a first login creates the account and wallet; the next login returns the same ones")
    func firstAndSecondLogin() async throws {
        try await AuthorityFixture.with { f in
            let first = try await f.login()
            #expect(first.accountCreated)
            #expect(first.accountID.hasPrefix("acct_"))
            #expect(first.walletID.hasPrefix("wal_"))
            #expect(first.tokens.accessToken.hasPrefix("rwa_"))
            #expect(first.tokens.refreshToken.hasPrefix("rwr_"))
            #expect(first.tokens.accessLifetime == .seconds(900))
            let account = try #require(
                try await f.store.account(appID: AuthorityFixture.app, contact: AuthorityFixture.email))
            #expect(account.id == first.accountID)
            #expect(account.walletID == first.walletID)
            #expect(account.createdAt == f.clock.now)

            f.clock.advance(by: .seconds(60))
            let second = try await f.login()
            #expect(!second.accountCreated)
            #expect(second.accountID == first.accountID)
            #expect(second.walletID == first.walletID)
            #expect(second.tokens.accessToken != first.tokens.accessToken)
            #expect(second.tokens.refreshToken != first.tokens.refreshToken)
        }
    }

    @Test("a wrong code is RAIN_203 wrong with attempts left, and the right code still works after two")
    func wrongThenRight() async throws {
        try await AuthorityFixture.with { f in
            let (challenge, code) = try await f.send()
            let first = try #require(await rainError { _ = try await f.confirm(challenge, code: wrongCode(for: code)) })
            #expect(first.code == .invalidLoginCode)
            #expect(first.details.reason == "wrong")
            #expect(first.details.attemptsRemaining == 2)
            let second = try #require(
                await rainError { _ = try await f.confirm(challenge, code: wrongCode(for: code)) })
            #expect(second.code == .invalidLoginCode)
            #expect(second.details.reason == "wrong")
            #expect(second.details.attemptsRemaining == 1)
            let record = try #require(try await f.store.challenge(id: challenge.challengeID))
            #expect(record.state == .pending)
            #expect(record.wrongAttempts == 2)
            let result = try await f.confirm(challenge, code: code)
            #expect(result.accountCreated)
        }
    }

    @Test(
        "a malformed code counts as a wrong attempt", arguments: ["12345", "1234567", "abcdef", "", "12 456", "１２３４５６"])
    func malformedCode(_ typed: String) async throws {
        try await AuthorityFixture.with { f in
            let (challenge, code) = try await f.send()
            let error = try #require(await rainError { _ = try await f.confirm(challenge, code: typed) })
            #expect(error.code == .invalidLoginCode)
            #expect(error.details.reason == "wrong")
            #expect(error.details.attemptsRemaining == 2)
            _ = try await f.confirm(challenge, code: code)
        }
    }

    @Test("three wrong codes lock the challenge; the right code is refused afterwards")
    func lockAfterThree() async throws {
        try await AuthorityFixture.with { f in
            let (challenge, code) = try await f.send()
            for _ in 0..<2 {
                _ = await rainError { _ = try await f.confirm(challenge, code: wrongCode(for: code)) }
            }
            let third = try #require(await rainError { _ = try await f.confirm(challenge, code: wrongCode(for: code)) })
            #expect(third.code == .invalidLoginCode)
            #expect(third.details.reason == "locked")
            #expect(third.details.attemptsRemaining == 0)
            let after = try #require(await rainError { _ = try await f.confirm(challenge, code: code) })
            #expect(after.code == .invalidLoginCode)
            #expect(after.details.reason == "locked")
            #expect(after.details.attemptsRemaining == 0)
            #expect(try await f.store.challenge(id: challenge.challengeID)?.state == .locked)
            // A new code works.
            let (fresh, freshCode) = try await f.send()
            _ = try await f.confirm(fresh, code: freshCode)
        }
    }

    @Test("a code works at 4:59 and is expired at exactly 5:00")
    func expiryBoundary() async throws {
        try await AuthorityFixture.with { f in
            let (challenge, code) = try await f.send()
            f.clock.advance(by: .seconds(299))
            _ = try await f.confirm(challenge, code: code)
        }
        try await AuthorityFixture.with { f in
            let (challenge, code) = try await f.send()
            f.clock.advance(by: .seconds(300))
            let error = try #require(await rainError { _ = try await f.confirm(challenge, code: code) })
            #expect(error.code == .invalidLoginCode)
            #expect(error.details.reason == "expired")
            #expect(error.details.attemptsRemaining == 0)
            // A wrong code on an expired challenge is reported as expired too, and not counted.
            let wrong = try #require(await rainError { _ = try await f.confirm(challenge, code: wrongCode(for: code)) })
            #expect(wrong.details.reason == "expired")
            #expect(try await f.store.challenge(id: challenge.challengeID)?.wrongAttempts == 0)
        }
    }

    @Test("the code lifetime comes from the settings")
    func shortenedLifetime() async throws {
        try await AuthorityFixture.with(settings: AuthoritySettings(codeLifetime: .seconds(10), sendLimits: .unlimited)) { f in
            let (challenge, code) = try await f.send()
            #expect(challenge.expiresAt == f.clock.now.adding(.seconds(10)))
            f.clock.advance(by: .seconds(10))
            let error = try #require(await rainError { _ = try await f.confirm(challenge, code: code) })
            #expect(error.details.reason == "expired")
        }
    }

    @Test("a resend replaces the pending code: the old one is retired, the new one works")
    func resendReplaces() async throws {
        try await AuthorityFixture.with { f in
            let (old, oldCode) = try await f.send()
            let (new, newCode) = try await f.send()
            #expect(old.challengeID != new.challengeID)
            let error = try #require(await rainError { _ = try await f.confirm(old, code: oldCode) })
            #expect(error.code == .invalidLoginCode)
            #expect(error.details.reason == "retired")
            _ = try await f.confirm(new, code: newCode)
        }
    }

    @Test(
        "the code of a message a resend replaced, typed for the new challenge, is RAIN_203 retired and costs the pending code no attempt"
    )
    func replacedCodeTypedForTheNewChallenge() async throws {
        try await AuthorityFixture.with { f in
            let (_, oldCode) = try await f.send()
            let (new, newCode) = try await f.send()
            try #require(oldCode != newCode, "two random codes were equal; run again")
            for _ in 0..<4 {
                let error = try #require(await rainError { _ = try await f.confirm(new, code: oldCode) })
                #expect(error.code == .invalidLoginCode)
                #expect(error.details.reason == "retired")
                #expect(error.details.attemptsRemaining == 3)
            }
            let record = try #require(try await f.store.challenge(id: new.challengeID))
            #expect(record.state == .pending && record.wrongAttempts == 0)
            // A code that was never sent is wrong, as before.
            let wrong = try #require(await rainError { _ = try await f.confirm(new, code: wrongCode(for: newCode)) })
            if wrongCode(for: newCode) != oldCode {
                #expect(wrong.details.reason == "wrong" && wrong.details.attemptsRemaining == 2)
            }
            _ = try await f.confirm(new, code: newCode)
        }
    }

    @Test("sending to another contact on the same device retires the first challenge")
    func switchingContactRetires() async throws {
        try await AuthorityFixture.with { f in
            let (emailChallenge, emailCode) = try await f.send(AuthorityFixture.email)
            let (phoneChallenge, phoneCode) = try await f.send(AuthorityFixture.phone)
            let error = try #require(await rainError { _ = try await f.confirm(emailChallenge, code: emailCode) })
            #expect(error.code == .invalidLoginCode)
            #expect(error.details.reason == "retired")
            _ = try await f.confirm(phoneChallenge, code: phoneCode)
        }
    }

    @Test("a 4th code for an account retires the oldest; the other three still work", arguments: [true, false])
    func fourthCodeRetiresOldest(accountExists: Bool) async throws {
        try await AuthorityFixture.with { f in
            if accountExists { _ = try await f.login(device: "device-0") }
            var sent: [(SendCodeResult, String, String)] = []
            for n in 1...4 {
                let device = "device-\(n)"
                let (challenge, code) = try await f.send(device: device)
                sent.append((challenge, code, device))
            }
            let (oldest, oldestCode, oldestDevice) = sent[0]
            let error = try #require(
                await rainError { _ = try await f.confirm(oldest, code: oldestCode, device: oldestDevice) })
            #expect(error.code == .invalidLoginCode)
            #expect(error.details.reason == "retired")
            for (challenge, code, device) in sent.dropFirst() {
                _ = try await f.confirm(challenge, code: code, device: device)
            }
        }
    }

    @Test("expired codes do not count against the account's three")
    func expiredCodesDoNotCount() async throws {
        try await AuthorityFixture.with { f in
            let (first, firstCode) = try await f.send(device: "device-1")
            f.clock.advance(by: .seconds(200))
            _ = try await f.send(device: "device-2")
            _ = try await f.send(device: "device-3")
            f.clock.advance(by: .seconds(100))  // the first code has expired now
            let (fourth, fourthCode) = try await f.send(device: "device-4")
            #expect(try await f.store.challenge(id: first.challengeID)?.state == .pending)
            let error = try #require(
                await rainError { _ = try await f.confirm(first, code: firstCode, device: "device-1") })
            #expect(error.details.reason == "expired")
            _ = try await f.confirm(fourth, code: fourthCode, device: "device-4")
        }
    }

    @Test("a used code is refused with reason used")
    func usedCode() async throws {
        try await AuthorityFixture.with { f in
            let (challenge, code) = try await f.send()
            _ = try await f.confirm(challenge, code: code)
            let error = try #require(await rainError { _ = try await f.confirm(challenge, code: code) })
            #expect(error.code == .invalidLoginCode)
            #expect(error.details.reason == "used")
        }
    }

    @Test("two confirms of one code at once: exactly one logs in")
    func concurrentConfirms() async throws {
        try await AuthorityFixture.with { f in
            let (challenge, code) = try await f.send()
            async let a = rainError { _ = try await f.confirm(challenge, code: code) }
            async let b = rainError { _ = try await f.confirm(challenge, code: code) }
            let errors = await [a, b].compactMap { $0 }
            #expect(errors.count == 1)
            #expect(errors.first?.code == .invalidLoginCode)
            #expect(errors.first?.details.reason == "used")
        }
    }

    @Test("an unknown challenge, or another device's, is RAIN_102 no_pending_code")
    func unknownChallenge() async throws {
        try await AuthorityFixture.with { f in
            let unknown = try #require(
                await rainError {
                    _ = try await f.authority.confirmLoginCode(
                        ConfirmCodeRequest(
                            appID: AuthorityFixture.app, deviceID: "device-a", challengeID: "chl_0", code: "123456"))
                })
            #expect(unknown.code == .invalidArgument)
            #expect(unknown.details.reason == "no_pending_code")

            let (challenge, code) = try await f.send(device: "device-a")
            let otherDevice = try #require(
                await rainError { _ = try await f.confirm(challenge, code: code, device: "device-b") })
            #expect(otherDevice.code == .invalidArgument)
            #expect(otherDevice.details.reason == "no_pending_code")
            let otherApp = try #require(
                await rainError { _ = try await f.confirm(challenge, code: code, app: "app-two") })
            #expect(otherApp.code == .invalidArgument)
            // Neither counted as a wrong attempt; the code still works.
            _ = try await f.confirm(challenge, code: code)
        }
    }

    @Test(
        "a contact that is not normalized, or invalid, is RAIN_102 before anything is sent",
        arguments: [
            RainWalletContact.email(" user@example.com"), .email("User@Example.com"), .email("no-at-sign"),
            .phone("+1 555 123 4567"), .phone("15551234567"), .phone("+44 (0)20 7946 0958"),
        ])
    func unnormalizedContact(_ contact: RainWalletContact) async throws {
        try await AuthorityFixture.with { f in
            let error = try #require(
                await rainError {
                    _ = try await f.authority.sendLoginCode(
                        SendCodeRequest(appID: AuthorityFixture.app, deviceID: "device-a", contact: contact))
                })
            #expect(error.code == .invalidArgument)
            #expect(f.sender.deliveries.isEmpty)
        }
    }

    @Test("a failed delivery is RAIN_501 and leaves no live challenge")
    func deliveryFailure() async throws {
        try await AuthorityFixture.with { f in
            let (earlier, earlierCode) = try await f.send(device: "device-b")
            f.sender.fail(with: RainError(.internalError, "disk full"))
            let error = try #require(await rainError { _ = try await f.send(device: "device-a") })
            #expect(error.code == .provider)
            let tables = try await f.store.dumpAllRows()
            let states = (tables["challenges"] ?? []).compactMap { try? $0.text(10, "state") }
            #expect(states.sorted() == ["pending", "retired"])
            f.sender.fail(with: nil)
            _ = try await f.confirm(earlier, code: earlierCode, device: "device-b")
        }
    }
}
