import Foundation
import RainCore
import RainTestSupport
import RainWire
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The prompt as programs of the daemon's own user attack it: a program of another session
/// holding the prompt terminal, a terminal multiplexer reading it, a client killed while its
/// prompt is up, copies of one program asking again and again, and an app path that would
/// rewrite the daemon's log. The daemon, its pinentry, the terminal's shell, the apps and the
/// attackers all run as one unprivileged uid (`OtherUser`): a daemon running as root would see
/// processes no user's daemon can.
@Suite(
    "Same user: the prompt and its terminal",
    .enabled(if: OtherUser.unavailableReason == nil, "needs a second uid: root and /usr/bin/setpriv (CI runs as root)"))
struct SameUserPromptTests {
    /// Starts `sh -c COMMAND` as the daemon's uid in a session of its own (`setsid -f`), the
    /// command writing its pid (`$$`) first, and returns that pid.
    static func startInOwnSession(_ d: UserDaemon, _ name: String, _ command: String) async throws -> Int32 {
        let pidFile = "\(d.home)/\(name).pid"
        let starter = try d.bin.launch(
            as: OtherUser.uid, executable: "/usr/bin/setsid", ["-f", "/bin/sh", "-c", "echo $$ > \(pidFile); \(command)"],
            home: d.home, log: "\(d.home)/\(name).log")
        _ = await starter.waitForExit(timeout: .seconds(20))
        var pid: Int32?
        let started = await eventually(timeout: .seconds(20)) {
            pid = Int32(DaemonHarness.readFile(pidFile).trimmingCharacters(in: .whitespacesAndNewlines))
            return pid != nil
        }
        return try #require(started ? pid : nil, "\(name): \(DaemonHarness.readFile("\(d.home)/\(name).log"))")
    }

    /// Waits for a prompt on `terminal` and types its code.
    static func confirm(on terminal: UserPromptTerminal, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let asked = try #require(
            await terminal.pty.waitForText("and press Enter", timeout: .seconds(20)), "no prompt: \(terminal.pty.shown)",
            sourceLocation: sourceLocation)
        let code = try #require(
            asked.matches(of: /type the code  (\S+)  and press/).last?.output.1, sourceLocation: sourceLocation)
        terminal.pty.clearShown()
        try terminal.pty.type(String(code) + "\n")
    }

    @Test(
        "a program of the user in another session holding the prompt terminal open stops the prompt (RAIN_202 prompt_terminal_shared, said on the terminal); once it is gone the prompt shows"
    )
    func foreignHolderStopsThePrompt() async throws {
        let d = try await UserDaemon.start(prompter: .terminal)
        defer { d.stop() }
        let terminal = try await UserPromptTerminal.register(d)
        defer { terminal.close() }

        // Another program of the user, in a session of its own, holds the terminal open.
        let holder = try await Self.startInOwnSession(d, "holder", "exec sleep 3600 < \(terminal.path)")
        defer { kill(holder, SIGKILL) }
        #expect(await eventually(timeout: .seconds(20)) { TestSupportProc.holds(pid: holder, path: terminal.path) })
        // `apps approve` asks the user every time.
        let refused = try await d.cli(["apps", "approve", "/bin/true"])
        #expect(
            refused.status == 5 && refused.stderr.contains("RAIN_202") && refused.stderr.contains("held open by pid \(holder)"),
            "\(refused)")
        #expect(await terminal.pty.waitForText("no prompt shown here", timeout: .seconds(20)) != nil, "\(terminal.pty.shown)")
        #expect(!terminal.pty.shown.contains("and press Enter"), "\(terminal.pty.shown)")
        #expect(d.children(named: "pinentry-tty").isEmpty)

        // Once it is gone, the prompt shows (and the user dismisses it).
        kill(holder, SIGKILL)
        #expect(await eventually(timeout: .seconds(20)) { !TestSupportProc.holds(pid: holder, path: terminal.path) })
        let log = "\(d.home)/approve.log"
        let asking = try d.launchCLI(["apps", "approve", "/bin/true"], log: log)
        #expect(await terminal.pty.waitForText("and press Enter", timeout: .seconds(20)) != nil, "\(terminal.pty.shown)")
        try terminal.pty.type([4])
        let dismissed = await asking.waitForExit(timeout: .seconds(30))
        #expect(dismissed == 9, "\(DaemonHarness.readFile(log))")
    }

    @Test(
        "a terminal multiplexer of the user holding the prompt terminal's other end is named on the prompt and by `status` (text and --json); once it is gone, by neither"
    )
    func multiplexerIsNamedOnThePromptAndInStatus() async throws {
        let d = try await UserDaemon.start(prompter: .terminal)
        defer { d.stop() }
        let terminal = try await UserPromptTerminal.register(d)
        defer { terminal.close() }
        // The user approves the CLI on the terminal (its first call that uses the profile); its
        // status then shows the place.
        let log = "\(d.home)/send.log"
        let first = try d.launchCLI(["code", "send", "--email", "multiplexer@example.com"], log: log)
        try await Self.confirm(on: terminal)
        #expect(await first.waitForExit(timeout: .seconds(30)) == 0, "\(DaemonHarness.readFile(log))")
        let place = "prompts:        terminal \(terminal.path)"
        let shownFirst = try await d.cli(["status"])
        #expect(shownFirst.stdout.contains(place + "\n"), "\(shownFirst)")

        // A program named like tmux, of the user, holds the terminal's master (as a multiplexer does).
        let tmux = "\(d.bin.directory)/tmux"
        try FileManager.default.copyItem(atPath: "/bin/sleep", toPath: tmux)
        let multiplexer = try d.bin.launch(
            as: OtherUser.uid, executable: tmux, ["3600"], home: d.home, log: "\(d.home)/tmux.log",
            stdin: .descriptor(terminal.pty.masterDescriptor))
        defer { multiplexer.signal(SIGKILL) }
        let pid = multiplexer.pid
        #expect(
            await eventually(timeout: .seconds(20)) { DaemonHarness.readFile("/proc/\(pid)/comm") == "tmux\n" },
            "\(DaemonHarness.readFile("\(d.home)/tmux.log"))")
        let named = "tmux (pid \(pid)) holds its other end and can read the screen"

        let status = try await d.cli(["status"])
        #expect(status.status == 0 && status.stdout.contains("\(place); \(named)"), "\(status)")
        let json = try await d.cli(["--json", "status"])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any], "\(json)")
        let prompt = try #require(object["prompt"] as? [String: Any], "\(json)")
        #expect(prompt["terminal"] as? String == terminal.path, "\(json)")
        let held = try #require(prompt["multiplexer"] as? [String: Any], "\(json)")
        #expect(held["command"] as? String == "tmux" && held["pid"] as? Int == Int(pid), "\(json)")

        // The prompt says so too (and the user dismisses it).
        let approveLog = "\(d.home)/approve.log"
        let asking = try d.launchCLI(["apps", "approve", "/bin/true"], log: approveLog)
        let shown = try #require(
            await terminal.pty.waitForText("and press Enter", timeout: .seconds(20)), "\(terminal.pty.shown)")
        #expect(shown.contains("Note: tmux (pid \(pid)) holds this terminal and can read the screen"), "\(shown)")
        try terminal.pty.type([4])
        #expect(await asking.waitForExit(timeout: .seconds(30)) == 9, "\(DaemonHarness.readFile(approveLog))")

        // Gone, it is named no more.
        multiplexer.signal(SIGKILL)
        _ = await multiplexer.waitForExit(timeout: .seconds(20))
        let after = try await d.cli(["status"])
        #expect(after.status == 0 && after.stdout.contains(place + "\n") && !after.stdout.contains("tmux"), "\(after)")
    }

    @Test(
        "a client of the user killed while its `apps approve` prompt is on screen withdraws it: pinentry gone, nothing approved, the next prompt shows at once"
    )
    func killedClientWithdrawsItsApproveAppPrompt() async throws {
        let d = try await UserDaemon.start(prompter: .terminal)
        defer { d.stop() }
        let terminal = try await UserPromptTerminal.register(d)
        defer { terminal.close() }

        // Apps/Approve is open to any app (the prompt decides); the client is killed while the
        // prompt waits for the code.
        let log = "\(d.home)/approve-1.log"
        let first = try d.launchCLI(["apps", "approve", "/bin/true"], log: log)
        let asked = try #require(
            await terminal.pty.waitForText("and press Enter", timeout: .seconds(20)), "\(terminal.pty.shown)")
        #expect(asked.contains("approve /"), "\(asked)")
        let shown = d.children(named: "pinentry-tty")
        #expect(shown.count == 1, "\(shown)")
        terminal.pty.clearShown()
        first.signal(SIGKILL)
        _ = await first.waitForExit(timeout: .seconds(20))
        #expect(
            await eventually(timeout: .seconds(20)) {
                shown.allSatisfy { !FileManager.default.fileExists(atPath: "/proc/\($0)") }
            },
            "pinentry still there: \(shown)")
        #expect(await terminal.pty.waitForText("withdrawn", timeout: .seconds(20)) != nil, "\(terminal.pty.shown)")

        // Nothing was approved, and the next prompt is shown at once (no RAIN_302 prompt_busy),
        // its code approving the program.
        let list = try await d.cli(["--json", "apps", "list"])
        #expect(list.status == 0 && !list.stdout.contains("/true"), "\(list)")
        let secondLog = "\(d.home)/approve-2.log"
        let second = try d.launchCLI(["apps", "approve", "/bin/true"], log: secondLog)
        try await Self.confirm(on: terminal)
        #expect(await second.waitForExit(timeout: .seconds(30)) == 0, "\(DaemonHarness.readFile(secondLog))")
        let approved = try await d.cli(["--json", "apps", "list"])
        #expect(approved.stdout.contains("/true"), "\(approved)")

        let audit = try await d.cli(["audit", "--json"])
        let withdrawn = audit.stdout.split(separator: "\n").filter {
            $0.contains("\"prompt_result\"") && $0.contains("prompt_withdrawn") && $0.contains("approve")
        }
        #expect(withdrawn.count == 1, "\(audit)")
        #expect(d.log.contains("prompt.withdrawn"), "\(d.log)")
    }

    @Test(
        "copies of one program of the user at four paths, each on a profile of its own: three approval prompts in a minute, then RAIN_302 prompt_rate_limited with when to retry, and nobody asked"
    )
    func approvalPromptsAreRateLimited() async throws {
        let d = try await UserDaemon.start()
        defer { d.stop() }
        // Hard links: one file, four paths, each a program never approved.
        var copies: [String] = []
        for n in 1...4 {
            let directory = "\(d.bin.directory)/copy-\(n)"
            #expect(mkdir(directory, 0o755) == 0)
            #expect(link(d.approvedApp, "\(directory)/app") == 0, "errno \(errno)")
            copies.append("\(directory)/app")
        }
        d.dismissPrompts(true)
        for (n, copy) in copies.enumerated() {
            let result = try await d.cli(
                ["--json", "--profile", "p\(n)", "code", "send", "--email", "copy\(n)@example.com"], program: copy)
            let error = try JSONSerialization.jsonObject(with: Data((result.stderr.split(separator: "\n").last ?? "").utf8))
            let details = (error as? [String: Any])?["error"] as? [String: Any]
            if n < 3 {
                #expect(result.status == 9 && details?["reason"] as? String == "prompt_dismissed", "copy \(n + 1): \(result)")
            } else {
                #expect(result.status == 8 && details?["reason"] as? String == "prompt_rate_limited", "copy 4: \(result)")
                let seconds = details?["retryAfterSeconds"] as? Int
                #expect(seconds.map { $0 > 0 && $0 <= 60 } == true, "copy 4: \(result)")
            }
        }
        // Three prompts, one per copy: the fourth copy asked nobody.
        let asked = d.prompts.split(separator: "\n").filter { $0.contains("RainWallet asks you to confirm") }
        #expect(asked.count == 3, "prompts: \(d.prompts)")
        #expect(!d.prompts.contains("copy-4"), "prompts: \(d.prompts)")
    }

    @Test(
        "apps of the user whose paths hold ESC[2J, U+202E and (a script's) a newline are refused on the prompt; the daemon's log shows their paths escaped, none of them raw"
    )
    func hostileAppPathIsEscapedInTheLog() async throws {
        let d = try await UserDaemon.start()
        defer { d.stop() }
        d.dismissPrompts(true)
        // A program in such a directory (a link to the CLI). Not a newline: /proc/PID/maps writes
        // one as `\012`, and the daemon, unable to read such a mapping, refuses the program unasked.
        let directory = "\(d.bin.directory)/evil\u{1B}[2Jx\u{202E}gpj"
        #expect(mkdir(directory, 0o755) == 0)
        let program = "\(directory)/wallet-app"
        #expect(link(d.approvedApp, program) == 0, "errno \(errno)")
        let refused = try await d.cli(["code", "send", "--email", "hostile@example.com"], program: program)
        #expect(refused.status == 9 && refused.stderr.contains("RAIN_401"), "\(refused)")
        // A script, whose path is whatever its command line claims: a newline too.
        let scripts = "\(d.bin.directory)/evil\u{1B}[2J\nforged\u{202E}gpj"
        #expect(mkdir(scripts, 0o755) == 0)
        let client = try UserRawClient.connect(d.bin, to: d.socket, directory: d.home, script: "\(scripts)/app.py")
        defer { client.close() }
        let asked = try await client.call(Method.authLogout, try LogoutRequest().encode(), profile: "scripted")
        #expect(asked.status.code == RainError.Code.userCancelled.rawValue, "\(asked.status)")

        let log = d.log
        let refusals = log.split(separator: "\n").filter { $0.contains("prompt.refused app=\"") }
        for escaped in [#"/evil\u{1B}[2Jx\u{202E}gpj/wallet-app""#, #"/evil\u{1B}[2J\nforged\u{202E}gpj/app.py""#] {
            #expect(refusals.contains { $0.contains(escaped) }, "\(escaped) in:\n\(log)")
        }
        #expect(!log.unicodeScalars.contains { $0 == "\u{1B}" || $0 == "\u{202E}" }, "\(log)")
        // The newline did not start a line of its own.
        #expect(!log.split(separator: "\n").contains { $0.hasPrefix("forged") }, "\(log)")
    }
}
