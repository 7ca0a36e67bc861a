import Foundation
import RainTestSupport
import RainWallet
import RainWire
import Synchronization
import Testing

/// Account/Get and Wallet/Get through a remote authority, answered by the device from what it read
/// while its read lease holds: real authority and device processes, and for the silenced link a
/// proxy (scripts/netfault-proxy.py) that holds the device's revocation stream open without
/// traffic and without a FIN.
@Suite("Read leases (real daemons)", .serialized)
struct ReadLeaseIntegrationTests {
    /// Sends a login code to `email` through `provider`, reads it from the authority's outbox and
    /// returns it.
    static func code(_ provider: RainProvider, _ email: String) async throws -> String {
        try await outboxCode(provider) { try await provider.sendLoginCode(to: .email(email)) }
    }

    /// Runs `send` (which sends one code through `provider`) and returns the code from the
    /// authority's outbox.
    static func outboxCode(_ provider: RainProvider, send: () async throws -> Void) async throws -> String {
        let before = try await provider.devOutbox().count
        try await send()
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            let entries = try await provider.devOutbox()
            if entries.count > before, let code = entries.last?.code { return code }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw HarnessError("no code reached the outbox")
    }

    static func logIn(_ provider: RainProvider, _ email: String) async throws {
        _ = try await provider.confirmLoginCodeReturningSession(try await code(provider, email))
    }

    /// The authority's count of `method` answered ok.
    static func calls(_ port: UInt16, _ method: String) throws -> Double {
        try MetricsTests.scrape(port: port).value("rainwallet_authority_calls_total", ["method": method, "code": "ok"])
    }

    static func counter(_ port: UInt16, _ name: String) throws -> Double {
        try MetricsTests.scrape(port: port).value(name)
    }

    /// A device daemon whose authority is 127.0.0.1:`port`.
    static func device(_ port: UInt16) async throws -> DaemonHarness {
        try await DaemonHarness.start(extraArguments: ["--authority", "127.0.0.1:\(port)"])
    }

    /// An authority with metrics on 127.0.0.1, in a fresh directory.
    static func withAuthority(_ body: (AuthorityProcess, UInt16, DaemonHarness) async throws -> Void) async throws {
        let setup = try DaemonHarness.prepare()
        defer { setup.shutdown() }
        try await AuthorityProcess.with(
            in: setup.directory, ["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--send-cooldown", "0"]
        ) { authority in
            try await body(authority, try MetricsTests.metricsPort(authority), setup)
        }
    }

    @Test("Account/Get and Wallet/Get are answered from the lease, and refused RAIN_201 as soon as a login elsewhere completed")
    func keptUntilTheLoginElsewhere() async throws {
        try await Self.withAuthority { authority, metrics, _ in
            let a = try await Self.device(authority.port)
            defer { a.shutdown() }
            let b = try await Self.device(authority.port)
            defer { b.shutdown() }
            let email = "leased@example.com"
            let providerA = a.provider()
            try await Self.logIn(providerA, email)
            let account = try await providerA.account()
            _ = try await providerA.getWallet()
            // Fifty reads of each: the lease answers nearly all of them (one read a lease goes out).
            let before = try Self.calls(metrics, AuthorityMethod.getAccountInfo)
            let walletBefore = try Self.calls(metrics, AuthorityMethod.getWallet)
            for _ in 0..<50 {
                #expect(try await providerA.account() == account)
                _ = try await providerA.getWallet()
            }
            let asked = try Self.calls(metrics, AuthorityMethod.getAccountInfo) - before
            let walletAsked = try Self.calls(metrics, AuthorityMethod.getWallet) - walletBefore
            #expect(asked < 25, "\(asked) of 50 Account/Get went to the authority")
            #expect(walletAsked < 25, "\(walletAsked) of 50 Wallet/Get went to the authority")

            try await Self.logIn(b.provider(), email)
            // The login completed: A's very next reads are refused, not answered from the lease.
            let accountRefusal = await rainError { _ = try await providerA.account() }
            #expect(accountRefusal?.code == .sessionExpired, "\(String(describing: accountRefusal))")
            let walletRefusal = await rainError { _ = try await providerA.getWallet() }
            #expect(walletRefusal?.code == .sessionExpired, "\(String(describing: walletRefusal))")
        }
    }

    @Test("a contact added through the device: its next Account/Get shows it, though the session did not change")
    func ownChangeIsSeen() async throws {
        try await Self.withAuthority { authority, _, _ in
            let a = try await Self.device(authority.port)
            defer { a.shutdown() }
            let provider = a.provider()
            try await Self.logIn(provider, "owner@example.com")
            let before = try await provider.account()
            #expect(try await provider.account() == before)
            let backup = RainWalletContact.email("second@example.com")
            let code = try await Self.outboxCode(provider) { _ = try await provider.sendContactVerificationCode(to: backup) }
            _ = try await provider.confirmContactVerification(code)
            // The authority answered the confirm once the device dropped what it kept.
            let after = try await provider.account()
            #expect(after.contacts.contains(backup), "\(after.contacts)")
            #expect(after.contacts.count == before.contacts.count + 1)
        }
    }

    @Test(
        "A's revocation stream held open without traffic or FIN: B's login waits out A's lease, and A's next read is RAIN_201"
    )
    func silencedLink() async throws {
        try await Self.withAuthority { authority, metrics, setup in
            let proxy = try await NetfaultProxy.start(upstream: authority.port, in: setup.directory)
            defer { proxy.stop() }
            let a = try await Self.device(proxy.port)
            defer { a.shutdown() }
            let b = try await Self.device(authority.port)
            defer { b.shutdown() }
            let email = "silenced@example.com"
            let providerA = a.provider()
            try await Self.logIn(providerA, email)
            let providerB = b.provider()
            let code = try await Self.code(providerB, email)
            let account = try await providerA.account()
            let ranOut = try Self.counter(metrics, "rainwallet_authority_lease_fences_ran_out_total")
            // A reads on, which renews its lease; the proxy freezes A's stream right after it
            // passed a renewal's answer down, so A's lease has nearly all of its second to run.
            let reading = Task {
                while !Task.isCancelled { _ = try? await providerA.account() }
            }
            let frozen = try await proxy.freezeAfterAnswer()
            reading.cancel()
            _ = await reading.value
            #expect(frozen == 1)
            #expect(try await providerA.account() == account)

            _ = try await providerB.confirmLoginCodeReturningSession(code)
            // The login waited until A's lease ran out: A's next read asks the authority (on its
            // other connection, which still passes) and is refused.
            #expect(try Self.counter(metrics, "rainwallet_authority_lease_fences_ran_out_total") == ranOut + 1)
            let refusal = await rainError { _ = try await providerA.account() }
            #expect(refusal?.code == .sessionExpired, "\(String(describing: refusal))")
            let walletRefusal = await rainError { _ = try await providerA.getWallet() }
            #expect(walletRefusal?.code == .sessionExpired, "\(String(describing: walletRefusal))")
        }
    }
}

/// scripts/netfault-proxy.py between a device and the authority.
final class NetfaultProxy: Sendable {
    let process: TestProcess
    let port: UInt16
    let control: String
    static let script = MultiDevice.repositoryRoot.appendingPathComponent("scripts/netfault-proxy.py").path

    private init(process: TestProcess, port: UInt16, control: String) {
        self.process = process
        self.port = port
        self.control = control
    }

    static func start(upstream: UInt16, in directory: String) async throws -> NetfaultProxy {
        let output = "\(directory)/proxy.out"
        let control = "\(directory)/proxy.sock"
        let p = try TestProcess(
            "/usr/bin/python3",
            [script, "serve", "--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:\(upstream)", "--control", control],
            stdout: .file(output), stderr: .file("\(directory)/proxy.err"))
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
            if let r = text.range(of: "ready port="), let port = UInt16(text[r.upperBound...].prefix(while: \.isNumber)) {
                return NetfaultProxy(process: p, port: port, control: control)
            }
            if let status = p.exitStatus { throw HarnessError("the proxy exited with \(status)") }
            try await Task.sleep(for: .milliseconds(20))
        }
        await p.stop(grace: .seconds(1))
        throw HarnessError("the proxy did not start")
    }

    /// Freezes each connection that carries a revocation stream right after it passed an answer
    /// down (`freeze watch-answered`, sent on the control socket directly: no process to start
    /// between the freeze and what the test does next); returns how many.
    func freezeAfterAnswer() async throws -> Int {
        let control = control
        let line = try await onThread { () throws -> String in
            let connection = try RawConnection(path: control)
            try connection.write(Array("freeze watch-answered\n".utf8))
            var answer: [UInt8] = []
            while answer.last != UInt8(ascii: "\n"), let byte = try connection.read(count: 1) { answer += byte }
            return String(decoding: answer, as: UTF8.self)
        }
        guard let data = line.data(using: .utf8), let answer = try JSONSerialization.jsonObject(with: data) as? [String: Any],
            answer["ok"] as? Bool == true, let frozen = answer["frozen"] as? Int
        else { throw HarnessError("freeze failed: \(line)") }
        return frozen
    }

    func stop() {
        kill(process.pid, SIGKILL)
    }
}
