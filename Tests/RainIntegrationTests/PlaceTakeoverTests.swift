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
    static let pinentry = "/usr/bin/pinentry-tty"

    /// `rainwallet --socket SOCKET prompt here` on terminal `$1`: from a session of its own whose
    /// controlling terminal it is (the user's shell, which then waits as `sleep`, its pid in `$4`)
    /// when `$5` is `shell`; else straight, as any program that holds a terminal. Output in `$3`.
    static let register = #"""
        #!/bin/sh
        # An exec of the copied CLI meets ETXTBSY (exit 126) while another test's child, between its
        # fork and its exec, still holds the copy's write descriptor: it is run again then.
        if [ "$5" = shell ]; then
            exec /usr/bin/setsid -f -c /bin/sh -c 'echo $$ > "$4"; for i in 1 2 3 4 5 6 7 8 9 10; do "$0" --socket "$2" prompt here > "$3.tmp" 2>&1; s=$?; [ $s = 126 ] || break; sleep 0.1; done; mv "$3.tmp" "$3"; exec sleep 120' "$RAINWALLET_REGISTER" "$@" < "$1"
        fi
        for i in 1 2 3 4 5 6 7 8 9 10; do
            "$RAINWALLET_REGISTER" --socket "$2" prompt here < "$1" > "$3.tmp" 2>&1; s=$?
            [ $s = 126 ] || break
            sleep 0.1
        done
        echo "exit $s" >> "$3.tmp"; mv "$3.tmp" "$3"
        """#

    @Test(
        "after the registered shell is killed, its place file removed and the daemon restarted, the attacker's terminal is asked for the place secret, not trusted; wrong guesses take nothing and are audited"
    )
    func killedShellDoesNotFreeThePlace() async throws {
        try #require(
            FileManager.default.isExecutableFile(atPath: Self.pinentry), "pinentry-tty is installed by scripts/lib/deps.sh")
        let bin = try await AccessibleBinaries.make()
        defer { bin.remove() }
        let home = "\(bin.directory)/home"
        try OtherUser.makeDirectory(home, mode: 0o700)
        let policy = "\(bin.directory)/policy.json"
        #expect(
            FileManager.default.createFile(
                atPath: policy, contents: Data(#"{"access": {"pinentry": "\#(Self.pinentry)"}}"#.utf8),
                attributes: [.posixPermissions: 0o644]))
        let script = "\(bin.directory)/register"
        #expect(
            FileManager.default.createFile(
                atPath: script, contents: Data(Self.register.utf8), attributes: [.posixPermissions: 0o755]))
        let socket = "\(home)/rainwalletd.sock"
        let rainwallet = "\(bin.directory)/rainwallet"
        var daemons: [TestProcess] = []
        defer { for d in daemons { d.signal(SIGKILL) } }
        func startDaemon(_ n: Int) async throws {
            let log = "\(home)/daemon-\(n).log"
            let daemon = try bin.launch(
                as: OtherUser.uid, executable: "\(bin.directory)/rainwalletd-test",
                ["--socket", socket, "--state-dir", "\(home)/state", "--policy", policy], home: home, log: log)
            daemons.append(daemon)
            let ready = await eventually(timeout: .seconds(20)) {
                DaemonHarness.readFile(log).contains("daemon.ready") || !daemon.isRunning
            }
            try #require(ready && daemon.isRunning, "daemon log:\n\(DaemonHarness.readFile(log))")
        }
        func terminal() throws -> PseudoTerminal {
            let pty = try PseudoTerminal()
            try OtherUser.chown(pty.path)
            return pty
        }
        func register(_ pty: PseudoTerminal, output: String, shell: Bool) throws -> TestProcess {
            try bin.launch(
                // Read by the shell, not executed: a file just written can meet ETXTBSY at exec.
                as: OtherUser.uid, executable: "/bin/sh",
                [script, pty.path, socket, output, "\(home)/leader.pid", shell ? "shell" : "program"], home: home,
                log: "\(home)/register.log", environment: ["RAINWALLET_REGISTER": rainwallet])
        }
        try await startDaemon(1)

        // The user registers the first place from its shell, choosing the place secret.
        let user = try terminal()
        defer { user.close() }
        let userOutput = "\(home)/user.out"
        let shell = try register(user, output: userOutput, shell: true)
        _ = await shell.waitForExit(timeout: .seconds(20))
        #expect(try await user.choosePlaceSecret(), "\(user.shown) \(DaemonHarness.readFile("\(home)/register.log"))")
        #expect(await eventually(timeout: .seconds(20)) { FileManager.default.fileExists(atPath: userOutput) })
        #expect(DaemonHarness.readFile(userOutput).contains("appear on \(user.path)"), "\(DaemonHarness.readFile(userOutput))")

        // The attacker kills that shell, removes the place's file and restarts the daemon.
        let leader = DaemonHarness.readFile("\(home)/leader.pid").trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(Int32(leader) != nil, "leader pid: \(leader)")
        #expect(try OtherUser.run(["/bin/kill", "-KILL", leader]).status == 0)
        #expect(try OtherUser.run(["/bin/rm", "-f", "\(home)/state/prompt-place.json"]).status == 0)
        daemons.last?.signal(SIGTERM)
        _ = await daemons.last?.waitForExit(timeout: .seconds(10))
        try await startDaemon(2)

        // Its own terminal is no first place: it is asked for the secret, and guesses take nothing.
        let attacker = try terminal()
        defer { attacker.close() }
        let attackerOutput = "\(home)/attacker.out"
        let attempt = try register(attacker, output: attackerOutput, shell: false)
        for _ in 0..<3 { #expect(try await attacker.enterPlaceSecret("a guess at it"), "\(attacker.shown)") }
        _ = await attempt.waitForExit(timeout: .seconds(20))
        #expect(await eventually(timeout: .seconds(20)) { FileManager.default.fileExists(atPath: attackerOutput) })
        let answered = DaemonHarness.readFile(attackerOutput)
        #expect(answered.contains("RAIN_401") && answered.contains("exit 9"), "\(answered)")
        #expect(!attacker.shown.contains("Choose a place secret"), "\(attacker.shown)")

        let audit = try await bin.runCLI(as: OtherUser.uid, socket: socket, ["audit", "--json"])
        #expect(audit.status == 0, "\(audit)")
        let lines = audit.stdout.split(separator: "\n")
        let registrations = lines.filter { $0.contains("prompt_registered") }
        #expect(registrations.count == 1 && registrations.first?.contains("first place") == true, "\(audit.stdout)")
        #expect(lines.contains { $0.contains("prompt_secret_wrong") && $0.contains(#""count":3"#) }, "\(audit.stdout)")
    }
}
