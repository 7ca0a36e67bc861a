import Foundation
import RainTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The attacks on per-app access that `PerAppAccessTests` leaves out, through the real
/// daemon with the machine policy of `HarnessAccess.enforced` and two copies of the CLI (different
/// content, same uid): an export by an unapproved app, `apps revoke` confirmed and dismissed, and a
/// client killed while its prompt is on screen.
@Suite("Per-app access: exports, revocations, withdrawn prompts (processes)")
struct AccessAttackTests {
    typealias Apps = PerAppAccessTests.Apps

    static func has(
        _ entries: [[String: Any]], _ event: String, result: String, app: URL? = nil, reason: String? = nil,
        detail: String? = nil
    ) -> Bool {
        entries.contains {
            $0["event"] as? String == event && $0["result"] as? String == result
                && (app == nil || PerAppAccessTests.appPath($0) == app?.path)
                && (reason == nil || $0["reason"] as? String == reason)
                && (detail == nil || ($0["detail"] as? String)?.contains(detail ?? "") == true)
        }
    }

    /// A daemon with `pinentry-tty` and no display, two copies of the CLI, and a terminal that A
    /// registered for the prompts (the first place: trusted, with a place secret chosen). The caller closes `pty` and shuts `h` down.
    static func promptsOnATerminal() async throws -> (DaemonHarness, Int32, Apps, PseudoTerminal) {
        let pinentry = "/usr/bin/pinentry-tty"
        try #require(FileManager.default.isExecutableFile(atPath: pinentry), "pinentry-tty is installed by scripts/lib/deps.sh")
        let h = try await DaemonHarness.start(
            config: PerAppAccessTests.config, environment: ["DISPLAY": nil], access: .enforced(pinentry: pinentry))
        do {
            let daemon = try #require(h.pid)
            let apps = try await Apps.make(h)
            let pty = try PseudoTerminal()
            let fd = open(pty.path, O_RDWR | O_NOCTTY | O_CLOEXEC)
            #expect(fd >= 0)
            let registering = try h.launchCLI(
                ["prompt", "here"], program: apps.a, standardInput: FileHandle(fileDescriptor: fd, closeOnDealloc: true))
            #expect(try await pty.choosePlaceSecret(), "\(pty.shown)")
            let here = try await registering.finish(timeout: .seconds(20))
            #expect(here.status == 0, "\(here)")
            return (h, daemon, apps, pty)
        } catch {
            h.shutdown()
            throw error
        }
    }

    /// Waits for `client`'s prompt on `pty`, kills the client, and expects the prompt withdrawn:
    /// its pinentry gone and "withdrawn" said on the terminal.
    /// - Returns: what the prompt showed.
    static func killWhilePrompting(
        _ client: CLIProcess, daemon: Int32, pty: PseudoTerminal, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> String {
        let asked = try #require(
            await pty.waitForText("and press Enter"), "no prompt on \(pty.path): \(pty.shown)", sourceLocation: sourceLocation)
        let shown = children(of: daemon, named: "pinentry-tty")
        #expect(shown.count == 1, "\(shown)", sourceLocation: sourceLocation)
        pty.clearShown()
        #expect(kill(client.pid, SIGKILL) == 0, sourceLocation: sourceLocation)
        _ = try await client.finish(timeout: .seconds(5))
        #expect(
            await eventually(timeout: .seconds(2)) {
                shown.allSatisfy { !FileManager.default.fileExists(atPath: "/proc/\($0)") }
            }, "pinentry still there: \(shown)", sourceLocation: sourceLocation)
        #expect(
            await pty.waitForText("withdrawn", timeout: .seconds(2)) != nil, "\(pty.shown)", sourceLocation: sourceLocation)
        return asked
    }

    @Test("an export by an unapproved app on another app's profile: RAIN_202 app_not_approved, no prompt, audited")
    func unapprovedExportIsRefusedWithoutAPrompt() async throws {
        let h = try await DaemonHarness.start(
            config: PerAppAccessTests.config, access: .enforced(pinentry: DaemonHarness.autoPinentryName))
        defer { h.shutdown() }
        let apps = try await Apps.make(h)
        try await PerAppAccessTests.logIn(h, apps.a, email: "unapproved-export@example.com")
        let prompts = h.answeredPrompts.count
        #expect(prompts == 1, "\(h.answeredPrompts)")

        for command in [["export", "phrase"], ["export", "key", "--chain", "ethereum"]] {
            let export = try await h.runCLI(["--json"] + command + ["--yes"], program: apps.b)
            #expect(export.status == 5, "\(export)")
            #expect(export.stderr.contains("RAIN_202") && export.stderr.contains("app_not_approved"), "\(export)")
            #expect(!export.stdout.contains("words") && !export.stdout.contains("privateKey"), "\(export)")
        }
        // Nobody was asked: the refusal comes before any prompt.
        #expect(h.answeredPrompts.count == prompts, "\(h.answeredPrompts)")

        let entries = try await PerAppAccessTests.audit(h, apps.a)
        #expect(Self.has(entries, "app_refused", result: "refused", app: apps.b, reason: "app_not_approved"), "\(entries)")
        // No prompt and no export for B.
        #expect(
            !entries.contains {
                PerAppAccessTests.appPath($0) == apps.b.path
                    && ["prompt_result", "export"].contains($0["event"] as? String ?? "")
            }, "\(entries)")
        #expect(!entries.contains { $0["event"] as? String == "export" }, "\(entries)")
    }

    @Test("`apps revoke` through the daemon: dismissed, nothing changes; confirmed, the app is refused afterwards; both audited")
    func revokeAskTheUser() async throws {
        let h = try await DaemonHarness.start(
            config: PerAppAccessTests.config, access: .enforced(pinentry: DaemonHarness.autoPinentryName))
        defer { h.shutdown() }
        let apps = try await Apps.make(h)
        try await PerAppAccessTests.logIn(h, apps.a, email: "revoke@example.com")
        let approve = try await h.runCLI(["apps", "approve", apps.b.path], program: apps.a)
        #expect(approve.status == 0, "\(approve)")
        let before = try await h.runCLI(["account"], program: apps.b)
        #expect(before.status == 0, "\(before)")
        let prompts = h.answeredPrompts.count

        // Dismissed: B keeps its access.
        h.autoPinentryDismisses(true)
        let dismissed = try await h.runCLI(["apps", "revoke", apps.b.path], program: apps.a)
        h.autoPinentryDismisses(false)
        #expect(dismissed.status == 9 && dismissed.stderr.contains("RAIN_401"), "\(dismissed)")
        #expect(h.answeredPrompts.count == prompts + 1, "\(h.answeredPrompts)")
        #expect(h.answeredPrompts.last?.contains("revoke \(apps.b.path)") == true, "\(h.answeredPrompts)")
        let still = try await h.runCLI(["account"], program: apps.b)
        #expect(still.status == 0, "\(still)")
        let listed = try await h.runCLI(["--json", "apps", "list"], program: apps.a)
        #expect(listed.stdout.contains(apps.b.path), "\(listed)")

        // Confirmed: B is refused from its next call on, and A keeps the profile.
        let revoke = try await h.runCLI(["apps", "revoke", apps.b.path], program: apps.a)
        #expect(revoke.status == 0, "\(revoke)")
        #expect(h.answeredPrompts.count == prompts + 2, "\(h.answeredPrompts)")
        let refused = try await h.runCLI(["account"], program: apps.b)
        #expect(refused.status == 5 && refused.stderr.contains("RAIN_202"), "\(refused)")
        let owner = try await h.runCLI(["account"], program: apps.a)
        #expect(owner.status == 0, "\(owner)")
        let after = try await h.runCLI(["--json", "apps", "list"], program: apps.a)
        #expect(!after.stdout.contains(apps.b.path) && after.stdout.contains(apps.a.path), "\(after)")

        let entries = try await PerAppAccessTests.audit(h, apps.a)
        let action = "revoke \(apps.b.path)"
        #expect(
            Self.has(entries, "prompt_result", result: "refused", app: apps.a, reason: "prompt_dismissed", detail: action),
            "\(entries)")
        #expect(Self.has(entries, "app_revoked", result: "ok", detail: apps.b.path), "\(entries)")
        #expect(entries.filter { $0["event"] as? String == "app_revoked" }.count == 1, "\(entries)")
        #expect(Self.has(entries, "app_refused", result: "refused", app: apps.b, reason: "app_not_approved"), "\(entries)")
    }

    @Test(
        "a client killed while its `apps approve` prompt is on screen withdraws it: pinentry gone, nothing approved, the next prompt shows"
    )
    func killedClientWithdrawsItsApproveAppPrompt() async throws {
        let (h, daemon, apps, pty) = try await Self.promptsOnATerminal()
        defer {
            pty.close()
            h.shutdown()
        }

        // A asks to approve B (Apps/Approve, open to any app: the prompt decides); A is killed while
        // the prompt waits for the code.
        let first = try h.launchCLI(["apps", "approve", apps.b.path], program: apps.a)
        let asked = try await Self.killWhilePrompting(first, daemon: daemon, pty: pty)
        #expect(asked.contains("approve \(apps.b.path)"), "\(asked)")

        // Nothing was approved, and the next prompt is shown at once (no RAIN_302 prompt_busy):
        // `apps revoke` of an app that is not approved is refused before any prompt, so `apps
        // approve` again, answered with its code.
        let list = try await h.runCLI(["--json", "apps", "list"], program: apps.a)
        #expect(list.status == 0 && !list.stdout.contains(apps.b.path), "\(list)")
        pty.clearShown()
        let second = try h.launchCLI(["apps", "approve", apps.b.path], program: apps.a)
        let again = try #require(await pty.waitForText("and press Enter"), "no second prompt: \(pty.shown)")
        let code = try #require(again.matches(of: /type the code  (\S+)  and press/).last?.output.1)
        try pty.type(String(code) + "\n")
        let approved = try await second.finish(timeout: .seconds(20))
        #expect(approved.status == 0 && !approved.stderr.contains("RAIN_302"), "\(approved)")

        let entries = try await PerAppAccessTests.audit(h, apps.b)
        #expect(
            Self.has(entries, "prompt_result", result: "refused", app: apps.a, reason: "prompt_withdrawn", detail: "approve"),
            "\(entries)")
        #expect(h.log.contains("prompt.withdrawn"), "\(h.log)")
    }

    @Test(
        "an app whose path holds ESC[2J, a newline and U+202E is refused; the daemon log shows its path escaped, none of them raw"
    )
    func hostileAppPathIsEscapedInTheLog() async throws {
        let h = try await DaemonHarness.start(
            config: PerAppAccessTests.config, access: .enforced(pinentry: DaemonHarness.autoPinentryName))
        defer { h.shutdown() }
        let directory = "\(h.directory)/evil\u{1B}[2J\nforged\u{202E}gpj"
        let program = URL(fileURLWithPath: "\(directory)/wallet-app")
        let source = h.binaryDirectory.appendingPathComponent("rainwallet")
        try await onThread {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try FileManager.default.copyItem(at: source, to: program)
        }
        h.autoPinentryDismisses(true)
        let refused = try await h.runCLI(["account"], program: program)
        #expect(refused.status == 9 && refused.stderr.contains("RAIN_401"), "\(refused)")
        #expect(h.answeredPrompts.count == 1, "\(h.answeredPrompts)")

        let log = h.log
        let escaped = #"evil\u{1B}[2J\nforged\u{202E}gpj/wallet-app"#
        #expect(log.contains("prompt.refused app=\"\(h.directory)/\(escaped)\""), "\(log)")
        #expect(!log.unicodeScalars.contains { $0 == "\u{1B}" || $0 == "\u{202E}" }, "\(log)")
        // The newline did not start a line of its own.
        #expect(!log.split(separator: "\n").contains { $0.hasPrefix("forged") }, "\(log)")
    }

    /// The pids of `parent`'s children whose command name is `name`.
    static func children(of parent: Int32, named name: String) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { Int32($0) }.filter { pid in
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                let open = stat.firstIndex(of: "("), let close = stat.lastIndex(of: ")")
            else { return false }
            // "PID (COMM) STATE PPID …"
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return stat[stat.index(after: open)..<close] == name && fields.count > 1 && Int32(fields[1]) == parent
        }
    }

    @Test("a client killed while its prompt is on screen withdraws it: pinentry gone, nothing approved, the next prompt shows")
    func killedClientWithdrawsItsPrompt() async throws {
        let (h, daemon, apps, pty) = try await Self.promptsOnATerminal()
        defer {
            pty.close()
            h.shutdown()
        }

        // A's first call asks the user; A is killed while the prompt waits for the code.
        let first = try h.launchCLI(["code", "send", "--email", "withdrawn@example.com"], program: apps.a)
        _ = try await Self.killWhilePrompting(first, daemon: daemon, pty: pty)

        // Nothing was approved: the profile still has no app.
        let list = try await h.runCLI(["--json", "apps", "list"], program: apps.b)
        #expect(list.status == 0 && !list.stdout.contains(apps.a.path), "\(list)")

        // The next prompt is shown at once (no RAIN_302 prompt_busy), and its code approves A.
        pty.clearShown()
        let second = try h.launchCLI(["code", "send", "--email", "withdrawn@example.com"], program: apps.a)
        let again = try #require(await pty.waitForText("and press Enter"), "no second prompt: \(pty.shown)")
        let code = try #require(again.matches(of: /type the code  (\S+)  and press/).last?.output.1)
        try pty.type(String(code) + "\n")
        let approved = try await second.finish(timeout: .seconds(20))
        #expect(approved.status == 0 && !approved.stderr.contains("RAIN_302"), "\(approved)")

        // The same for an export by the approved app: killed on its prompt, nothing is exported.
        try await PerAppAccessTests.logIn(h, apps.a, email: "withdrawn@example.com")
        pty.clearShown()
        let export = try h.launchCLI(["--json", "export", "phrase", "--yes"], program: apps.a)
        _ = try #require(await pty.waitForText("and press Enter"), "no export prompt: \(pty.shown)")
        let exportPrompt = Self.children(of: daemon, named: "pinentry-tty")
        #expect(exportPrompt.count == 1, "\(exportPrompt)")
        #expect(kill(export.pid, SIGKILL) == 0)
        let killed = try await export.finish(timeout: .seconds(5))
        #expect(!killed.stdout.contains("words"), "\(killed)")
        #expect(
            await eventually(timeout: .seconds(2)) {
                exportPrompt.allSatisfy { !FileManager.default.fileExists(atPath: "/proc/\($0)") }
            }, "pinentry still there: \(exportPrompt)")

        let entries = try await PerAppAccessTests.audit(h, apps.a)
        #expect(Self.has(entries, "app_refused", result: "refused", app: apps.a, reason: "prompt_withdrawn"), "\(entries)")
        #expect(entries.filter { $0["event"] as? String == "app_approved" }.count == 1, "\(entries)")
        #expect(
            Self.has(
                entries, "prompt_result", result: "refused", app: apps.a, reason: "prompt_withdrawn", detail: "recovery phrase"),
            "\(entries)")
        #expect(!entries.contains { $0["event"] as? String == "export" }, "\(entries)")
        #expect(h.log.contains("prompt.withdrawn"), "\(h.log)")
    }
}
