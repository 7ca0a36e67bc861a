import Foundation
import RainTestSupport
import RainWallet
import Testing

/// Device binding and a device clock that is off, with real processes: a device daemon and a
/// remote authority (`rainwalletd authority`, plain TCP on loopback).
@Suite("Device binding (processes)")
struct DeviceBindingProcessTests {
    static let config = #"{"profiles": {"default": {"allowExport": true}}}"#

    @Test("a session file and storage.key copied into another device daemon: account and export are refused there")
    func copiedSessionIsUseless() async throws {
        let setup = try DaemonHarness.prepare()
        defer { setup.shutdown() }
        try await AuthorityProcess.with(in: setup.directory, ["--listen", "127.0.0.1:0"]) { authority in
            let flags = ["--authority", "127.0.0.1:\(authority.port)"]
            let owner = try await DaemonHarness.start(config: Self.config, extraArguments: flags)
            defer { owner.shutdown() }
            let provider = owner.provider()
            _ = try await owner.logIn(provider, .email("bound@example.com"))
            let account = try await provider.account()
            #expect(!account.accountID.isEmpty)

            // The attacker's daemon: its own device key, the victim's session file and storage key,
            // and the victim's confirmed settings (sealed under that key: they name the authority).
            let thief = try DaemonHarness.prepare(config: Self.config, extraArguments: flags)
            defer { thief.shutdown() }
            let fm = FileManager.default
            try fm.createDirectory(
                atPath: "\(thief.stateDirectory)/sessions", withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700])
            for file in ["storage.key", "sessions/default.session", "confirmed-settings.json"] {
                try fm.copyItem(atPath: "\(owner.stateDirectory)/\(file)", toPath: "\(thief.stateDirectory)/\(file)")
            }
            try await thief.start()
            let stolen = thief.provider()
            // The copied session loads (the storage key opens it)…
            // …(the daemon's revocation stream checks the session once it connects, a call
            // with its token that the authority refuses: the copy may already have ended then)…
            let loaded = try await stolen.currentSession()
            #expect(loaded.hasActiveSession || loaded.sessionState == .expired)
            // …but the authority refuses its tokens on a connection proven by another key.
            let read = await rainError { _ = try await stolen.account() }
            #expect(read?.code == .sessionExpired)
            let export = await rainError { _ = try await stolen.exportRecoveryPhrase() }
            #expect(export?.code == .sessionExpired)
            #expect(
                await eventually { authority.log.contains("session.family_revoked") && authority.log.contains("stolen_token") })
            // Theft burns the family: the owner logs in again (DESIGN: a copied token is never worth a session).
            let owners = await rainError { _ = try await provider.account() }
            #expect(owners?.code == .sessionExpired)
        }
    }

    @Test("a device clock 5 minutes off either way (faketime) is never a revocation", arguments: ["+5m", "-5m"])
    func skewedDeviceClock(offset: String) async throws {
        let setup = try DaemonHarness.prepare()
        defer { setup.shutdown() }
        // The authority runs on the real clock.
        try await AuthorityProcess.with(in: setup.directory, ["--listen", "127.0.0.1:0"]) { authority in
            let device = try DaemonHarness.prepare(
                config: Self.config, extraArguments: ["--authority", "127.0.0.1:\(authority.port)"])
            // `faketime` runs the daemon as its child: stopping the wrapper leaves the daemon
            // running (and, under libfaketime, spinning on its timers), so the daemon is killed
            // itself. Waited for asynchronously, never in a `defer`: the two
            // cases run at once, and two blocked waits held both threads of the concurrency pool
            // for 10 s, stalling every other test.
            // Only the daemon is killed, never the wrapper: a wrapper that sees its child end removes
            // its named semaphore, while a killed one leaves it in /dev/shm, and a later wrapper
            // given the same pid then cannot start ("sem_open: File exists").
            func stopDevice() async {
                if let wrapper = device.pid {
                    _ = try? await TestProcess.run("/usr/bin/pkill", ["-KILL", "-P", String(wrapper)], timeout: .seconds(10))
                    _ = try? await device.waitForExit(timeout: .seconds(10))
                }
                await device.shutdownAsync()
            }
            do {
                try await Self.skewedDeviceClock(offset: offset, device: device, authority: authority)
            } catch {
                await stopDevice()
                throw error
            }
            await stopDevice()
        }
    }

    static func skewedDeviceClock(offset: String, device: DaemonHarness, authority: AuthorityProcess) async throws {
        // Only the wall clock is moved: monotonic time (timeouts) stays real.
        try device.launch(
            executable: URL(fileURLWithPath: "/usr/bin/faketime"),
            arguments: ["-f", offset, device.binaryDirectory.appendingPathComponent("rainwalletd-test").path]
                + device.daemonArguments,
            environment: ["DONT_FAKE_MONOTONIC": "1"])
        try await device.waitUntilReady()
        let provider = device.provider()
        let (session, _, _) = try await device.logIn(provider, .email("skew@example.com"))
        // The daemon really runs 5 minutes off: it computed the expiry on its own clock.
        let expiresAt = try #require(session.expiresAt)
        let skew = expiresAt.timeIntervalSince(Date().addingTimeInterval(900))
        let expected: Double = offset.hasPrefix("+") ? 300 : -300
        #expect(abs(skew - expected) < 60, "skew \(skew) s, expected about \(expected) s")

        for _ in 0..<4 {
            let refreshed = try await provider.refreshSession()
            #expect(refreshed.hasActiveSession)
            _ = try await provider.account()
        }
        _ = try await provider.exportRecoveryPhrase()
        #expect(!authority.log.contains("session.family_revoked"))
        #expect(!device.log.contains("session.ended"))
    }
}
