import Foundation
import RainAuthorityAPI
import RainAuthorityServer
import RainCore
import RainCrypto
import RainTestSupport
import RainTransport
import RainWire
import Synchronization
import Testing

@testable import RainAuthority
@testable import RainStore

/// A confirm repeated with its idempotency key gets its first outcome back (the same
/// tokens, one login, one session), on SQLite and PostgreSQL and across two PostgreSQL instances.
@Suite("Idempotent confirm")
struct IdempotentConfirmTests {
    static let app = StoreFixture.app
    static let email = StoreFixture.email

    /// Sends a code to `email` from `device` through `authority`; returns the request that confirms it.
    static func pendingConfirm(
        _ f: StoreFixture, authority: EmbeddedAuthority? = nil, device: String = "device-a", key: [UInt8]
    ) async throws -> ConfirmCodeRequest {
        let challenge = try await (authority ?? f.authority).sendLoginCode(
            SendCodeRequest(appID: app, deviceID: device, contact: email))
        let code = try f.sender.lastCode(to: email)
        return ConfirmCodeRequest(
            appID: app, deviceID: device, challengeID: challenge.challengeID, code: code,
            idempotencyKey: key)
    }

    @Test(
        "a repeat with the same key (on either instance) returns the same tokens: one account, one session",
        arguments: StoreKind.allCases)
    func repeatReturnsTheFirstOutcome(kind: StoreKind) async throws {
        try await StoreFixture.with(kind, instances: 2) { f in
            let key = try SecureRandom.bytes(count: 32)
            let request = try await Self.pendingConfirm(f, key: key)
            let first = try await f.authorities[0].confirmLoginCode(request)
            f.clock.advance(by: .seconds(10))
            let again = try await f.authorities[0].confirmLoginCode(request)
            let elsewhere = try await f.authorities[1].confirmLoginCode(request)
            for repeated in [again, elsewhere] {
                #expect(repeated.accountID == first.accountID)
                #expect(repeated.walletID == first.walletID)
                #expect(repeated.accountCreated == first.accountCreated)
                #expect(repeated.tokens.accessToken == first.tokens.accessToken)
                #expect(repeated.tokens.refreshToken == first.tokens.refreshToken)
                // The access token's remaining lifetime, not a fresh one.
                #expect(repeated.tokens.accessLifetime == first.tokens.accessLifetime - .seconds(10))
            }
            let sessions = try await f.store.sessions(appID: Self.app, accountID: first.accountID)
            #expect(sessions.count == 1)
            #expect(sessions.first?.accessHash == f.keys.tokenHash(first.tokens.accessToken))
            #expect(try await f.violations().isEmpty)

            // Another key is another confirm: the code is used.
            var other = request
            other.idempotencyKey = try SecureRandom.bytes(count: 32)
            let used = await rainError { _ = try await f.authority.confirmLoginCode(other) }
            #expect(used?.code == .invalidLoginCode)
            #expect(used?.details.reason == "used")

            // The key of this confirm names no other: a new challenge with it opens nothing.
            f.clock.advance(by: .seconds(60))  // past the contact's send cooldown
            let next = try await Self.pendingConfirm(f, key: key)
            let reused = await rainError { _ = try await f.authority.confirmLoginCode(next) }
            #expect(reused?.code == .invalidArgument)
            #expect(reused?.details.reason == "idempotency_key_reused")
        }
    }

    @Test(
        "a repeat racing its first confirm on another instance gets the first outcome, never a used code",
        arguments: StoreKind.allCases)
    func repeatRacingTheFirstConfirm(kind: StoreKind) async throws {
        try await StoreFixture.with(kind, instances: 2) { f in
            // The repeat may look its key up before the first confirm commits and read the
            // challenge after: it must then find the first outcome, not the used code.
            for round in 0..<20 {
                let contact = RainWalletContact.email("race-\(round)@example.com")
                let sent = try await f.authority.sendLoginCode(
                    SendCodeRequest(appID: Self.app, deviceID: "device-a", contact: contact))
                let request = ConfirmCodeRequest(
                    appID: Self.app, deviceID: "device-a", challengeID: sent.challengeID,
                    code: try f.sender.lastCode(to: contact),
                    idempotencyKey: try SecureRandom.bytes(count: 32))
                async let a = f.authorities[0].confirmLoginCode(request)
                async let b = f.authorities[1].confirmLoginCode(request)
                let (x, y) = try await (a, b)
                #expect(x.tokens.accessToken == y.tokens.accessToken, "round \(round)")
            }
            #expect(try await f.violations().isEmpty)
        }
    }

    @Test(
        "same key, wrong code: RAIN_102 idempotency_key_reused and no tokens, on either instance",
        arguments: StoreKind.allCases)
    func repeatWithAnotherCodeIsRefused(kind: StoreKind) async throws {
        try await StoreFixture.with(kind, instances: 2) { f in
            let request = try await Self.pendingConfirm(f, key: try SecureRandom.bytes(count: 32))
            let first = try await f.authorities[0].confirmLoginCode(request)
            var wrong = request
            wrong.code = request.code == "000000" ? "111111" : "000000"
            for authority in f.authorities {
                let refused = await rainError { _ = try await authority.confirmLoginCode(wrong) }
                #expect(refused?.code == .invalidArgument)
                #expect(refused?.details.reason == "idempotency_key_reused")
            }
            // Every other field is the request too: another device key with the same key and code.
            var rebound = request
            rebound.devicePublicKey = FixtureDevice.key.publicKey.rawRepresentation
            let other = await rainError { _ = try await f.authority.confirmLoginCode(rebound) }
            #expect(other?.details.reason == "idempotency_key_reused")
            // The request itself still gets its first outcome.
            #expect(try await f.authorities[1].confirmLoginCode(request).tokens == first.tokens)
            #expect(try await f.store.sessions(appID: Self.app, accountID: first.accountID).count == 1)
        }
    }

    @Test("a repeat with another code that races its first confirm is refused, never answered with its tokens")
    func racingRepeatWithAnotherCodeIsRefused() async throws {
        try await StoreFixture.with(.sqlite) { f in
            // The store's own repeat path: the first outcome committed between the lookup and the
            // completion (`.repeated` from completeLogin), checked against this request's hash.
            let request = try await Self.pendingConfirm(f, key: try SecureRandom.bytes(count: 32))
            let call = try #require(try IdempotentCall(request, keys: f.keys))
            var wrong = request
            wrong.code = request.code == "000000" ? "111111" : "000000"
            let wrongCall = try #require(try IdempotentCall(wrong, keys: f.keys))
            #expect(call.keyHash == wrongCall.keyHash)
            #expect(call.requestHash != wrongCall.requestHash)
            _ = try await f.authority.confirmLoginCode(request)
            let first = try #require(try await f.store.idempotentOutcome(keyHash: call.keyHash, now: f.clock.now))
            #expect(first.requestHash == call.requestHash)
            #expect(throws: RainError.self) { _ = try wrongCall.requiredLogin(of: first, now: f.clock.now) }
            #expect(try call.requiredLogin(of: first, now: f.clock.now).accountID == first.accountID)
        }
    }

    @Test("past the challenge's lifetime a repeat is not answered from the record")
    func repeatAfterTheChallengeExpired() async throws {
        try await StoreFixture.with(.sqlite) { f in
            let request = try await Self.pendingConfirm(f, key: try SecureRandom.bytes(count: 32))
            _ = try await f.authority.confirmLoginCode(request)
            f.clock.advance(by: .seconds(3600))
            let late = await rainError { _ = try await f.authority.confirmLoginCode(request) }
            #expect(late?.code == .invalidLoginCode)
        }
    }

    @Test("two instances confirming with one key at once: one login, both answered with it")
    func concurrentRepeatsOnTwoInstances() async throws {
        try await StoreFixture.with(.postgres, instances: 2) { f in
            let request = try await Self.pendingConfirm(f, key: try SecureRandom.bytes(count: 32))
            async let a = f.authorities[0].confirmLoginCode(request)
            async let b = f.authorities[1].confirmLoginCode(request)
            let (x, y) = try await (a, b)
            #expect(x.tokens.accessToken == y.tokens.accessToken)
            #expect(x.tokens.refreshToken == y.tokens.refreshToken)
            #expect(try await f.store.sessions(appID: Self.app, accountID: x.accountID).count == 1)
            #expect(try await f.violations().isEmpty)
        }
    }

    @Test("without a key, a repeat is refused as used (the old behaviour); a malformed key is RAIN_102")
    func withoutAKey() async throws {
        try await StoreFixture.with(.sqlite) { f in
            let request = try await Self.pendingConfirm(f, key: [])
            _ = try await f.authority.confirmLoginCode(request)
            let again = await rainError { _ = try await f.authority.confirmLoginCode(request) }
            #expect(again?.details.reason == "used")
            f.clock.advance(by: .seconds(60))  // past the contact's send cooldown
            let short = try await Self.pendingConfirm(f, key: [1, 2, 3])
            let malformed = await rainError { _ = try await f.authority.confirmLoginCode(short) }
            #expect(malformed?.code == .invalidArgument)
        }
    }

    /// The answer of the first confirm is dropped on the authority's side (its work is done and
    /// committed, then the answer never leaves): the device sees RAIN_501 outcome_unknown at its
    /// send deadline (moved by hand), repeats with the same key and gets the login that happened.
    @Test("a confirm whose answer is lost, repeated with its key, returns the same tokens and one login")
    func lostAnswerRepeated() async throws {
        try await StoreFixture.with(.sqlite) { f in
            let logger = Logger(label: "test", sink: CapturingLogSink())
            let dropping = AnswerDroppingAuthority(f.authority)
            let server = try RunningTCPServer(handler: AuthorityService(authority: dropping, logger: logger), logger: logger)
            let remoteClock = ManualClock()
            let remote = try RemoteAuthority(
                address: server.address,
                deadlines: AuthorityDeadlines(read: .seconds(5), send: .seconds(10), refresh: .seconds(5)),
                clock: remoteClock, logger: logger)
            let request = try await Self.pendingConfirm(f, key: try SecureRandom.bytes(count: 32))

            async let lost = rainError { _ = try await remote.confirmLoginCode(request) }
            let doneBy = ContinuousClock.now + .seconds(60)
            while dropping.dropped == 0 && ContinuousClock.now < doneBy { try await Task.sleep(for: .milliseconds(5)) }
            #expect(dropping.dropped == 1, "the first confirm never ran")
            remoteClock.advance(by: .seconds(10))
            let error = await lost
            #expect(error?.code == .provider)
            #expect(error?.details.reason == "outcome_unknown")

            let repeated = try await remote.confirmLoginCode(request)
            #expect(repeated.accountCreated)
            let sessions = try await f.store.sessions(appID: Self.app, accountID: repeated.accountID)
            #expect(sessions.count == 1)
            #expect(sessions.first?.accessHash == f.keys.tokenHash(repeated.tokens.accessToken))
            #expect(sessions.first?.refreshHash == f.keys.tokenHash(repeated.tokens.refreshToken))
            #expect(try await f.violations().isEmpty)
            remote.close()
            try await server.stop()
        }
    }
}

/// An authority whose first confirm runs to its end and whose answer is then never sent (it waits
/// until cancelled): the answer lost on the way back.
final class AnswerDroppingAuthority: ForwardingAuthority {
    private let inner: EmbeddedAuthority
    private let count = Mutex(0)

    init(_ inner: EmbeddedAuthority) { self.inner = inner }

    var forwarded: any Authority { inner }

    /// How many answers were dropped.
    var dropped: Int { count.withLock { $0 } }

    func confirmLoginCode(_ request: ConfirmCodeRequest, caller: AuthorityCaller) async throws(RainError) -> LoginResult {
        let result = try await inner.confirmLoginCode(request, caller: caller)
        let isFirst = count.withLock { n in
            defer { n += 1 }
            return n == 0
        }
        guard isFirst else {
            count.withLock { $0 -= 1 }
            return result
        }
        try? await Task.sleep(for: .seconds(3600))
        throw RainError(.internalError, "dropped")
    }
}
