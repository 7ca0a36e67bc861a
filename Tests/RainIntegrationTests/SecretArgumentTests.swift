import Foundation
import RainCore
import RainTestSupport
import Testing

@testable import RainStore

/// A one-time code never has to be on the command line (where every user reads
/// it in `/proc/PID/cmdline`), and neither does a PostgreSQL password.
@Suite("Secrets stay off the command line")
struct SecretArgumentTests {
    /// The NUL-separated command line of a process, as every user of the machine can read it.
    static func commandLine(of pid: Int32) -> String {
        let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") ?? Data()
        return String(decoding: data, as: UTF8.self).replacingOccurrences(of: "\0", with: " ")
    }

    @Test("code confirm and contact confirm read the code from a stdin pipe; the code is never in /proc/PID/cmdline")
    func codeFromStdinPipe() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let sent = try await h.runCLI(["code", "send", "--email", "pipe@example.com"])
        #expect(sent.status == 0, "\(sent)")
        #expect(sent.stdout.contains("rainwallet code confirm (it asks for the code)"), "\(sent)")
        let code = try await h.waitForCode(for: "pipe@example.com")

        let confirm = try h.launchCLI(["--json", "code", "confirm"])
        // It waits for stdin: its command line, which other users can read, holds no code.
        let started = await eventually { Self.commandLine(of: confirm.pid).contains("code confirm") }
        let cmdline = Self.commandLine(of: confirm.pid)
        #expect(started, "\(cmdline)")
        #expect(!cmdline.contains(code))
        confirm.send("\(code)\n")
        let confirmed = try await confirm.finish()
        #expect(confirmed.status == 0, "\(confirmed)")
        #expect(try jsonObject(confirmed.stdout)["authState"] as? String == "authenticated")
        #expect(!confirmed.stderr.contains("warning"), "\(confirmed)")

        let add = try await h.runCLI(["contact", "add", "--email", "pipe-backup@example.com"])
        #expect(add.status == 0, "\(add)")
        let verification = try await h.waitForCode(for: "pipe-backup@example.com")
        let verified = try await h.runCLI(["--json", "contact", "confirm"], stdin: "\(verification)\n")
        #expect(verified.status == 0, "\(verified)")
        #expect(!verified.stderr.contains("warning"), "\(verified)")
    }

    @Test(
        "with no terminal and nothing on stdin, confirm exits 64 at once without calling the daemon",
        arguments: [["code", "confirm"], ["contact", "confirm"], ["--json", "code", "confirm"]])
    func emptyStdinExits64(_ command: [String]) async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        // A socket nothing listens on: a CLI that called the daemon would exit 2.
        let r = try await h.runCLI(command, stdin: "", socketPath: "\(h.directory)/nothing.sock", timeout: .seconds(10))
        #expect(r.status == 64, "\(r)")
        #expect(r.stderr.contains("no code on stdin"), "\(r)")
        #expect(r.stderr.contains("printf '%s\\n' CODE | rainwallet"), "\(r)")
    }

    @Test("a code given as an argument still works, with a warning on stderr")
    func codeArgumentWarns() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        _ = try await h.runCLI(["code", "send", "--email", "arg@example.com"])
        let code = try await h.waitForCode(for: "arg@example.com")
        let r = try await h.runCLI(["code", "confirm", code])
        #expect(r.status == 0, "\(r)")
        #expect(r.stderr.contains("warning: a code on the command line can be read by every user"), "\(r)")
        #expect(!r.stderr.contains(code), "the warning does not repeat the code")
    }

    @Test("a code given as an argument is overwritten in /proc/PID/cmdline while the CLI runs")
    func codeArgumentIsHidden() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        // A socket that accepts connections (backlog) and never answers: the CLI waits on it.
        let stall = "\(h.directory)/stall.sock"
        let fd = try Self.listenWithoutAccepting(stall)
        defer { close(fd) }
        let code = "815243"
        let cli = try h.launchCLI(["code", "confirm", code], socketPath: stall)
        // Until the exec the child's command line is the test runner's (no code, no mask): wait
        // for the CLI's own masked command line and its warning, which it writes right after.
        let hidden = await eventually {
            (Self.commandLine(of: cli.pid).contains("code confirm ******")
                && cli.stderrSoFar.contains("warning: a code on the command line")) || !cli.isRunning
        }
        let cmdline = Self.commandLine(of: cli.pid)
        #expect(hidden, "\(cmdline) / \(cli.stderrSoFar)")
        #expect(cli.isRunning, "the CLI waits for the stalled daemon")
        #expect(cmdline.contains("code confirm ******"), "\(cmdline)")
        #expect(!cmdline.contains(code))
        let r = try await Self.kill(cli)
        #expect(r.stderr.contains("warning: a code on the command line"), "\(r)")
    }

    @Test("on a terminal (a pseudo-terminal through script(1)) code confirm prompts and reads the code")
    func codeFromTerminal() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        _ = try await h.runCLI(["code", "send", "--email", "tty@example.com"])
        let code = try await h.waitForCode(for: "tty@example.com")
        let cli = try DaemonHarness.binaryDirectory().appendingPathComponent("rainwallet").path
        let (status, output) = try await Self.runOnTerminal(
            "\(cli) --socket \(h.socketPath) code confirm", input: "\(code)\n")
        #expect(status == 0, "\(output)")
        #expect(output.contains("Enter the 6-digit code: "), "\(output)")
        #expect(output.contains("Logged in."), "\(output)")
        #expect(!output.contains("warning"), "\(output)")

        let (empty, emptyOutput) = try await Self.runOnTerminal(
            "\(cli) --socket \(h.socketPath) contact confirm", input: "\n")
        #expect(empty == 64, "\(emptyOutput)")
        #expect(emptyOutput.contains("Enter the 6-digit verification code: "), "\(emptyOutput)")
        #expect(emptyOutput.contains("no code was entered"), "\(emptyOutput)")
    }

    // MARK: PostgreSQL

    @Test("the authority connects with PGPASSFILE and the libpq environment (--store postgres://), never shows a password")
    func postgresPasswordFile() async throws {
        let url = try await PostgresTestCluster.freshDatabaseURL(label: "pgpass")
        let parts = try #require(URLComponents(string: url))
        let port = try #require(parts.port)
        let database = String(parts.path.dropFirst())
        let role = "rw_pw_\(UInt32.random(in: 0...UInt32.max))"
        let password = "pw-\(UInt64.random(in: 0...UInt64.max))"
        // A role that must give its password: scripts/lib/pg-cluster asks members of
        // rain_password_login for one (scram-sha-256); everyone else is trusted.
        let admin = try PostgresConnection(url: url)
        try admin.executeSimple(
            "DO $$ BEGIN CREATE ROLE rain_password_login NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$",
            operation: "create the password group")
        try admin.executeSimple(
            "CREATE ROLE \(role) LOGIN PASSWORD '\(password)' IN ROLE rain_password_login", operation: "create the role")
        try admin.executeSimple("ALTER DATABASE \(database) OWNER TO \(role)", operation: "give the database")
        let noPassword = #expect(throws: RainError.self, "the server asks this role for its password") {
            _ = try PostgresConnection(url: "postgres://\(role)@127.0.0.1:\(port)/\(database)", environment: [:])
        }
        #expect(noPassword?.code == .internalError)

        let dir = "/tmp/rwpg-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(
            atPath: dir, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let passfile = "\(dir)/pgpass"
        #expect(
            FileManager.default.createFile(
                atPath: passfile, contents: Data("127.0.0.1:\(port):\(database):\(role):\(password)\n".utf8),
                attributes: [.posixPermissions: 0o600]))
        let environment = [
            "PGHOST": "127.0.0.1", "PGPORT": "\(port)", "PGUSER": role, "PGDATABASE": database, "PGSSLMODE": "disable",
            "PGPASSFILE": passfile,
        ]

        // Everything from the environment, the password from PGPASSFILE.
        let fromEnvironment = try await Self.startAuthority(
            dir: "\(dir)/a", store: "postgres://", environment: environment)
        #expect(fromEnvironment.log.contains("store=postgres:\(role)@127.0.0.1:\(port)/\(database)"), "\(fromEnvironment.log)")
        #expect(!fromEnvironment.log.contains("password_in_url"))
        #expect(!fromEnvironment.log.contains(password))
        // The database name in the URL, the rest from the environment; a second instance on the
        // database, so with the first one's master key.
        try FileManager.default.createDirectory(
            atPath: "\(dir)/b", withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        try FileManager.default.copyItem(atPath: "\(dir)/a/authority.key", toPath: "\(dir)/b/authority.key")
        var withoutDatabase = environment
        withoutDatabase["PGDATABASE"] = nil
        let dbOnly = try await Self.startAuthority(
            dir: "\(dir)/b", store: "postgres:///\(database)", environment: withoutDatabase)
        #expect(dbOnly.log.contains("authority.ready"))

        // Without the password file the server refuses the role: the file did the work.
        var withoutFile = environment
        withoutFile["PGPASSFILE"] = "\(dir)/missing"
        let refused = try await Self.runAuthority(dir: "\(dir)/c", store: "postgres://", environment: withoutFile)
        #expect(refused.status == 1, "\(refused.log)")
        #expect(!refused.log.contains(password))
    }

    @Test("a password in --store is warned about, never logged, and hidden from /proc/PID/cmdline")
    func postgresPasswordInURL() async throws {
        let url = try await PostgresTestCluster.freshDatabaseURL(label: "pwurl")
        let parts = try #require(URLComponents(string: url))
        let port = try #require(parts.port)
        let database = String(parts.path.dropFirst())
        let password = "hunter-\(UInt32.random(in: 0...UInt32.max))"
        let dir = "/tmp/rwpu-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(
            atPath: dir, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // The cluster trusts postgres: the password is not checked, only where it shows.
        let started = try await Self.startAuthority(
            dir: "\(dir)/a", store: "postgres://postgres:\(password)@127.0.0.1:\(port)/\(database)", environment: [:],
            inspect: { pid in
                let cmdline = Self.commandLine(of: pid)
                #expect(!cmdline.contains(password), "\(cmdline)")
                #expect(cmdline.contains("postgres://postgres:*"), "\(cmdline)")
            })
        #expect(started.log.contains("store.password_in_url"), "\(started.log)")
        #expect(started.log.contains("PGPASSFILE"))
        #expect(!started.log.contains(password))
    }

    @Test(
        "the password ranges of a store URL, as libpq reads it",
        arguments: [
            ("postgres://u:secret@h:5432/db", ["secret"]),
            ("--store=postgresql://u:secret@h/db?sslmode=require&password=other", ["secret", "other"]),
            ("postgres://u@h/db", []),
            ("postgres://u:@h/db", []),
            ("postgres://", []),
            ("postgres:///db", []),
            ("postgres://h/db?password=q", ["q"]),
            ("sqlite", []),
        ])
    func passwordRanges(_ argument: String, _ expected: [String]) {
        let bytes = Array(argument.utf8)
        let found = PostgresURL.passwordRanges(in: bytes).map { String(decoding: bytes[$0], as: UTF8.self) }
        #expect(found == expected)
        #expect(PostgresURL.hasPassword(argument) == !expected.isEmpty)
    }

    // MARK: helpers

    static func readText(_ path: String) -> String {
        String(decoding: FileManager.default.contents(atPath: path) ?? Data(), as: UTF8.self)
    }

    /// A Unix socket that listens and never accepts.
    static func listenWithoutAccepting(_ path: String) throws -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("socket: \(errno)") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in bytes.enumerated() where i < raw.count - 1 { raw[i] = b }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, listen(fd, 16) == 0 else {
            close(fd)
            throw HarnessError("bind/listen \(path): \(errno)")
        }
        return fd
    }

    /// Kills a CLI still running and returns what it printed.
    static func kill(_ cli: CLIProcess) async throws -> CLIResult {
        _ = Foundation.kill(cli.pid, SIGKILL)
        return try await cli.finish(timeout: .seconds(10))
    }

    /// Runs `command` on a pseudo-terminal (`script -qec`), typing `input` into it.
    static func runOnTerminal(_ command: String, input: String) async throws -> (status: Int32, output: String) {
        var env = ProcessInfo.processInfo.environment
        env["RAINWALLET_SOCKET"] = nil
        let output = "/tmp/rwtty-\(UInt32.random(in: 0...UInt32.max)).out"
        defer { unlink(output) }
        let p = try TestProcess(
            "/usr/bin/script", ["-qec", command, "/dev/null"], environment: env, stdin: .pipe, stdout: .file(output),
            stderr: .file(output))
        try p.input?.write(contentsOf: Data(input.utf8))
        // Standard input stays open until the program is done, as a person at a terminal would keep it.
        let status = await p.waitForExit(timeout: .seconds(30))
        try? p.input?.close()
        guard let status else {
            let state = p.kernelState
            p.signal(SIGKILL)
            throw HarnessError("\(command) on a terminal did not exit within 30 s (\(state)): \(DaemonHarness.readFile(output))")
        }
        return (status, DaemonHarness.readFile(output))
    }

    /// `rainwalletd authority` on a free loopback port with `--store store` and `environment` (on
    /// top of PATH and HOME only), run until it exits.
    static func runAuthority(dir: String, store: String, environment: [String: String]) async throws -> (
        status: Int32, log: String
    ) {
        let p = try launchAuthority(dir: dir, store: store, environment: environment)
        if await p.process.waitForExit(timeout: .seconds(30)) == nil { await p.process.stop(grace: .seconds(5)) }
        return (p.process.exitStatus ?? -1, Self.readText(p.log))
    }

    /// Starts `rainwalletd authority`, waits until it is ready, runs `inspect` with its pid, stops it.
    static func startAuthority(
        dir: String, store: String, environment: [String: String], inspect: (Int32) -> Void = { _ in }
    ) async throws -> (status: Int32, log: String) {
        let p = try launchAuthority(dir: dir, store: store, environment: environment)
        let ready = await eventually(timeout: .seconds(30)) {
            Self.readText(p.log).contains("authority.ready") || !p.process.isRunning
        }
        let isRunning = p.process.isRunning
        if ready && isRunning { inspect(p.process.pid) }
        await p.process.stop(grace: .seconds(20))
        let log = Self.readText(p.log)
        #expect(ready && isRunning, "the authority did not get ready: \(log)")
        return (p.process.exitStatus ?? -1, log)
    }

    static func launchAuthority(dir: String, store: String, environment: [String: String]) throws -> (
        process: TestProcess, log: String
    ) {
        let log = "\(dir).log"
        guard FileManager.default.createFile(atPath: log, contents: nil) else { throw HarnessError("cannot create \(log)") }
        let base = ProcessInfo.processInfo.environment
        let p = try TestProcess(
            try DaemonHarness.binaryDirectory().appendingPathComponent("rainwalletd-test").path,
            ["authority", "--listen", "127.0.0.1:0", "--state-dir", dir, "--store", store],
            environment: ["PATH": base["PATH"] ?? "/usr/bin:/bin", "HOME": base["HOME"] ?? "/root"].merging(environment) { $1 },
            stdout: .file(log), stderr: .file(log))
        return (p, log)
    }
}
