import Foundation
import RainAuthorityAPI
import RainAuthorityServer
import RainCore
import RainCrypto
import RainSystem
import RainTestSupport
import RainTransport
import RainWire
import Synchronization
import Testing

@testable import RainAuthority
@testable import RainStore

/// An authority whose every call waits `delay` and then fails (for deadlines).
/// A count shared between a test and its fake.
final class Counter: Sendable {
    private let count = Mutex(0)
    var value: Int { count.withLock { $0 } }
    func increment() { count.withLock { $0 += 1 } }
}

struct SlowAuthority: ForwardingAuthority {
    var delay: Duration
    /// Counts the calls that reached it (a test moves its clock once the request arrived).
    var arrivals: Counter?

    init(delay: Duration, arrivals: Counter? = nil) {
        self.delay = delay
        self.arrivals = arrivals
    }

    /// Never reached: every call waits and fails in `intercept`.
    var forwarded: any Authority { self }

    func intercept<Response>(_ method: String, _ call: () async throws(RainError) -> Response) async throws(RainError)
        -> Response
    {
        arrivals?.increment()
        try? await Task.sleep(for: delay)
        throw RainError(.internalError, "too late")
    }
}

@Suite("Remote authority over TCP")
struct RemoteAuthorityTests {
    // MARK: - Login

    @Test("send and confirm across the wire: account created, session bound to the device key, tokens")
    func sendAndConfirm() async throws {
        try await RemoteFixture.with { f in
            let key = FixtureDevice.key
            let (challenge, code) = try await f.send(.email("user@example.com"))
            #expect(challenge.challengeID.hasPrefix("chl_"))
            #expect(challenge.contact == RemoteFixture.email)
            #expect(challenge.expiresAt == f.clock.now.adding(.seconds(300)))

            let login = try await f.remote.confirmLoginCode(
                ConfirmCodeRequest(
                    appID: RemoteFixture.app, deviceID: RemoteFixture.device, challengeID: challenge.challengeID,
                    code: code, devicePublicKey: key.publicKey.rawRepresentation))
            #expect(login.accountCreated)
            #expect(login.accountID.hasPrefix("acct_"))
            #expect(login.walletID.hasPrefix("wal_"))
            #expect(login.tokens.accessToken.hasPrefix("rwa_"))
            #expect(login.tokens.refreshToken.hasPrefix("rwr_"))
            #expect(login.tokens.accessLifetime == .seconds(900))

            // The device key crossed the wire: the stored session is bound to it.
            let sessions = try await f.store.sessions(appID: RemoteFixture.app, accountID: login.accountID)
            #expect(sessions.last?.devicePublicKey == key.publicKey.rawRepresentation)
            #expect(sessions.last?.deviceID == RemoteFixture.device)

            // A second login finds the same account and wallet.
            let again = try await f.login(key: key)
            #expect(!again.accountCreated)
            #expect(again.accountID == login.accountID)
            #expect(again.walletID == login.walletID)
        }
    }

    @Test("a wrong code is RAIN_203 with attemptsRemaining 2 across the wire; the third locks it")
    func wrongCode() async throws {
        try await RemoteFixture.with { f in
            let (challenge, code) = try await f.send()
            func confirm(_ typed: String) async -> RainError? {
                await rainError {
                    _ = try await f.remote.confirmLoginCode(
                        ConfirmCodeRequest(
                            appID: RemoteFixture.app, deviceID: RemoteFixture.device,
                            challengeID: challenge.challengeID, code: typed))
                }
            }
            let first = try #require(await confirm(RainTestSupport.wrongCode(for: code)))
            #expect(first.code == .invalidLoginCode)
            #expect(first.details.attemptsRemaining == 2)
            #expect(first.details.reason == "wrong")
            #expect(!first.message.contains(code))

            let second = try #require(await confirm(RainTestSupport.wrongCode(for: code)))
            #expect(second.details.attemptsRemaining == 1)
            let third = try #require(await confirm(RainTestSupport.wrongCode(for: code)))
            #expect(third.code == .invalidLoginCode)
            #expect(third.details.attemptsRemaining == 0)
            #expect(third.details.reason == "locked")
            let afterLock = try #require(await confirm(code))
            #expect(afterLock.details.reason == "locked")
        }
    }

    @Test("the authority's other errors pass through with their code and details")
    func errorsPassThrough() async throws {
        try await RemoteFixture.with { f in
            let unnormalized = await rainError {
                _ = try await f.remote.sendLoginCode(
                    SendCodeRequest(appID: RemoteFixture.app, deviceID: RemoteFixture.device, contact: .email(" A@B.com")))
            }
            #expect(unnormalized?.code == .invalidArgument)
            #expect(unnormalized?.details.reason == "not_normalized")
            #expect(unnormalized?.details.field == "email")

            let unknownChallenge = await rainError {
                _ = try await f.remote.confirmLoginCode(
                    ConfirmCodeRequest(
                        appID: RemoteFixture.app, deviceID: RemoteFixture.device, challengeID: "chl_nope", code: "123456"))
            }
            #expect(unknownChallenge?.code == .invalidArgument)
            #expect(unknownChallenge?.details.reason == "no_pending_code")
            #expect(unknownChallenge?.details.field == "challengeId")

            let badKey = await rainError {
                let (challenge, code) = try await f.send()
                _ = try await f.remote.confirmLoginCode(
                    ConfirmCodeRequest(
                        appID: RemoteFixture.app, deviceID: RemoteFixture.device, challengeID: challenge.challengeID,
                        code: code, devicePublicKey: [1, 2, 3]))
            }
            #expect(badKey?.code == .invalidArgument)
            #expect(badKey?.details.field == "devicePublicKey")

            f.sender.fail(with: RainError(.provider, "smtp is down"))
            let delivery = await rainError { _ = try await f.send() }
            #expect(delivery?.code == .provider)
        }
    }

    // MARK: - Sessions

    @Test("revokeSession over the wire ends the session: its access token and refresh are refused")
    func revoke() async throws {
        try await RemoteFixture.with { f in
            let key = FixtureDevice.key
            let login = try await f.login(key: key)
            try await f.remote.revokeSession(appID: RemoteFixture.app, refreshToken: login.tokens.refreshToken)
            // Unknown or already revoked tokens succeed silently.
            try await f.remote.revokeSession(appID: RemoteFixture.app, refreshToken: login.tokens.refreshToken)
            try await f.remote.revokeSession(appID: RemoteFixture.app, refreshToken: "rwr_unknown")

            let info = await rainError {
                _ = try await f.remote.accountInfo(appID: RemoteFixture.app, accessToken: login.tokens.accessToken)
            }
            #expect(info?.code == .sessionExpired)
            #expect(info?.details.reason == "revoked")
            let refresh = await rainError {
                _ = try await f.remote.refreshSession(
                    RefreshRequest(
                        appID: RemoteFixture.app, deviceID: RemoteFixture.device, refreshToken: login.tokens.refreshToken))
            }
            #expect(refresh?.code == .sessionExpired)
            #expect(refresh?.details.reason == "revoked")
        }
    }

    @Test("refreshSession and accountInfo over the wire: signed refresh rotates, the new access token reads the account")
    func refreshAndAccountInfo() async throws {
        try await RemoteFixture.with { f in
            let key = FixtureDevice.key
            let login = try await f.login(key: key)

            let info = try await f.remote.accountInfo(appID: RemoteFixture.app, accessToken: login.tokens.accessToken)
            #expect(info.accountID == login.accountID)
            #expect(info.walletID == login.walletID)
            #expect(info.contacts == [RemoteFixture.email])
            #expect(info.createdAt == f.clock.now)

            f.clock.advance(by: .seconds(600))
            let request = RefreshRequest(
                appID: RemoteFixture.app, deviceID: RemoteFixture.device, refreshToken: login.tokens.refreshToken)
            let next = try await f.remote.refreshSession(request)
            #expect(next.accessToken != login.tokens.accessToken)
            #expect(next.refreshToken != login.tokens.refreshToken)
            #expect(next.accessLifetime == .seconds(900))

            // The same request again, within the grace window, gets the same pair.
            let repeated = try await f.remote.refreshSession(request)
            #expect(repeated.accessToken == next.accessToken)
            #expect(repeated.refreshToken == next.refreshToken)

            let after = try await f.remote.accountInfo(appID: RemoteFixture.app, accessToken: next.accessToken)
            #expect(after.accountID == login.accountID)
            let old = await rainError {
                _ = try await f.remote.accountInfo(appID: RemoteFixture.app, accessToken: login.tokens.accessToken)
            }
            #expect(old?.code == .sessionExpired)
            #expect(old?.details.reason == "invalid_token")
        }
    }

    @Test("a refresh on a connection proven by another key is refused with its reason, and burns the session")
    func refreshWrongKey() async throws {
        try await RemoteFixture.with { f in
            let key = FixtureDevice.key
            let login = try await f.login(key: key)
            let other = try RemoteAuthority(
                address: f.server.address,
                device: TestDeviceKeys(deviceID: RemoteFixture.device, keys: [try Ed25519PrivateKey()]),
                deadlines: .forTests, logger: f.logger.child("thief"))
            defer { other.close() }
            let thief = await rainError {
                _ = try await other.refreshSession(
                    RefreshRequest(
                        appID: RemoteFixture.app, deviceID: RemoteFixture.device, refreshToken: login.tokens.refreshToken),
                    proof: .none())
            }
            #expect(thief?.code == .sessionExpired)
            #expect(thief?.details.reason == "refresh_rejected")
            let owner = await rainError {
                _ = try await f.remote.refreshSession(
                    RefreshRequest(
                        appID: RemoteFixture.app, deviceID: RemoteFixture.device, refreshToken: login.tokens.refreshToken))
            }
            #expect(owner?.code == .sessionExpired)
        }
    }

    // MARK: - Outbox and info

    @Test("listOutbox is RAIN_202 unless the service runs with the development outbox")
    func outboxDisabled() async throws {
        try await RemoteFixture.with(isDevOutboxEnabled: false, withOutbox: true) { f in
            let error = await rainError { _ = try await f.remote.listOutbox() }
            #expect(error?.code == .unauthorized)
            let info = try await f.remote.getInfo()
            #expect(!info.capabilities.contains("dev-outbox"))
        }
    }

    @Test("with the development outbox, listOutbox returns the deliveries across the wire")
    func outboxEnabled() async throws {
        try await RemoteFixture.with(isDevOutboxEnabled: true, withOutbox: true) { f in
            _ = try await f.remote.sendLoginCode(
                SendCodeRequest(appID: RemoteFixture.app, deviceID: RemoteFixture.device, contact: .phone("+15551234567")))
            _ = try await f.remote.sendLoginCode(
                SendCodeRequest(appID: "app-two", deviceID: RemoteFixture.device, contact: RemoteFixture.email))
            let local = try await f.embedded.listOutbox()
            let remote = try await f.remote.listOutbox()
            #expect(remote.count == 2)
            #expect(remote == local)
            #expect(remote.first?.kind == "phone")
            #expect(remote.first?.contact == "+15551234567")
            #expect(remote.last?.appID == "app-two")
            #expect(remote.allSatisfy { $0.code.utf8.count == 6 })
            let info = try await f.remote.getInfo()
            #expect(info.capabilities.contains("dev-outbox"))
        }
    }

    @Test("GetInfo reports the version, protocol version, capabilities and frame limit")
    func getInfo() async throws {
        try await RemoteFixture.with { f in
            let info = try await f.remote.getInfo()
            #expect(info.daemonVersion == "test")
            #expect(info.protocolVersion == protocolVersion)
            #expect(info.maxFrameBytes == UInt32(Frame.defaultMaximumLength))
            #expect(
                info.capabilities == [
                    "login-code", "refresh", "account-info", "revoke", "wallet", "export", "passkeys", "contacts", "device-proof",
                    AuthorityCapability.revocationHeartbeat, AuthorityCapability.readLease,
                ])
        }
    }

    // MARK: - Service admission

    @Test("the service answers an unknown method and an undecodable payload with RAIN_102 and stays up")
    func serviceAdmission() async throws {
        try await RemoteFixture.with { f in
            let address = try TCPAddress(parsing: f.server.address)
            let connection = try ClientConnection(tcp: address)
            defer { connection.close() }
            let unknown = await rainError {
                _ = try await connection.call(method: "/rain.wallet.v1.Authority/Nope", payload: [])
            }
            #expect(unknown?.code == .invalidArgument)
            #expect(unknown?.details.reason == "unknown_method")
            // A device-protocol method is not an authority method.
            let deviceMethod = await rainError { _ = try await connection.call(method: Method.daemonGetInfo, payload: []) }
            #expect(deviceMethod?.details.reason == "unknown_method")

            let garbage = await rainError {
                _ = try await connection.call(method: AuthorityMethod.sendLoginCode, payload: [0xff, 0xff, 0xff])
            }
            #expect(garbage?.code == .invalidArgument)
            #expect(garbage?.details.reason == "undecodable_payload")

            let noContact = await rainError {
                _ = try await connection.call(
                    method: AuthorityMethod.sendLoginCode,
                    // app_id "a" (field 1) and device_id "d" (field 2), no contact (field 3): a
                    // `SendCodeRequest` cannot be built without one.
                    payload: [0x0A, 0x01, 0x61, 0x12, 0x01, 0x64])
            }
            #expect(noContact?.code == .invalidArgument)
            #expect(noContact?.details.field == "contact")

            // The connection and the service still work.
            let info = try GetInfoResponse.decode(try await connection.call(method: AuthorityMethod.getInfo, payload: []))
            #expect(info.protocolVersion == protocolVersion)
            _ = try await f.send()
        }
    }

    @Test("many concurrent calls share the one connection and each gets its own answer")
    func concurrentCalls() async throws {
        try await RemoteFixture.with { f in
            let results = try await withThrowingTaskGroup(of: (Int, SendCodeResult).self) { group in
                for i in 0..<24 {
                    group.addTask {
                        let r = try await f.remote.sendLoginCode(
                            SendCodeRequest(
                                appID: RemoteFixture.app, deviceID: "device-\(i)", contact: .email("user\(i)@example.com")))
                        return (i, r)
                    }
                }
                var all: [Int: SendCodeResult] = [:]
                for try await (i, r) in group { all[i] = r }
                return all
            }
            #expect(results.count == 24)
            for (i, r) in results { #expect(r.contact == .email("user\(i)@example.com")) }
            #expect(Set(results.values.map(\.challengeID)).count == 24)
            #expect(f.server.server.counts.connections == 1)
        }
    }

    @Test("codes and tokens never appear in either side's logs")
    func secretsStayOutOfLogs() async throws {
        try await RemoteFixture.with { f in
            let key = FixtureDevice.key
            let (challenge, code) = try await f.send()
            _ = await rainError {
                _ = try await f.remote.confirmLoginCode(
                    ConfirmCodeRequest(
                        appID: RemoteFixture.app, deviceID: RemoteFixture.device, challengeID: challenge.challengeID,
                        code: RainTestSupport.wrongCode(for: code)))
            }
            let login = try await f.remote.confirmLoginCode(
                ConfirmCodeRequest(
                    appID: RemoteFixture.app, deviceID: RemoteFixture.device, challengeID: challenge.challengeID,
                    code: code, devicePublicKey: key.publicKey.rawRepresentation))
            let next = try await f.remote.refreshSession(
                RefreshRequest(appID: RemoteFixture.app, deviceID: RemoteFixture.device, refreshToken: login.tokens.refreshToken))
            _ = await rainError { _ = try await f.remote.accountInfo(appID: RemoteFixture.app, accessToken: "rwa_bad") }
            try await f.remote.revokeSession(appID: RemoteFixture.app, refreshToken: next.refreshToken)

            let secrets = [
                code, login.tokens.accessToken, login.tokens.refreshToken, next.accessToken, next.refreshToken,
            ]
            let lines = f.logSink.captured
            #expect(lines.contains { $0.contains("call.failed") })
            for line in lines {
                for secret in secrets { #expect(!line.contains(secret), "a log line holds a secret: \(line)") }
            }
            // The wire models print redacted too.
            let wire = ConfirmCodeRequest(appID: "a", deviceID: "d", challengeID: "c", code: code)
            #expect(!String(describing: wire).contains(code))
            let tokens = SessionTokens(
                accessToken: next.accessToken, refreshToken: next.refreshToken, accessLifetime: .seconds(1))
            #expect(!String(describing: tokens).contains(next.refreshToken))
        }
    }

    // MARK: - Reachability

    @Test("authority stopped: calls give RAIN_301; restarted on the same port: calls work again")
    func stopAndRestart() async throws {
        try await RemoteFixture.with { f in
            let login = try await f.login()
            let port = f.server.port
            try await f.server.stop()

            for _ in 0..<3 {
                let error = await rainError {
                    _ = try await f.remote.accountInfo(appID: RemoteFixture.app, accessToken: login.tokens.accessToken)
                }
                #expect(error?.code == .network)
                #expect(error?.details.reason == "authority_unreachable")
                #expect(error?.message.contains("127.0.0.1:\(port)") == true)
                #expect(error?.message.contains(login.tokens.accessToken) == false)
            }
            let send = await rainError { _ = try await f.send() }
            #expect(send?.code == .network)

            let restarted = try RunningTCPServer(handler: f.service, port: port, logger: f.logger.child("loop2"))
            do {
                let info = try await f.remote.accountInfo(appID: RemoteFixture.app, accessToken: login.tokens.accessToken)
                #expect(info.accountID == login.accountID)
                let again = try await f.login()
                #expect(again.accountID == login.accountID)
            } catch {
                try await restarted.stop()
                throw error
            }
            try await restarted.stop()
        }
    }

    @Test("a connection dropped while calls are idle is replaced by the next call")
    func reconnectAfterIdleDrop() async throws {
        try await RemoteFixture.with { f in
            _ = try await f.remote.getInfo()
            let port = f.server.port
            try await f.server.stop()
            let restarted = try RunningTCPServer(handler: f.service, port: port, logger: f.logger.child("loop2"))
            // The old connection's end may not have been seen yet: poll with a deadline.
            var info: GetInfoResponse?
            let deadline = ContinuousClock.now + .seconds(10)
            while info == nil && ContinuousClock.now < deadline {
                do {
                    info = try await f.remote.getInfo()
                } catch let error as RainError {
                    #expect(error.code == .network)
                    try await Task.sleep(for: .milliseconds(20))
                }
            }
            #expect(info?.daemonVersion == "test")
            try await restarted.stop()
        }
    }

    /// The connect timeout is an hour: had the refusal waited for it, the test's one-minute limit
    /// would fail it. No elapsed time is asserted, so a slow machine cannot fail it.
    @Test("nothing listening: RAIN_301 without waiting for the connect timeout", .timeLimit(.minutes(1)))
    func nothingListening() async throws {
        // A port nothing listens on (and that no test running alongside can be given meanwhile).
        let refused = try RefusedPort()
        defer { withExtendedLifetime(refused) {} }
        let port = refused.port
        let remote = try RemoteAuthority(
            address: "127.0.0.1:\(port)", connectTimeout: .seconds(3600), deadlines: .forTests,
            logger: Logger(label: "test", sink: CapturingLogSink()))
        defer { remote.close() }
        let error = await rainError { _ = try await remote.listOutbox() }
        #expect(error?.code == .network)
        #expect(error?.details.reason == "authority_unreachable")
        #expect(error?.message.hasPrefix("the authority at 127.0.0.1:\(port) could not be reached") == true)
    }

    /// Call deadlines run on the injected clock: the test moves it past the deadline by hand, so the
    /// outcome does not depend on how busy the machine is, and the follow-up call cannot time out.
    /// A send past its bound is RAIN_501 `outcome_unknown` (it left; no answer came), a
    /// read RAIN_301 `deadline_exceeded`; the connection nothing answered on is replaced, and the
    /// link goes degraded, then unreachable, then connected again at the next answer.
    @Test(
        "an authority that does not answer in time: a send is outcome_unknown, a read deadline_exceeded, the hung connection is replaced"
    )
    func callDeadline() async throws {
        let sink = CapturingLogSink()
        let logger = Logger(label: "test", sink: sink)
        let clock = ManualClock()
        let arrivals = Counter()
        let service = AuthorityService(authority: SlowAuthority(delay: .seconds(60), arrivals: arrivals), logger: logger)
        let server = try RunningTCPServer(handler: service, logger: logger)
        let remote = try RemoteAuthority(
            address: server.address,
            deadlines: AuthorityDeadlines(read: .seconds(1), send: .seconds(2), refresh: .seconds(1)),
            // No probe within the test: the link changes only with the calls it makes.
            linkProbeInterval: .seconds(3600), clock: clock, logger: logger)
        let changes = Mutex<[AuthorityLinkState.Phase]>([])
        remote.observeLink { link in changes.withLock { $0.append(link.phase) } }

        /// Runs `body`, moves the clock by `by` once its deadline is armed, and returns its error.
        func timedOut(by: Duration, _ body: @escaping @Sendable () async throws -> Void) async -> RainError? {
            let before = arrivals.value
            async let outcome = rainError { try await body() }
            let armedBy = ContinuousClock.now + .seconds(60)
            while arrivals.value <= before && ContinuousClock.now < armedBy {
                try? await Task.sleep(for: .milliseconds(5))
            }
            #expect(arrivals.value > before, "the request never reached the authority")
            // Not quite the bound: nothing fires early.
            clock.advance(by: by - .milliseconds(1))
            clock.advance(by: .milliseconds(1))
            return await outcome
        }

        let send = await timedOut(by: .seconds(2)) { try await remote.revokeSession(appID: "app", refreshToken: "rwr_x") }
        #expect(send?.code == .provider)
        #expect(send?.details.reason == "outcome_unknown")
        #expect(remote.linkState?.phase == .degraded)
        #expect(sink.captured.contains { $0.contains("authority.connection_replaced") })

        let read = await timedOut(by: .seconds(1)) {
            _ = try await remote.wallet(appID: "app", accessToken: "rwa_x", proof: .none())
        }
        #expect(read?.code == .network)
        #expect(read?.details.reason == "deadline_exceeded")
        #expect(remote.linkState?.phase == .unreachable)
        #expect(remote.linkState?.lastError?.isEmpty == false)

        // A fresh connection answers (the clock stands still: this call cannot time out).
        let info = try await remote.getInfo()
        #expect(info.protocolVersion == protocolVersion)
        #expect(remote.linkState?.phase == .connected)
        #expect(changes.withLock { $0 } == [.degraded, .unreachable, .connected])
        remote.close()
        try await server.stop()
    }

    /// Within a device's read (`AuthorityDeadlines.operationDeadline`), a call waits only what is
    /// left of the read's bound; nothing left fails at once, without a request.
    @Test("a call inside an operation whose deadline passed fails at once with RAIN_301")
    func operationDeadlinePassed() async throws {
        let logger = Logger(label: "test", sink: CapturingLogSink())
        let clock = ManualClock()
        let service = AuthorityService(authority: SlowAuthority(delay: .seconds(60)), logger: logger)
        let server = try RunningTCPServer(handler: service, logger: logger)
        let remote = try RemoteAuthority(address: server.address, clock: clock, logger: logger)
        let error = await AuthorityDeadlines.$operationDeadline.withValue(clock.now) {
            await rainError { _ = try await remote.listOutbox() }
        }
        #expect(error?.code == .network)
        #expect(error?.details.reason == "deadline_exceeded")
        remote.close()
        try await server.stop()
    }

    @Test("a closed client refuses further calls with RAIN_301")
    func closedClient() async throws {
        try await RemoteFixture.with { f in
            _ = try await f.remote.getInfo()
            f.remote.close()
            let error = await rainError { _ = try await f.remote.getInfo() }
            #expect(error?.code == .network)
        }
    }

    // MARK: - Addresses

    @Test(
        "loopback addresses parse",
        arguments: [
            ("127.0.0.1:7000", "127.0.0.1:7000", 7000), ("[::1]:7000", "[::1]:7000", 7000),
            ("localhost:7000", "localhost:7000", 7000), ("LOCALHOST:1", "LOCALHOST:1", 1),
            ("127.5.6.7:65535", "127.5.6.7:65535", 65535), ("127.0.0.1:0", "127.0.0.1:0", 0),
            ("[::ffff:127.0.0.1]:80", "[::ffff:127.0.0.1]:80", 80),
        ] as [(String, String, Int)])
    func loopbackParses(text: String, description: String, port: Int) throws {
        let address = try TCPAddress(parsing: text)
        #expect(address.description == description)
        #expect(Int(address.port) == port)
    }

    @Test(
        "non-loopback addresses are refused with RAIN_102 before any socket call",
        arguments: [
            "0.0.0.0:7000", "192.0.2.1:7000", "10.0.0.1:7000", "128.0.0.1:7000", "[::]:7000", "[2001:db8::1]:7000",
            "[::ffff:192.0.2.1]:7000", "example.com:7000", "authority.internal:7000",
        ])
    func nonLoopbackRefused(text: String) async throws {
        let parse = await rainError { _ = try TCPAddress(parsing: text, field: "listen") }
        #expect(parse?.code == .invalidArgument)
        #expect(parse?.details.reason == TCPAddress.nonLoopbackReason)
        #expect(parse?.details.field == "listen")
        #expect(parse?.message.contains("TLS") == true)
        // RemoteAuthority refuses it at construction; nothing is ever sent.
        let remote = await rainError {
            _ = try RemoteAuthority(address: text, logger: Logger(label: "test", sink: CapturingLogSink()))
        }
        #expect(remote?.code == .invalidArgument)
        #expect(remote?.details.reason == TCPAddress.nonLoopbackReason)
        #expect(remote?.details.field == "authority")
    }

    @Test(
        "malformed addresses are refused with RAIN_102",
        arguments: [
            "", "7000", ":7000", "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1", "127.0.0.1:7000x",
            "127.0.0.1:123456", "::1:7000", "[::1]7000", "[::1", "[::1]:", "[]:7000", "127.1:7000", "[127.0.0.1]:7000",
            "local host:7000", "localhost:+80", "999.0.0.1:7000", " 127.0.0.1:7000",
        ])
    func malformedRefused(text: String) async throws {
        let error = await rainError { _ = try TCPAddress(parsing: text) }
        #expect(error?.code == .invalidArgument)
        #expect(error?.details.reason == TCPAddress.malformedReason)
    }

    @Test("port 0 is for listening only: RemoteAuthority and connect refuse it")
    func portZero() async throws {
        let remote = await rainError {
            _ = try RemoteAuthority(address: "127.0.0.1:0", logger: Logger(label: "test", sink: CapturingLogSink()))
        }
        #expect(remote?.code == .invalidArgument)
        let connect = await rainError { _ = try TCPSocket.connect(TCPAddress(parsing: "127.0.0.1:0"), timeout: .seconds(1)) }
        #expect(connect?.code == .invalidArgument)
    }

    @Test("a port already in use is RAIN_102; a stopped server's port can be bound again at once")
    func portInUse() async throws {
        let fd = try TCPSocket.listen(TCPAddress(parsing: "127.0.0.1:0"))
        let port = try TCPSocket.localPort(of: fd)
        let busy = await rainError { _ = try TCPSocket.listen(TCPAddress(parsing: "127.0.0.1:\(port)")) }
        #expect(busy?.code == .invalidArgument)
        #expect(busy?.details.field == "listen")
        close(fd)
        let again = try TCPSocket.listen(TCPAddress(parsing: "127.0.0.1:\(port)"))
        #expect(try TCPSocket.localPort(of: again) == port)
        close(again)
    }

    @Test("an IPv6 loopback listener serves a RemoteAuthority")
    func ipv6Loopback() async throws {
        let sink = CapturingLogSink()
        let logger = Logger(label: "test", sink: sink)
        let address = try TCPAddress(parsing: "[::1]:0")
        let fd: Int32
        do {
            fd = try TCPSocket.listen(address)
        } catch {
            // A machine without IPv6 on loopback cannot run this test.
            return
        }
        let port = try TCPSocket.localPort(of: fd)
        var options = ServerOptions()
        options.isTCP = true
        // Not a test of admission: with the whole suite on two busy cores the request can leave
        // more than the default 10 s after the connection, and the server then closes it unanswered.
        options.admissionTimeout = .seconds(120)
        let service = AuthorityService(authority: SlowAuthority(delay: .zero), version: "v6", logger: logger)
        let server = try EventLoopServer(listeningSocket: fd, options: options, handler: service, logger: logger)
        let thread = Thread { server.run() }
        thread.start()
        let remote = try RemoteAuthority(address: "[::1]:\(port)", deadlines: .forTests, logger: logger)
        let info = try await remote.getInfo()
        #expect(info.daemonVersion == "v6")
        remote.close()
        server.stop(drainTimeout: .zero)
    }
}
