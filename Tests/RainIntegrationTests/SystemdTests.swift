import Foundation
import RainCore
import RainDaemon
import RainDevice
import RainTestSupport
import RainTransport
import RainWallet
import Testing

// Running rainwalletd as a systemd user service. systemd is not PID 1 here, so
// the units are checked with `systemd-analyze verify`, socket activation runs under
// `systemd-socket-activate` or with a listening socket the test holds and hands over as systemd
// does (descriptor 3, LISTEN_PID, LISTEN_FDS), and readiness arrives on a datagram socket the
// test owns (NOTIFY_SOCKET).

/// A descriptor the test owns and hands to the daemon: a listening Unix socket by default, or
/// something else that must be refused.
final class HandedDescriptor: Sendable {
    enum Kind: String, CaseIterable, Sendable {
        case listeningUnixStream, regularFile, unixStreamNotListening, unixDatagram, tcpListening
    }

    let fd: Int32

    /// Creates the descriptor; Unix sockets are bound at `path` (then chmod'ed to `mode`).
    init(_ kind: Kind, path: String, mode: mode_t = 0o600) throws {
        func check(_ rc: Int32, _ what: String) throws {
            if rc < 0 { throw HarnessError("\(what): \(String(cString: strerror(errno)))") }
        }
        let cloexec = Int32(SOCK_CLOEXEC.rawValue)
        switch kind {
        case .regularFile:
            fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            try check(fd, "open \(path)")
        case .tcpListening:
            fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | cloexec, 0)
            try check(fd, "socket")
            var addr = sockaddr_in()
            addr.sin_family = sa_family_t(AF_INET)
            addr.sin_addr.s_addr = inet_addr("127.0.0.1")
            let rc = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            try check(rc, "bind 127.0.0.1:0")
            try check(listen(fd, 16), "listen")
        case .listeningUnixStream, .unixStreamNotListening, .unixDatagram:
            let type = kind == .unixDatagram ? Int32(SOCK_DGRAM.rawValue) : Int32(SOCK_STREAM.rawValue)
            fd = socket(AF_UNIX, type | cloexec, 0)
            try check(fd, "socket")
            try check(Self.bindUnix(fd, path), "bind \(path)")
            try check(chmod(path, mode), "chmod \(path)")
            if kind == .listeningUnixStream { try check(listen(fd, 64), "listen") }
        }
    }

    deinit { close(fd) }

    /// For `Process.standardInput`: the child gets a duplicate as its stdin.
    var handle: FileHandle { FileHandle(fileDescriptor: fd, closeOnDealloc: false) }

    /// Binds `fd` to a path, or to an abstract address when `path` starts with `@`.
    static func bindUnix(_ fd: Int32, _ path: String) -> Int32 {
        let isAbstract = path.hasPrefix("@")
        let bytes = Array((isAbstract ? String(path.dropFirst()) : path).utf8)
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let start = isAbstract ? 1 : 0
        withUnsafeMutableBytes(of: &addr.sun_path) { buf in
            for (i, b) in bytes.enumerated() { buf[start + i] = b }
        }
        let length = isAbstract ? 2 + 1 + bytes.count : MemoryLayout<sockaddr_un>.size
        return withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(length)) }
        }
    }
}

/// The test's end of NOTIFY_SOCKET: a datagram socket at a path or an abstract `@name`.
final class NotifyReceiver: Sendable {
    let address: String
    let fd: Int32

    init(address: String) throws {
        self.address = address
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0, HandedDescriptor.bindUnix(fd, address) == 0 else {
            throw HarnessError("cannot bind the notify socket \(address): \(String(cString: strerror(errno)))")
        }
    }

    deinit { close(fd) }

    /// Waits (on a thread of its own) for the next datagram that holds `assignment` as a line;
    /// returns its lines as a dictionary, or nil at the deadline.
    func waitFor(_ assignment: String, timeout: Duration = .seconds(20)) async throws -> [String: String]? {
        let fd = self.fd
        return try await onThread { () -> [String: String]? in
            let deadline = ContinuousClock.now + timeout
            var buffer = [UInt8](repeating: 0, count: 4096)
            while ContinuousClock.now < deadline {
                var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&p, 1, 100) > 0 else { continue }
                let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                guard n > 0 else { continue }
                let lines = String(decoding: buffer[0..<n], as: UTF8.self).split(separator: "\n").map(String.init)
                guard lines.contains(assignment) else { continue }
                var fields: [String: String] = [:]
                for line in lines {
                    guard let eq = line.firstIndex(of: "=") else { continue }
                    fields[String(line[..<eq])] = String(line[line.index(after: eq)...])
                }
                return fields
            }
            return nil
        }
    }
}

extension DaemonHarness {
    /// The daemon's flags without `--socket`: under socket activation the unit passes none.
    var activatedArguments: [String] {
        var args = daemonArguments
        if let i = args.firstIndex(of: "--socket") { args.removeSubrange(i...(i + 1)) }
        return args
    }

    /// The socket the daemon would bind by default in this harness (its XDG_RUNTIME_DIR).
    var defaultSocketPath: String { "\(directory)/xdg-run/rainwallet/rainwalletd.sock" }

    /// Starts rainwalletd the way systemd does after socket activation: `handed` becomes
    /// descriptor 3 + `position` (lower ones are /dev/null), `LISTEN_FDS` is `count`,
    /// `LISTEN_PID` the daemon's own pid (a shell sets it, then execs the daemon in its place).
    func launchActivated(
        _ handed: HandedDescriptor, position: Int = 0, count: Int = 1, names: String? = nil,
        environment: [String: String] = [:]
    ) throws {
        let redirections = (0..<count).map { i in i == position ? "\(3 + i)<&0" : "\(3 + i)</dev/null" }
        let script =
            "exec \(redirections.joined(separator: " ")) 0</dev/null; LISTEN_PID=$$; export LISTEN_PID; exec \"$0\" \"$@\""
        var env = environment
        env["LISTEN_FDS"] = "\(count)"
        if let names { env["LISTEN_FDNAMES"] = names }
        try launch(
            executable: URL(fileURLWithPath: "/bin/sh"),
            arguments: ["-c", script, binaryDirectory.appendingPathComponent("rainwalletd-test").path] + activatedArguments,
            environment: env, standardInput: handed.handle)
    }

    /// Starts `systemd-socket-activate -l socketPath [-E NOTIFY_SOCKET=…] rainwalletd …`: it binds
    /// the socket and execs the daemon (same pid) on the first connection.
    func launchUnderSocketActivate(notify: String?) throws {
        // It passes the daemon only a few variables of its own: give it the harness's XDG
        // directories, so nothing of the machine's (a user's config) leaks in.
        var args = ["-l", socketPath]
        for (key, dir) in [("XDG_CONFIG_HOME", "xdg-config"), ("XDG_STATE_HOME", "xdg-state"), ("XDG_RUNTIME_DIR", "xdg-run")] {
            args += ["-E", "\(key)=\(directory)/\(dir)"]
        }
        if let notify { args += ["-E", "NOTIFY_SOCKET=\(notify)"] }
        try launch(
            executable: URL(fileURLWithPath: try SystemdTools.path("systemd-socket-activate")),
            arguments: args + [binaryDirectory.appendingPathComponent("rainwalletd-test").path] + activatedArguments)
    }
}

enum SystemdTools {
    static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// A systemd tool on PATH (scripts/lib/deps.sh installs the `systemd` package).
    static func path(_ tool: String) throws -> String {
        for dir in ["/usr/bin", "/bin", "/usr/local/bin"] where FileManager.default.isExecutableFile(atPath: "\(dir)/\(tool)") {
            return "\(dir)/\(tool)"
        }
        throw HarnessError("\(tool) is missing: install the systemd package (scripts/lib/deps.sh does)")
    }

    /// Runs a program to its end; stdout and stderr together.
    static func run(_ executable: String, _ arguments: [String], in directory: String) async throws -> (
        status: Int32, output: String
    ) {
        let outPath = "\(directory)/run-\(UInt32.random(in: 0...UInt32.max)).out"
        let p = try TestProcess(executable, arguments, stdout: .file(outPath), stderr: .file(outPath))
        guard let status = await p.waitForExit(timeout: .seconds(60)) else {
            await p.stop(grace: .seconds(5))
            throw HarnessError("\(executable) \(arguments) did not finish within 60 s")
        }
        return (status, (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? "")
    }

    /// Renders the units with `scripts/systemd/install --no-start` into `directory`.
    static func install(into directory: String, scratch: String) async throws -> (socket: String, service: String) {
        let binary = try DaemonHarness.binaryDirectory().appendingPathComponent("rainwalletd-test").path
        let r = try await run(
            repositoryRoot.appendingPathComponent("scripts/systemd/install").path,
            ["--no-start", "--binary", binary, "--unit-dir", directory], in: scratch)
        guard r.status == 0 else { throw HarnessError("install failed (\(r.status)): \(r.output)") }
        return (
            try String(contentsOfFile: "\(directory)/rainwalletd.socket", encoding: .utf8),
            try String(contentsOfFile: "\(directory)/rainwalletd.service", encoding: .utf8)
        )
    }

    /// `scripts/systemd/verify DIR`.
    static func verify(_ directory: String, scratch: String) async throws -> (status: Int32, output: String) {
        try await run(repositoryRoot.appendingPathComponent("scripts/systemd/verify").path, [directory], in: scratch)
    }
}

@Suite("systemd: units, socket activation, readiness")
struct SystemdTests {
    // MARK: units

    @Test("the installed units pass systemd-analyze verify, with the binary filled in and the daemon's default socket")
    func unitsVerify() async throws {
        let h = try DaemonHarness.prepare()
        defer { h.shutdown() }
        let units = "\(h.directory)/units"
        let (socket, service) = try await SystemdTools.install(into: units, scratch: h.directory)

        let r = try await SystemdTools.verify(units, scratch: h.directory)
        #expect(r.status == 0, "\(r.output)")

        let binary = try DaemonHarness.binaryDirectory().appendingPathComponent("rainwalletd-test").resolvingSymlinksInPath().path
        let lines = Set(service.split(separator: "\n").map(String.init))
        #expect(lines.contains("ExecStart=\(binary)"), "\(service)")
        #expect(lines.contains("Type=notify"))
        #expect(lines.contains("Restart=on-failure"))
        #expect(lines.contains("UMask=0077"))
        #expect(lines.contains("NoNewPrivileges=yes"))
        // The socket unit listens where the daemon and its clients look by default (docs/operations.md "Files and paths").
        let socketLines = Set(socket.split(separator: "\n").map(String.init))
        let expected = RainPaths.defaultSocket(environment: ["XDG_RUNTIME_DIR": "%t"])
        #expect(socketLines.contains("ListenStream=\(expected)"), "\(socket)")
        #expect(socketLines.contains("SocketMode=0600"))
        #expect(socketLines.contains("DirectoryMode=0700"))
        #expect(socketLines.contains("FileDescriptorName=\(Daemon.activationSocketName)"))
    }

    @Test(
        "systemd-analyze verify fails on a broken unit",
        arguments: [
            ("rainwalletd.service", "Restart=on-failure", "Restrat=on-failure"),  // a typo'd key is only a warning to systemd
            ("rainwalletd.socket", "SocketMode=0600", "SocketMdoe=0600"),
            ("rainwalletd.service", "Type=notify", "Type=notifyy"),
            ("rainwalletd.service", "ExecStart=/", "ExecStart=/nonexistent/"),
        ])
    func brokenUnitFailsVerify(file: String, original: String, broken: String) async throws {
        let h = try DaemonHarness.prepare()
        defer { h.shutdown() }
        let units = "\(h.directory)/units"
        _ = try await SystemdTools.install(into: units, scratch: h.directory)
        let path = "\(units)/\(file)"
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text.contains(original))
        try text.replacingOccurrences(of: original, with: broken).write(toFile: path, atomically: true, encoding: .utf8)

        let r = try await SystemdTools.verify(units, scratch: h.directory)
        #expect(r.status != 0, "\(r.output)")
    }

    // MARK: socket activation and readiness

    @Test(
        "under systemd-socket-activate: the first client starts the daemon, READY=1 with MAINPID arrives, a login works, SIGTERM sends STOPPING=1 and leaves the socket",
        arguments: ["path", "abstract"])
    func socketActivateAndNotify(notifyKind: String) async throws {
        let h = try DaemonHarness.prepare()
        defer { h.shutdown() }
        let address =
            notifyKind == "path" ? "\(h.directory)/notify.sock" : "@rwt-notify-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let notify = try NotifyReceiver(address: address)
        try h.launchUnderSocketActivate(notify: address)

        try await h.waitUntilReady()  // this connection starts the daemon
        let ready = try #require(await notify.waitFor("READY=1"), "no READY=1; log:\n\(h.log)")
        #expect(ready["MAINPID"] == h.pid.map { "\($0)" })
        #expect(ready["STATUS"]?.contains(h.socketPath) == true, "\(ready)")

        let p = h.provider()
        let login = try await h.logIn(p, .email("activated@example.com"))
        let status = try await h.runCLI(["status", "--json"])
        #expect(status.status == 0, "\(status)")
        #expect(try jsonObject(status.stdout)["accountId"] as? String == login.session.accountID)
        #expect(h.log.contains("activation=systemd"), "log:\n\(h.log)")
        #expect(fileMode(h.defaultSocketPath) == nil, "the daemon bound a socket of its own")

        #expect(try await h.stop() == 0, "log:\n\(h.log)")
        #expect(try await notify.waitFor("STOPPING=1") != nil, "no STOPPING=1; log:\n\(h.log)")
        #expect(fileMode(h.socketPath)?.type == S_IFSOCK, "the daemon removed a socket it was handed")
    }

    @Test(
        "SIGKILL, then a restart on the same held socket: the socket file stays, a client that connected meanwhile is served, the session is still there"
    )
    func killThenRestartOnSameSocket() async throws {
        let h = try DaemonHarness.prepare()
        defer { h.shutdown() }
        let listener = try HandedDescriptor(.listeningUnixStream, path: h.socketPath)
        try h.launchActivated(listener)
        try await h.waitUntilReady()
        let login = try await h.logIn(h.provider(), .email("kill-restart@example.com"))

        await h.kill()
        #expect(h.exitStatus == 128 + SIGKILL)
        #expect(fileMode(h.socketPath)?.type == S_IFSOCK)
        // The listening socket outlives the daemon, as systemd keeps it: this client's connection
        // waits in the backlog instead of being refused.
        let waiting = try h.launchCLI(["status", "--json"])

        try h.launchActivated(listener)
        try await h.waitUntilReady()
        let r = try await waiting.finish()
        #expect(r.status == 0, "\(r)")
        let json = try jsonObject(r.stdout)
        #expect(json["authState"] as? String == "authenticated", "\(r)")
        #expect(json["accountId"] as? String == login.session.accountID)
        let p = h.provider()
        try await p.awaitSessionRestore()
        #expect(try await p.currentSession().accountID == login.session.accountID)
        #expect(h.log.components(separatedBy: "activation=systemd").count - 1 == 2, "log:\n\(h.log)")
    }

    @Test("a handed socket is never chmod'ed or unlinked: its modes stay, SIGTERM leaves it, and it serves the next daemon")
    func handedSocketLeftAlone() async throws {
        let h = try DaemonHarness.prepare()
        defer { h.shutdown() }
        // Modes rainwalletd never sets itself (it would make them 0700 / 0600).
        let dir = "\(h.directory)/unit"
        #expect(mkdir(dir, 0o750) == 0)
        #expect(chmod(dir, 0o750) == 0)
        let path = "\(dir)/s.sock"
        let listener = try HandedDescriptor(.listeningUnixStream, path: path, mode: 0o660)
        try h.launchActivated(listener)
        try await waitUntilServing(h, path)

        #expect(fileMode(path)?.permissions == 0o660)
        #expect(fileMode(dir)?.permissions == 0o750)
        #expect(try await h.stop() == 0, "log:\n\(h.log)")
        #expect(fileMode(path)?.type == S_IFSOCK, "SIGTERM removed a socket the daemon was handed")
        #expect(fileMode(path)?.permissions == 0o660)
        #expect(fileMode(h.defaultSocketPath) == nil)

        try h.launchActivated(listener)
        try await waitUntilServing(h, path)
    }

    @Test(
        "a handed socket open to every uid (0666 in a 0711 directory): SO_PEERCRED still refuses another uid at accept",
        .enabled(if: AccessTests.canSwitchUID, AccessTests.skipReason))
    func handedSocketStillChecksPeers() async throws {
        let h = try DaemonHarness.prepare()
        defer { h.shutdown() }
        let bin = try await AccessibleBinaries.make()
        defer { bin.remove() }
        #expect(chmod(h.directory, 0o711) == 0)
        let listener = try HandedDescriptor(.listeningUnixStream, path: h.socketPath, mode: 0o666)
        try h.launchActivated(listener)
        try await h.waitUntilReady()

        // --daemon-uid: the client accepts this root daemon, so the daemon's own check is
        // what refuses: one refusal frame at accept, the close, and a log line with the uid.
        let refused = try await bin.runCLI(
            as: AccessTests.allowedUID, socket: h.socketPath, ["--daemon-uid", "\(getuid())", "status"])
        #expect(refused.status == 5, "\(refused)")
        #expect(refused.stderr.contains("RAIN_202"), "\(refused)")
        #expect(refused.stderr.contains("uid \(AccessTests.allowedUID) may not use this daemon"), "\(refused)")
        #expect(h.log.contains("peer.refused uid=\(AccessTests.allowedUID)"), "log:\n\(h.log)")
        #expect(try await h.provider().daemonInfo().protocolVersion > 0)
    }

    @Test(
        "the handed descriptor is made non-blocking and close-on-exec",
        .enabled(if: getuid() == 0, "reads /proc/PID/fdinfo of a non-dumpable daemon, which only root can"))
    func handedDescriptorFlags() async throws {
        let h = try DaemonHarness.prepare()
        defer { h.shutdown() }
        let listener = try HandedDescriptor(.listeningUnixStream, path: h.socketPath)
        try h.launchActivated(listener)
        try await h.waitUntilReady()
        let pid = try #require(h.pid)
        let info = try String(contentsOfFile: "/proc/\(pid)/fdinfo/3", encoding: .utf8)
        let flagsLine = try #require(info.split(separator: "\n").first { $0.hasPrefix("flags:") })
        let flags = try #require(Int32(flagsLine.dropFirst("flags:".count).trimmingCharacters(in: .whitespaces), radix: 8))
        #expect(flags & O_NONBLOCK != 0, "\(info)")
        #expect(flags & O_CLOEXEC != 0, "\(info)")
    }

    @Test("several passed sockets: LISTEN_FDNAMES picks the one named rainwalletd")
    func namedSocketPicked() async throws {
        let h = try DaemonHarness.prepare()
        defer { h.shutdown() }
        let listener = try HandedDescriptor(.listeningUnixStream, path: h.socketPath)
        // fd 3 is /dev/null, fd 4 the socket: picking by position would fail.
        try h.launchActivated(listener, position: 1, count: 2, names: "other:\(Daemon.activationSocketName)")
        try await h.waitUntilReady()
        #expect(try await h.provider().daemonInfo().protocolVersion > 0)
    }

    @Test(
        "a passed descriptor that is not a listening Unix stream socket, or an ambiguous set, is refused with exit 78 and RAIN_102",
        arguments: [
            ("regularFile", 0, 1, nil), ("unixStreamNotListening", 0, 1, nil), ("unixDatagram", 0, 1, nil),
            ("tcpListening", 0, 1, nil),
            ("listeningUnixStream", 1, 2, nil),  // two sockets, no names
            ("listeningUnixStream", 1, 2, "rainwalletd:other"),  // the named one (fd 3) is /dev/null
            ("listeningUnixStream", 0, 2, "a:b"),  // none named rainwalletd
        ] as [(String, Int, Int, String?)])
    func badHandedDescriptorRefused(kind: String, position: Int, count: Int, names: String?) async throws {
        let h = try DaemonHarness.prepare()
        defer { h.shutdown() }
        let handed = try HandedDescriptor(try #require(HandedDescriptor.Kind(rawValue: kind)), path: "\(h.directory)/handed")
        try h.launchActivated(handed, position: position, count: count, names: names)
        let status = try await h.waitForExit()
        #expect(status == 78, "log:\n\(h.log)")
        #expect(h.log.contains("RAIN_102"), "log:\n\(h.log)")
        #expect(!h.log.contains("daemon.ready"))
        #expect(fileMode(h.defaultSocketPath) == nil, "the daemon fell back to a socket of its own")
    }

    @Test("LISTEN_PID of another process: the variables are not for this daemon, which binds its own socket")
    func listenPIDOfAnotherProcessIgnored() async throws {
        let h = try DaemonHarness.prepare()
        defer { h.shutdown() }
        try h.launch(
            executable: h.binaryDirectory.appendingPathComponent("rainwalletd-test"), arguments: h.daemonArguments,
            environment: ["LISTEN_PID": "1", "LISTEN_FDS": "1"])
        try await h.waitUntilReady()
        #expect(fileMode(h.socketPath)?.permissions == 0o600)
        #expect(h.log.contains("activation=none"), "log:\n\(h.log)")
        #expect(try await h.stop() == 0)
        #expect(fileMode(h.socketPath) == nil, "a socket the daemon bound itself is removed on SIGTERM")
    }

    @Test("programs the daemon starts inherit neither LISTEN_* nor NOTIFY_SOCKET")
    func childrenInheritNoServiceVariables() async throws {
        let envFile = "/tmp/rwt-env-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { unlink(envFile) }
        let config = """
            {"codeSender": {"type": "command", "command": ["/bin/sh", "-c", "cat >/dev/null; env > \(envFile).tmp; mv \(envFile).tmp \(envFile)"]}}
            """
        let h = try DaemonHarness.prepare(config: config)
        defer { h.shutdown() }
        let notify = try NotifyReceiver(address: "\(h.directory)/notify.sock")
        let listener = try HandedDescriptor(.listeningUnixStream, path: h.socketPath)
        try h.launchActivated(listener, names: Daemon.activationSocketName, environment: ["NOTIFY_SOCKET": notify.address])
        try await h.waitUntilReady()
        #expect(try await notify.waitFor("READY=1") != nil, "log:\n\(h.log)")

        try await h.provider().sendLoginCode(to: .email("children@example.com"))
        #expect(await eventually(timeout: .seconds(20)) { FileManager.default.fileExists(atPath: envFile) })
        let names = Set(
            try String(contentsOfFile: envFile, encoding: .utf8).split(separator: "\n")
                .compactMap { $0.split(separator: "=", maxSplits: 1).first.map(String.init) })
        #expect(names.contains("XDG_STATE_HOME"), "the sender's environment was not captured: \(names)")
        for variable in SocketActivation.environmentVariables + ["NOTIFY_SOCKET"] {
            #expect(!names.contains(variable), "\(variable) leaked to the code sender")
        }
    }

    /// Polls GetInfo on `path` (the harness's own check only knows its default socket path).
    private func waitUntilServing(_ h: DaemonHarness, _ path: String) async throws {
        let p = RainProvider(RainWalletConfig(socketPath: path))
        let served = await eventually(timeout: .seconds(20)) {
            if !h.isRunning { return true }
            return (try? await p.daemonInfo()) != nil
        }
        #expect(served && h.isRunning, "the daemon did not serve \(path); log:\n\(h.log)")
    }
}
