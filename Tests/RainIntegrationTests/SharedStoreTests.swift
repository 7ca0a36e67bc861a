import Foundation
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainStore
import RainTestSupport
import RainWallet
import RainWire
import Synchronization
import Testing

/// Two `rainwalletd authority` processes on one PostgreSQL database (sharing `authority.key`, copied
/// 0600 into the second one's state directory, as docs/operations.md says), and device daemons, each
/// pointed at one of them. All run on one test clock (`advance(by:)`).
final class SharedStoreCluster: Sendable {
    let dir: String
    let storeURL: String
    let binaries: URL
    /// The offset file every process of the cluster reads its clock from.
    let clock: TestClockFile
    /// The authorities' listening ports, by index.
    let ports: Mutex<[Int]> = Mutex([])
    private let processes = Mutex<[String: TestProcess]>([:])
    static let app = "default"

    private init(dir: String, storeURL: String, binaries: URL) throws {
        self.dir = dir
        self.storeURL = storeURL
        self.binaries = binaries
        clock = try TestClockFile(path: "\(dir)/clock")
    }

    /// Starts two authorities (grace `refreshGrace` seconds) and one device daemon per entry of
    /// `devices` (the index of the authority it uses).
    static func up(devices: [Int], refreshGrace: Int = 10, sendCooldown: Int = 30) async throws -> SharedStoreCluster {
        let url = try await PostgresTestCluster.freshDatabaseURL(label: "shared")
        let dir = "/tmp/rws-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(
            atPath: dir, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        let cluster = try SharedStoreCluster(dir: dir, storeURL: url, binaries: try DaemonHarness.binaryDirectory())
        do {
            cluster.ports.withLock { $0 = [0, 0] }
            _ = try await cluster.startAuthority(0, refreshGrace: refreshGrace, sendCooldown: sendCooldown)
            // Provisioning the shared master key: the first instance created it; the second gets a copy.
            try FileManager.default.createDirectory(
                atPath: "\(dir)/authority1", withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
            try FileManager.default.copyItem(atPath: "\(dir)/authority0/authority.key", toPath: "\(dir)/authority1/authority.key")
            #expect(chmod("\(dir)/authority1/authority.key", 0o600) == 0)
            _ = try await cluster.startAuthority(1, refreshGrace: refreshGrace, sendCooldown: sendCooldown)
            for (i, a) in devices.enumerated() {
                let port = cluster.ports.withLock { $0[a] }
                try cluster.launch(
                    "device\(i)",
                    ["--authority", "127.0.0.1:\(port)", "--socket", cluster.socket(i), "--state-dir", "\(dir)/device\(i)"])
            }
            for i in devices.indices { try await cluster.waitForLog("device\(i)", "daemon.ready", occurrences: 1) }
        } catch {
            cluster.down()
            throw error
        }
        return cluster
    }

    func socket(_ i: Int) -> String { "\(dir)/d\(i).sock" }
    func provider(_ i: Int) -> RainProvider { RainProvider(RainWalletConfig(socketPath: socket(i))) }

    /// A client of authority `i`, as a device daemon would hold.
    func remote(_ i: Int, device: (any DeviceKeyHolder)? = nil) throws -> RemoteAuthority {
        try RemoteAuthority(
            address: "127.0.0.1:\(ports.withLock { $0[i] })", device: device,
            deadlines: .forTests, logger: Logger(label: "test.remote", minimumLevel: .error))
    }

    /// Starts authority `i` (on its old port when it ran before) and waits until it is ready.
    func startAuthority(_ i: Int, refreshGrace: Int = 10, sendCooldown: Int = 30) async throws -> Int {
        let name = "authority\(i)"
        let before = log(name).components(separatedBy: "authority.ready").count - 1
        let port = ports.withLock { $0[i] }
        try launch(
            name,
            [
                "authority", "--listen", "127.0.0.1:\(port)", "--state-dir", "\(dir)/\(name)", "--dev-outbox",
                "--store", storeURL, "--refresh-grace", "\(refreshGrace)", "--access-token-lifetime", "60",
                "--send-cooldown", "\(sendCooldown)",
            ])
        try await waitForLog(name, "authority.ready", occurrences: before + 1)
        let text = log(name)
        guard let r = text.range(of: "port=", options: .backwards),
            let actual = Int(text[r.upperBound...].prefix(while: \.isNumber))
        else { throw HarnessError("no port in the log of \(name):\n\(text)") }
        ports.withLock { $0[i] = actual }
        return actual
    }

    /// Whether authority `i` has libpq mapped (it loads it only for a PostgreSQL store).
    func mapsLibPQ(_ i: Int) -> Bool {
        guard let p = processes.withLock({ $0["authority\(i)"] }) else { return false }
        return processMaps(p.pid, library: "libpq.so")
    }

    /// SIGKILLs authority `i`.
    func killAuthority(_ i: Int) async {
        guard let p = processes.withLock({ $0["authority\(i)"] }) else { return }
        p.signal(SIGKILL)
        _ = await p.waitForExit(timeout: .seconds(10))
    }

    func log(_ name: String) -> String { (try? String(contentsOfFile: "\(dir)/\(name).log", encoding: .utf8)) ?? "" }

    /// Moves every process's clock forward by `delta` and waits until each running process of the
    /// cluster (the authorities and the devices) has applied it: its timers due by then are queued.
    /// Waiting for some only would let a device take the move later, during a call: a deadline
    /// armed before it then passes at once (a send's RAIN_501 "no answer within 9000 ms").
    func advance(by delta: Duration) async throws {
        try clock.advance(by: delta)
        let line = "clock.advanced offsetMilliseconds=\(clock.elapsed.milliseconds)"
        let running = processes.withLock { $0.filter { $0.value.isRunning }.keys.sorted() }
        for name in running { try await waitForLog(name, line, occurrences: 1) }
    }

    /// Now on the cluster's clock (for what the test signs itself).
    var now: Date { Date().addingTimeInterval(clock.elapsed.timeInterval) }

    private func launch(_ name: String, _ arguments: [String]) throws {
        let p = try TestProcess(
            binaries.appendingPathComponent("rainwalletd-test").path, arguments,
            environment: ProcessInfo.processInfo.environment.merging(clock.environment) { $1 },
            stderr: .file("\(dir)/\(name).log"))
        processes.withLock { $0[name] = p }
    }

    func waitForLog(_ name: String, _ marker: String, occurrences: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(20)
        while log(name).components(separatedBy: marker).count - 1 < occurrences {
            if let p = processes.withLock({ $0[name] }), !p.isRunning {
                throw HarnessError("\(name) exited before \(marker):\n\(log(name))")
            }
            guard ContinuousClock.now < deadline else { throw HarnessError("\(name): no \(marker) in time:\n\(log(name))") }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// SIGTERM to every process; the wait for their exit (SIGKILL after 10 s) and the removal of
    /// the directory go on on a thread of their own, so that this returns at once, for `defer`.
    func down() {
        let all = processes.withLock { Array($0.values) }
        for p in all { p.signal(SIGTERM) }
        let dir = self.dir
        Thread {
            for p in all where p.waitForExitBlocking(timeout: .seconds(10)) == nil {
                p.signal(SIGKILL)
                _ = p.waitForExitBlocking(timeout: .seconds(5))
            }
            try? FileManager.default.removeItem(atPath: dir)
        }.start()
    }

    /// Sends a code to `email` through authority `i` for `device`, and reads it from that
    /// authority's outbox.
    func sendCode(via i: Int, device: String, email: String) async throws -> (challenge: String, code: String) {
        let remote = try remote(i)
        defer { remote.close() }
        let sent = try await remote.sendLoginCode(SendCodeRequest(appID: Self.app, deviceID: device, contact: .email(email)))
        let sentCode = try await remote.listOutbox().last(where: { $0.contact == email })?.code
        let code = try #require(sentCode)
        return (sent.challengeID, code)
    }
}

@Suite("Two authorities on one PostgreSQL database", .serialized)
struct SharedStoreTests {
    @Test(
        "--store that cannot be used (another scheme, a malformed URL, a bad port or sslmode) exits 78 naming the part; an unreachable server exits 1; none prints the password"
    )
    func storeErrors() async throws {
        let binary = try DaemonHarness.binaryDirectory().appendingPathComponent("rainwalletd-test")
        let dir = "/tmp/rwse-\(UInt32.random(in: 0...UInt32.max))"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let cases: [(url: String, status: Int32, names: String)] = [
            ("mysql://rain:hunter22@127.0.0.1/db", 78, "--store takes sqlite or postgres://"),
            ("postgres://rain:hunter22@[::1/db", 78, "store URL"),
            ("postgres://rain:hunter22@127.0.0.1:99999/db", 78, "the store URL's port \"99999\" is not a port number"),
            (
                "postgres://rain:hunter22@127.0.0.1:5432/db?sslmode=bogus", 78,
                "the store URL's sslmode \"bogus\" is not an SSL mode"
            ),
            ("postgres://rain:hunter22@127.0.0.1:1/db", 1, "127.0.0.1:1"),
        ]
        for (url, status, names) in cases {
            let r = try await TestProcess.run(
                binary.path, ["authority", "--listen", "127.0.0.1:0", "--state-dir", dir, "--store", url], timeout: .seconds(30))
            #expect(r.status == status, "\(url): \(r.stderr)")
            #expect(r.stderr.contains(names), "\(url): \(r.stderr)")
            #expect(!r.stderr.contains("hunter22"), "\(url): \(r.stderr)")
        }
    }

    @Test("a code sent through A is confirmed through B; refresh rotation and reuse detection hold across them")
    func codeAndRefreshAcrossInstances() async throws {
        let h = try await SharedStoreCluster.up(devices: [], refreshGrace: 30)
        defer { h.down() }
        #expect(h.mapsLibPQ(0) && h.mapsLibPQ(1), "an authority on PostgreSQL loads libpq")
        let (challenge, code) = try await h.sendCode(via: 0, device: "dev-x", email: "across@example.com")
        let key = try Ed25519PrivateKey()
        let device = TestDeviceKeys(deviceID: "dev-x", keys: [key])
        let a = try h.remote(0, device: device)
        let b = try h.remote(1, device: device)
        defer {
            a.close()
            b.close()
        }
        let login = try await b.confirmLoginCode(
            ConfirmCodeRequest(
                appID: SharedStoreCluster.app, deviceID: "dev-x", challengeID: challenge, code: code,
                devicePublicKey: key.publicKey.rawRepresentation))
        #expect(login.accountCreated)
        func refresh(_ token: String, on authority: RemoteAuthority) async throws -> SessionTokens {
            try await authority.refreshSession(
                RefreshRequest(appID: SharedStoreCluster.app, deviceID: "dev-x", refreshToken: token), proof: device.proof)
        }
        // A rotates; the same refresh repeated on B within the grace window gets the same pair.
        let first = try await refresh(login.tokens.refreshToken, on: a)
        let repeated = try await refresh(login.tokens.refreshToken, on: b)
        #expect(repeated.refreshToken == first.refreshToken)
        #expect(repeated.accessToken == first.accessToken)
        let second = try await refresh(first.refreshToken, on: b)
        #expect(second.refreshToken != first.refreshToken)
        // Past the grace window (30 s, moved on the clock, so a loaded machine still repeats within
        // it), the login's token is reuse on A: the family is revoked, so B refuses the newest token too.
        try await h.advance(by: .seconds(31))
        let reuse = await rainError { _ = try await refresh(login.tokens.refreshToken, on: a) }
        #expect(reuse?.code == .sessionExpired)
        let after = await rainError { _ = try await refresh(second.refreshToken, on: b) }
        #expect(after?.code == .sessionExpired)
    }

    @Test("a login through A revokes a device served by B, which learns revokedElsewhere")
    func loginRevokesAcrossInstances() async throws {
        let h = try await SharedStoreCluster.up(devices: [1, 0], sendCooldown: 10)
        defer { h.down() }
        let onB = h.provider(0)
        let onA = h.provider(1)
        let email = "revoke@example.com"
        try await onB.sendLoginCode(to: .email(email))
        let codeB = try #require(try await onB.devOutbox().last?.code)
        let first = try await onB.confirmLoginCodeReturningSession(codeB).session
        let events = try EventLog(onB)
        // The contact's resend cooldown (10 s here: generous for a loaded machine) counts across
        // instances: A's send waits for it.
        let refused = await rainError { try await onA.sendLoginCode(to: .email(email)) }
        #expect(refused?.code == .refused)
        let retryAt = refused?.details.retryAfterMilliseconds ?? 10_000
        try await h.advance(by: .milliseconds(Int64(retryAt) + 200))
        try await onA.sendLoginCode(to: .email(email))
        let codeA = try #require(try await onA.devOutbox().last?.code)
        let second = try await onA.confirmLoginCodeReturningSession(codeA).session
        #expect(second.accountID == first.accountID)
        let error = await rainError { _ = try await onB.account() }
        #expect(error?.code == .sessionExpired)
        #expect(await eventually(timeout: .seconds(15)) { events.expiries == [.revokedElsewhere] })
        #expect(try await onA.currentSession().authState == .authenticated)
    }

    @Test("concurrent confirmations on A and B: one account per contact, never a 4th wrong guess")
    func concurrentConfirmationsAcrossInstances() async throws {
        let h = try await SharedStoreCluster.up(devices: [])
        defer { h.down() }
        let clients = [try h.remote(0), try h.remote(1)]
        defer { clients.forEach { $0.close() } }
        let app = SharedStoreCluster.app

        // The right code, confirmed on both at once, many times: one login, one account.
        let (challenge, code) = try await h.sendCode(via: 0, device: "dev-r", email: "race@example.com")
        let outcomes = try await withThrowingTaskGroup(of: LoginResult?.self) { group in
            for i in 0..<8 {
                let client = clients[i % 2]
                group.addTask {
                    try? await client.confirmLoginCode(
                        ConfirmCodeRequest(appID: app, deviceID: "dev-r", challengeID: challenge, code: code, devicePublicKey: [])
                    )
                }
            }
            return try await group.reduce(into: [LoginResult?]()) { $0.append($1) }
        }
        let logins = outcomes.compactMap { $0 }
        #expect(logins.count == 1)
        #expect(logins.first?.accountCreated == true)

        // Wrong codes on both at once: exactly 3 are counted, and then the right one is refused.
        let (locked, rightCode) = try await h.sendCode(via: 1, device: "dev-w", email: "guess@example.com")
        let reasons = try await withThrowingTaskGroup(of: String?.self) { group in
            for i in 0..<10 {
                let client = clients[i % 2]
                group.addTask {
                    await rainError {
                        _ = try await client.confirmLoginCode(
                            ConfirmCodeRequest(
                                appID: app, deviceID: "dev-w", challengeID: locked, code: wrongCode(for: rightCode),
                                devicePublicKey: []))
                    }?.details.reason
                }
            }
            return try await group.reduce(into: [String?]()) { $0.append($1) }
        }
        #expect(reasons.filter { $0 == "wrong" }.count == 2)
        #expect(reasons.allSatisfy { $0 == "wrong" || $0 == "locked" })
        let late = await rainError {
            _ = try await clients[0].confirmLoginCode(
                ConfirmCodeRequest(appID: app, deviceID: "dev-w", challengeID: locked, code: rightCode, devicePublicKey: []))
        }
        #expect(late?.details.reason == "locked")

        let store = try await PostgresAuthorityStore.open(url: h.storeURL, connections: 1)
        #expect(try await store.account(appID: app, contact: .email("guess@example.com")) == nil)
        #expect(try await store.account(appID: app, contact: .email("race@example.com"))?.id == logins.first?.accountID)
        #expect(try await store.consistencyViolations() == [])
        await store.close()
    }

    @Test("an instance SIGKILLed mid-run: devices on the other keep working; restarted, it rejoins without migrating again")
    func instanceKilledMidRun() async throws {
        let h = try await SharedStoreCluster.up(devices: [0, 1])
        defer { h.down() }
        let onA = h.provider(0)
        let onB = h.provider(1)
        try await onB.sendLoginCode(to: .email("survivor@example.com"))
        _ = try await onB.confirmLoginCodeReturningSession(try #require(try await onB.devOutbox().last?.code))

        // Load on both while A dies.
        let stop = Mutex(false)
        let failuresOnB = Mutex(0)
        let load = Task {
            while !stop.withLock({ $0 }) {
                do { _ = try await onB.refreshSession() } catch { failuresOnB.withLock { $0 += 1 } }
            }
        }
        await h.killAuthority(0)
        let unreachable = await rainError { try await onA.sendLoginCode(to: .email("other@example.com")) }
        #expect(unreachable?.code == .network)
        for _ in 0..<5 {
            _ = try await onB.refreshSession()
            _ = try await onB.account()
        }
        stop.withLock { $0 = true }
        await load.value
        #expect(failuresOnB.withLock { $0 } == 0)

        _ = try await h.startAuthority(0)
        #expect(h.log("authority0").components(separatedBy: "authority.ready").count - 1 == 2)
        let store = try await PostgresAuthorityStore.open(url: h.storeURL, connections: 1)
        #expect(try await store.appliedMigrations() == Array(1...PostgresAuthorityStore.latestSchemaVersion))
        await store.close()
        // A serves again, on the same accounts.
        let back = await eventually(timeout: .seconds(15)) {
            (try? await onA.sendLoginCode(to: .email("other@example.com"))) != nil
        }
        #expect(back)
        let code = try #require(try await onA.devOutbox().last?.code)
        let session = try await onA.confirmLoginCodeReturningSession(code).session
        #expect(session.authState == .authenticated)
        #expect(try await onB.currentSession().authState == .authenticated)
        let check = try await PostgresAuthorityStore.open(url: h.storeURL, connections: 1)
        #expect(try await check.consistencyViolations() == [])
        await check.close()
    }
}
