import Foundation
import RainTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Per-app access through the real daemon, with two different executables of the
/// same uid (two copies of the CLI, one with extra bytes so their content differs).
///
/// The user's confirmation comes from the harness's test pinentry (it types back the code each
/// prompt shows, or dismisses it while told to) fixed by the machine policy, except in the test of
/// the real `pinentry-tty`, answered on a pseudo-terminal registered with `rainwallet prompt here`.
@Suite("Per-app access (two apps of one uid)")
struct PerAppAccessTests {
    static let config = #"{"profiles": {"default": {"allowExport": true}}}"#

    /// Two copies of the CLI with different content, in the harness directory.
    struct Apps {
        let a: URL
        let b: URL

        /// Two copies of the CLI (`b` with bytes appended: another hash), made on a thread of
        /// their own: copying two large binaries on the concurrency pool would stall other tests. No lock is
        /// needed against "Text file busy": every child the tests start inherits only descriptors
        /// 0 to 2 (`TestProcess`, the harness), never a copy open for writing.
        static func make(_ h: DaemonHarness) async throws -> Apps {
            let source = h.binaryDirectory.appendingPathComponent("rainwallet")
            let apps = Apps(
                a: URL(fileURLWithPath: "\(h.directory)/app-a/wallet-app"),
                b: URL(fileURLWithPath: "\(h.directory)/app-b/wallet-app"))
            try await onThread {
                for copy in [apps.a, apps.b] {
                    try FileManager.default.createDirectory(
                        at: copy.deletingLastPathComponent(), withIntermediateDirectories: true)
                    try FileManager.default.copyItem(at: source, to: copy)
                }
                try append(to: apps.b)
            }
            return apps
        }

        /// Appends bytes past the end of the ELF file: it still runs, and its hash changes.
        static func append(to program: URL) throws {
            let handle = try FileHandle(forWritingTo: program)
            defer { try? handle.close() }
            try handle.seekToEnd()
            try handle.write(contentsOf: Data("rainwallet test: another build \(UUID().uuidString)\n".utf8))
        }
    }

    /// Logs `program` in through its own calls (the outbox is read by the same app: it is a
    /// profile's data, which only the profile's apps reach).
    static func logIn(_ h: DaemonHarness, _ program: URL, email: String) async throws {
        let send = try await h.runCLI(["code", "send", "--email", email], program: program)
        #expect(send.status == 0, "\(send)")
        let outbox = try await h.runCLI(["--json", "dev", "outbox"], program: program)
        let code = try #require(outbox.stdout.matches(of: /"code":"([0-9]{6})"/).last?.output.1, "\(outbox)")
        let confirm = try await h.runCLI(["code", "confirm", String(code)], program: program)
        #expect(confirm.status == 0, "\(confirm)")
    }

    /// The audit entries as "event/result/reason" lines, with the app's path.
    static func audit(_ h: DaemonHarness, _ program: URL) async throws -> [[String: Any]] {
        let listed = try await h.runCLI(["--json", "audit"], program: program)
        #expect(listed.status == 0, "\(listed)")
        return try listed.stdout.split(separator: "\n").map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
    }

    static func appPath(_ entry: [String: Any]) -> String? { (entry["app"] as? [String: Any])?["path"] as? String }

    @Test(
        "the second app is refused on the first's profile until approved; an export still needs the prompt; a replaced binary is asked again; an LD_PRELOAD caller is refused; all of it audited"
    )
    func twoAppsOneProfile() async throws {
        let h = try await DaemonHarness.start(
            config: Self.config, access: .enforced(pinentry: DaemonHarness.autoPinentryName))
        defer { h.shutdown() }
        let apps = try await Apps.make(h)

        // A's first call asks the user (the prompt names A), and A becomes the profile's app.
        try await Self.logIn(h, apps.a, email: "two-apps@example.com")
        #expect(h.answeredPrompts.count == 1, "\(h.answeredPrompts)")
        #expect(h.answeredPrompts.first?.contains(apps.a.path) == true, "\(h.answeredPrompts)")

        // B, another executable of the same uid: refused without a prompt, told how to approve it.
        let refused = try await h.runCLI(["account"], program: apps.b)
        #expect(refused.status == 5, "\(refused)")
        #expect(refused.stderr.contains("RAIN_202") && refused.stderr.contains("is not approved for profile default"))
        #expect(refused.stderr.contains("rainwallet apps approve --profile default \(apps.b.path)"), "\(refused)")
        #expect(h.answeredPrompts.count == 1)

        // The approval itself is confirmed on the prompt, whoever asks for it.
        let approve = try await h.runCLI(["apps", "approve", apps.b.path], program: apps.b)
        #expect(approve.status == 0, "\(approve)")
        #expect(h.answeredPrompts.count == 2 && h.answeredPrompts[1].contains("approve \(apps.b.path)"))
        let account = try await h.runCLI(["account"], program: apps.b)
        #expect(account.status == 0, "\(account)")
        let list = try await h.runCLI(["--json", "apps", "list"], program: apps.b)
        #expect(list.stdout.contains(apps.a.path) && list.stdout.contains(apps.b.path), "\(list)")

        // An approved app's export still asks the user; dismissed, nothing is exported.
        let export = try await h.runCLI(["--json", "export", "phrase", "--yes"], program: apps.a)
        #expect(export.status == 0 && export.stdout.contains("words"), "\(export)")
        #expect(h.answeredPrompts.count == 3 && h.answeredPrompts[2].contains("recovery phrase"))
        h.autoPinentryDismisses(true)
        let dismissed = try await h.runCLI(["--json", "export", "phrase", "--yes"], program: apps.a)
        #expect(dismissed.status == 9 && dismissed.stderr.contains("RAIN_401"), "\(dismissed)")
        #expect(!dismissed.stdout.contains("words"), "\(dismissed)")
        #expect(h.answeredPrompts.count == 4)
        h.autoPinentryDismisses(false)

        // A replaced on disk (an update): its next connection is asked about again, once.
        try Apps.append(to: apps.a)
        let updated = try await h.runCLI(["account"], program: apps.a)
        #expect(updated.status == 0, "\(updated)")
        #expect(h.answeredPrompts.count == 5 && h.answeredPrompts[4].contains("new version"), "\(h.answeredPrompts)")
        let again = try await h.runCLI(["account"], program: apps.a)
        #expect(again.status == 0 && h.answeredPrompts.count == 5, "\(again)")

        // A caller with LD_PRELOAD (code injected into an approved program) is refused outright.
        let preloaded = try await h.runCLI(
            ["account"], program: apps.a, environment: ["LD_PRELOAD": "\(h.directory)/no-such-library.so"])
        #expect(preloaded.status == 5 && preloaded.stderr.contains("cannot use a wallet profile while"), "\(preloaded)")
        #expect(h.answeredPrompts.count == 5)

        // The audit log has each decision, with the app that asked, and its chain holds.
        let entries = try await Self.audit(h, apps.a)
        func has(_ event: String, _ result: String, app: URL, reason: String? = nil) -> Bool {
            entries.contains {
                $0["event"] as? String == event && $0["result"] as? String == result && Self.appPath($0) == app.path
                    && (reason == nil || $0["reason"] as? String == reason)
            }
        }
        #expect(has("app_approved", "ok", app: apps.a), "\(entries)")
        #expect(has("app_refused", "refused", app: apps.b, reason: "app_not_approved"), "\(entries)")
        #expect(has("app_approved", "ok", app: apps.b), "\(entries)")
        #expect(has("prompt_result", "refused", app: apps.a, reason: "prompt_dismissed"), "\(entries)")
        #expect(has("export", "ok", app: apps.a), "\(entries)")
        #expect(has("app_refused", "refused", app: apps.a, reason: "unapprovable"), "\(entries)")
        #expect(
            entries.contains { $0["event"] as? String == "app_approved" && $0["detail"] as? String == "changed binary" },
            "\(entries)")
        let verified = try await h.runCLI(["audit", "--verify"], program: apps.a)
        #expect(verified.status == 0, "\(verified)")

        // An edited line is caught and named.
        let path = "\(h.stateDirectory)/audit.jsonl"
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let edited = text.replacingOccurrences(of: #""reason":"app_not_approved""#, with: #""reason":"ok""#)
        #expect(edited != text)
        try edited.write(toFile: path, atomically: false, encoding: .utf8)
        let broken = try await h.runCLI(["audit", "--verify"], program: apps.a)
        #expect(broken.status == 1 && broken.stderr.contains("is edited"), "\(broken)")
    }

    @Test("a dismissed approval changes nothing: the profile stays without an app, and nothing is recorded as approved")
    func dismissedApprovalChangesNothing() async throws {
        let h = try await DaemonHarness.start(
            config: Self.config, access: .enforced(pinentry: DaemonHarness.autoPinentryName))
        defer { h.shutdown() }
        let apps = try await Apps.make(h)
        h.autoPinentryDismisses(true)
        let first = try await h.runCLI(["account"], program: apps.a)
        #expect(first.status == 9 && first.stderr.contains("RAIN_401"), "\(first)")
        h.autoPinentryDismisses(false)
        // Still nobody's: B, asking next, is the one asked about and approved.
        let list = try await h.runCLI(["--json", "apps", "list"], program: apps.b)
        #expect(list.status == 0 && !list.stdout.contains(apps.a.path), "\(list)")
        let second = try await h.runCLI(["code", "send", "--email", "dismissed@example.com"], program: apps.b)
        #expect(second.status == 0, "\(second)")
        let owner = try await h.runCLI(["--json", "apps", "list"], program: apps.b)
        #expect(owner.stdout.contains(apps.b.path) && !owner.stdout.contains(apps.a.path), "\(owner)")
        // The dismissal is audited as A's refusal; nothing records A as approved.
        let entries = try await Self.audit(h, apps.b)
        #expect(
            entries.contains {
                $0["event"] as? String == "app_refused" && $0["result"] as? String == "refused"
                    && $0["reason"] as? String == "prompt_dismissed" && Self.appPath($0) == apps.a.path
            }, "\(entries)")
        #expect(!entries.contains { $0["event"] as? String == "app_approved" && Self.appPath($0) == apps.a.path })
    }

    @Test("a config edit by another program waits for the user: the daemon runs on the confirmed settings until confirmed")
    func configEditWaitsForConfirmation() async throws {
        let h = try await DaemonHarness.start(
            config: #"{"profiles": {"default": {"allowExport": false}}}"#,
            access: .enforced(pinentry: DaemonHarness.autoPinentryName))
        defer { h.shutdown() }
        let apps = try await Apps.make(h)
        try await Self.logIn(h, apps.a, email: "settings@example.com")

        // Another program turns export on and restarts the daemon.
        let configPath = try #require(h.configPath)
        try #"{"profiles": {"default": {"allowExport": true}}}"#.write(toFile: configPath, atomically: true, encoding: .utf8)
        _ = try await h.stop()
        try await h.start()
        #expect(h.log.contains("settings.change_waiting") && h.log.contains("profiles.default.allowExport"), "\(h.log)")
        let pending = try await h.runCLI(["--json", "settings"], program: apps.a)
        #expect(pending.stdout.contains("profiles.default.allowExport"), "\(pending)")
        // The human listing shows the short digest a prompt names when the list does not fit on it.
        let requested = try #require(pending.stdout.firstMatch(of: /"requestedDigest":"([0-9a-f]{64})"/)?.output.1, "\(pending)")
        let listed = try await h.runCLI(["settings"], program: apps.a)
        #expect(listed.stdout.contains("digest \(requested.prefix(16))"), "\(listed)")
        let refused = try await h.runCLI(["export", "phrase", "--yes"], program: apps.a)
        #expect(refused.status == 5 && refused.stderr.contains("not allowed"), "\(refused)")

        // Dismissed: still waiting. Confirmed: recorded, in effect at the next start.
        h.autoPinentryDismisses(true)
        let dismissed = try await h.runCLI(["settings", "confirm"], program: apps.a)
        #expect(dismissed.status == 9, "\(dismissed)")
        h.autoPinentryDismisses(false)
        let confirmed = try await h.runCLI(["settings", "confirm"], program: apps.a)
        #expect(confirmed.status == 0, "\(confirmed)")
        #expect(h.answeredPrompts.last?.contains("allowExport") == true, "\(h.answeredPrompts)")
        _ = try await h.stop()
        try await h.start()
        let export = try await h.runCLI(["--json", "export", "phrase", "--yes"], program: apps.a)
        #expect(export.status == 0 && export.stdout.contains("words"), "\(export)")

        // Audited: the edit waiting at the start, the dismissed and the confirmed confirmation, each
        // naming the keys (the rewritten config also drops the harness's storage key) and never a value.
        let entries = try await Self.audit(h, apps.a)
        func detail(_ event: String, _ result: String, app: URL? = nil) -> String? {
            entries.first {
                $0["event"] as? String == event && $0["result"] as? String == result
                    && (app == nil || Self.appPath($0) == app?.path)
            }?["detail"] as? String
        }
        let keys = "keys: profiles.default.allowExport, storage.provider"
        #expect(detail("settings_waiting", "refused") == keys, "\(entries)")
        #expect(detail("settings_changed", "cancelled", app: apps.a) == keys, "\(entries)")
        #expect(detail("settings_changed", "ok", app: apps.a) == keys, "\(entries)")

        // The record cannot be rewritten by hand: an edited one stops the start, naming the file.
        _ = try await h.stop()
        let record = "\(h.stateDirectory)/confirmed-settings.json"
        let sealed = try String(contentsOfFile: record, encoding: .utf8)
        try sealed.replacingOccurrences(of: "true", with: "false").write(toFile: record, atomically: true, encoding: .utf8)
        try h.launch()
        #expect(try await h.waitForExit() != 0)
        #expect(h.log.contains("confirmed-settings.json") && h.log.contains("changed outside rainwalletd"), "\(h.log)")
    }

    @Test("the approval answered on a real pinentry-tty on the registered terminal; a wrong code approves nothing")
    func realPinentryOnARegisteredTerminal() async throws {
        let pinentry = "/usr/bin/pinentry-tty"
        try #require(FileManager.default.isExecutableFile(atPath: pinentry), "pinentry-tty is installed by scripts/lib/deps.sh")
        let h = try await DaemonHarness.start(
            config: Self.config, environment: ["DISPLAY": nil], access: .enforced(pinentry: pinentry))
        defer { h.shutdown() }
        let apps = try await Apps.make(h)
        let pty = try PseudoTerminal()
        defer { pty.close() }

        // `prompt here` from the terminal (the first place: trusted, audited; a place secret chosen).
        let fd = open(pty.path, O_RDWR | O_NOCTTY | O_CLOEXEC)
        #expect(fd >= 0)
        let terminal = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        let registering = try h.launchCLI(["prompt", "here"], program: apps.a, standardInput: terminal)
        #expect(try await pty.choosePlaceSecret(), "\(pty.shown)")
        let here = try await registering.finish(timeout: .seconds(20))
        #expect(here.status == 0 && here.stdout.contains(pty.path), "\(here)")
        // Only the terminal's own side stays with the test (as with a terminal emulator): a process
        // holding the terminal itself outside its session stops every prompt there.
        try terminal.close()

        // A's first call: the prompt appears on the terminal, and the code typed there approves A.
        let first = try h.launchCLI(["code", "send", "--email", "real-pinentry@example.com"], program: apps.a)
        let shown = try #require(await pty.waitForText("and press Enter"), "no prompt on \(pty.path): \(pty.shown)")
        #expect(shown.contains(apps.a.path) && shown.contains("Profile: default"), "\(shown)")
        let code = try #require(shown.matches(of: /type the code  (\S+)  and press/).last?.output.1)
        try pty.type(String(code) + "\n")
        let approved = try await first.finish(timeout: .seconds(20))
        #expect(approved.status == 0, "\(approved)")

        // B asks for its own approval; a wrong code refuses it, and B stays refused.
        pty.clearShown()
        let asking = try h.launchCLI(["apps", "approve", apps.b.path], program: apps.b)
        _ = try #require(await pty.waitForText("and press Enter"), "no prompt: \(pty.shown)")
        try pty.type("ZZZZ\n")
        let wrong = try await asking.finish(timeout: .seconds(20))
        #expect(wrong.status == 9 && wrong.stderr.contains("RAIN_401"), "\(wrong)")
        let still = try await h.runCLI(["account"], program: apps.b)
        #expect(still.status == 5 && still.stderr.contains("is not approved"), "\(still)")
    }
}
