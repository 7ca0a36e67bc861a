import Foundation
import RainCore
import RainSystem
import RainTestSupport
import RainWire
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Programs of the daemon's own user that try to pass for the app the user approved, through the
/// socket alone. The daemon, the approved app (a copy of `rainwallet`) and the attacker (a Python
/// program) all run as one unprivileged uid (`OtherUser`): root reads every process, so a daemon
/// running as root would identify a caller no user's daemon can.
@Suite(
    "Same user: a connection speaks only for the process that opened it",
    .enabled(if: OtherUser.unavailableReason == nil, "needs a second uid: root and /usr/bin/setpriv (CI runs as root)"))
struct SameUserAttackTests {
    /// Connects, then (per `mode`) writes `frame`, forks a child that keeps the socket, and execs
    /// the approved app in the parent, so the connection's pid becomes the approved app's. The
    /// child waits for `OUT.go`, writes `frame` (unless already written), and saves the answer
    /// frame in `OUT`.
    static let attacker = #"""
        import ctypes, os, socket, sys, time
        mode, sock_path, frame_path, out_path = sys.argv[1:5]
        app = sys.argv[5:]
        frame = open(frame_path, "rb").read()
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(sock_path)
        if mode == "write-then-exec":
            s.sendall(frame)
        if os.fork() == 0:
            if mode == "child-not-dumpable":
                ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: hidden from /proc readers
            while not os.path.exists(out_path + ".go"):
                time.sleep(0.01)
            if mode != "write-then-exec":
                s.sendall(frame)
            s.settimeout(20)
            answer = b""
            try:
                while len(answer) < 4 or len(answer) < 4 + int.from_bytes(answer[:4], "big"):
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    answer += chunk
            except OSError:
                pass
            with open(out_path + ".tmp", "wb") as f:
                f.write(answer)
            os.rename(out_path + ".tmp", out_path)
            os._exit(0)
        with open(out_path + ".pid", "w") as f:
            f.write(str(os.getpid()))
        os.execv(app[0], app)
        """#

    /// Runs the attacker with the daemon stopped (`SIGSTOP`) from its connect until the parent runs
    /// the approved app, so the daemon accepts a connection whose process already is that app;
    /// then lets the child go and returns the answer it read.
    static func attack(_ d: UserDaemon, mode: String, method: String, payload: [UInt8] = []) async throws -> WireStatus {
        let script = "\(d.bin.directory)/attack.py"
        #expect(
            FileManager.default.createFile(
                atPath: script, contents: Data(attacker.utf8), attributes: [.posixPermissions: 0o755]))
        let frameFile = "\(d.bin.directory)/frame-\(mode)"
        let envelope = Envelope(requestID: 1, kind: .request(WireRequest(method: method, payload: payload)))
        #expect(FileManager.default.createFile(atPath: frameFile, contents: Data(Frame.encode(try envelope.encode()))))
        let out = "\(d.home)/answer-\(mode)"
        d.daemon.signal(SIGSTOP)
        var resumed = false
        defer { if !resumed { d.daemon.signal(SIGCONT) } }
        let p = try d.bin.launch(
            as: OtherUser.uid, executable: PythonTools.python,
            [script, mode, d.socket, frameFile, out, d.approvedApp, "--socket", d.socket, "watch"], home: d.home,
            log: "\(d.home)/attack-\(mode).log")
        defer { p.signal(SIGKILL) }
        // The parent runs the approved app (the exec is done) before the daemon reads anything.
        let execed = await eventually(timeout: .seconds(20)) {
            guard let pid = Int32(DaemonHarness.readFile(out + ".pid")) else { return false }
            // The exe link moves early in execve, before the new program's arguments and environment
            // are laid out: wait for its command line too, so the daemon meets a finished exec and
            // not one in progress (which it refuses differently, as caller_unidentified).
            let commandLine = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") ?? Data()
            return (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe")) == d.approvedApp
                && commandLine.split(separator: 0).last.map { String(decoding: $0, as: UTF8.self) } == "watch"
        }
        try #require(execed, "attacker log: \(DaemonHarness.readFile("\(d.home)/attack-\(mode).log"))")
        d.daemon.signal(SIGCONT)
        resumed = true
        #expect(FileManager.default.createFile(atPath: out + ".go", contents: nil))
        let answered = await eventually(timeout: .seconds(25)) { FileManager.default.fileExists(atPath: out) }
        try #require(answered, "no answer; daemon log:\n\(d.log)")
        let bytes = [UInt8](FileManager.default.contents(atPath: out) ?? Data())
        try #require(bytes.count > Frame.headerLength, "the connection closed without an answer; daemon log:\n\(d.log)")
        let envelope2 = try Envelope.decode(Array(bytes[Frame.headerLength...]))
        guard case .response(let response) = envelope2.kind else {
            Issue.record("not a response: \(envelope2)")
            return .ok
        }
        return response.status
    }

    @Test(
        "a program connects, forks, and execs the approved app: the child's calls on the copied socket are refused, RAIN_202 connection_shared",
        arguments: ["child-dumpable", "child-not-dumpable"])
    func forkedChildIsRefused(mode: String) async throws {
        let d = try await UserDaemon.start()
        defer { d.stop() }
        try await d.approveTheApp()

        // GetState is served only to the approved app: the child would be served as that app.
        let status = try await Self.attack(
            d, mode: mode, method: Method.sessionGetState, payload: try GetSessionStateRequest().encode())
        #expect(status.code == RainError.Code.unauthorized.rawValue, "\(status)")
        #expect(status.details.reason == "connection_shared", "\(status)")
        #expect(d.log.contains("connection.shared"), "log:\n\(d.log)")
    }

    @Test(
        "a program writes a sensitive request, then execs the approved app: the request is refused as sent before the identity was read (retryable)"
    )
    func requestWrittenBeforeExecIsRefused() async throws {
        let d = try await UserDaemon.start()
        defer { d.stop() }
        try await d.approveTheApp()
        let prompts = d.prompts

        let status = try await Self.attack(
            d, mode: "write-then-exec", method: Method.storageBackup,
            payload: try StorageBackupRequest(passphrase: Array("correct horse battery".utf8)).encode())
        #expect(status.code == RainError.Code.unauthorized.rawValue, "\(status)")
        #expect(status.details.reason == RainError.sentBeforeIdentityReason, "\(status)")
        #expect(status.details.retryAfterMilliseconds == 0, "\(status)")
        // Nobody was asked.
        #expect(d.prompts == prompts, "prompts: \(d.prompts)")
    }

    @Test(
        "the kernel's ptrace_scope is said: in GetInfo and `info --json`, a line of `status`, the log once, and a note on each prompt where programs of the user can read each other's memory"
    )
    func kernelSettingIsSaid() async throws {
        let d = try await UserDaemon.start()
        defer { d.stop() }
        try await d.approveTheApp()
        let scope = PtraceScope.read()

        let info = try await d.bin.runCLI(as: OtherUser.uid, socket: d.socket, ["--json", "info"])
        #expect(info.status == 0, "\(info)")
        let object = try JSONSerialization.jsonObject(with: Data(info.stdout.utf8)) as? [String: Any]
        #expect(object?["ptraceScope"] as? String == scope.wireValue, "\(info)")

        let status = try await d.bin.runCLI(as: OtherUser.uid, socket: d.socket, ["status"])
        #expect(status.stdout.contains("memory:") && status.stdout.contains(scope.explanation), "\(status)")

        let logged = d.log.components(separatedBy: scope.isOpenToSameUser ? "kernel.memory_open" : "kernel.memory").count - 1
        #expect(logged == 1, "log:\n\(d.log)")
        if scope.isOpenToSameUser {
            #expect(d.prompts.contains("Note: programs of yours can read this code too"), "prompts: \(d.prompts)")
            #expect(status.stdout.contains("set kernel.yama.ptrace_scope = 1"), "\(status)")
        } else {
            #expect(!d.prompts.contains("Note:"), "prompts: \(d.prompts)")
        }
    }

    @Test(
        "rainwalletd run by a user refuses --policy (a missing file too), --enable-test-methods, --test-confirm-instantly, the test clock and the test security keys, exit 64; rainwalletd-test takes them"
    )
    func policyIsRoots() async throws {
        let bin = try await AccessibleBinaries.make()
        defer { bin.remove() }
        let home = "\(bin.directory)/home"
        try OtherUser.makeDirectory(home, mode: 0o700)
        let policy = "\(bin.directory)/policy.json"
        #expect(
            FileManager.default.createFile(atPath: policy, contents: Data("{}".utf8), attributes: [.posixPermissions: 0o644]))
        let base = ["--socket", "\(home)/d.sock", "--state-dir", "\(home)/state"]
        // The test clock too: a clock moved from a file would skip every wait the daemon keeps.
        let clock = ["RAINWALLET_TEST_CLOCK_FILE": "\(home)/clock"]
        let cases: [([String], [String: String])] = [
            (["--policy", policy], [:]), (["--policy", "/nonexistent"], [:]), (["--enable-test-methods"], [:]), ([], clock),
            // Confirming without asking would sign without the user.
            (["--test-confirm-instantly"], [:]),
            // Keys served on sockets by a program of the user would touch and type PINs for the user.
            ([], ["RAINWALLET_TEST_SECURITY_KEYS": "\(home)/keys"]),
        ]
        for (n, (extra, environment)) in cases.enumerated() {
            let log = "\(home)/refused-\(n).log"
            let p = try bin.launch(
                as: OtherUser.uid, executable: "\(bin.directory)/rainwalletd", base + extra, home: home, log: log,
                environment: environment)
            let status = await p.waitForExit(timeout: .seconds(20))
            #expect(status == 64, "\(extra): exit \(String(describing: status)); \(DaemonHarness.readFile(log))")
            let expected =
                extra.first == "--policy" ? "--policy may be given only when rainwalletd runs as root" : "rainwalletd-test"
            #expect(DaemonHarness.readFile(log).contains(expected), "\(extra): \(DaemonHarness.readFile(log))")
        }
        // The tests' daemon takes both as the same user.
        let log = "\(home)/test-daemon.log"
        let p = try bin.launch(
            as: OtherUser.uid, "rainwalletd-test", base + ["--policy", policy, "--enable-test-methods"], home: home, log: log)
        defer { p.signal(SIGKILL) }
        let ready = await eventually(timeout: .seconds(20)) {
            DaemonHarness.readFile(log).contains("daemon.ready") || !p.isRunning
        }
        #expect(ready && p.isRunning, "\(DaemonHarness.readFile(log))")
    }

    /// Per `mode`, loads code its user can write (`lib`: a copy of libz it owns, through ctypes;
    /// `jit`: anonymous executable memory, as a JIT makes) or nothing (`clean`), then sends
    /// `frame` on a connection of its own and saves the answer frame in `OUT`.
    static let loader = #"""
        import ctypes, ctypes.util, mmap, os, shutil, socket, sys
        mode, sock_path, frame_path, out_path, home = sys.argv[1:6]
        if mode == "lib":
            name = ctypes.util.find_library("z")
            source = next(p for d in ("/lib", "/usr/lib") for p in [os.path.realpath(os.path.join(r, name))
                for r, _, files in os.walk(d) if name in files])
            copy = os.path.join(home, "libcopy.so")
            shutil.copy(source, copy)
            ctypes.CDLL(copy)
        elif mode == "jit":
            code = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(sock_path)
        s.sendall(open(frame_path, "rb").read())
        s.settimeout(20)
        answer = b""
        while len(answer) < 4 or len(answer) < 4 + int.from_bytes(answer[:4], "big"):
            chunk = s.recv(65536)
            if not chunk:
                break
            answer += chunk
        with open(out_path + ".tmp", "wb") as f:
            f.write(answer)
        os.rename(out_path + ".tmp", out_path)
        """#

    /// Runs the loader in `mode` on a profile of its own and returns the daemon's answer.
    static func runLoader(_ d: UserDaemon, mode: String, script: String? = nil) async throws -> WireResponse {
        let script = script ?? "\(d.bin.directory)/loader.py"
        if !FileManager.default.fileExists(atPath: script) {
            #expect(
                FileManager.default.createFile(
                    atPath: script, contents: Data(loader.utf8), attributes: [.posixPermissions: 0o644]))
        }
        // A profile per run: the first app of a profile becomes its owner. A logout uses the
        // profile (a GetState only looks, and claims nothing), and succeeds without a session.
        let name = "\(URL(fileURLWithPath: script).deletingPathExtension().lastPathComponent)-\(mode)"
        let request = WireRequest(
            method: Method.authLogout, payload: try LogoutRequest().encode(),
            metadata: [MetadataEntry(key: profileMetadataKey, value: name)])
        let frameFile = "\(d.bin.directory)/frame-\(name)"
        #expect(
            FileManager.default.createFile(
                atPath: frameFile,
                contents: Data(Frame.encode(try Envelope(requestID: 1, kind: .request(request)).encode()))))
        let out = "\(d.home)/answer-\(name)"
        let log = "\(d.home)/\(name).log"
        try? FileManager.default.removeItem(atPath: out)
        let p = try d.bin.launch(
            as: OtherUser.uid, executable: PythonTools.python, [script, mode, d.socket, frameFile, out, d.home], home: d.home,
            log: log)
        _ = await p.waitForExit(timeout: .seconds(30))
        let bytes = [UInt8](FileManager.default.contents(atPath: out) ?? Data())
        try #require(bytes.count > Frame.headerLength, "\(mode): no answer; \(DaemonHarness.readFile(log))\n\(d.log)")
        guard case .response(let response) = try Envelope.decode(Array(bytes[Frame.headerLength...])).kind else {
            Issue.record("\(mode): not a response")
            return WireResponse(status: .ok)
        }
        return response
    }

    @Test(
        "a caller running code its user can write (a library it owns, anonymous executable memory) is never approved, whatever its environment says; the same program without it is"
    )
    func writableCodeIsRefused() async throws {
        let d = try await UserDaemon.start()
        defer { d.stop() }
        for mode in ["clean", "lib", "jit"] {
            let response = try await Self.runLoader(d, mode: mode)
            switch mode {
            case "clean":
                #expect(response.status.isOK, "\(response.status)")
            case "lib":
                #expect(response.status.details.reason == "app_not_approved", "\(response.status)")
                #expect(
                    response.status.message.contains("libcopy.so, which uid \(OtherUser.uid) can write"), "\(response.status)")
            default:
                #expect(response.status.details.reason == "app_not_approved", "\(response.status)")
                #expect(response.status.message.contains("anonymous executable memory"), "\(response.status)")
            }
        }
    }

    @Test("an app pre-approved with allowWritableCode (a guarded setting) may run a JIT; the setting is for that app only")
    func writableCodeAllowedBySetting() async throws {
        let python = try #require(
            realpath(PythonTools.python, nil).map { p in
                defer { free(p) }
                return String(cString: p)
            })
        let d = try await UserDaemon.start { directory in
            #"{"*": [{"path": "\#(python) \#(directory)/loader.py", "allowWritableCode": true}]}"#
        }
        defer { d.stop() }
        let allowed = try await Self.runLoader(d, mode: "jit")
        #expect(allowed.status.isOK, "\(allowed.status)")
        // Another program with the same JIT is still refused.
        let other = "\(d.bin.directory)/other.py"
        #expect(
            FileManager.default.createFile(
                atPath: other, contents: Data(Self.loader.utf8), attributes: [.posixPermissions: 0o644]))
        let refused = try await Self.runLoader(d, mode: "jit", script: other)
        #expect(refused.status.details.reason == "app_not_approved", "\(refused.status)")
        #expect(refused.status.message.contains("anonymous executable memory"), "\(refused.status)")
    }

    @Test("a script is shown as \"script, not verifiable\" and asked on each of its connections")
    func scriptAskedEachConnection() async throws {
        let d = try await UserDaemon.start()
        defer { d.stop() }
        for run in 1...2 {
            let answer = try await Self.runLoader(d, mode: "clean")
            #expect(answer.status.isOK, "run \(run): \(answer.status)")
            let asked = d.prompts.components(separatedBy: "script, not verifiable").count - 1
            #expect(asked == run, "run \(run): prompts: \(d.prompts)")
        }
        let list = try await d.bin.runCLI(as: OtherUser.uid, socket: d.socket, ["apps", "list"])
        #expect(!list.stdout.contains("loader.py"), "a script is never remembered: \(list)")
    }
}
