import Foundation
import RainCore
import RainTestSupport
import RainWire
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A daemon of `OtherUser`, with per-app access enforced, in a directory of copies of the binaries
/// that uid can run: for the tests where the daemon, the app and the attacker are all one
/// unprivileged user. Root reads every process, so a daemon running as root sees callers and
/// terminal holders no user's daemon can.
struct UserDaemon {
    /// What answers the daemon's prompts.
    enum Prompter {
        /// A script that types back each prompt's code (or dismisses it while `dismissPrompts`
        /// is on), with `DISPLAY` set so that there is a place to ask.
        case auto
        /// `pinentry-tty`, without a display: prompts appear only on a registered terminal
        /// (`UserPromptTerminal`).
        case terminal
    }

    static let pinentryTTY = "/usr/bin/pinentry-tty"

    let bin: AccessibleBinaries
    let home: String
    let socket: String
    let daemon: TestProcess
    var log: String { DaemonHarness.readFile("\(home)/daemon.log") }
    /// What the auto-answering pinentry was asked, one description a line.
    var prompts: String { DaemonHarness.readFile("\(home)/prompts.log") }
    var approvedApp: String { "\(bin.directory)/rainwallet" }

    /// - Parameters:
    ///   - prompter: what answers the prompts.
    ///   - config: the daemon's config (JSON), if any, in a file of its uid.
    ///   - apps: `access.apps` of the machine's policy (JSON) for the binaries' directory, if any.
    ///   - arguments: more `rainwalletd` arguments (`--authority HOST:PORT`).
    static func start(
        prompter: Prompter = .auto, config: String? = nil, apps: ((String) -> String)? = nil, arguments: [String] = []
    ) async throws -> UserDaemon {
        let bin = try await AccessibleBinaries.make()
        do {
            return try await start(bin, prompter: prompter, config: config, apps: apps, arguments: arguments)
        } catch {
            bin.remove()
            throw error
        }
    }

    /// A config with the send limits of `DaemonHarness.SendLimits.relaxed`: for tests that send
    /// to one contact again and again.
    static var relaxedSendLimits: String {
        let data = try? JSONSerialization.data(
            withJSONObject: ["authority": ["sendLimits": DaemonHarness.relaxedSendLimits]], options: [.sortedKeys])
        return data.map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    /// The same daemon started again on its state directory (after `stop(keepingFiles:)`), as a
    /// program of its uid would start it.
    func restarted(prompter: Prompter = .auto, arguments: [String] = []) async throws -> UserDaemon {
        try await Self.start(bin, prompter: prompter, config: nil, apps: nil, arguments: arguments)
    }

    private static func start(
        _ bin: AccessibleBinaries, prompter: Prompter, config: String?, apps: ((String) -> String)?, arguments: [String]
    ) async throws -> UserDaemon {
        let home = "\(bin.directory)/home"
        try OtherUser.makeDirectory(home, mode: 0o700)
        var configArguments: [String] = []
        if let config {
            // The daemon's own file, 0600: it refuses a config another uid owns or others can write.
            let path = "\(home)/config.json"
            #expect(
                FileManager.default.createFile(
                    atPath: path, contents: Data(config.utf8), attributes: [.posixPermissions: 0o600]))
            try OtherUser.chown(path)
            configArguments = ["--config", path]
        }
        let pinentry: String
        switch prompter {
        case .auto:
            pinentry = "\(bin.directory)/pinentry-auto"
            #expect(
                FileManager.default.createFile(
                    atPath: pinentry,
                    contents: Data(
                        DaemonHarness.autoPinentryScript(log: "\(home)/prompts.log", cancelFlag: "\(home)/cancel").utf8),
                    attributes: [.posixPermissions: 0o755]))
        case .terminal:
            try #require(
                FileManager.default.isExecutableFile(atPath: pinentryTTY), "pinentry-tty is installed by scripts/lib/deps.sh")
            pinentry = pinentryTTY
        }
        let policy = "\(bin.directory)/policy.json"
        #expect(
            FileManager.default.createFile(
                atPath: policy,
                contents: Data(
                    #"{"access": {"pinentry": "\#(pinentry)"\#(apps.map { ", \"apps\": \($0(bin.directory))" } ?? "")}}"#.utf8),
                attributes: [.posixPermissions: 0o644]))
        let socket = "\(home)/rainwalletd.sock"
        var attempt = 0
        var d: UserDaemon
        var ready: Bool
        repeat {
            attempt += 1
            let daemon = try bin.launch(
                as: OtherUser.uid, executable: "\(bin.directory)/rainwalletd-test",
                ["--socket", socket, "--state-dir", "\(home)/state", "--policy", policy] + configArguments + arguments,
                home: home, log: "\(home)/daemon.log", environment: prompter == .auto ? ["DISPLAY": ":rainwallet-test"] : [:])
            d = UserDaemon(bin: bin, home: home, socket: socket, daemon: daemon)
            let started = d
            ready = await eventually(timeout: .seconds(20)) { started.log.contains("daemon.ready") || !daemon.isRunning }
            // An exec of the copy meets ETXTBSY while another test's child, between its fork and
            // its exec, still holds the copy's write descriptor (as `AccessibleBinaries.runCLI` says):
            // started again, it runs.
        } while !d.daemon.isRunning && d.log.contains("Text file busy") && attempt < 5
        let daemon = d.daemon
        guard ready && daemon.isRunning else {
            d.daemon.signal(SIGKILL)
            _ = await d.daemon.waitForExit(timeout: .seconds(5))
            throw HarnessError("the daemon of uid \(OtherUser.uid) did not start; its log:\n\(d.log)")
        }
        return d
    }

    /// The copy of `rainwallet` becomes the default profile's app: the user confirms it on the
    /// (auto) prompt.
    func approveTheApp() async throws {
        // A send uses the profile (status only looks, and claims nothing).
        let status = try await cli(["code", "send", "--email", "same-user@example.com"])
        #expect(status.status == 0, "\(status)")
        #expect(prompts.contains("rainwallet"), "prompts: \(prompts)")
    }

    /// Runs the copy of `rainwallet` (or `program`) as the daemon's uid with `arguments` and
    /// waits for it.
    func cli(_ arguments: [String], program: String? = nil) async throws -> AccessibleBinaries.Result {
        guard let program else { return try await bin.runCLI(as: OtherUser.uid, socket: socket, arguments) }
        let n = UUID().uuidString.prefix(8)
        let (out, err) = ("\(bin.directory)/cli-\(n).out", "\(bin.directory)/cli-\(n).err")
        let p = try bin.launch(
            as: OtherUser.uid, executable: program, ["--socket", socket] + arguments, home: bin.directory, log: err,
            stdout: out)
        guard let status = await p.waitForExit(timeout: .seconds(30)) else {
            p.signal(SIGKILL)
            throw HarnessError("\(program) \(arguments) did not exit within 30 s")
        }
        return AccessibleBinaries.Result(status: status, stdout: DaemonHarness.readFile(out), stderr: DaemonHarness.readFile(err))
    }

    /// Starts the copy of `rainwallet` as the daemon's uid with `arguments`, without waiting:
    /// its output goes to `log`.
    func launchCLI(_ arguments: [String], log: String) throws -> TestProcess {
        try bin.launch(
            as: OtherUser.uid, executable: approvedApp, ["--socket", socket] + arguments, home: bin.directory, log: log)
    }

    /// While on, the auto-answering pinentry dismisses every prompt instead of confirming it.
    func dismissPrompts(_ isOn: Bool) {
        let flag = "\(home)/cancel"
        if isOn { _ = FileManager.default.createFile(atPath: flag, contents: nil) } else { unlink(flag) }
    }

    /// The `count`-th code the embedded authority's development outbox holds for `contact`, read
    /// as root reads the file (the daemon's uid could too; what matters is that the tests' caller
    /// never does): polled until it is there.
    func code(for contact: String, count: Int = 1) async throws -> String {
        let path = "\(home)/state/authority/outbox.jsonl"
        var found: String?
        let delivered = await eventually(timeout: .seconds(20)) {
            let codes = DaemonHarness.readFile(path).split(separator: "\n").compactMap { line -> String? in
                guard let entry = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                    entry["contact"] as? String == contact
                else { return nil }
                return entry["code"] as? String
            }
            found = codes.count >= count ? codes[count - 1] : nil
            return found != nil
        }
        guard delivered, let found else { throw HarnessError("no code #\(count) for \(contact) in \(path)") }
        return found
    }

    /// The pids of the daemon's children named `name` (its pinentry).
    func children(named name: String) -> [Int32] { AccessAttackTests.children(of: daemon.pid, named: name) }

    func stop() {
        daemon.signal(SIGKILL)
        _ = daemon.waitForExitBlocking(timeout: .seconds(5))
        bin.remove()
    }
}

/// A pseudo-terminal of `OtherUser`, registered for the daemon's prompts from its own shell (a
/// session whose controlling terminal it is, `setsid -c`, the shell then waiting as `sleep`), as a
/// user runs `rainwallet prompt here` in a terminal kept for prompts. The test holds the master:
/// it reads what the prompt shows and types on the terminal's keyboard.
struct UserPromptTerminal {
    let pty: PseudoTerminal
    /// The leader of the terminal's session (its shell).
    let shell: Int32
    var path: String { pty.path }

    /// `prompt-shell TERMINAL OUT PIDFILE RAINWALLET SOCKET`: in a new session on TERMINAL, writes
    /// the session's pid to PIDFILE, registers the terminal, moves the CLI's output to OUT and waits.
    static let shellScript = """
        #!/bin/sh
        exec /usr/bin/setsid -f -c /bin/sh -c 'echo $$ > "$3"; "$4" --socket "$5" prompt here > "$2.tmp" 2>&1; \
        mv "$2.tmp" "$2"; exec sleep 3600' sh "$@" < "$1"

        """

    static func register(_ d: UserDaemon) async throws -> UserPromptTerminal {
        let pty = try PseudoTerminal()
        do {
            // A terminal of the user: the daemon refuses another uid's.
            try OtherUser.chown(pty.path)
            let script = "\(d.bin.directory)/prompt-shell"
            if !FileManager.default.fileExists(atPath: script) {
                #expect(
                    FileManager.default.createFile(
                        atPath: script, contents: Data(shellScript.utf8), attributes: [.posixPermissions: 0o755]))
            }
            let n = UUID().uuidString.prefix(8)
            let (out, pidFile) = ("\(d.home)/prompt-here-\(n).out", "\(d.home)/prompt-here-\(n).pid")
            // Read by `sh`, not executed: a file this process just wrote can meet ETXTBSY at exec
            // (a child another test forks meanwhile holds its write descriptor until its own exec).
            let starter = try d.bin.launch(
                as: OtherUser.uid, executable: "/bin/sh", [script, pty.path, out, pidFile, d.approvedApp, d.socket], home: d.home,
                log: "\(d.home)/prompt-shell-\(n).log")
            _ = await starter.waitForExit(timeout: .seconds(20))
            // The first place: the user chooses the place secret on it.
            let chosen = try await pty.choosePlaceSecret()
            try #require(chosen, "no place secret asked: \(pty.shown)\n\(DaemonHarness.readFile(out))")
            // `setsid -f` returns at once: the registration is done when the shell has moved its output.
            let registered = await eventually(timeout: .seconds(20)) { FileManager.default.fileExists(atPath: out) }
            try #require(
                registered && DaemonHarness.readFile(out).contains(pty.path),
                "prompt here: \(DaemonHarness.readFile(out)) \(DaemonHarness.readFile("\(d.home)/prompt-shell-\(n).log"))\n\(d.log)"
            )
            let shell = try #require(Int32(DaemonHarness.readFile(pidFile).trimmingCharacters(in: .whitespacesAndNewlines)))
            return UserPromptTerminal(pty: pty, shell: shell)
        } catch {
            pty.close()
            throw error
        }
    }

    /// Ends the shell and closes the terminal.
    func close() {
        kill(shell, SIGKILL)
        pty.close()
    }
}

/// One connection of a Python program of `OtherUser` (a script: the daemon cannot vouch for it,
/// as for an attacker's program), driven by the test one frame at a time: each request goes to
/// its stdin as a hex line, and it appends each answer frame to a file as one.
final class UserRawClient: Sendable {
    static let script = #"""
        import socket, sys
        target, out_path = sys.argv[1:3]
        if target.startswith("/"):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(target)
        else:
            host, port = target.rsplit(":", 1)
            s = socket.create_connection((host, int(port)))
        s.settimeout(120)

        def read_exact(n):
            data = b""
            while len(data) < n:
                chunk = s.recv(n - len(data))
                if not chunk:
                    raise EOFError("the connection closed")
                data += chunk
            return data

        for line in sys.stdin:
            s.sendall(bytes.fromhex(line.strip()))
            header = read_exact(4)
            answer = header + read_exact(int.from_bytes(header, "big"))
            with open(out_path, "a") as f:
                f.write(answer.hex() + "\n")
        """#

    let process: TestProcess
    let answers: String
    let log: String
    private let sent = Mutex<UInt64>(0)

    private init(process: TestProcess, answers: String, log: String) {
        self.process = process
        self.answers = answers
        self.log = log
    }

    /// Starts the program, connected to `target` (a Unix socket's path, or `HOST:PORT`).
    /// - Parameters:
    ///   - directory: a directory the other uid can write, for its answers.
    ///   - script: where the program's file is (the path its command line names).
    static func connect(
        _ bin: AccessibleBinaries, to target: String, directory: String, script: String? = nil
    ) throws -> UserRawClient {
        let script = script ?? "\(bin.directory)/raw-client.py"
        if !FileManager.default.fileExists(atPath: script) {
            #expect(
                FileManager.default.createFile(
                    atPath: script, contents: Data(Self.script.utf8), attributes: [.posixPermissions: 0o644]))
        }
        let n = UUID().uuidString.prefix(8)
        let (answers, log) = ("\(directory)/raw-\(n).answers", "\(directory)/raw-\(n).log")
        let process = try bin.launch(
            as: OtherUser.uid, executable: PythonTools.python, [script, target, answers], home: directory, log: log,
            stdin: .pipe)
        return UserRawClient(process: process, answers: answers, log: log)
    }

    /// Sends one request (on `profile`, when given) and waits for its answer.
    func call(_ method: String, _ payload: [UInt8], profile: String? = nil) async throws -> WireResponse {
        let id = sent.withLock { n in
            n += 1
            return n
        }
        let metadata = profile.map { [MetadataEntry(key: profileMetadataKey, value: $0)] } ?? []
        let envelope = Envelope(requestID: id, kind: .request(WireRequest(method: method, payload: payload, metadata: metadata)))
        let hex = Frame.encode(try envelope.encode()).map { String(format: "%02x", $0) }.joined()
        try #require(process.input).write(contentsOf: Data((hex + "\n").utf8))
        var line: Substring?
        let answered = await eventually(timeout: .seconds(60)) {
            // Whole lines only: the program may be writing the next.
            let lines = DaemonHarness.readFile(answers).split(separator: "\n", omittingEmptySubsequences: false).dropLast()
            line = lines.count >= Int(id) ? lines[Int(id) - 1] : nil
            return line != nil || !process.isRunning
        }
        guard answered, let line else {
            throw HarnessError("no answer to \(method) (#\(id)): \(DaemonHarness.readFile(log))")
        }
        let bytes = try Self.bytes(hex: line)
        guard case .response(let response) = try Envelope.decode(Array(bytes[Frame.headerLength...])).kind else {
            throw HarnessError("the answer to \(method) is not a response")
        }
        return response
    }

    /// Ends the program (closing its connection).
    func close() {
        try? process.input?.close()
        process.signal(SIGKILL)
    }

    private static func bytes(hex: Substring) throws -> [UInt8] {
        var out: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2, limitedBy: hex.endIndex) ?? hex.endIndex
            guard let byte = UInt8(hex[index..<next], radix: 16) else { throw HarnessError("not hex: \(hex)") }
            out.append(byte)
            index = next
        }
        return out
    }
}
