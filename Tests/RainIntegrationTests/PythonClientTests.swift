import Foundation
import Glibc
import RainTestSupport
import Testing

/// What the Python client needs (outside the suite: its trait cannot refer to the suite's own type).
enum PythonTools {
    static let python = "/usr/bin/python3"

    /// `protoc` on PATH (the client runs it to generate the message classes).
    static let protoc: String? = {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/protoc" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }()

    static var arePresent: Bool { FileManager.default.isExecutableFile(atPath: python) && protoc != nil }
}

/// The Python example client (Examples/python/rainwallet_client.py), written from proto/PROTOCOL.md
/// alone with `protoc --python_out` and the protobuf runtime, run end to end against a real daemon
/// so the document stays true.
@Suite(
    .timeLimit(.minutes(2)),
    .enabled(
        if: PythonTools.arePresent,
        "needs /usr/bin/python3 and protoc on PATH (Debian: python3, python3-protobuf, protobuf-compiler; scripts/lib/deps.sh installs them)"
    ))
struct PythonClientTests {
    static let python = PythonTools.python
    static let repositoryRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let client = repositoryRoot.appendingPathComponent("Examples/python/rainwallet_client.py").path

    /// What the daemon names the client: the interpreter's executable (symbolic links resolved, as
    /// `/proc/PID/exe` shows it) and the script as its command line gives it (docs/app-identity.md).
    static var appPath: String {
        guard let real = realpath(python, nil) else { return python }
        defer { free(real) }
        return "\(String(cString: real)) \(client)"
    }

    /// A daemon whose policy pre-approves the Python client for every profile, as it does the CLI.
    static func startDaemon() async throws -> DaemonHarness {
        try await DaemonHarness.start(access: .testRunnerApprovedWith(apps: [appPath]))
    }

    /// Runs `rainwallet_client.py --socket SOCKET ARGS…` with the harness's environment, minus the
    /// interpreter variables that make a caller unapprovable (`PYTHONPATH`, …).
    static func runClient(
        _ h: DaemonHarness, _ arguments: [String], socket: String? = nil, extraEnvironment: [String: String] = [:],
        input: String = ""
    ) async throws -> CLIResult {
        let environment = h.daemonEnvironment.filter { !$0.key.hasPrefix("PYTHON") }.merging(extraEnvironment) { $1 }
        return try await TestProcess.run(
            python, [client, "--socket", socket ?? h.socketPath] + arguments, environment: environment, input: input,
            timeout: .seconds(60))
    }

    @Test("the Python client reads GetInfo: protocol 1 and the daemon's capabilities, dev-outbox among them")
    func info() async throws {
        let h = try await Self.startDaemon()
        defer { h.shutdown() }
        let r = try await Self.runClient(h, ["info"])
        #expect(r.status == 0, "\(r)")
        #expect(r.stdout.contains("protocol version: 1"), "\(r.stdout)")
        #expect(r.stdout.contains("max frame bytes: 1048576"), "\(r.stdout)")
        #expect(r.stdout.contains("capabilities: login-code, session-state, watch"), "\(r.stdout)")
        #expect(r.stdout.contains("dev-outbox"), "\(r.stdout)")
    }

    @Test(
        "the Python client logs in by email with the outbox's code, Watch events ahead of the answer, and the state reads authenticated"
    )
    func loginWithOutboxCode() async throws {
        let h = try await Self.startDaemon()
        defer { h.shutdown() }
        let before = try await Self.runClient(h, ["state"])
        #expect(before.status == 0, "\(before)")
        #expect(before.stdout.contains("auth state: unauthenticated"), "\(before.stdout)")

        let login = try await Self.runClient(h, ["login", "--watch", "--email", "  Py@Example.COM "])
        #expect(login.status == 0, "\(login)")
        // In this order (PROTOCOL.md §5.8, §7): the watch's first event is the current state; the
        // login's events arrive on the same connection ahead of ConfirmLoginCode's answer.
        let expected = [
            "event 1: auth_state (auth state unauthenticated, session none)", "code sent to py@example.com",
            "code read from the development outbox", "event 2: auth_state (auth state authenticated, session active)",
            "event 3: session_state (auth state authenticated, session active)", "logged in (new account)",
            "auth state: authenticated", "session: active", "contact: py@example.com",
        ]
        let lines = login.stdout.split(separator: "\n").map(String.init)
        let positions = expected.map { line in lines.firstIndex { $0.hasPrefix(line) } }
        #expect(!positions.contains(nil), "missing lines in:\n\(login.stdout)")
        #expect(positions.compactMap { $0 } == positions.compactMap { $0 }.sorted(), "out of order:\n\(login.stdout)")
        #expect(!login.stdout.contains("event 4"), "\(login.stdout)")

        let watch = try await Self.runClient(h, ["watch", "--events", "1"])
        #expect(watch.status == 0, "\(watch)")
        #expect(
            watch.stdout == "event 1: auth_state (auth state authenticated, session active)\nwatch cancelled\n",
            "\(watch.stdout)")

        let state = try await Self.runClient(h, ["state"])
        #expect(state.status == 0, "\(state)")
        #expect(state.stdout.contains("auth state: authenticated"), "\(state.stdout)")
        #expect(state.stdout.contains("has active session: yes"), "\(state.stdout)")
        #expect(state.stdout.contains("account: acct_"), "\(state.stdout)")
        // Approved by the policy as interpreter + script: nobody was asked.
        #expect(h.answeredPrompts.isEmpty, "\(h.answeredPrompts)")

        let logout = try await Self.runClient(h, ["logout"])
        #expect(logout.status == 0 && logout.stdout.contains("logged out"), "\(logout)")
        let after = try await Self.runClient(h, ["state"])
        #expect(after.stdout.contains("auth state: unauthenticated"), "\(after.stdout)")
    }

    @Test(
        "confirm reads the code from stdin, never needs the command line, and after a wrong code (RAIN_203, attempts left) asks again"
    )
    func wrongCodeIsAskedAgain() async throws {
        let h = try await Self.startDaemon()
        defer { h.shutdown() }
        let sent = try await Self.runClient(h, ["send-code", "--email", "wrong@example.com"])
        #expect(sent.status == 0, "\(sent)")
        let code = try await h.waitForCode(for: "wrong@example.com")

        // Only a wrong code: answered inline, then the end of input ends it.
        let wrong = try await Self.runClient(h, ["confirm"], input: "\(wrongCode(for: code))\n")
        #expect(wrong.status == 1, "\(wrong)")
        #expect(wrong.stdout.contains("That code didn't work. Check it and try again (2 left)."), "\(wrong)")
        #expect(wrong.stderr.contains("error: RAIN_102: no code was entered"), "\(wrong.stderr)")

        let right = try await Self.runClient(h, ["confirm"], input: "\(wrongCode(for: code))\n\(code)\n")
        #expect(right.status == 0, "\(right)")
        #expect(right.stdout.contains("(1 left)") && right.stdout.contains("auth state: authenticated"), "\(right.stdout)")
        #expect(right.stderr.isEmpty, "\(right.stderr)")
    }

    @Test(
        "the whole example as an unapproved script: the user answers its real pinentry-tty prompt (script, not verifiable), then it sends, handles a wrong code, confirms, reads the account and wallet, logs out"
    )
    func demoAnswersARealPrompt() async throws {
        let (h, _, _, pty) = try await AccessAttackTests.promptsOnATerminal()
        defer {
            pty.close()
            h.shutdown()
        }
        let email = "python-demo@example.com"
        let output = "\(h.directory)/demo.out"
        let environment = h.daemonEnvironment.filter { !$0.key.hasPrefix("PYTHON") }
        let demo = try TestProcess(
            Self.python, [Self.client, "--socket", h.socketPath, "demo", "--email", email], environment: environment,
            stdin: .pipe, stdout: .file(output), stderr: .file(output))
        defer { demo.signal(SIGKILL) }
        // Asked on the registered terminal: a script is asked about on each connection.
        let shown = try #require(await pty.waitForText("and press Enter", timeout: .seconds(30)), "\(pty.shown)")
        #expect(shown.contains("script, not verifiable") && shown.contains("rainwallet_client.py"), "\(shown)")
        let confirmation = try #require(shown.matches(of: /type the code  (\S+)  and press/).last?.output.1)
        try pty.type(String(confirmation) + "\n")
        let code = try await h.waitForCode(for: email)
        try demo.input?.write(contentsOf: Data("\(wrongCode(for: code))\n".utf8))
        #expect(
            await eventually(timeout: .seconds(30)) { DaemonHarness.readFile(output).contains("That code didn't work") },
            "\(DaemonHarness.readFile(output))")
        try demo.input?.write(contentsOf: Data("\(code)\n".utf8))
        let status = await demo.waitForExit(timeout: .seconds(60))
        let text = DaemonHarness.readFile(output)
        #expect(status == 0, "\(text)")
        for line in ["code sent to \(email)", "logged in (new account)", "account acct_", "Ethereum 0x", "logged out"] {
            #expect(text.contains(line), "missing \(line) in:\n\(text)")
        }
    }

    @Test(
        "the Python client reports RAIN_102 with its field for a bad profile, RAIN_202 when run with PYTHONPATH, RAIN_101 when no daemon listens"
    )
    func refusals() async throws {
        let h = try await Self.startDaemon()
        defer { h.shutdown() }
        let badProfile = try await Self.runClient(h, ["--profile", "Not_A_Profile", "info"])
        #expect(badProfile.status == 1, "\(badProfile)")
        #expect(badProfile.stderr.contains("error: RAIN_102: ") && badProfile.stderr.contains("field: profile"), "\(badProfile)")

        // PROTOCOL.md §5.10: an interpreter variable that loads code makes the caller unapprovable,
        // whatever the policy says; GetInfo is open to any app, the session state is not.
        let withPath = ["PYTHONPATH": "\(h.directory)/nothing"]
        let info = try await Self.runClient(h, ["info"], extraEnvironment: withPath)
        #expect(info.status == 0, "\(info)")
        let refused = try await Self.runClient(h, ["state"], extraEnvironment: withPath)
        #expect(refused.status == 1, "\(refused)")
        #expect(refused.stderr.contains("error: RAIN_202: ") && refused.stderr.contains("reason: app_not_approved"), "\(refused)")

        let noDaemon = try await Self.runClient(h, ["info"], socket: "\(h.directory)/nothing.sock")
        #expect(noDaemon.status == 1, "\(noDaemon)")
        #expect(noDaemon.stderr.contains("error: RAIN_101: rainwalletd is not running"), "\(noDaemon)")
    }
}
