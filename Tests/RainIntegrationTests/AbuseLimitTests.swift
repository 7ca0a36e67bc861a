import Foundation
import RainTestSupport
import RainWallet
import Testing

/// Send limits and pruning in the real daemon.
@Suite("Abuse limits end to end")
struct AbuseLimitIntegrationTests {
    /// Checks a send-limit refusal as `--json` prints it (the last line of stderr); returns the retry time.
    static func expectJSONRefusal(_ r: CLIResult, limit: String, within window: Int = 30) throws -> Date {
        #expect(r.status == 8, "\(r)")
        // The last stderr line is the error as JSON; the line before it the message for people.
        let last = try #require(r.stderr.split(separator: "\n").last.map(String.init))
        let error = try #require(try jsonObject(last)["error"] as? [String: Any], "\(r.stderr)")
        #expect(r.stdout.isEmpty)
        #expect(error["code"] as? String == "RAIN_302")
        #expect(error["limit"] as? String == limit)
        let seconds = try #require(error["retryAfterSeconds"] as? Int)
        #expect((1...window).contains(seconds))
        let retryAfterText = try #require(error["retryAfter"] as? String)
        let retryAfter = try #require(parseRFC3339UTC(retryAfterText))
        // The authority's clock is this machine's: the time is at most `window` seconds ahead.
        #expect(retryAfter > Date().addingTimeInterval(-5) && retryAfter <= Date().addingTimeInterval(Double(window) + 1))
        return retryAfter
    }

    @Test("a sent code says when a resend is accepted (30 s later by default); a resend before is refused until exactly then")
    func sendSaysWhenToResend() async throws {
        let h = try await DaemonHarness.start(sendLimits: .defaults)
        defer { h.shutdown() }
        let p = h.provider()
        let before = Date()
        let sent = try await p.sendLoginCode(to: .email("resend@example.com"))
        let resendAfter = try #require(sent.resendAfter, "\(sent)")
        #expect(resendAfter >= before.addingTimeInterval(29) && resendAfter <= Date().addingTimeInterval(31), "\(resendAfter)")
        let error = await rainError { try await p.sendLoginCode(to: .email("resend@example.com")) }
        #expect(error?.details.reason == "contact_cooldown", "\(String(describing: error))")
        #expect(error?.details.retryAfter == resendAfter, "\(String(describing: error?.details.retryAfter)) vs \(resendAfter)")
    }

    @Test("with the default limits, a quick resend is RAIN_302 with when to retry: CLI exit 8 and the library's details")
    func defaultCooldown() async throws {
        let h = try await DaemonHarness.start(sendLimits: .defaults)
        defer { h.shutdown() }
        let first = try await h.runCLI(["code", "send", "--email", "limit@example.com"])
        #expect(first.status == 0, "\(first)")
        _ = try await h.waitForCode(for: "limit@example.com")

        // The CLI: exit 8, a message that says when, on stderr.
        let again = try await h.runCLI(["code", "send", "--email", "limit@example.com"])
        #expect(again.status == 8, "\(again)")
        #expect(again.stderr.contains("RAIN_302"))
        #expect(again.stderr.contains("try again after 20"), "\(again.stderr)")  // an RFC 3339 time
        #expect(again.stderr.contains("Z (in "), "\(again.stderr)")
        let json = try await h.runCLI(["--json", "code", "send", "--email", "limit@example.com"])
        let shown = try Self.expectJSONRefusal(json, limit: "contact_cooldown")

        // The client library: a RainError with typed details.
        let error = await rainError { try await h.provider().sendLoginCode(to: .email("limit@example.com")) }
        #expect(error?.code == .refused)
        #expect(error?.details.limit == "contact_cooldown")
        #expect(error?.details.reason == "contact_cooldown")
        let retryAfter = try #require(error?.details.retryAfter)
        #expect(abs(retryAfter.timeIntervalSince(shown)) < 0.001)
        let wait = try #require(error?.details.retryAfterMilliseconds)
        #expect(wait > 0 && wait <= 30_000)

        // Nothing was sent for the refusals, and the first code still logs in.
        let codes = try await h.outbox().filter { $0.contact?.value == "limit@example.com" }
        #expect(codes.count == 1)
        let confirmed = try await h.runCLI(["code", "confirm", try #require(codes.first?.code)])
        #expect(confirmed.status == 0, "\(confirmed)")
    }

    @Test("contact add is limited the same way, and the configured limits apply (2 per window, no cooldown)")
    func configuredLimitsAndContactAdd() async throws {
        let config = #"{"authority": {"sendLimits": {"contactCooldownSeconds": 0, "contactMaxSends": 2}}}"#
        let h = try await DaemonHarness.start(config: config, sendLimits: .defaults)
        defer { h.shutdown() }
        try await h.cliLogIn("owner@example.com")
        for _ in 0..<2 {
            let sent = try await h.runCLI(["contact", "add", "--email", "backup@example.com"])
            #expect(sent.status == 0, "\(sent)")
        }
        let refused = try await h.runCLI(["--json", "contact", "add", "--email", "backup@example.com"])
        _ = try Self.expectJSONRefusal(refused, limit: "contact_window", within: 900)
        #expect(refused.stderr.contains("too many codes were sent to this contact"), "\(refused.stderr)")
    }

    @Test("rainwalletd authority with default limits: another device's quick send is refused with the details; it prunes")
    func remoteAuthority() async throws {
        let h = try await MultiDevice.up(
            devices: 2, lifetime: 60,
            arguments: [
                "--default-send-limits", "--authority-flag", "--prune-interval", "--authority-flag", "1",
                "--authority-flag", "--prune-retention", "--authority-flag", "1",
            ])
        defer { h.down() }
        try await h.provider(0).sendLoginCode(to: .email("remote-limit@example.com"))
        // The limit is the authority's, per contact: another device daemon is refused too.
        let error = await rainError { try await h.provider(1).sendLoginCode(to: .email("remote-limit@example.com")) }
        #expect(error?.code == .refused)
        #expect(error?.details.limit == "contact_cooldown")
        let retryAfter = try #require(error?.details.retryAfter)
        #expect(retryAfter > Date().addingTimeInterval(-5) && retryAfter <= Date().addingTimeInterval(31))
        #expect((1...30_000).contains(error?.details.retryAfterMilliseconds ?? 0))
        #expect(error?.message.contains("try again after") == true)

        let outboxFile = "\(h.dir)/authority/outbox.jsonl"
        let authorityLog = { (try? String(contentsOfFile: "\(h.dir)/authority.log", encoding: .utf8)) ?? "" }
        #expect(await eventually(timeout: .seconds(30)) { authorityLog().contains("outbox=1") }, "\(authorityLog())")
        let left = (try? String(contentsOfFile: outboxFile, encoding: .utf8))?.split(separator: "\n").count ?? 0
        #expect(left == 0)
    }

    @Test("a daemon with a short prune interval empties its outbox file of old codes")
    func pruningEmptiesTheOutbox() async throws {
        let config = #"{"authority": {"pruneIntervalSeconds": 1, "pruneRetentionSeconds": 1}}"#
        let h = try await DaemonHarness.start(config: config)
        defer { h.shutdown() }
        let outboxFile = "\(h.stateDirectory)/authority/outbox.jsonl"
        // The send returns once the delivery is in the file; a second later it is past the retention.
        try await h.provider().sendLoginCode(to: .email("pruned@example.com"))
        let lines = { (try? String(contentsOfFile: outboxFile, encoding: .utf8))?.split(separator: "\n").count ?? 0 }
        #expect(await eventually(timeout: .seconds(30)) { lines() == 0 }, "the outbox still holds \(lines()) lines")
        #expect(await eventually(timeout: .seconds(10)) { h.log.contains(" prune ") && h.log.contains("outbox=1") })
    }
}
