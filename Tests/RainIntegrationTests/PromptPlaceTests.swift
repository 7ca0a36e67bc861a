import Foundation
import Glibc
import RainCore
import RainTestSupport
import Testing

/// The registered prompt terminal outlives a restart of the daemon (where the
/// prompt appears is the user's choice, and `rainwallet prompt here` is itself confirmed). Kept in
/// memory only, every restart would leave no place, and the first registration after it would be
/// trusted: any program that restarted rainwalletd could register a terminal it holds and answer the prompts.
@Suite("Prompt place across restarts", .serialized)
struct PromptPlaceTests {
    @Test(
        "after a restart, registering another terminal is confirmed on the one registered before; once that one is closed, a new one takes the place secret and a 10-minute wait"
    )
    func registeredTerminalOutlivesARestart() async throws {
        let pinentry = "/usr/bin/pinentry-tty"
        try #require(FileManager.default.isExecutableFile(atPath: pinentry), "pinentry-tty is installed by scripts/lib/deps.sh")
        let clock = try TestClockFile(path: "/tmp/rwclock-\(UInt32.random(in: 0...UInt32.max))")
        defer { try? FileManager.default.removeItem(atPath: clock.path) }
        let h = try await DaemonHarness.start(
            environment: ["DISPLAY": nil, TestClockEnvironment.variable: clock.path], access: .enforced(pinentry: pinentry))
        defer { h.shutdown() }
        let user = try PseudoTerminal()
        var userOpen = true
        defer { if userOpen { user.close() } }
        let attacker = try PseudoTerminal()
        defer { attacker.close() }

        func promptHere(_ pty: PseudoTerminal, program: URL? = nil) throws -> (CLIProcess, FileHandle) {
            let fd = open(pty.path, O_RDWR | O_NOCTTY | O_CLOEXEC)
            #expect(fd >= 0)
            let terminal = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
            return (try h.launchCLI(["prompt", "here"], program: program, standardInput: terminal), terminal)
        }

        // The user registers a terminal from its shell (a session whose controlling terminal it
        // is: `setsid -c`, the shell then waiting as `sleep`): the first place, trusted.
        let shell = URL(fileURLWithPath: "\(h.directory)/terminal-shell")
        let output = "\(h.directory)/terminal-shell.out"
        let rainwallet = h.binaryDirectory.appendingPathComponent("rainwallet").path
        let body = #"'"$0" "$@" >"\#(output).tmp" 2>&1; mv "\#(output).tmp" "\#(output)"; exec sleep 60'"#
        try """
        #!/bin/sh
        exec /usr/bin/setsid -f -c /bin/sh -c \(body) "\(rainwallet)" "$@"
        """.write(to: shell, atomically: true, encoding: .utf8)
        #expect(chmod(shell.path, 0o700) == 0)
        let (first, firstInput) = try promptHere(user, program: shell)
        #expect(try await first.finish(timeout: .seconds(20)).status == 0)
        try firstInput.close()
        #expect(try await user.choosePlaceSecret(), "\(user.shown)")
        #expect(await eventually(timeout: .seconds(15)) { FileManager.default.fileExists(atPath: output) })
        let registered = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        #expect(registered.contains(user.path), "\(registered)")

        // Another program restarts the daemon and registers its own terminal at once.
        try await h.restart()
        #expect(h.log.contains("registered before this start"), "\(h.log)")
        let (second, secondInput) = try promptHere(attacker)
        defer { try? secondInput.close() }
        // The question goes to the user's terminal, not to the new one…
        let shown = try #require(await user.waitForText("and press Enter"), "no prompt on \(user.path): \(user.shown)")
        #expect(shown.contains(attacker.path), "\(shown)")
        #expect(!attacker.shown.contains("and press Enter"))
        // …and the user refuses it: the place stays the user's.
        try user.type([4])
        let refused = try await second.finish(timeout: .seconds(20))
        #expect(refused.status == 9 && refused.stderr.contains("RAIN_401"), "\(refused)")

        // Once the user's terminal is closed (its shell hung up, its node gone), a new place is
        // no first place: it takes the place secret, and a wrong one takes nothing.
        user.close()
        userOpen = false
        attacker.clearShown()
        let (third, thirdInput) = try promptHere(attacker)
        defer { try? thirdInput.close() }
        for _ in 0..<3 { #expect(try await attacker.enterPlaceSecret("a guess at it"), "\(attacker.shown)") }
        let guessed = try await third.finish(timeout: .seconds(20))
        #expect(guessed.status == 9, "\(guessed)")
        #expect(guessed.stderr.contains("RAIN_401") && guessed.stderr.contains("not the place secret"), "\(guessed)")
        let nowhere = try await h.runCLI(["apps", "approve", "/bin/true"])
        #expect(nowhere.status == 5 && nowhere.stderr.contains("no prompt can be shown"), "\(nowhere)")

        // The right secret moves the place, after a wait of 10 minutes on the daemon's clock.
        let mine = try PseudoTerminal()
        defer { mine.close() }
        let (fourth, fourthInput) = try promptHere(mine)
        defer { try? fourthInput.close() }
        #expect(try await mine.enterPlaceSecret(), "\(mine.shown)")
        #expect(
            await eventually(timeout: .seconds(20)) { fourth.stderrSoFar.contains("keep this running") }, "\(fourth.stderrSoFar)")
        kill(fourth.pid, SIGKILL)
        _ = try await fourth.finish(timeout: .seconds(10))
        try clock.advance(by: .seconds(601))
        #expect(await eventually(timeout: .seconds(10)) { h.log.contains("clock.advanced offsetMilliseconds=601000") })
        let (fifth, fifthInput) = try promptHere(mine)
        defer { try? fifthInput.close() }
        #expect(try await mine.enterPlaceSecret(), "\(mine.shown)")
        let moved = try await fifth.finish(timeout: .seconds(20))
        #expect(moved.status == 0 && moved.stdout.contains(mine.path), "\(moved)")
        let audit = try await h.runCLI(["audit", "--json"])
        #expect(audit.status == 0, "\(audit)")
        let lines = audit.stdout.split(separator: "\n")
        let registrations = lines.filter { $0.contains("prompt_registered") }
        #expect(registrations.count == 2, "\(audit.stdout)")
        #expect(registrations.first?.contains("first place") == true, "\(registrations)")
        #expect(registrations.last?.contains("confirmed by the place secret") == true, "\(registrations)")
        // Repeats of one entry are written once, with their count.
        let wrong = lines.filter { $0.contains("prompt_secret_wrong") }
        #expect(wrong.count == 1 && wrong.first?.contains(#""count":3"#) == true, "\(audit.stdout)")
        #expect(lines.filter { $0.contains("prompt_move_requested") }.count == 1, "\(audit.stdout)")
    }

    @Test(
        "a process outside the registered shell's session that holds the prompt terminal open stops the prompt (RAIN_202 prompt_terminal_shared, said on the terminal); once it is gone the prompt shows"
    )
    func foreignHolderStopsThePrompt() async throws {
        let pinentry = "/usr/bin/pinentry-tty"
        try #require(FileManager.default.isExecutableFile(atPath: pinentry), "pinentry-tty is installed by scripts/lib/deps.sh")
        let h = try await DaemonHarness.start(environment: ["DISPLAY": nil], access: .enforced(pinentry: pinentry))
        defer { h.shutdown() }
        let user = try PseudoTerminal()
        defer { user.close() }
        // The user's shell registers the terminal from its own session, then waits.
        let shell = URL(fileURLWithPath: "\(h.directory)/terminal-shell")
        let output = "\(h.directory)/terminal-shell.out"
        let rainwallet = h.binaryDirectory.appendingPathComponent("rainwallet").path
        try """
        #!/bin/sh
        exec /usr/bin/setsid -f -c /bin/sh -c '"$0" "$@" >"\(output).tmp" 2>&1; mv "\(output).tmp" "\(output)"; exec sleep 60' "\(rainwallet)" "$@"
        """.write(to: shell, atomically: true, encoding: .utf8)
        #expect(chmod(shell.path, 0o700) == 0)
        let fd = open(user.path, O_RDWR | O_NOCTTY | O_CLOEXEC)
        #expect(fd >= 0)
        let input = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        #expect(
            try await h.launchCLI(["prompt", "here"], program: shell, standardInput: input).finish(timeout: .seconds(20)).status
                == 0)
        try input.close()
        #expect(try await user.choosePlaceSecret(), "\(user.shown)")
        // `setsid -f` returns at once: the registration is done when the shell has written its output.
        #expect(await eventually(timeout: .seconds(15)) { FileManager.default.fileExists(atPath: output) })
        #expect(DaemonHarness.readFile(output).contains(user.path), "\(DaemonHarness.readFile(output))")

        // Another program of the user, in a session of its own, holds the terminal open.
        let pidFile = "\(h.directory)/holder.pid"
        let starter = try TestProcess(
            "/usr/bin/setsid", ["-f", "/bin/sh", "-c", "echo $$ > \(pidFile); exec sleep 60 < \(user.path)"])
        _ = await starter.waitForExit(timeout: .seconds(10))
        #expect(
            await eventually(timeout: .seconds(10)) {
                Int32(DaemonHarness.readFile(pidFile).trimmingCharacters(in: .whitespacesAndNewlines)) != nil
            })
        let holder = Int32(DaemonHarness.readFile(pidFile).trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        defer { if holder > 0 { kill(holder, SIGKILL) } }
        #expect(await eventually(timeout: .seconds(10)) { TestSupportProc.holds(pid: holder, path: user.path) })
        // `apps approve` asks the user every time.
        let refused = try await h.runCLI(["apps", "approve", "/bin/true"])
        #expect(
            refused.status == 5 && refused.stderr.contains("RAIN_202") && refused.stderr.contains("is held open by"), "\(refused)"
        )
        #expect(await user.waitForText("no prompt shown here") != nil, "\(user.shown)")
        #expect(!user.shown.contains("and press Enter"), "\(user.shown)")

        // Once it is gone, the prompt shows (and the user dismisses it).
        kill(holder, SIGKILL)
        #expect(await eventually(timeout: .seconds(10)) { !TestSupportProc.holds(pid: holder, path: user.path) })
        let asking = try h.launchCLI(["apps", "approve", "/bin/true"])
        #expect(await user.waitForText("and press Enter") != nil, "\(user.shown)")
        try user.type([4])
        let dismissed = try await asking.finish(timeout: .seconds(20))
        #expect(dismissed.status == 9, "\(dismissed)")
    }
}

/// What `/proc` says about a test's own child processes.
enum TestSupportProc {
    /// Whether `pid` has a descriptor open on `path`.
    static func holds(pid: Int32, path: String) -> Bool {
        let directory = "/proc/\(pid)/fd"
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.contains { (try? FileManager.default.destinationOfSymbolicLink(atPath: "\(directory)/\($0)")) == path }
    }
}
