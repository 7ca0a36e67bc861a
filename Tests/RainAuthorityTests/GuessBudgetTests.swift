import Foundation
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainTestSupport
import RainWire
import Testing

@testable import RainStore

/// The wrong-guess budgets (docs/security.md "Login codes"): every code check, login or contact
/// verification, first takes a slot per device key (20 an hour) and per source (500 an hour, an
/// IPv6 address as its /64), across every account; once either is spent no code is compared at all
/// (RAIN_302 with a retry-after); a right code gives its slot back.
@Suite("Wrong-guess budgets")
struct GuessBudgetTests {
    static let office = SendSource.address("192.0.2.7")
    static let localSource = SendSource.uid(getuid())

    /// Send limits off (each test sends many codes back to back), the guess budgets on.
    static func budgets(deviceKey: Int = 20, source: Int = 500) -> AuthoritySettings {
        var limits = CodeSendLimits.unlimited
        limits.guessWindow = .seconds(3600)
        limits.deviceKeyMaxWrongGuesses = deviceKey
        limits.sourceMaxWrongGuesses = source
        return AuthoritySettings(sendLimits: limits)
    }

    /// A device key of its own for `n`.
    static func key(_ n: UInt8) throws -> Ed25519PrivateKey {
        try Ed25519PrivateKey(rawRepresentation: Array(repeating: n, count: 31) + [0x99])
    }

    /// Confirms `code` for `challenge` with `key`, as a caller from `source`.
    static func confirm(
        _ f: AuthorityFixture, _ challenge: SendCodeResult, code: String, key: Ed25519PrivateKey, source: SendSource,
        device: String = "device-a"
    ) async throws -> LoginResult {
        try await f.authority.confirmLoginCode(
            ConfirmCodeRequest(
                appID: AuthorityFixture.app, deviceID: device, challengeID: challenge.challengeID, code: code,
                devicePublicKey: key.publicKey.rawRepresentation),
            source: source)
    }

    /// Sends a login code to a contact of its own (a new account each time) and confirms a wrong
    /// code; returns the error.
    static func wrongGuess(
        _ f: AuthorityFixture, _ n: Int, key: Ed25519PrivateKey, source: SendSource, device: String = "device-a"
    ) async throws -> RainError? {
        let (challenge, code) = try await f.send(.email("guess\(n)@example.com"), device: device)
        return await rainError {
            _ = try await Self.confirm(f, challenge, code: wrongCode(for: code), key: key, source: source, device: device)
        }
    }

    /// Checks a budget's refusal: RAIN_302, the budget's name as reason and limit, the retry time.
    static func expectSpent(
        _ error: RainError?, _ limit: CodeGuessLimit, retryAfter: Date, now: Date,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(error?.code == .refused, "\(String(describing: error))", sourceLocation: sourceLocation)
        #expect(error?.details.reason == limit.rawValue, sourceLocation: sourceLocation)
        #expect(error?.details.limit == limit.rawValue, sourceLocation: sourceLocation)
        #expect(error?.details.retryAfter == retryAfter, sourceLocation: sourceLocation)
        #expect(
            error?.details.retryAfterMilliseconds == UInt64(retryAfter.unixMilliseconds - now.unixMilliseconds),
            sourceLocation: sourceLocation)
    }

    @Test("the defaults: 20 wrong codes per device key and 500 per source, per hour")
    func defaults() {
        let limits = CodeSendLimits()
        #expect(limits.guessWindow == .seconds(3600))
        #expect(limits.deviceKeyMaxWrongGuesses == 20)
        #expect(limits.sourceMaxWrongGuesses == 500)
        #expect(limits.hasGuessBudgets)
        #expect(!CodeSendLimits.unlimited.hasGuessBudgets)
        #expect(limits.longestWindow >= limits.guessWindow)
    }

    @Test(
        "20 wrong codes from one device key across 20 accounts spend its budget: the next code, even the right one, is not checked until an hour after the first"
    )
    func deviceKeyBudget() async throws {
        try await AuthorityFixture.with(settings: Self.budgets()) { f in
            let guesser = try Self.key(1)
            let start = f.clock.now
            for n in 0..<20 {
                let error = try await Self.wrongGuess(f, n, key: guesser, source: Self.office)
                #expect(error?.code == .invalidLoginCode)
                #expect(error?.details.reason == "wrong")
                f.clock.advance(by: .seconds(1))
            }
            let (challenge, code) = try await f.send(.email("victim@example.com"))
            let spent = await rainError {
                _ = try await Self.confirm(f, challenge, code: code, key: guesser, source: Self.office)
            }
            Self.expectSpent(spent, .deviceKeyGuessWindow, retryAfter: start.adding(.seconds(3600)), now: f.clock.now)
            // Not checked: the challenge neither counted a wrong attempt nor was used.
            let untouched = try #require(try await f.store.challenge(id: challenge.challengeID))
            #expect(untouched.state == .pending)
            #expect(untouched.wrongAttempts == 0)
            // A wrong code is refused the same way: the answer says nothing about the code.
            let wrong = await rainError {
                _ = try await Self.confirm(f, challenge, code: wrongCode(for: code), key: guesser, source: Self.office)
            }
            #expect(wrong?.code == .refused)
            #expect(try await f.store.challenge(id: challenge.challengeID)?.wrongAttempts == 0)
            // Another device key from the same address is not held back by this one.
            let login = try await Self.confirm(f, challenge, code: code, key: try Self.key(2), source: Self.office)
            #expect(login.accountCreated)

            // An hour after the first wrong code, one guess fits again.
            f.clock.advance(by: .seconds(3600 - 21))
            let early = try await f.send(.email("later@example.com"))
            let stillSpent = await rainError {
                _ = try await Self.confirm(f, early.challenge, code: early.code, key: guesser, source: Self.office)
            }
            Self.expectSpent(stillSpent, .deviceKeyGuessWindow, retryAfter: start.adding(.seconds(3600)), now: f.clock.now)
            f.clock.advance(by: .seconds(1))
            let again = try await Self.confirm(f, early.challenge, code: early.code, key: guesser, source: Self.office)
            #expect(again.accountCreated)
        }
    }

    @Test("the code of a message a resend replaced spends no guess: it is answered retired, never RAIN_302")
    func replacedCodeSpendsNothing() async throws {
        try await AuthorityFixture.with(settings: Self.budgets(deviceKey: 2)) { f in
            let key = try Self.key(7)
            let (_, oldCode) = try await f.send()
            let (new, newCode) = try await f.send()
            try #require(oldCode != newCode, "two random codes were equal; run again")
            for _ in 0..<4 {
                let error = await rainError {
                    _ = try await Self.confirm(f, new, code: oldCode, key: key, source: Self.localSource)
                }
                #expect(error?.code == .invalidLoginCode && error?.details.reason == "retired", "\(String(describing: error))")
            }
            _ = try await Self.confirm(f, new, code: newCode, key: key, source: Self.localSource)
        }
    }

    @Test("a right code spends nothing: only wrong codes count against the budgets")
    func rightCodesAreFree() async throws {
        try await AuthorityFixture.with(settings: Self.budgets(deviceKey: 2)) { f in
            let key = try Self.key(3)
            for n in 0..<5 {
                let (challenge, code) = try await f.send(.email("right\(n)@example.com"))
                _ = try await Self.confirm(f, challenge, code: code, key: key, source: Self.office)
            }
            #expect(try await Self.wrongGuess(f, 10, key: key, source: Self.office)?.code == .invalidLoginCode)
            #expect(try await Self.wrongGuess(f, 11, key: key, source: Self.office)?.code == .invalidLoginCode)
            let spent = try await Self.wrongGuess(f, 12, key: key, source: Self.office)
            #expect(spent?.code == .refused)
            #expect(spent?.details.reason == CodeGuessLimit.deviceKeyGuessWindow.rawValue)
        }
    }

    @Test("the source budget counts every device key from one address, across accounts; another address has its own")
    func sourceBudget() async throws {
        try await AuthorityFixture.with(settings: Self.budgets(source: 4)) { f in
            let start = f.clock.now
            for n in 0..<4 {
                let error = try await Self.wrongGuess(f, n, key: try Self.key(UInt8(10 + n)), source: Self.office)
                #expect(error?.code == .invalidLoginCode)
                f.clock.advance(by: .seconds(2))
            }
            let (challenge, code) = try await f.send(.email("victim@example.com"))
            let spent = await rainError {
                _ = try await Self.confirm(f, challenge, code: code, key: try Self.key(20), source: Self.office)
            }
            Self.expectSpent(spent, .sourceGuessWindow, retryAfter: start.adding(.seconds(3600)), now: f.clock.now)
            #expect(try await f.store.challenge(id: challenge.challengeID)?.wrongAttempts == 0)
            // Another address, and the daemon's own uid, are other sources.
            let elsewhere = try await Self.confirm(
                f, challenge, code: code, key: try Self.key(20), source: .address("198.51.100.1"))
            #expect(elsewhere.accountCreated)
        }
    }

    @Test("an IPv6 source is counted by its /64: two addresses in one /64 share a budget, another /64 does not")
    func ipv6Network() async throws {
        try await AuthorityFixture.with(settings: Self.budgets(source: 2)) { f in
            let first = SendSource.address("2001:db8:1:2::1")
            let second = SendSource.address("2001:db8:1:2:ffff:ffff:ffff:fffe")
            #expect(try await Self.wrongGuess(f, 0, key: try Self.key(30), source: first)?.code == .invalidLoginCode)
            #expect(try await Self.wrongGuess(f, 1, key: try Self.key(31), source: second)?.code == .invalidLoginCode)
            let third = try await Self.wrongGuess(f, 2, key: try Self.key(32), source: .address("2001:db8:1:2::abcd"))
            #expect(third?.code == .refused)
            #expect(third?.details.reason == CodeGuessLimit.sourceGuessWindow.rawValue)
            let otherNetwork = try await Self.wrongGuess(f, 3, key: try Self.key(33), source: .address("2001:db8:1:3::1"))
            #expect(otherNetwork?.code == .invalidLoginCode)
        }
    }

    @Test("contact verification codes spend the same budgets as login codes, under the session's device key")
    func contactVerificationShares() async throws {
        try await AuthorityFixture.with(settings: Self.budgets(deviceKey: 3)) { f in
            // The fixture's sessions are bound to `FixtureDevice.key`; the login's right code is free.
            let token = try await f.login().tokens.accessToken
            let key = FixtureDevice.key
            #expect(try await Self.wrongGuess(f, 0, key: key, source: Self.localSource)?.code == .invalidLoginCode)
            let backup = RainWalletContact.email("backup@example.com")
            let sent = try await f.authority.sendContactVerificationCode(
                appID: AuthorityFixture.app, deviceID: "device-a", accessToken: token, contact: backup)
            let code = try f.sender.lastCode(to: backup)
            let wrong = await rainError {
                _ = try await f.authority.confirmContactVerification(
                    appID: AuthorityFixture.app, deviceID: "device-a", accessToken: token,
                    challengeID: sent.challengeID, code: wrongCode(for: code))
            }
            #expect(wrong?.code == .invalidLoginCode)
            #expect(try await Self.wrongGuess(f, 1, key: key, source: Self.localSource)?.code == .invalidLoginCode)
            // Three wrong codes from the key: the right verification code is not checked.
            let spent = await rainError {
                _ = try await f.authority.confirmContactVerification(
                    appID: AuthorityFixture.app, deviceID: "device-a", accessToken: token,
                    challengeID: sent.challengeID, code: code)
            }
            #expect(spent?.code == .refused)
            #expect(spent?.details.reason == CodeGuessLimit.deviceKeyGuessWindow.rawValue)
            #expect(spent?.details.retryAfterMilliseconds ?? 0 > 0)
            let info = try await f.authority.accountInfo(appID: AuthorityFixture.app, accessToken: token)
            #expect(!info.contacts.contains(backup))
        }
    }

    @Test("no code reaches the log when a budget refuses a check")
    func refusalLogsNoCode() async throws {
        try await AuthorityFixture.with(settings: Self.budgets(deviceKey: 1)) { f in
            let key = try Self.key(40)
            _ = try await Self.wrongGuess(f, 0, key: key, source: Self.office)
            let (challenge, code) = try await f.send(.email("victim@example.com"))
            _ = await rainError { _ = try await Self.confirm(f, challenge, code: code, key: key, source: Self.office) }
            let lines = f.logSink.captured.joined(separator: "\n")
            #expect(lines.contains("code.guesses_limited"))
            #expect(!lines.contains(code))
        }
    }
}
