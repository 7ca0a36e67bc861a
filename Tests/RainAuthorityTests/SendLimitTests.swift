import Foundation
import RainAuthorityAPI
import RainCore
import RainTestSupport
import RainWire
import Synchronization
import Testing

@testable import RainStore

/// The code send limits (docs/operations.md "Send limits"): 30 s cooldown and 5 per 15 minutes per contact, 10
/// per hour per account; every refusal is RAIN_302 with the limit and when to retry.
@Suite("Code send limits")
struct SendLimitTests {
    /// The documented default send limits, explicitly (the fixture turns limits off unless told).
    static let limited = AuthoritySettings(sendLimits: CodeSendLimits())
    static let phone = RainWalletContact.phone("+15557654321")

    /// The RAIN_302 a send throws; records an issue when it succeeds or throws another code.
    static func refusal(
        sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> Void
    ) async -> RainError? {
        guard let error = await rainError(body) else {
            Issue.record("expected RAIN_302, but the send went through", sourceLocation: sourceLocation)
            return nil
        }
        #expect(error.code == .refused, "expected RAIN_302, got \(error)", sourceLocation: sourceLocation)
        return error
    }

    /// Checks a refusal's details: the limit, the exact retry time and the wait from `now`.
    static func expect(
        _ error: RainError?, limit: CodeSendLimit, retryAfter: Date, now: Date,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(error?.details.limit == limit.rawValue, sourceLocation: sourceLocation)
        #expect(error?.details.reason == limit.rawValue, sourceLocation: sourceLocation)
        #expect(error?.details.retryAfter == retryAfter, sourceLocation: sourceLocation)
        #expect(
            error?.details.retryAfterMilliseconds == UInt64(retryAfter.unixMilliseconds - now.unixMilliseconds),
            sourceLocation: sourceLocation)
    }

    @Test(
        "a send says when a resend will be accepted; a second send within 30 s is refused with the time the cooldown ends; at 30 s it goes"
    )
    func cooldown() async throws {
        try await AuthorityFixture.with(settings: Self.limited) { f in
            let start = f.clock.now
            let (sent, _) = try await f.send()
            #expect(sent.resendAfter == Date(unixMilliseconds: start.adding(.seconds(30)).unixMilliseconds))
            f.clock.advance(by: .milliseconds(29_999))
            let error = await Self.refusal { _ = try await f.send() }
            Self.expect(error, limit: .contactCooldown, retryAfter: start.adding(.seconds(30)), now: f.clock.now)
            #expect(error?.details.retryAfterMilliseconds == 1)
            #expect(error?.message.contains(RFC3339.string(from: start.adding(.seconds(30)))) == true)
            // Another device asking for the same contact is the same contact.
            #expect(await Self.refusal { _ = try await f.send(device: "device-b") } != nil)
            f.clock.advance(by: .milliseconds(1))
            _ = try await f.send()
            #expect(f.sender.deliveries.count == 2)
        }
    }

    @Test("the 6th send to a contact within 15 minutes is refused until the oldest leaves the window")
    func contactWindow() async throws {
        try await AuthorityFixture.with(settings: Self.limited) { f in
            let start = f.clock.now
            for i in 0..<5 {
                if i > 0 { f.clock.advance(by: .seconds(30)) }
                _ = try await f.send()
            }
            f.clock.advance(by: .seconds(30))
            let error = await Self.refusal { _ = try await f.send() }
            Self.expect(error, limit: .contactWindow, retryAfter: start.adding(.seconds(900)), now: f.clock.now)
            f.clock.advance(to: start.adding(.milliseconds(899_999)))
            let stillRefused = await Self.refusal { _ = try await f.send() }
            Self.expect(stillRefused, limit: .contactWindow, retryAfter: start.adding(.seconds(900)), now: f.clock.now)
            #expect(f.sender.deliveries.count == 5)
            f.clock.advance(by: .milliseconds(1))
            _ = try await f.send()
            #expect(f.sender.deliveries.count == 6)
        }
    }

    @Test("the 11th send for an account within an hour, across two contacts, is refused")
    func accountWindow() async throws {
        // A long access token: the verification at the end still has a live session.
        let settings = AuthoritySettings(accessTokenLifetime: .seconds(7200), sendLimits: CodeSendLimits())
        try await AuthorityFixture.with(settings: settings) { f in
            let start = f.clock.now
            // The account, with a verified phone beside its email. Before the account exists the
            // first code counts for the contact key; the phone's verification counts for the account.
            let login = try await f.login()
            let verification = try await f.authority.sendContactVerificationCode(
                appID: AuthorityFixture.app, deviceID: "device-a", accessToken: login.tokens.accessToken,
                contact: Self.phone)
            _ = try await f.authority.confirmContactVerification(
                appID: AuthorityFixture.app, deviceID: "device-a", accessToken: login.tokens.accessToken,
                challengeID: verification.challengeID, code: try f.sender.lastCode(to: Self.phone))
            // Past both contact windows, inside the account window: 9 more sends make 10.
            f.clock.advance(by: .seconds(960))
            for i in 0..<5 {
                if i > 0 { f.clock.advance(by: .seconds(30)) }
                _ = try await f.send()
                if i < 4 { _ = try await f.send(Self.phone, device: "device-b") }
            }
            let sent = f.sender.deliveries.count
            #expect(sent == 11)  // the first login code, the verification, 9 more
            // The phone is under its own limits (4 sends, last 30 s ago), but the account is full.
            let error = await Self.refusal { _ = try await f.send(Self.phone, device: "device-b") }
            Self.expect(error, limit: .accountWindow, retryAfter: start.adding(.seconds(3600)), now: f.clock.now)
            #expect(error?.message.contains("account") == true)
            // A verification code for the same account counts against the same limit.
            let newContact = RainWalletContact.email("third@example.com")
            let verify = await Self.refusal {
                _ = try await f.authority.sendContactVerificationCode(
                    appID: AuthorityFixture.app, deviceID: "device-a", accessToken: login.tokens.accessToken,
                    contact: newContact)
            }
            #expect(verify?.details.limit == CodeSendLimit.accountWindow.rawValue)
            #expect(f.sender.deliveries.count == sent)
            f.clock.advance(to: start.adding(.seconds(3600)))
            _ = try await f.send(Self.phone, device: "device-b")
        }
    }

    @Test("a refused send stores nothing, sends nothing, does not count and keeps the pending code valid")
    func refusalsDoNotCount() async throws {
        try await AuthorityFixture.with(settings: Self.limited) { f in
            let (pending, _) = try await f.send()
            let rows = try await f.store.dumpAllRows()["challenges"]?.count
            for _ in 0..<20 {
                f.clock.advance(by: .seconds(1))
                _ = await Self.refusal { _ = try await f.send() }
            }
            #expect(f.sender.deliveries.count == 1)
            #expect(try await f.store.dumpAllRows()["challenges"]?.count == rows)
            #expect(try await f.store.challenge(id: pending.challengeID)?.state == .pending)
            // 20 refusals did not fill the 5-per-15-minutes window: the next send after the
            // cooldown goes (and replaces the pending code, as a resend does).
            f.clock.advance(by: .seconds(10))
            let (fresh, freshCode) = try await f.send()
            #expect(try await f.store.challenge(id: pending.challengeID)?.state == .retired)
            _ = try await f.confirm(fresh, code: freshCode)
        }
    }

    @Test("the code that was pending when a send was refused still logs in")
    func pendingCodeSurvivesARefusal() async throws {
        try await AuthorityFixture.with(settings: Self.limited) { f in
            let (pending, code) = try await f.send()
            f.clock.advance(by: .seconds(5))
            _ = await Self.refusal { _ = try await f.send() }
            let login = try await f.confirm(pending, code: code)
            #expect(login.accountCreated)
        }
    }

    @Test(
        "parallel sends on two connections to one SQLite file let exactly the allowed number through",
        arguments: [
            (CodeSendLimits(), 1),
            (CodeSendLimits(contactCooldown: .zero), 5),
            (CodeSendLimits(contactCooldown: .zero, contactMaxSends: 100, accountMaxSends: 7), 7),
        ])
    func concurrentSends(limits: CodeSendLimits, allowed: Int) async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/" + SQLiteAuthorityStore.fileName
        let first = try await SQLiteAuthorityStore.open(path: path)
        let second = try await SQLiteAuthorityStore.open(path: path)
        let now = Date(unixMilliseconds: 1_800_000_000_000)
        let outcomes = try await withThrowingTaskGroup(of: ChallengeInsertionOutcome.self) { group in
            for i in 0..<24 {
                let store = i % 2 == 0 ? first : second
                group.addTask {
                    try await store.insertChallenge(
                        NewChallenge(
                            id: "chl_\(i)", appID: "app", deviceID: "device-\(i)", contact: AuthorityFixture.email,
                            codeHash: Array(repeating: UInt8(i), count: 32), createdAt: now,
                            expiresAt: now.adding(.seconds(300))),
                        maxActivePerAccount: 3, limits: limits)
                }
            }
            var all: [ChallengeInsertionOutcome] = []
            for try await outcome in group { all.append(outcome) }
            return all
        }
        let inserted = outcomes.filter { if case .inserted = $0 { true } else { false } }
        #expect(inserted.count == allowed)
        #expect(try await first.dumpAllRows()["challenges"]?.count == allowed)
        await first.close()
        await second.close()
    }

    @Test("guessing is bounded: 3 active codes take 9 guesses in all; more codes hit the send limits")
    func guessingIsBounded() async throws {
        try await AuthorityFixture.with(settings: Self.limited) { f in
            // Three devices each hold a live code for the same contact (the most an account key has).
            var challenges: [(SendCodeResult, String, String)] = []
            for device in ["device-a", "device-b", "device-c"] {
                if !challenges.isEmpty { f.clock.advance(by: .seconds(30)) }
                let (challenge, code) = try await f.send(device: device)
                challenges.append((challenge, code, device))
            }
            var evaluated = 0
            for round in 0..<5 {
                for (challenge, code, device) in challenges {
                    let error = await rainError {
                        _ = try await f.confirm(challenge, code: wrongCode(for: code), device: device)
                    }
                    #expect(error?.code == .invalidLoginCode)
                    if error?.details.reason == "wrong" || (round == 2 && error?.details.reason == "locked") {
                        evaluated += 1
                    } else {
                        #expect(error?.details.reason == "locked")
                    }
                }
            }
            #expect(evaluated == 9)
            for (challenge, code, device) in challenges {
                let error = await rainError { _ = try await f.confirm(challenge, code: code, device: device) }
                #expect(error?.details.reason == "locked")
            }
            // More guesses need more codes, and the contact's window allows 5 per 15 minutes in
            // all: 15 guesses per 15 minutes per contact, 30 per hour per account (10 codes).
            f.clock.advance(by: .seconds(30))
            _ = try await f.send(device: "device-a")
            f.clock.advance(by: .seconds(30))
            _ = try await f.send(device: "device-d")
            f.clock.advance(by: .seconds(30))
            let error = await Self.refusal { _ = try await f.send(device: "device-e") }
            #expect(error?.details.limit == CodeSendLimit.contactWindow.rawValue)
        }
    }

    @Test("pruning keeps every challenge the limits still count, whatever the retention")
    func pruningKeepsCountedChallenges() async throws {
        let settings = AuthoritySettings(
            sendLimits: CodeSendLimits(accountWindow: .seconds(7200)), pruneRetention: .seconds(60))
        #expect(settings.challengeRetention == .seconds(7200))
        try await AuthorityFixture.with(settings: settings) { f in
            let (first, _) = try await f.send()
            f.clock.advance(by: .seconds(3600))
            try await f.authority.pruneExpired()
            #expect(try await f.store.challenge(id: first.challengeID) != nil)
            f.clock.advance(by: .seconds(3600 + 301))
            try await f.authority.pruneExpired()
            #expect(try await f.store.challenge(id: first.challengeID) == nil)
        }
    }

    @Test("the defaults are the documented send limits; unlimited never refuses")
    func defaults() {
        let limits = AuthoritySettings().sendLimits
        #expect(limits.contactCooldown == .seconds(30))
        #expect(limits.contactWindow == .seconds(900))
        #expect(limits.contactMaxSends == 5)
        #expect(limits.accountWindow == .seconds(3600))
        #expect(limits.accountMaxSends == 10)
        #expect(limits.longestWindow == .seconds(3600))
        #expect(AuthoritySettings().challengeRetention == .seconds(86_400))
        #expect(CodeSendLimits.unlimited.longestWindow == .zero)
    }
}

extension ManualClock {
    /// Advances to `date` (which must not be in the past).
    func advance(to date: Date) {
        let delta = date.unixMilliseconds - now.unixMilliseconds
        precondition(delta >= 0, "advance(to:) into the past")
        advance(by: .milliseconds(delta))
    }
}
