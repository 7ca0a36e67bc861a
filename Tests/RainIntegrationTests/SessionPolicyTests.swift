import Foundation
import RainTestSupport
import RainWallet
import Testing

/// `RainWalletConfig(sessionPolicy:)` through a real daemon with per-app access
/// enforced (the test runner becomes the profile's owner on its first call, confirmed by the
/// harness's auto pinentry). The daemon logs each policy it applies (`profile.session_policy_set`,
/// with when the live session's refresh is due under it).
@Suite("Session policy from Swift")
struct SessionPolicyIntegrationTests {
    /// The config file sets `transientRetries` only.
    static let config = #"{"profiles": {"default": {"sessionPolicy": {"transientRetries": 1}}}}"#

    static func provider(
        _ h: DaemonHarness, _ policy: RainWalletSessionPolicy?, passkeyDomain: String? = nil
    ) -> RainProvider {
        RainProvider(RainWalletConfig(passkeyDomain: passkeyDomain, sessionPolicy: policy, socketPath: h.socketPath))
    }

    /// The `profile.session_policy_set` log lines so far.
    static func applied(_ h: DaemonHarness) -> [String] {
        h.log.split(separator: "\n").filter { $0.contains("profile.session_policy_set") }.map(String.init)
    }

    /// Waits (at most 2 s) for the `n`th applied policy and returns its line.
    static func appliedLine(_ h: DaemonHarness, _ n: Int) async throws -> String {
        #expect(await eventually(timeout: .seconds(2)) { applied(h).count >= n }, "log:\n\(h.log)")
        return try #require(applied(h).dropFirst(n - 1).first)
    }

    /// The `refreshDueMs` of a log line, when it is a time.
    static func refreshDue(_ line: String) -> Int64? {
        line.firstMatch(of: /refreshDueMs=([0-9]+)/).flatMap { Int64($0.output.1) }
    }

    @Test("a policy set from Swift moves the live session's refresh, turns auto refresh off; the config file's key wins")
    func policyTakesEffectAndTheConfigWins() async throws {
        let h = try await DaemonHarness.start(
            config: Self.config, access: .enforced(pinentry: DaemonHarness.autoPinentryName))
        defer { h.shutdown() }
        let owner = Self.provider(h, RainWalletSessionPolicy(refreshBuffer: .seconds(200), transientRetries: 5))
        try await owner.awaitSessionRestore()  // the first call: the runner becomes the owner
        #expect(h.answeredPrompts.count == 1, "\(h.answeredPrompts)")
        let first = try await Self.appliedLine(h, 1)
        #expect(first.contains("refreshBufferMs=200000"), "\(first)")
        #expect(first.contains("transientRetries=1"), "the config file's transientRetries wins: \(first)")
        #expect(first.contains("configKeys=transientRetries"), "\(first)")
        #expect(first.contains("refreshDueMs=none"), "\(first)")

        let (session, _, _) = try await h.logIn(owner, .email("policy@example.com"))
        let expiresAt = try #require(session.expiresAt)

        // Another provider of the owner app moves the refresh of the live session.
        let earlier = Self.provider(h, RainWalletSessionPolicy(refreshBuffer: .seconds(300)))
        try await earlier.awaitSessionRestore()
        let moved = try await Self.appliedLine(h, 2)
        let due = try #require(Self.refreshDue(moved), "\(moved)")
        #expect(abs(due - (expiresAt.unixMilliseconds - 300_000)) <= 1, "\(moved); expires at \(expiresAt.unixMilliseconds)")

        // Auto refresh off: no refresh is scheduled; the session runs to its expiry.
        let manual = Self.provider(h, RainWalletSessionPolicy(isAutoRefreshEnabled: false))
        try await manual.awaitSessionRestore()
        let off = try await Self.appliedLine(h, 3)
        #expect(off.contains("autoRefresh=false") && off.contains("refreshDueMs=off"), "\(off)")
        #expect(try await manual.hasActiveSession())
    }

    @Test("a value out of range is RAIN_102 naming the field at awaitSessionRestore; code login still works")
    func badValueIsReportedAtRestore() async throws {
        let h = try await DaemonHarness.start(
            config: Self.config, access: .enforced(pinentry: DaemonHarness.autoPinentryName))
        defer { h.shutdown() }
        let p = Self.provider(h, RainWalletSessionPolicy(refreshBuffer: .seconds(4000)))
        let error = try #require(await rainError { try await p.awaitSessionRestore() })
        #expect(error.code == .invalidArgument)
        #expect(error.details.field == "sessionPolicy.refreshBufferSeconds", "\(error)")
        #expect(error.message.contains("sessionPolicy.refreshBufferSeconds"), "\(error.message)")
        #expect(Self.applied(h).isEmpty, "nothing applied")
        // The refusal blocks nothing else.
        try await h.logIn(p, .email("bad-policy@example.com"))
        #expect(try await p.hasActiveSession())
    }

    @Test("a public-suffix passkey domain is refused by the daemon at awaitSessionRestore, not on a code login")
    func badDomainIsReportedAtRestore() async throws {
        let h = try await DaemonHarness.start(
            config: Self.config, access: .enforced(pinentry: DaemonHarness.autoPinentryName))
        defer { h.shutdown() }
        let config = RainWalletConfig(passkeyDomain: "co.uk", socketPath: h.socketPath)
        try config.validate()  // the syntax is fine: only the daemon knows the Public Suffix List
        let p = RainProvider(config)
        try await h.logIn(p, .email("bad-domain@example.com"))
        let error = try #require(await rainError { try await p.awaitSessionRestore() })
        #expect(error.code == .invalidArgument)
        #expect(error.details.field == "passkeyDomain", "\(error)")
        #expect(try await p.hasActiveSession())
    }

    @Test("an app approved for the profile that does not own it is RAIN_202 not_profile_owner; its calls still work")
    func nonOwnerIsRefused() async throws {
        let h = try await DaemonHarness.start(
            config: Self.config, access: .enforced(pinentry: DaemonHarness.autoPinentryName))
        defer { h.shutdown() }
        // The CLI's first profile call (a send: status only looks) makes it the owner; it then
        // approves the test runner.
        let status = try await h.runCLI(["code", "send", "--email", "owner@example.com"])
        #expect(status.status == 0, "\(status)")
        let approve = try await h.runCLI(["apps", "approve", DaemonHarness.testRunnerPath])
        #expect(approve.status == 0, "\(approve)")

        let p = Self.provider(h, RainWalletSessionPolicy(isAutoRefreshEnabled: false))
        let error = try #require(await rainError { try await p.awaitSessionRestore() })
        #expect(error.code == .unauthorized)
        #expect(error.details.reason == "not_profile_owner", "\(error)")
        #expect(Self.applied(h).isEmpty, "nothing applied: \(Self.applied(h))")
        try await h.logIn(p, .email("not-owner@example.com"))
        #expect(try await p.hasActiveSession())
    }
}
