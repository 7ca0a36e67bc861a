import Foundation
import Glibc
import RainTestSupport
import Testing

/// The attack on the prompt place, as a program of the user would run it: kill the shell of the
/// registered terminal, remove the place's file, restart the daemon, and register a terminal it
/// holds. The daemon, the user's shell and the attacker all run as one unprivileged uid
/// (`OtherUser`); the terminals are given to that uid, as a terminal emulator of that user makes them.
@Suite(
    "Prompt place: a closed place is never a first place again",
    .enabled(if: OtherUser.unavailableReason == nil, "needs a second uid: root and /usr/bin/setpriv (CI runs as root)"))
struct PlaceTakeoverTests {
    @Test(
        "after the registered shell is killed, its place file removed and the daemon restarted, the attacker's terminal is asked for the place secret, not trusted; wrong guesses take nothing and are audited"
    )
    func killedShellDoesNotFreeThePlace() async throws {
        // The user registers the first place from its shell, choosing the place secret.
        let first = try await UserDaemon.start(prompter: .terminal)
        var restarted: UserDaemon?
        defer { (restarted ?? first).stop() }
        let user = try await UserPromptTerminal.register(first)
        defer { user.pty.close() }

        // The attacker kills that shell, removes the place's file and restarts the daemon.
        #expect(try OtherUser.run(["/bin/kill", "-KILL", "\(user.shell)"]).status == 0)
        #expect(try OtherUser.run(["/bin/rm", "-f", "\(first.home)/state/prompt-place.json"]).status == 0)
        #expect(try OtherUser.run(["/bin/kill", "-TERM", "\(first.daemon.pid)"]).status == 0)
        #expect(await first.daemon.waitForExit(timeout: .seconds(20)) != nil)
        let d = try await first.restarted(prompter: .terminal)
        restarted = d

        // Its own terminal is no first place: it is asked for the secret, and guesses take nothing.
        let attacker = try PseudoTerminal()
        defer { attacker.close() }
        try OtherUser.chown(attacker.path)
        let terminal = open(attacker.path, O_RDWR | O_NOCTTY | O_CLOEXEC)
        try #require(terminal >= 0)
        defer { close(terminal) }
        let output = "\(d.home)/attacker.out"
        let attempt = try d.bin.launch(
            as: OtherUser.uid, executable: d.approvedApp, ["--socket", d.socket, "prompt", "here"], home: d.home,
            log: output, stdin: .descriptor(terminal))
        for _ in 0..<3 { #expect(try await attacker.enterPlaceSecret("a guess at it"), "\(attacker.shown)") }
        let status = await attempt.waitForExit(timeout: .seconds(20))
        let answered = DaemonHarness.readFile(output)
        #expect(status == 9 && answered.contains("RAIN_401"), "exit \(String(describing: status)): \(answered)")
        #expect(!attacker.shown.contains("Choose a place secret"), "\(attacker.shown)")

        let audit = try await d.cli(["audit", "--json"])
        #expect(audit.status == 0, "\(audit)")
        let lines = audit.stdout.split(separator: "\n")
        let registrations = lines.filter { $0.contains("prompt_registered") }
        #expect(registrations.count == 1 && registrations.first?.contains("first place") == true, "\(audit.stdout)")
        #expect(lines.contains { $0.contains("prompt_secret_wrong") && $0.contains(#""count":3"#) }, "\(audit.stdout)")
    }
}
