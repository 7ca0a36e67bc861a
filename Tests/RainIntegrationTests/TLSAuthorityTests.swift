import Foundation
import RainCrypto
import RainTestSupport
import RainWallet
import Testing

/// A real `rainwalletd authority` process in `directory`, stopped by `stop()`.
final class AuthorityProcess: Sendable {
    let process: TestProcess
    let port: UInt16
    let logPath: String

    private init(process: TestProcess, port: UInt16, logPath: String) {
        self.process = process
        self.port = port
        self.logPath = logPath
    }

    /// Its process id.
    var pid: Int32 { process.pid }

    /// Starts `rainwalletd authority ARGS --state-dir DIR/authority --dev-outbox` and waits for
    /// `authority.ready`.
    static func start(in directory: String, _ arguments: [String]) async throws -> AuthorityProcess {
        let logPath = "\(directory)/authority.log"
        guard FileManager.default.createFile(atPath: logPath, contents: nil) else {
            throw HarnessError("cannot create \(logPath)")
        }
        let p = try TestProcess(
            try DaemonHarness.binaryDirectory().appendingPathComponent("rainwalletd-test").path,
            ["authority"] + arguments + ["--state-dir", "\(directory)/authority", "--dev-outbox"], stderr: .file(logPath))
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            let text = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
            if let r = text.range(of: " port=") {
                let digits = text[r.upperBound...].prefix(while: \.isNumber)
                if let port = UInt16(digits) { return AuthorityProcess(process: p, port: port, logPath: logPath) }
            }
            if let status = p.exitStatus { throw HarnessError("the authority exited with \(status): \(text)") }
            try await Task.sleep(for: .milliseconds(20))
        }
        let state = p.kernelState
        await p.stop(grace: .seconds(5))
        throw HarnessError("the authority was not ready in time (\(state))")
    }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// Starts an authority (see `start`), runs `body` and stops the authority however it ends.
    static func with(in directory: String, _ arguments: [String], _ body: (AuthorityProcess) async throws -> Void) async throws {
        let authority = try await start(in: directory, arguments)
        do {
            try await body(authority)
        } catch {
            await authority.stop()
            throw error
        }
        await authority.stop()
    }

    /// SIGTERM; waits (polling, off the concurrency pool's threads) until it exited, SIGKILL after 20 s.
    func stop() async {
        await process.stop(grace: .seconds(20))
    }
}

/// TLS between real device daemons and a real authority process, with certificates made at test
/// time by `openssl`.
@Suite("TLS authority (processes)")
struct TLSAuthorityTests {
    static func certificates(in h: DaemonHarness) async throws -> TestCertificates {
        let dir = "\(h.directory)/certs"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false)
        return try await TestCertificates.make(in: dir)
    }

    @Test(
        "a device logs in by code through a TLS authority; a device trusting another CA gets RAIN_501 tls_unknown_ca; one without --authority-ca gets RAIN_501 outcome_unknown naming it"
    )
    func loginThroughTLS() async throws {
        let setup = try DaemonHarness.prepare()
        defer { setup.shutdown() }
        let certs = try await Self.certificates(in: setup)
        try await AuthorityProcess.with(
            in: setup.directory,
            ["--listen", "127.0.0.1:0", "--tls-cert", certs.serverCertificatePath, "--tls-key", certs.serverKeyPath]
        ) { authority in
            #expect(authority.log.contains("tls=true"))

            let good = try await DaemonHarness.start(extraArguments: [
                "--authority", "localhost:\(authority.port)", "--authority-ca", certs.caPath,
            ])
            defer { good.shutdown() }
            let provider = good.provider()
            let login = try await good.logIn(provider, .email("tls@example.com"))
            #expect(login.accountCreated)
            let account = try await provider.account()
            #expect(!account.walletID.isEmpty)
            #expect(good.log.contains("authority.connected") && good.log.contains("tls=true"))

            let wrong = try await DaemonHarness.start(extraArguments: [
                "--authority", "localhost:\(authority.port)", "--authority-ca", certs.otherCAPath,
            ])
            defer { wrong.shutdown() }
            let error = await rainError { try await wrong.provider().sendLoginCode(to: .email("tls@example.com")) }
            #expect(error?.code == .provider)
            #expect(error?.details.reason == TLSSession.FailureReason.unknownCA)
            #expect(error?.message.contains("--authority-ca") == true)
            // A device without --authority-ca speaks plain TCP: the TLS authority closes without a
            // word, and the error says what to try. The send's request had left, so its outcome is
            // unknown to the device: RAIN_501 outcome_unknown, never a guess.
            let plain = try await DaemonHarness.start(extraArguments: ["--authority", "127.0.0.1:\(authority.port)"])
            defer { plain.shutdown() }
            let lost = await rainError { try await plain.provider().sendLoginCode(to: .email("tls@example.com")) }
            #expect(lost?.code == .provider, "\(String(describing: lost))")
            #expect(lost?.details.reason == "outcome_unknown", "\(String(describing: lost))")
            #expect(lost?.message.contains("--authority-ca") == true, "\(String(describing: lost))")
            // The authority logged the refused handshake and still serves the good device.
            #expect(await eventually { authority.log.contains("tls.handshake_failed") })
            #expect(try await provider.account().accountID == account.accountID)
        }
    }

    @Test("a certificate that stops verifying (expired) fails calls with RAIN_501 but keeps the session; renewed, all works")
    func failingCertificateKeepsSession() async throws {
        let setup = try DaemonHarness.prepare()
        defer { setup.shutdown() }
        let certs = try await Self.certificates(in: setup)
        func serve(_ certificate: String, port: UInt16) -> [String] {
            ["--listen", "127.0.0.1:\(port)", "--tls-cert", certificate, "--tls-key", certs.serverKeyPath]
        }
        let first = try await AuthorityProcess.start(in: setup.directory, serve(certs.serverCertificatePath, port: 0))
        let port = first.port
        let device: DaemonHarness
        do {
            device = try await DaemonHarness.start(extraArguments: [
                "--authority", "localhost:\(port)", "--authority-ca", certs.caPath,
            ])
        } catch {
            await first.stop()
            throw error
        }
        defer { device.shutdown() }
        let provider = device.provider()
        do {
            try await device.logIn(provider, .email("renew@example.com"))
        } catch {
            await first.stop()
            throw error
        }
        await first.stop()

        // Same port and state, but the certificate has expired.
        try await AuthorityProcess.with(in: setup.directory, serve(certs.expiredCertificatePath, port: port)) { _ in
            let read = await rainError { _ = try await provider.account() }
            #expect(read?.code == .provider)
            #expect(read?.details.reason == TLSSession.FailureReason.certificateExpired)
            #expect(read?.message.contains("renew") == true)
            let refresh = await rainError { _ = try await provider.refreshSession() }
            #expect(refresh != nil)
            #expect(refresh?.code != .sessionExpired)
            let isActive = try await provider.hasActiveSession()
            #expect(isActive, "a certificate problem ended the session")
        }
        // Renewed: the same session refreshes again.
        try await AuthorityProcess.with(in: setup.directory, serve(certs.serverCertificatePath, port: port)) { _ in
            _ = try await provider.refreshSession()
            #expect(try await provider.hasActiveSession())
        }
    }

    @Test("without TLS the authority refuses a non-loopback listen address and the device a non-loopback authority")
    func nonLoopbackWithoutTLSRefused() async throws {
        let h = try DaemonHarness.prepare()
        defer { h.shutdown() }
        let authority = try await h.runDaemon(arguments: [
            "authority", "--listen", "0.0.0.0:0", "--state-dir", "\(h.directory)/a",
        ])
        #expect(authority.status == 78)
        #expect(authority.output.contains("RAIN_102"))
        #expect(authority.output.contains("--tls-cert"))
        let device = try await h.runDaemon(arguments: h.daemonArguments + ["--authority", "192.0.2.1:7420"])
        #expect(device.status == 78)
        #expect(device.output.contains("RAIN_102"))
        #expect(device.output.contains("--authority-ca"))
        let caAlone = try await h.runDaemon(arguments: h.daemonArguments + ["--authority-ca", "/nonexistent.pem"])
        #expect(caAlone.status == 64)
        let missingCA = try await h.runDaemon(
            arguments: h.daemonArguments + ["--authority", "127.0.0.1:7420", "--authority-ca", "\(h.directory)/nonexistent.pem"])
        #expect(missingCA.status == 78)
        #expect(missingCA.output.contains("nonexistent.pem"))
    }

    @Test("with TLS the authority listens on 0.0.0.0 and the device accepts a non-loopback authority address")
    func nonLoopbackWithTLSAccepted() async throws {
        let setup = try DaemonHarness.prepare()
        defer { setup.shutdown() }
        let certs = try await Self.certificates(in: setup)
        try await AuthorityProcess.with(
            in: setup.directory,
            ["--listen", "0.0.0.0:0", "--tls-cert", certs.serverCertificatePath, "--tls-key", certs.serverKeyPath]
        ) { authority in
            #expect(authority.log.contains("listen=0.0.0.0:"))
            // A device dialling a documentation address (nothing answers there) starts: the address is
            // accepted; calls then fail as unreachable, not as refused configuration.
            let device = try await DaemonHarness.start(extraArguments: [
                "--authority", "192.0.2.1:7420", "--authority-ca", certs.caPath,
            ])
            defer { device.shutdown() }
            #expect(device.isRunning)
        }
    }

    @Test("the authority refuses a TLS key file that others can read, and a certificate without its key")
    func keyFileChecks() async throws {
        let h = try DaemonHarness.prepare()
        defer { h.shutdown() }
        let certs = try await Self.certificates(in: h)
        #expect(chmod(certs.serverKeyPath, 0o640) == 0)
        let open = try await h.runDaemon(arguments: [
            "authority", "--listen", "127.0.0.1:0", "--state-dir", "\(h.directory)/a", "--tls-cert", certs.serverCertificatePath,
            "--tls-key", certs.serverKeyPath,
        ])
        #expect(open.status == 78)
        #expect(open.output.contains("chmod 600"))
        let alone = try await h.runDaemon(arguments: [
            "authority", "--listen", "127.0.0.1:0", "--state-dir", "\(h.directory)/a", "--tls-cert", certs.serverCertificatePath,
        ])
        #expect(alone.status == 64)
    }
}
