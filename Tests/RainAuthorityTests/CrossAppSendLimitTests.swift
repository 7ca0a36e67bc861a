import Foundation
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainTestSupport
import RainWire
import Testing

@testable import RainAuthority
@testable import RainAuthorityServer
@testable import RainStore
@testable import RainTransport

/// Send limits that cannot be sidestepped: 10 sends per 15 minutes per contact across
/// every app, 20 per minute per source (the daemon's uid, or the caller's address), on both stores
/// and across instances sharing one database; and an authority serves only the app ids it is given.
@Suite("Send limits across apps and sources")
struct CrossAppSendLimitTests {
    static let kinds = StoreKind.allCases
    /// Only the limits across apps: the per-app ones are out of the way.
    static let acrossApps = CodeSendLimits(
        contactCooldown: .zero, contactWindow: .zero, contactMaxSends: .max, accountWindow: .zero,
        accountMaxSends: .max)

    static func isInserted(_ outcome: ChallengeInsertionOutcome) -> Bool {
        if case .inserted = outcome { true } else { false }
    }

    // MARK: - Stores

    @Test("rotating app ids: the 11th send to one contact in 15 minutes is refused; the window slides", arguments: kinds)
    func contactAcrossApps(kind: StoreKind) async throws {
        try await StoreFixture.with(kind) { f in
            let start = f.clock.now
            for i in 0..<10 {
                if i > 0 { f.clock.advance(by: .seconds(1)) }
                let outcome = try await f.store.insertChallenge(
                    try f.newChallenge(device: "d\(i)", app: "app-\(i)"), maxActivePerAccount: 3, limits: Self.acrossApps)
                #expect(Self.isInserted(outcome), "send \(i + 1): \(outcome)")
            }
            let eleventh = try f.newChallenge(device: "d10", app: "app-10")
            #expect(
                try await f.store.insertChallenge(eleventh, maxActivePerAccount: 3, limits: Self.acrossApps)
                    == .limited(.contactAllAppsWindow, retryAfter: start.adding(.seconds(900))))
            #expect(try await f.store.challenge(id: eleventh.id) == nil)
            // Another contact is not affected.
            #expect(
                Self.isInserted(
                    try await f.store.insertChallenge(
                        try f.newChallenge(.email("other@example.com"), device: "d11", app: "app-10"),
                        maxActivePerAccount: 3, limits: Self.acrossApps)))
            // The first send leaves the window at start + 900 s: one more goes, then it is full again.
            f.clock.advance(to: start.adding(.milliseconds(899_999)))
            #expect(
                try await f.store.insertChallenge(
                    try f.newChallenge(device: "d12", app: "app-12"), maxActivePerAccount: 3, limits: Self.acrossApps)
                    == .limited(.contactAllAppsWindow, retryAfter: start.adding(.seconds(900))))
            f.clock.advance(by: .milliseconds(1))
            #expect(
                Self.isInserted(
                    try await f.store.insertChallenge(
                        try f.newChallenge(device: "d13", app: "app-13"), maxActivePerAccount: 3, limits: Self.acrossApps)))
            #expect(
                try await f.store.insertChallenge(
                    try f.newChallenge(device: "d14", app: "app-14"), maxActivePerAccount: 3, limits: Self.acrossApps)
                    == .limited(.contactAllAppsWindow, retryAfter: start.adding(.seconds(901))))
        }
    }

    @Test("the 21st send in a minute from one source is refused; other sources are not; the window slides", arguments: kinds)
    func perSource(kind: StoreKind) async throws {
        try await StoreFixture.with(kind) { f in
            let start = f.clock.now
            func challenge(_ i: Int, source: String?) throws -> NewChallenge {
                var c = try f.newChallenge(.email("u\(i)@example.com"), device: "d\(i)", app: "app-\(i % 3)")
                c.source = source
                return c
            }
            for i in 0..<20 {
                if i > 0 && i % 5 == 0 { f.clock.advance(by: .seconds(1)) }
                let outcome = try await f.store.insertChallenge(
                    try challenge(i, source: "ip:192.0.2.1"), maxActivePerAccount: 3, limits: Self.acrossApps)
                #expect(Self.isInserted(outcome), "send \(i + 1): \(outcome)")
            }
            let refused = try await f.store.insertChallenge(
                try challenge(20, source: "ip:192.0.2.1"), maxActivePerAccount: 3, limits: Self.acrossApps)
            #expect(refused == .limited(.sourceWindow, retryAfter: start.adding(.seconds(60))))
            // The user's own send from another source goes, and so does one without a source.
            #expect(
                Self.isInserted(
                    try await f.store.insertChallenge(
                        try challenge(21, source: "ip:192.0.2.2"), maxActivePerAccount: 3, limits: Self.acrossApps)))
            #expect(
                Self.isInserted(
                    try await f.store.insertChallenge(
                        try challenge(22, source: nil), maxActivePerAccount: 3, limits: Self.acrossApps)))
            // At start + 60 s the first five leave the window: five more go, the next is refused.
            f.clock.advance(to: start.adding(.seconds(60)))
            for i in 23..<28 {
                #expect(
                    Self.isInserted(
                        try await f.store.insertChallenge(
                            try challenge(i, source: "ip:192.0.2.1"), maxActivePerAccount: 3, limits: Self.acrossApps)))
            }
            #expect(
                try await f.store.insertChallenge(
                    try challenge(28, source: "ip:192.0.2.1"), maxActivePerAccount: 3, limits: Self.acrossApps)
                    == .limited(.sourceWindow, retryAfter: start.adding(.seconds(61))))
        }
    }

    @Test("the per-(app, contact) limits still hold under the limits across apps", arguments: kinds)
    func perAppLimitsStillHold(kind: StoreKind) async throws {
        try await StoreFixture.with(kind) { f in
            let limits = CodeSendLimits()
            let first = try await f.store.insertChallenge(
                try f.newChallenge(device: "d0"), maxActivePerAccount: 3, limits: limits)
            #expect(Self.isInserted(first))
            let start = f.clock.now
            let again = try await f.store.insertChallenge(
                try f.newChallenge(device: "d1"), maxActivePerAccount: 3, limits: limits)
            #expect(again == .limited(.contactCooldown, retryAfter: start.adding(.seconds(30))))
            // Another app is under its own cooldown, and under the limits across apps.
            let other = try await f.store.insertChallenge(
                try f.newChallenge(device: "d2", app: "app-two"), maxActivePerAccount: 3, limits: limits)
            #expect(Self.isInserted(other))
        }
    }

    @Test("parallel sends on two instances sharing one database never pass a limit across apps", arguments: kinds)
    func parallelAcrossInstances(kind: StoreKind) async throws {
        try await StoreFixture.with(kind, instances: 2) { f in
            // 30 sends from one source to 30 contacts of 30 apps: exactly 20 go.
            let fromOneSource = try await withThrowingTaskGroup(of: ChallengeInsertionOutcome.self) { group in
                for i in 0..<30 {
                    let store = f.stores[i % 2]
                    var challenge = try f.newChallenge(.email("s\(i)@example.com"), device: "d\(i)", app: "app-\(i)")
                    challenge.source = "uid:4242"
                    group.addTask {
                        try await store.insertChallenge(challenge, maxActivePerAccount: 3, limits: Self.acrossApps)
                    }
                }
                return try await group.reduce(into: [ChallengeInsertionOutcome]()) { $0.append($1) }
            }
            #expect(fromOneSource.filter(Self.isInserted).count == 20)
            // 16 sends to one contact from 16 apps and sources: exactly 10 go.
            let toOneContact = try await withThrowingTaskGroup(of: ChallengeInsertionOutcome.self) { group in
                for i in 0..<16 {
                    let store = f.stores[i % 2]
                    var challenge = try f.newChallenge(.email("target@example.com"), device: "t\(i)", app: "app-\(i)")
                    challenge.source = "ip:198.51.100.\(i)"
                    group.addTask {
                        try await store.insertChallenge(challenge, maxActivePerAccount: 3, limits: Self.acrossApps)
                    }
                }
                return try await group.reduce(into: [ChallengeInsertionOutcome]()) { $0.append($1) }
            }
            #expect(toOneContact.filter(Self.isInserted).count == 10)
            let violations = try await f.violations()
            #expect(violations.isEmpty, "\(violations)")
        }
    }

    @Test("the counts survive a restart: a reopened store still refuses", arguments: kinds)
    func survivesRestart(kind: StoreKind) async throws {
        try await StoreFixture.with(kind) { f in
            for i in 0..<10 {
                var c = try f.newChallenge(device: "d\(i)", app: "app-\(i)")
                c.source = "uid:7"
                #expect(Self.isInserted(try await f.store.insertChallenge(c, maxActivePerAccount: 3, limits: Self.acrossApps)))
            }
            let reopened = try await f.reopen()
            let outcome = try await reopened.insertChallenge(
                try f.newChallenge(device: "d10", app: "app-10"), maxActivePerAccount: 3, limits: Self.acrossApps)
            #expect(!Self.isInserted(outcome))
            await reopened.close()
        }
    }

    // MARK: - Authority

    @Test("rotating app ids through the authority: RAIN_302 naming the limit and the retry, never the contact")
    func authorityRotatingApps() async throws {
        try await AuthorityFixture.with(settings: AuthoritySettings(sendLimits: CodeSendLimits())) { f in
            let start = f.clock.now
            for i in 0..<10 { _ = try await f.send(app: "app-\(i)") }
            let error = await rainError { _ = try await f.send(app: "app-10") }
            #expect(error?.code == .refused)
            #expect(error?.details.limit == CodeSendLimit.contactAllAppsWindow.rawValue)
            #expect(error?.details.retryAfter == start.adding(.seconds(900)))
            #expect(error?.details.retryAfterMilliseconds == 900_000)
            #expect(error?.message.contains("across every app") == true)
            #expect(error?.message.contains(RFC3339.string(from: start.adding(.seconds(900)))) == true)
            #expect(error?.message.contains("user@example.com") == false)
            #expect(f.sender.deliveries.count == 10)
            // The log names the limit and the source, and only the redacted contact.
            let lines = f.logSink.captured.joined(separator: "\n")
            #expect(lines.contains("contact_all_apps_window"))
            #expect(!lines.contains("user@example.com"))
        }
    }

    @Test("the daemon's own sends count against its uid: the 21st in a minute is refused, another source goes")
    func authorityPerSource() async throws {
        try await AuthorityFixture.with(settings: AuthoritySettings(sendLimits: CodeSendLimits())) { f in
            for i in 0..<20 { _ = try await f.send(.email("u\(i)@example.com"), app: "app-\(i % 4)") }
            let error = await rainError { _ = try await f.send(.email("u20@example.com"), app: "app-9") }
            #expect(error?.code == .refused)
            #expect(error?.details.limit == CodeSendLimit.sourceWindow.rawValue)
            #expect(error?.details.retryAfterMilliseconds == 60_000)
            // A caller the server identified by another address is not throttled.
            _ = try await f.authority.sendLoginCode(
                SendCodeRequest(appID: "app-9", deviceID: "device-z", contact: .email("u20@example.com")),
                source: .address("192.0.2.9"))
        }
    }

    @Test("an authority given --apps refuses every other app id with RAIN_102 app_not_served")
    func servedApps() async throws {
        var settings = AuthoritySettings(sendLimits: .unlimited)
        settings.servedAppIDs = [AuthorityFixture.app]
        try await AuthorityFixture.with(settings: settings) { f in
            let login = try await f.login()
            let refused = await rainError { _ = try await f.send(app: "other-app") }
            #expect(refused?.code == .invalidArgument)
            #expect(refused?.details.reason == EmbeddedAuthority.appNotServedReason)
            #expect(refused?.details.field == "appId")
            #expect(refused?.message.contains("--apps") == true)
            #expect(f.sender.deliveries.count == 1)
            for call in [
                { _ = try await f.authority.accountInfo(appID: "other-app", accessToken: login.tokens.accessToken) },
                { _ = try await f.authority.wallet(appID: "other-app", accessToken: login.tokens.accessToken) },
                { _ = try await f.authority.exportWallet(appID: "other-app", accessToken: login.tokens.accessToken) },
                { try await f.authority.revokeSession(appID: "other-app", refreshToken: login.tokens.refreshToken) },
                {
                    _ = try await f.authority.sendContactVerificationCode(
                        appID: "other-app", deviceID: "device-a", accessToken: login.tokens.accessToken,
                        contact: .email("b@example.com"))
                },
            ] as [() async throws -> Void] {
                #expect(await rainError(call)?.details.reason == EmbeddedAuthority.appNotServedReason)
            }
            _ = try await f.authority.accountInfo(appID: AuthorityFixture.app, accessToken: login.tokens.accessToken)
        }
    }

    @Test("over TCP the source is the connection's address, not the caller's word and not the daemon's uid")
    func remoteSourceIsTheAddress() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let logger = Logger(label: "test", sink: CapturingLogSink())
        let store = try await SQLiteAuthorityStore.open(stateDirectory: directory)
        let sender = CapturingCodeSender()
        var limits = Self.acrossApps
        limits.sourceMaxSends = 2
        let embedded = EmbeddedAuthority(
            store: store, keys: try AuthorityKeys(masterKey: SymmetricKey(bytes: Array(repeating: 3, count: 32))),
            settings: AuthoritySettings(sendLimits: limits), clock: ManualClock(), sender: sender, outbox: nil,
            logger: logger)
        let service = AuthorityService(authority: embedded, logger: logger)
        let server = try RunningTCPServer(handler: service, logger: logger)
        let remote = try RemoteAuthority(
            address: server.address, connectTimeout: .seconds(2), deadlines: .forTests, logger: logger)
        do {
            for i in 0..<2 {
                _ = try await remote.sendLoginCode(
                    SendCodeRequest(appID: "app-\(i)", deviceID: "d\(i)", contact: .email("r\(i)@example.com")))
            }
            let error = await rainError {
                _ = try await remote.sendLoginCode(
                    SendCodeRequest(appID: "app-2", deviceID: "d2", contact: .email("r2@example.com")))
            }
            #expect(error?.code == .refused)
            #expect(error?.details.limit == CodeSendLimit.sourceWindow.rawValue)
            // The daemon's own uid is another source.
            _ = try await embedded.sendLoginCode(
                SendCodeRequest(appID: "app-2", deviceID: "d2", contact: .email("r2@example.com")))
            let sources = try await store.dumpAllRows()["challenges"]?.compactMap { row in
                row.values.compactMap(\.textValue).first { $0.hasPrefix("ip:") || $0.hasPrefix("uid:") }
            }
            #expect(Set(sources ?? []) == ["ip:127.0.0.1", "uid:\(getuid())"])
        } catch {
            remote.close()
            try await server.stop()
            await store.close()
            throw error
        }
        remote.close()
        try await server.stop()
        await store.close()
    }

    @Test("AuthorityService's source: the TCP address, else a Unix peer's uid, else the shared unknown address")
    func serviceSource() {
        #expect(AuthorityService.source(of: .tcpPeer(address: "192.0.2.4")) == .address("192.0.2.4"))
        #expect(AuthorityService.source(of: .tcpPeer) == .unknownAddress)
        #expect(AuthorityService.source(of: PeerCredentials(pid: 3, uid: 1000, gid: 1000)) == .uid(1000))
    }

    @Test("an IPv4 address is its own source; an IPv6 address counts as its /64")
    func addressSources() {
        #expect(SendSource.address("192.0.2.7").key == "ip:192.0.2.7")
        #expect(SendSource.address("2001:db8:1:2:aaaa:bbbb:cccc:dddd").key == "ip:2001:db8:1:2::/64")
        #expect(SendSource.address("2001:db8:1:2::1") == SendSource.address("2001:db8:1:2:ffff::9"))
        #expect(SendSource.address("2001:db8:1:3::1") != SendSource.address("2001:db8:1:2::1"))
        #expect(SendSource.address("::1").key == "ip:::/64")
    }

    @Test("the defaults are the documented limits and count in the retention")
    func defaults() {
        let limits = CodeSendLimits()
        #expect(limits.contactAllAppsMaxSends == 10)
        #expect(limits.contactAllAppsWindow == .seconds(900))
        #expect(limits.sourceMaxSends == 20)
        #expect(limits.sourceWindow == .seconds(60))
        #expect(CodeSendLimits(accountWindow: .seconds(1), contactAllAppsWindow: .seconds(5000)).longestWindow == .seconds(5000))
    }
}
