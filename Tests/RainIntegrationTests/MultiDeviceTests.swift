import Foundation
import RainTestSupport
import RainWallet
import RainWire
import Synchronization
import Testing

/// One authority and N device daemons started by `scripts/harness`, all on one test clock that the
/// test moves (`advance(by:)`) instead of waiting for lifetimes to pass.
final class MultiDevice: Sendable {
    struct Device: Sendable {
        let socket: String
        let stateDir: String
        let log: String
    }

    let dir: String
    let authority: String
    let devices: [Device]
    let binaries: URL
    /// The offset file every daemon of this harness reads its clock from.
    let clock: TestClockFile
    static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    private init(dir: String, authority: String, devices: [Device], binaries: URL, clock: TestClockFile) {
        self.dir = dir
        self.authority = authority
        self.devices = devices
        self.binaries = binaries
        self.clock = clock
    }

    /// Runs `bash ARGUMENTS` to completion (waiting asynchronously: `scripts/harness up` takes
    /// seconds, which must not hold a thread of the concurrency pool).
    static func run(_ arguments: [String], environment: [String: String] = [:]) async throws -> (Int32, String, String) {
        let r = try await TestProcess.run("/bin/bash", arguments, environment: bashEnvironment(environment))
        return (r.status, r.stdout, r.stderr)
    }

    /// This process's environment with `environment` on top, without a session bus: a keyring
    /// another suite of this process started (TestKeyring.shared) must not become these daemons'
    /// key provider; they keep their keys in files, as the tests expect.
    private static func bashEnvironment(_ environment: [String: String]) -> [String: String] {
        var env = ProcessInfo.processInfo.environment
        env["DBUS_SESSION_BUS_ADDRESS"] = nil
        for (k, v) in environment { env[k] = v }
        return env
    }

    /// `scripts/harness up --devices N --access-token-lifetime L --json`, plus `arguments`.
    static func up(devices: Int, lifetime: Int, arguments: [String] = []) async throws -> MultiDevice {
        let binaries = try DaemonHarness.binaryDirectory()
        let dir = "/tmp/rwm-\(UInt32.random(in: 0...UInt32.max))"
        // Beside DIR, not in it: the harness creates DIR and refuses one that exists.
        let clock = try TestClockFile(path: "\(dir).clock")
        let script = repositoryRoot.appendingPathComponent("scripts/harness").path
        let (status, out, err) = try await run(
            [
                script, "up", "--devices", "\(devices)", "--dir", dir, "--access-token-lifetime", "\(lifetime)", "--json",
                "--approve", DaemonHarness.testRunnerPath,
            ] + arguments,
            environment: ["RAINWALLET_BIN_DIR": binaries.path].merging(clock.environment) { $1 })
        guard status == 0, let data = out.data(using: .utf8),
            let json = try JSONSerialization.jsonObject(with: data) as? [String: Any],
            let authority = json["authority"] as? String, let list = json["devices"] as? [[String: Any]]
        else {
            try? FileManager.default.removeItem(atPath: clock.path)
            throw HarnessError("harness up failed (\(status)): \(err)")
        }
        let devices = list.compactMap { d -> Device? in
            guard let s = d["socket"] as? String, let st = d["stateDir"] as? String, let l = d["log"] as? String else {
                return nil
            }
            return Device(socket: s, stateDir: st, log: l)
        }
        return MultiDevice(dir: dir, authority: authority, devices: devices, binaries: binaries, clock: clock)
    }

    /// `scripts/harness down`, on a thread of its own: the call returns at once, for `defer`.
    /// `scripts/harness down`, started before this returns (so the daemons stop even if the test
    /// process ends first); the wait for it happens on a thread of its own, for `defer`.
    func down() {
        let script = Self.repositoryRoot.appendingPathComponent("scripts/harness").path
        let stopping = try? TestProcess("/bin/bash", [script, "down", "--dir", dir], environment: Self.bashEnvironment([:]))
        let clock = clock.path
        Thread {
            _ = stopping?.waitForExitBlocking(timeout: .seconds(30))
            try? FileManager.default.removeItem(atPath: clock)
        }.start()
    }

    /// The environment of a daemon started by the test itself (on the harness's clock).
    var daemonEnvironment: [String: String] {
        var env = ProcessInfo.processInfo.environment.merging(clock.environment) { $1 }
        env["DBUS_SESSION_BUS_ADDRESS"] = nil
        return env
    }

    /// Moves every daemon's clock forward by `delta` and waits (returning as soon as they have)
    /// until the daemons whose logs are `logs` (all devices by default) have applied it: their
    /// timers due by then are queued.
    func advance(by delta: Duration, logs: [String]? = nil) async throws {
        try clock.advance(by: delta)
        let line = "clock.advanced offsetMilliseconds=\(clock.elapsed.milliseconds)"
        let paths = logs ?? devices.map(\.log)
        let applied = await eventually(timeout: .seconds(10)) {
            paths.allSatisfy { ((try? String(contentsOfFile: $0, encoding: .utf8)) ?? "").contains(line) }
        }
        guard applied else { throw HarnessError("the daemons did not apply \(line)") }
    }

    /// How many times device `i` has refreshed its session.
    func refreshCount(_ i: Int) -> Int { log(i).components(separatedBy: "session.refreshed").count - 1 }

    var authorityLog: String { "\(dir)/authority.log" }

    func provider(_ i: Int) -> RainProvider { RainProvider(RainWalletConfig(socketPath: devices[i].socket)) }

    func pid(_ name: String) -> Int32? {
        guard let text = try? String(contentsOfFile: "\(dir)/\(name).pid", encoding: .utf8) else { return nil }
        return Int32(text.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Sends a code through device `i`, reads it from the outbox and confirms it.
    func logIn(_ i: Int, email: String = "multi@example.com") async throws -> SessionSnapshot {
        let p = provider(i)
        let before = try await p.devOutbox().count
        try await p.sendLoginCode(to: .email(email))
        var code: String?
        let deadline = ContinuousClock.now + .seconds(10)
        while code == nil && ContinuousClock.now < deadline {
            let entries = try await p.devOutbox()
            if entries.count > before { code = entries.last?.code } else { try await Task.sleep(for: .milliseconds(20)) }
        }
        return try await p.confirmLoginCodeReturningSession(try #require(code)).session
    }

    /// Kills the authority (SIGKILL).
    func killAuthority() throws {
        let authorityPID = try #require(pid("authority"))
        kill(authorityPID, SIGKILL)
        // The kill is delivered later: until the process is gone (reaped, or a zombie) it still
        // holds its listening socket and its state directory's lock, and a new authority started
        // meanwhile cannot bind or lock, and exits.
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            var status: Int32 = 0
            if waitpid(authorityPID, &status, WNOHANG) == authorityPID { return }
            let stat = (try? String(contentsOfFile: "/proc/\(authorityPID)/stat", encoding: .utf8)) ?? ""
            if stat.isEmpty || stat.split(separator: ")").last?.trimmingCharacters(in: .whitespaces).hasPrefix("Z") == true {
                return
            }
            usleep(5_000)
        }
    }

    /// The send limits `scripts/harness up` relaxes (these tests log in again and again).
    static let relaxedSendLimitFlags = [
        "--send-cooldown", "0", "--contact-max-sends", "1000000", "--account-max-sends", "1000000",
        "--contact-all-apps-max-sends", "1000000", "--source-max-sends", "1000000",
    ]

    /// Starts the authority again on the same port, state and clock, and waits until it is ready.
    func restartAuthority() async throws {
        let arguments = [
            "authority", "--listen", authority, "--state-dir", "\(dir)/authority", "--dev-outbox", "--access-token-lifetime",
            "\(lifetimeSeconds)",
        ]
        let readyBefore = authorityReadyCount
        // Appended to the first run's log, so its readiness is the count going up.
        let p = try TestProcess(
            binaries.appendingPathComponent("rainwalletd-test").path, arguments + Self.relaxedSendLimitFlags,
            environment: daemonEnvironment, stderr: .file(authorityLog))
        try "\(p.pid)\n".write(toFile: "\(dir)/authority.pid", atomically: true, encoding: .utf8)
        let ready = await eventually(timeout: .seconds(15)) { self.authorityReadyCount > readyBefore }
        guard ready else {
            let log = (try? String(contentsOfFile: authorityLog, encoding: .utf8)) ?? ""
            throw HarnessError("the restarted authority did not get ready; its log ends:\n\(log.suffix(2000))")
        }
    }

    private var authorityReadyCount: Int {
        ((try? String(contentsOfFile: authorityLog, encoding: .utf8)) ?? "").components(separatedBy: "authority.ready").count - 1
    }

    var lifetimeSeconds: Int {
        let log = (try? String(contentsOfFile: "\(dir)/authority.log", encoding: .utf8)) ?? ""
        guard let r = log.range(of: "accessTokenLifetime=") else { return 6 }
        return Int(Double(log[r.upperBound...].prefix(while: { $0.isNumber || $0 == "." })) ?? 6)
    }

    func log(_ i: Int) -> String { (try? String(contentsOfFile: devices[i].log, encoding: .utf8)) ?? "" }
}

/// Collects a provider's events in the background.
final class EventLog: Sendable {
    final class Store: Sendable {
        let events = Mutex<[SessionEvent]>([])
    }
    let store = Store()
    let task: Mutex<Task<Void, Never>?> = Mutex(nil)
    /// Kept alive: the stream ends when its provider goes away.
    let provider: RainProvider

    init(_ provider: RainProvider) throws {
        self.provider = provider
        let stream = try provider.events()
        let store = self.store
        let t = Task {
            do {
                for try await e in stream { store.events.withLock { $0.append(e) } }
            } catch {}
        }
        task.withLock { $0 = t }
    }

    deinit { task.withLock { $0?.cancel() } }

    var expiries: [ExpiryReason?] { store.events.withLock { $0.filter { $0.kind == .sessionExpired }.map(\.expiryReason) } }
    var count: Int { store.events.withLock { $0.count } }
}

@Suite(.serialized) struct MultiDeviceTests {
    @Test func automaticRefreshKeepsTheSessionAliveAcrossSeveralLifetimes() async throws {
        // A refresh is due half a lifetime (15 s) after the last one; each step moves the clock
        // 16 s, past it and well before the expiry, and waits for that refresh.
        let h = try await MultiDevice.up(devices: 1, lifetime: 30)
        defer { h.down() }
        _ = try await h.logIn(0)
        let events = try EventLog(h.provider(0))
        for _ in 0..<6 {  // 96 s: more than three lifetimes
            let before = h.refreshCount(0)
            try await h.advance(by: .seconds(16))
            #expect(await eventually(timeout: .seconds(10)) { h.refreshCount(0) > before })
        }
        let s = try await h.provider(0).currentSession()
        #expect(s.authState == .authenticated)
        #expect(s.hasActiveSession)
        #expect(h.log(0).components(separatedBy: "session.refreshed").count - 1 >= 3)
        #expect(events.expiries.isEmpty)
    }

    @Test func loginOnAnotherDeviceEndsTheFirstOnceWithRevokedElsewhere() async throws {
        let h = try await MultiDevice.up(devices: 2, lifetime: 20)
        defer { h.down() }
        let a = try await h.logIn(0)
        let watchers = try (0..<3).map { _ in try EventLog(h.provider(0)) }
        let b = try await h.logIn(1)
        #expect(a.accountID == b.accountID)
        // Past the refresh points (10 s): the first device learns at its refresh; the second refreshes.
        let refreshesOf1 = h.refreshCount(1)
        try await h.advance(by: .seconds(12))
        let ended = await eventually(timeout: .seconds(15)) { watchers.allSatisfy { !$0.expiries.isEmpty } }
        #expect(ended)
        #expect(await eventually(timeout: .seconds(10)) { h.refreshCount(1) > refreshesOf1 })
        // No second event may follow: past every deadline of the first device's old session
        // (its expiry at 20 s); the second device refreshes again on the way.
        let refreshesOf1Later = h.refreshCount(1)
        try await h.advance(by: .seconds(12))
        #expect(await eventually(timeout: .seconds(10)) { h.refreshCount(1) > refreshesOf1Later })
        _ = await eventually(timeout: .milliseconds(500)) { watchers.contains { $0.expiries.count > 1 } }
        for w in watchers { #expect(w.expiries == [.revokedElsewhere]) }
        let error = await rainError { try await h.provider(0).refreshSession() }
        #expect(error?.code == .sessionExpired)
        #expect(try await h.provider(1).currentSession().authState == .authenticated)
    }

    @Test func authorityDownPastExpiryEndsTheSessionWithRefreshFailed() async throws {
        let h = try await MultiDevice.up(devices: 1, lifetime: 20)
        defer { h.down() }
        _ = try await h.logIn(0)
        let events = try EventLog(h.provider(0))
        try h.killAuthority()
        // Past the refresh point (10 s): the refresh fails while the authority is down...
        try await h.advance(by: .seconds(11))
        let failed = await eventually(timeout: .seconds(10)) { h.log(0).contains("refresh.transient_failure") }
        #expect(failed)
        // ...and past the expiry (20 s) the session ends.
        try await h.advance(by: .seconds(10))
        let ended = await eventually(timeout: .seconds(15)) { !events.expiries.isEmpty }
        #expect(ended)
        #expect(events.expiries == [.refreshFailed])
        #expect(try await h.provider(0).currentSession().sessionState == .expired)
    }

    @Test func authorityDownDuringRefreshThenBackUpKeepsTheSession() async throws {
        let h = try await MultiDevice.up(devices: 1, lifetime: 60)
        defer { h.down() }
        _ = try await h.logIn(0)
        let events = try EventLog(h.provider(0))
        try h.killAuthority()
        // The refresh is due 30 s after login: it fails (and is retried) while the authority is down.
        try await h.advance(by: .seconds(31))
        let failed = await eventually(timeout: .seconds(20)) { h.log(0).contains("refresh.transient_failure") }
        #expect(failed)
        let refreshCountBefore = h.refreshCount(0)
        try await h.restartAuthority()
        // Past the next retry (at most `retryMaxDelay`, 4 s, after the last failure); 35 s of the
        // 60 s lifetime are used.
        try await h.advance(by: .seconds(4) + .milliseconds(500))
        let refreshed = await eventually(timeout: .seconds(15)) { h.refreshCount(0) > refreshCountBefore }
        #expect(refreshed)
        #expect(try await h.provider(0).currentSession().authState == .authenticated)
        #expect(events.expiries.isEmpty)
    }

    @Test func copiedSessionFileWithoutTheDeviceKeyIsRefusedAtRefresh() async throws {
        let h = try await MultiDevice.up(devices: 2, lifetime: 30)
        defer { h.down() }
        _ = try await h.logIn(0)
        // Stop device 2, give it device 1's session file and storage key (not its device key), restart it.
        let pid2 = try #require(h.pid("device2"))
        kill(pid2, SIGTERM)
        _ = await eventually(timeout: .seconds(10)) { kill(pid2, 0) != 0 }
        let fm = FileManager.default
        let d1 = h.devices[0].stateDir
        let d2 = h.devices[1].stateDir
        // With device 1's confirmed settings, sealed under the same storage key (they name the
        // authority, which a start must match).
        for file in ["storage.key", "sessions/default.session", "confirmed-settings.json"] {
            try? fm.removeItem(atPath: "\(d2)/\(file)")
            try fm.copyItem(atPath: "\(d1)/\(file)", toPath: "\(d2)/\(file)")
        }
        // The records sealed under device 2's own storage key no longer open (rainwalletd would
        // refuse to start, naming them): a thief removes them too.
        for file in ["apps.json"] { try? fm.removeItem(atPath: "\(d2)/\(file)") }
        let p = try TestProcess(
            h.binaries.appendingPathComponent("rainwalletd-test").path,
            ["--authority", h.authority, "--socket", h.devices[1].socket, "--state-dir", d2], environment: h.daemonEnvironment,
            stderr: .file(h.devices[1].log))
        try "\(p.pid)\n".write(toFile: "\(h.dir)/device2.pid", atomically: true, encoding: .utf8)
        let ready = await eventually(timeout: .seconds(15)) { (try? await h.provider(1).daemonInfo()) != nil }
        #expect(ready)
        let thief = h.provider(1)
        try await thief.awaitSessionRestore()
        // The copy decrypts... (the revocation stream's check at connect, a call with its
        // token that the authority refuses, may have ended it already)
        let loaded = try await thief.currentSession()
        #expect(loaded.authState == .authenticated || loaded.sessionState == .expired)
        let error = await rainError { try await thief.refreshSession() }  // ...but cannot be refreshed
        #expect(error?.code == .sessionExpired)
        #expect(try await thief.currentSession().sessionState == .expired)
        // The stolen token burned the session family: the real device is refused at its next refresh too.
        let victimError = await rainError { try await h.provider(0).refreshSession() }
        #expect(victimError?.code == .sessionExpired)
    }

    @Test func aSignedOutDeviceLearnsItOnItsNextCall() async throws {
        let h = try await MultiDevice.up(devices: 2, lifetime: 60)  // no refresh during the test
        defer { h.down() }
        _ = try await h.logIn(0)
        let account = try await h.provider(0).account()
        #expect(account.contacts == [.email("multi@example.com")])
        let watcher = try EventLog(h.provider(0))
        _ = try await h.logIn(1)
        let (status, _, err) = try await MultiDevice.run([
            "-c", "exec \"$0\" --socket \"$1\" account", h.binaries.appendingPathComponent("rainwallet").path,
            h.devices[0].socket,
        ])
        #expect(status == 4)  // RAIN_201
        #expect(err.contains("RAIN_201"))
        let ended = await eventually(timeout: .seconds(10)) { !watcher.expiries.isEmpty }
        #expect(ended)
        #expect(watcher.expiries == [.revokedElsewhere])
        #expect(try await h.provider(1).account().accountID == account.accountID)
    }

    @Test func logoutFiresNoExpiryEvent() async throws {
        let h = try await MultiDevice.up(devices: 1, lifetime: 3)
        defer { h.down() }
        _ = try await h.logIn(0)
        let events = try EventLog(h.provider(0))
        // Subscribed (the current state arrived) before the logout, or the logout is what it sees first.
        #expect(await eventually(timeout: .seconds(5)) { events.count >= 1 })
        try await h.provider(0).logout()
        // Well past the old session's refresh point and expiry; a late event would show within the poll.
        try await h.advance(by: .seconds(10))
        _ = await eventually(timeout: .milliseconds(500)) { !events.expiries.isEmpty }
        #expect(events.expiries.isEmpty)
        #expect(events.count >= 2)  // the current state, then the logout
        #expect(try await h.provider(0).currentSession().authState == .unauthenticated)
    }
}
