import Foundation
import RainTestSupport
import RainWallet
import RainWire
import Synchronization
import Testing

/// One authority and N device daemons started by `scripts/harness`, with a short token lifetime.
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
    static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    private init(dir: String, authority: String, devices: [Device], binaries: URL) {
        self.dir = dir
        self.authority = authority
        self.devices = devices
        self.binaries = binaries
    }

    static func run(_ arguments: [String], environment: [String: String] = [:]) throws -> (Int32, String, String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/bash")
        p.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        for (k, v) in environment { env[k] = v }
        p.environment = env
        let out = Pipe()
        let err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        let o = out.fileHandleForReading.readDataToEndOfFile()
        let e = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: o, as: UTF8.self), String(decoding: e, as: UTF8.self))
    }

    /// `scripts/harness up --devices N --access-token-lifetime L --json`, plus `arguments`.
    static func up(devices: Int, lifetime: Int, arguments: [String] = []) throws -> MultiDevice {
        let binaries = try DaemonHarness.binaryDirectory()
        let dir = "/tmp/rwm-\(UInt32.random(in: 0...UInt32.max))"
        let script = repositoryRoot.appendingPathComponent("scripts/harness").path
        let (status, out, err) = try run(
            [script, "up", "--devices", "\(devices)", "--dir", dir, "--access-token-lifetime", "\(lifetime)", "--json"]
                + arguments,
            environment: ["RAINWALLET_BIN_DIR": binaries.path])
        guard status == 0, let data = out.data(using: .utf8),
            let json = try JSONSerialization.jsonObject(with: data) as? [String: Any],
            let authority = json["authority"] as? String, let list = json["devices"] as? [[String: Any]]
        else { throw HarnessError("harness up failed (\(status)): \(err)") }
        let devices = list.compactMap { d -> Device? in
            guard let s = d["socket"] as? String, let st = d["stateDir"] as? String, let l = d["log"] as? String else { return nil }
            return Device(socket: s, stateDir: st, log: l)
        }
        return MultiDevice(dir: dir, authority: authority, devices: devices, binaries: binaries)
    }

    func down() {
        _ = try? Self.run([Self.repositoryRoot.appendingPathComponent("scripts/harness").path, "down", "--dir", dir])
    }

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
        var status: Int32 = 0
        _ = waitpid(authorityPID, &status, WNOHANG)
    }

    /// The send limits `scripts/harness up` relaxes (these tests log in again and again).
    static let relaxedSendLimitFlags = [
        "--send-cooldown", "0", "--contact-max-sends", "1000000", "--account-max-sends", "1000000",
    ]

    /// Starts the authority again on the same port and state.
    func restartAuthority() throws {
        let p = Process()
        p.executableURL = binaries.appendingPathComponent("rainwalletd")
        let arguments = [
            "authority", "--listen", authority, "--state-dir", "\(dir)/authority", "--dev-outbox", "--access-token-lifetime",
            "\(lifetimeSeconds)",
        ]
        p.arguments = arguments + Self.relaxedSendLimitFlags
        p.standardError = FileHandle(forWritingAtPath: "\(dir)/authority.log") ?? FileHandle.nullDevice
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        try "\(p.processIdentifier)\n".write(toFile: "\(dir)/authority.pid", atomically: true, encoding: .utf8)
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
        let events = Mutex<[WatchEvent]>([])
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
        let h = try MultiDevice.up(devices: 1, lifetime: 3)
        defer { h.down() }
        _ = try await h.logIn(0)
        let events = try EventLog(h.provider(0))
        try await Task.sleep(for: .seconds(10))  // more than three lifetimes
        let s = try await h.provider(0).currentSession()
        #expect(s.authState == .authenticated)
        #expect(s.hasActiveSession)
        #expect(h.log(0).components(separatedBy: "session.refreshed").count - 1 >= 3)
        #expect(events.expiries.isEmpty)
    }

    @Test func loginOnAnotherDeviceEndsTheFirstOnceWithRevokedElsewhere() async throws {
        let h = try MultiDevice.up(devices: 2, lifetime: 4)
        defer { h.down() }
        let a = try await h.logIn(0)
        let watchers = try (0..<3).map { _ in try EventLog(h.provider(0)) }
        let b = try await h.logIn(1)
        #expect(a.accountID == b.accountID)
        let ended = await eventually(timeout: .seconds(15)) { watchers.allSatisfy { !$0.expiries.isEmpty } }
        #expect(ended)
        try await Task.sleep(for: .seconds(3))  // no second event may follow
        for w in watchers { #expect(w.expiries == [.revokedElsewhere]) }
        let error = await rainError { try await h.provider(0).refreshSession() }
        #expect(error?.code == .sessionExpired)
        #expect(try await h.provider(1).currentSession().authState == .authenticated)
    }

    @Test func authorityDownPastExpiryEndsTheSessionWithRefreshFailed() async throws {
        let h = try MultiDevice.up(devices: 1, lifetime: 4)
        defer { h.down() }
        _ = try await h.logIn(0)
        let events = try EventLog(h.provider(0))
        try h.killAuthority()
        let ended = await eventually(timeout: .seconds(15)) { !events.expiries.isEmpty }
        #expect(ended)
        #expect(events.expiries == [.refreshFailed])
        #expect(try await h.provider(0).currentSession().sessionState == .expired)
    }

    @Test func authorityDownDuringRefreshThenBackUpKeepsTheSession() async throws {
        let h = try MultiDevice.up(devices: 1, lifetime: 16)
        defer { h.down() }
        _ = try await h.logIn(0)
        let events = try EventLog(h.provider(0))
        try h.killAuthority()
        // The refresh is due 8 s after login: it fails (and is retried) while the authority is down.
        let failed = await eventually(timeout: .seconds(20)) { h.log(0).contains("refresh.transient_failure") }
        #expect(failed)
        let refreshCountBefore = h.log(0).components(separatedBy: "session.refreshed").count
        try h.restartAuthority()
        let refreshed = await eventually(timeout: .seconds(15)) {
            h.log(0).components(separatedBy: "session.refreshed").count > refreshCountBefore
        }
        #expect(refreshed)
        #expect(try await h.provider(0).currentSession().authState == .authenticated)
        #expect(events.expiries.isEmpty)
    }

    @Test func copiedSessionFileWithoutTheDeviceKeyIsRefusedAtRefresh() async throws {
        let h = try MultiDevice.up(devices: 2, lifetime: 30)
        defer { h.down() }
        _ = try await h.logIn(0)
        // Stop device 2, give it device 1's session file and storage key (not its device key), restart it.
        let pid2 = try #require(h.pid("device2"))
        kill(pid2, SIGTERM)
        _ = await eventually(timeout: .seconds(10)) { kill(pid2, 0) != 0 }
        let fm = FileManager.default
        let d1 = h.devices[0].stateDir
        let d2 = h.devices[1].stateDir
        for file in ["storage.key", "sessions/default.session"] {
            try? fm.removeItem(atPath: "\(d2)/\(file)")
            try fm.copyItem(atPath: "\(d1)/\(file)", toPath: "\(d2)/\(file)")
        }
        let p = Process()
        p.executableURL = h.binaries.appendingPathComponent("rainwalletd")
        p.arguments = ["--authority", h.authority, "--socket", h.devices[1].socket, "--state-dir", d2]
        p.standardError = FileHandle(forWritingAtPath: h.devices[1].log) ?? FileHandle.nullDevice
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        try "\(p.processIdentifier)\n".write(toFile: "\(h.dir)/device2.pid", atomically: true, encoding: .utf8)
        let ready = await eventually(timeout: .seconds(15)) { (try? await h.provider(1).daemonInfo()) != nil }
        #expect(ready)
        let thief = h.provider(1)
        try await thief.awaitSessionRestore()
        #expect(try await thief.currentSession().authState == .authenticated)  // the copy decrypts...
        let error = await rainError { try await thief.refreshSession() }  // ...but cannot be refreshed
        #expect(error?.code == .sessionExpired)
        #expect(try await thief.currentSession().sessionState == .expired)
        // The stolen token burned the session family: the real device is refused at its next refresh too.
        let victimError = await rainError { try await h.provider(0).refreshSession() }
        #expect(victimError?.code == .sessionExpired)
    }

    @Test func aSignedOutDeviceLearnsItOnItsNextCall() async throws {
        let h = try MultiDevice.up(devices: 2, lifetime: 60)  // no refresh during the test
        defer { h.down() }
        _ = try await h.logIn(0)
        let account = try await h.provider(0).account()
        #expect(account.contacts == [.email("multi@example.com")])
        let watcher = try EventLog(h.provider(0))
        _ = try await h.logIn(1)
        let (status, _, err) = try MultiDevice.run([
            "-c", "exec \"$0\" --socket \"$1\" account", h.binaries.appendingPathComponent("rainwallet").path, h.devices[0].socket,
        ])
        #expect(status == 4)  // RAIN_201
        #expect(err.contains("RAIN_201"))
        let ended = await eventually(timeout: .seconds(10)) { !watcher.expiries.isEmpty }
        #expect(ended)
        #expect(watcher.expiries == [.revokedElsewhere])
        #expect(try await h.provider(1).account().accountID == account.accountID)
    }

    @Test func logoutFiresNoExpiryEvent() async throws {
        let h = try MultiDevice.up(devices: 1, lifetime: 3)
        defer { h.down() }
        _ = try await h.logIn(0)
        let events = try EventLog(h.provider(0))
        try await h.provider(0).logout()
        try await Task.sleep(for: .seconds(5))
        #expect(events.expiries.isEmpty)
        #expect(events.count >= 2)  // the current state, then the logout
        #expect(try await h.provider(0).currentSession().authState == .unauthenticated)
    }
}
