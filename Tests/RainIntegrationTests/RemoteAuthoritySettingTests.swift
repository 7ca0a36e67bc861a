import Foundation
import RainTestSupport
import RainWallet
import Testing

/// The remote authority and its CA are a guarded setting: whoever restarts the daemon chooses its
/// flags, and the authority it names would receive the device's tokens and proofs. Real daemons,
/// real authorities, real certificates.
@Suite("Remote authority as a guarded setting (processes)")
struct RemoteAuthoritySettingTests {
    /// Runs `body` with an authority of its own in `setup`'s `name` directory, stopped however
    /// `body` ends.
    static func withAuthority(
        _ setup: DaemonHarness, _ name: String, _ arguments: [String] = [],
        _ body: (AuthorityProcess) async throws -> Void
    ) async throws {
        let directory = "\(setup.directory)/\(name)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try await AuthorityProcess.with(in: directory, ["--listen", "127.0.0.1:0"] + arguments, body)
    }

    /// Runs `body` with two authorities, `a` and `b`, both stopped however it ends.
    static func withTwoAuthorities(
        _ setup: DaemonHarness, _ body: (AuthorityProcess, AuthorityProcess) async throws -> Void
    ) async throws {
        try await withAuthority(setup, "a") { a in
            try await withAuthority(setup, "b") { b in try await body(a, b) }
        }
    }

    /// The harness's arguments with `--authority` (and `--authority-ca`) set to `flags`; without
    /// them, no deadline flags either (they need `--authority`).
    static func arguments(_ h: DaemonHarness, authority flags: [String]) -> [String] {
        var out: [String] = []
        var skip = false
        for arg in h.daemonArguments {
            if skip {
                skip = false
                continue
            }
            if arg == "--authority" || arg == "--authority-ca" || (flags.isEmpty && arg.hasPrefix("--authority-")) {
                skip = true
                continue
            }
            out.append(arg)
        }
        return out + flags
    }

    @Test(
        "a start naming another authority than the confirmed one is refused (exit 78, both named, nothing sent to it); the confirmed one starts and the session is intact"
    )
    func anotherAuthorityIsRefused() async throws {
        let setup = try DaemonHarness.prepare()
        defer { setup.shutdown() }
        try await Self.withTwoAuthorities(setup) { a, b in
            let device = try await DaemonHarness.start(extraArguments: ["--authority", "127.0.0.1:\(a.port)"])
            defer { device.shutdown() }
            let provider = device.provider()
            try await device.logIn(provider, .email("guarded@example.com"))
            let account = try await provider.account()
            _ = try await device.stop()

            // Another program restarts the daemon on its own authority.
            let refused = try await device.runDaemon(
                arguments: Self.arguments(device, authority: ["--authority", "127.0.0.1:\(b.port)"]))
            #expect(refused.status == 78, "\(refused)")
            #expect(refused.output.contains("RAIN_102") && refused.output.contains("security setting"), "\(refused.output)")
            #expect(refused.output.contains("127.0.0.1:\(b.port)") && refused.output.contains("127.0.0.1:\(a.port)"))
            #expect(refused.output.contains("rainwallet settings confirm"), "\(refused.output)")
            // Nothing reached the other authority: no connection, no proof.
            #expect(!b.log.contains("device_proven") && !b.log.contains("connection.accepted"), "\(b.log)")
            // Nor the embedded one in its place.
            let embedded = try await device.runDaemon(arguments: Self.arguments(device, authority: []))
            #expect(
                embedded.status == 78 && embedded.output.contains("the embedded one"), "\(embedded.status) \(embedded.output)")

            // The confirmed authority: the daemon starts and the session is the same.
            try await device.start()
            #expect(try await provider.account().accountID == account.accountID)
        }
    }

    @Test("a CA file replaced under the same name is refused until confirmed; the same bytes start again")
    func replacedCAIsRefused() async throws {
        let setup = try DaemonHarness.prepare()
        defer { setup.shutdown() }
        let certs = try await TLSAuthorityTests.certificates(in: setup)
        try await Self.withAuthority(
            setup, "tls", ["--tls-cert", certs.serverCertificatePath, "--tls-key", certs.serverKeyPath]
        ) { authority in
            let ca = "\(setup.directory)/trusted-ca.pem"
            try FileManager.default.copyItem(atPath: certs.caPath, toPath: ca)
            let flags = ["--authority", "localhost:\(authority.port)", "--authority-ca", ca]
            let device = try await DaemonHarness.start(extraArguments: flags)
            defer { device.shutdown() }
            try await device.logIn(device.provider(), .email("guarded-ca@example.com"))
            _ = try await device.stop()

            // Same path, another CA (one whose certificates a program of the user made).
            let original = try Data(contentsOf: URL(fileURLWithPath: ca))
            try Data(contentsOf: URL(fileURLWithPath: certs.otherCAPath)).write(to: URL(fileURLWithPath: ca))
            let refused = try await device.runDaemon(arguments: device.daemonArguments)
            #expect(refused.status == 78 && refused.output.contains("security setting"), "\(refused)")
            #expect(refused.output.contains("sha256"), "\(refused.output)")

            try original.write(to: URL(fileURLWithPath: ca))
            try await device.start()
            _ = try await device.provider().account()
        }
    }

    @Test(
        "config.json's remoteAuthority: an edit shows in `settings`, takes effect after `settings confirm` and a restart; root's policy fixes it against the flags"
    )
    func configEditIsConfirmed() async throws {
        let setup = try DaemonHarness.prepare()
        defer { setup.shutdown() }
        try await Self.withTwoAuthorities(setup) { a, b in
            func config(_ port: UInt16) -> String { #"{"remoteAuthority": {"address": "127.0.0.1:\#(port)"}}"# }
            let device = try await DaemonHarness.start(config: config(a.port))
            defer { device.shutdown() }
            try await device.logIn(device.provider(), .email("moved@example.com"))
            #expect(a.log.contains("device_proven") || device.log.contains("authority=127.0.0.1:\(a.port)"), "\(device.log)")

            // The user moves to authority b: the edit waits, listed by `settings`.
            let configPath = try #require(device.configPath)
            try config(b.port).write(toFile: configPath, atomically: true, encoding: .utf8)
            let pending = try await device.runCLI(["--json", "settings"])
            #expect(pending.stdout.contains("remoteAuthority") && pending.stdout.contains("127.0.0.1:\(b.port)"), "\(pending)")
            let confirmed = try await device.runCLI(["settings", "confirm"])
            #expect(confirmed.status == 0, "\(confirmed)")
            #expect(device.answeredPrompts.last?.contains("remoteAuthority") == true, "\(device.answeredPrompts)")
            _ = try await device.stop()
            try await device.start()
            #expect(device.log.contains("authority=127.0.0.1:\(b.port)"), "\(device.log)")
            // b knows no session of this device: logging in again works there.
            try await device.logIn(device.provider(), .email("moved@example.com"))
            _ = try await device.stop()

            // Root's policy fixes the authority: a flag that differs is refused, without a prompt.
            let policy = #"{"remoteAuthority": {"address": "127.0.0.1:\#(b.port)"}}"#
            let policyPath = "\(setup.directory)/fixed-policy.json"
            guard
                FileManager.default.createFile(
                    atPath: policyPath, contents: Data(policy.utf8), attributes: [.posixPermissions: 0o644])
            else { throw HarnessError("cannot write \(policyPath)") }
            var arguments = Self.arguments(device, authority: ["--authority", "127.0.0.1:\(a.port)"])
            if let i = arguments.firstIndex(of: "--policy") { arguments[i + 1] = policyPath }
            let fixed = try await device.runDaemon(arguments: arguments)
            #expect(fixed.status == 78 && fixed.output.contains("fixes the remote authority"), "\(fixed)")
        }
    }

    @Test(
        "scripts/systemd/install --authority writes config.json's remoteAuthority (mode 0600, other keys kept), which the daemon uses"
    )
    func installWritesTheSetting() async throws {
        let setup = try DaemonHarness.prepare()
        defer { setup.shutdown() }
        try await AuthorityProcess.with(in: setup.directory, ["--listen", "127.0.0.1:0"]) { authority in
            let device = try DaemonHarness.prepare(config: #"{"profiles": {"default": {"allowExport": false}}}"#)
            defer { device.shutdown() }
            let configPath = try #require(device.configPath)
            let binary = try DaemonHarness.binaryDirectory().appendingPathComponent("rainwalletd-test").path
            let install = try await SystemdTools.run(
                SystemdTools.repositoryRoot.appendingPathComponent("scripts/systemd/install").path,
                [
                    "--no-start", "--binary", binary, "--unit-dir", "\(setup.directory)/units", "--authority",
                    "127.0.0.1:\(authority.port)", "--config", configPath,
                ], in: setup.directory)
            #expect(install.status == 0, "\(install)")
            let written = try jsonObject(String(contentsOfFile: configPath, encoding: .utf8))
            #expect((written["remoteAuthority"] as? [String: Any])?["address"] as? String == "127.0.0.1:\(authority.port)")
            #expect(written["profiles"] != nil, "\(written)")
            let mode = try FileManager.default.attributesOfItem(atPath: configPath)[.posixPermissions] as? Int
            #expect(mode == 0o600)
            try await device.start()
            try await device.logIn(device.provider(), .email("installed@example.com"))
            #expect(device.log.contains("authority=127.0.0.1:\(authority.port)"), "\(device.log)")
            #expect(authority.log.contains("device_proven") || authority.log.contains("login"), "\(authority.log)")
        }
    }
}
