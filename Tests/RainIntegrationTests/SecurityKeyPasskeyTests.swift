import Foundation
import RainTestSupport
import RainWallet
import RainWire
import Testing

/// `Passkey/Run` with security keys: a real `rainwalletd-test` whose libfido2 reaches software
/// CTAP2 keys this test process serves on Unix sockets (`RAINWALLET_TEST_SECURITY_KEYS`), so the
/// test touches, unplugs and gives PINs to the keys the daemon uses. Real hidraw enumeration
/// needs real keys and is not covered here.
@Suite("Security keys run by the daemon")
struct SecurityKeyPasskeyTests {
    static let config = #"{"profiles": {"default": {"passkeyDomain": "example.com"}}}"#

    /// A daemon and the keys it sees.
    struct World {
        let harness: DaemonHarness
        let servers: [SoftCTAP2SocketServer]
        let directory: String

        var keys: [SoftCTAP2Authenticator] { servers.map(\.key) }
        var wallet: RainProvider {
            RainProvider(RainWalletConfig(passkeyDomain: "example.com", socketPath: harness.socketPath))
        }

        func stop() {
            for server in servers { server.stop() }
            harness.shutdown()
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    /// Starts keys (`touch`, `pin` each) on sockets in a short directory of their own, and a daemon
    /// that uses them.
    static func start(_ keys: [(touch: SoftCTAP2Authenticator.TouchPolicy, pin: String?)]) async throws -> World {
        let directory = "/tmp/rk-" + UUID().uuidString.prefix(8).lowercased()
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        var servers: [SoftCTAP2SocketServer] = []
        for (index, key) in keys.enumerated() {
            let soft = try SoftCTAP2Authenticator(name: "key\(index)", touch: key.touch, pin: key.pin)
            servers.append(try SoftCTAP2SocketServer(key: soft, directory: directory, name: "key\(index)"))
        }
        let harness = try await DaemonHarness.start(
            config: config, environment: ["RAINWALLET_TEST_SECURITY_KEYS": directory])
        return World(harness: harness, servers: servers, directory: directory)
    }

    /// Waits until `key` blinks (polled: a blocking wait would hold one of the pool's threads).
    static func blinking(_ key: SoftCTAP2Authenticator) async -> Bool {
        await eventually(timeout: .seconds(20)) { key.isBlinking }
    }

    /// Waits until `key` stops blinking.
    static func stopsBlinking(_ key: SoftCTAP2Authenticator) async -> Bool {
        await eventually(timeout: .seconds(20)) { !key.isBlinking }
    }

    @Test("sign up then log in with a security key through the library: the same account and wallet")
    func signUpThenLogIn() async throws {
        let w = try await Self.start([(.immediately, nil)])
        defer { w.stop() }
        let wallet = w.wallet
        let created = try await wallet.signUpWithPasskey(authenticator: .securityKey)
        #expect(created.authState == .authenticated)
        #expect(w.keys[0].credentialCount == 1)
        let address = try await wallet.getWallet().ethereumAddress
        _ = try await wallet.logout()
        let again = try await wallet.loginWithPasskey(authenticator: .securityKey)
        #expect(again.accountID == created.accountID)
        #expect(again.walletID == created.walletID)
        #expect(try await wallet.getWallet().ethereumAddress == address)
    }

    @Test("sign up, log out and log in with a security key through the CLI")
    func throughTheCLI() async throws {
        let w = try await Self.start([(.immediately, nil)])
        defer { w.stop() }
        let signup = try await w.harness.runCLI(["passkey", "signup", "--authenticator", "security-key", "--json"])
        #expect(signup.status == 0, "\(signup)")
        #expect(signup.stdout.contains("\"authState\":\"authenticated\""), "\(signup)")
        let account = try await w.wallet.currentSession().accountID
        #expect(try await w.harness.runCLI(["logout"]).status == 0)
        let login = try await w.harness.runCLI(["passkey", "login", "--authenticator", "security-key"])
        #expect(login.status == 0, "\(login)")
        #expect(login.stdout.contains("Touch your security key"), "\(login)")
        #expect(try await w.wallet.currentSession().accountID == account)
    }

    @Test("with two keys both blink, the second touched wins and the first is cancelled")
    func secondKeyTouchedWins() async throws {
        let w = try await Self.start([(.manual, nil), (.manual, nil)])
        defer { w.stop() }
        let wallet = w.wallet
        let signUp = Task { try await wallet.signUpWithPasskey(authenticator: .securityKey) }
        #expect(await Self.blinking(w.keys[0]))
        #expect(await Self.blinking(w.keys[1]))
        w.keys[1].touch()
        let created = try await signUp.value
        #expect(created.authState == .authenticated)
        #expect(await Self.stopsBlinking(w.keys[0]))
        #expect(w.keys[0].credentialCount == 0)
        #expect(w.keys[1].credentialCount == 1)

        _ = try await wallet.logout()
        let login = Task { try await wallet.loginWithPasskey(authenticator: .securityKey) }
        #expect(await Self.blinking(w.keys[1]))
        w.keys[1].touch()
        #expect(try await login.value.accountID == created.accountID)
        #expect(await Self.stopsBlinking(w.keys[0]))
    }

    @Test("with two keys, one with a PIN, a touch chooses it, then its PIN is asked and it is touched again")
    func touchChoosesTheKeyWithAPIN() async throws {
        let w = try await Self.start([(.manual, nil), (.manual, "1234")])
        defer { w.stop() }
        w.harness.autoPinentryTypes(secrets: ["1234"])
        let wallet = w.wallet
        let signUp = Task { try await wallet.signUpWithPasskey(authenticator: .securityKey) }
        #expect(await Self.blinking(w.keys[0]))
        #expect(await Self.blinking(w.keys[1]))
        w.keys[1].touch()
        // Chosen: the other key stops, the PIN is typed on the prompt, and the chosen key blinks
        // again for the ceremony itself.
        #expect(await Self.stopsBlinking(w.keys[0]))
        #expect(await eventually(timeout: .seconds(20)) { w.keys[1].isBlinking && w.harness.answeredPrompts.count == 1 })
        w.keys[1].touch()
        #expect(try await signUp.value.authState == .authenticated)
        #expect(w.keys[0].credentialCount == 0)
        #expect(w.keys[1].credentialCount == 1)
    }

    @Test("a wrong PIN is asked again with the tries left, and the right one signs up")
    func wrongPINShowsTriesLeft() async throws {
        let w = try await Self.start([(.immediately, "zq7319xk")])
        defer { w.stop() }
        w.harness.autoPinentryTypes(secrets: ["wrong-pin-4831", "zq7319xk"])
        let created = try await w.wallet.signUpWithPasskey(authenticator: .securityKey)
        #expect(created.authState == .authenticated)
        let asked = w.harness.answeredPrompts.filter { $0.contains("type the PIN") }.map(DaemonHarness.unescaped)
        #expect(asked.count == 2, "\(asked)")
        #expect(asked.first?.contains("tries left") == false, "\(asked)")
        // The PIN prompt names what it is for, the app and the profile, as a confirmation does.
        #expect(asked.first?.contains("to sign up with a passkey") == true, "\(asked)")
        #expect(asked.first?.contains("Profile: default") == true, "\(asked)")
        #expect(asked.last?.contains("That PIN was wrong: 7 tries left") == true, "\(asked)")
        #expect(w.keys[0].pinRetries == 8)
        // Neither PIN reached the daemon's log.
        #expect(!w.harness.log.contains("zq7319xk"))
        #expect(!w.harness.log.contains("wrong-pin-4831"))
    }

    @Test("a blocked PIN ends the ceremony with RAIN_202 and the session untouched")
    func blockedPIN() async throws {
        let w = try await Self.start([(.immediately, "1234")])
        defer { w.stop() }
        w.keys[0].setPINRetries(1)
        w.harness.autoPinentryTypes(secrets: ["0000", "1234"])
        let error = await rainError { try await w.wallet.signUpWithPasskey(authenticator: .securityKey) }
        #expect(error?.code == .unauthorized)
        #expect(error?.details.reason == "security_key_pin_blocked")
        #expect(try await w.wallet.currentSession().authState != .authenticated)
        #expect(w.keys[0].credentialCount == 0)
    }

    @Test("a key unplugged while it blinks ends the ceremony with RAIN_404 security_key_removed")
    func unpluggedMidCeremony() async throws {
        let w = try await Self.start([(.manual, nil)])
        defer { w.stop() }
        let wallet = w.wallet
        let signUp = Task { try await wallet.signUpWithPasskey(authenticator: .securityKey) }
        #expect(await Self.blinking(w.keys[0]))
        w.servers[0].unplug()
        let error = await rainError { _ = try await signUp.value }
        #expect(error?.code == .unavailable)
        #expect(error?.details.reason == "security_key_removed")
        #expect(await eventually { !w.keys[0].isOpen })
        #expect(try await wallet.currentSession().authState != .authenticated)
        // With no key left, the next ceremony says so at once.
        let none = await rainError { try await wallet.signUpWithPasskey(authenticator: .securityKey) }
        #expect(none?.details.reason == "security_key_not_found")
    }

    @Test("a key nobody touches ends the ceremony with RAIN_401 security_key_timeout and stops blinking")
    func timeout() async throws {
        let w = try await Self.start([(.never, nil)])
        defer { w.stop() }
        let error = await rainError { try await w.wallet.signUpWithPasskey(authenticator: .securityKey, timeout: .seconds(2)) }
        #expect(error?.code == .userCancelled)
        #expect(error?.details.reason == "security_key_timeout")
        #expect(await Self.stopsBlinking(w.keys[0]))
        #expect(await eventually { !w.keys[0].isOpen })
        #expect(try await w.wallet.currentSession().authState != .authenticated)
    }

    @Test("a dismissed PIN prompt is RAIN_401 and leaves the live session as it was")
    func dismissedPINPrompt() async throws {
        let w = try await Self.start([(.immediately, "1234")])
        defer { w.stop() }
        let wallet = w.wallet
        let session = try await w.harness.logIn(wallet, .email("pin@example.com")).session
        w.harness.autoPinentryTypes(secrets: [])
        let error = await rainError { try await wallet.loginWithPasskey(authenticator: .securityKey) }
        #expect(error?.code == .userCancelled)
        #expect(error?.details.reason == "prompt_dismissed")
        let after = try await wallet.currentSession()
        #expect(after.authState == .authenticated)
        #expect(after.accountID == session.accountID)
        #expect(!w.keys[0].isBlinking)
        // The ceremony ended at the authority, and the daemon let the key go.
        #expect(await eventually { w.harness.log.contains("passkey.cancelled") })
        #expect(await eventually { !w.keys[0].isOpen })
    }

    @Test(
        "while the key blinks the prompt says so with the request, and the status goes once the key is touched; Cancel on it ends the ceremony with RAIN_401"
    )
    func statusOnThePrompt() async throws {
        let w = try await Self.start([(.manual, nil)])
        defer { w.stop() }
        let wallet = w.wallet
        let signUp = Task { try await wallet.signUpWithPasskey(authenticator: .securityKey) }
        #expect(await Self.blinking(w.keys[0]))
        #expect(await eventually(timeout: .seconds(20)) { !w.harness.shownStatuses.isEmpty })
        let status = DaemonHarness.unescaped(w.harness.shownStatuses.first ?? "")
        #expect(
            status.hasPrefix("RainWallet waits: touch your security key when it blinks, to sign up with a passkey")
                && status.contains("Profile: default"), "\(status)")
        w.keys[0].touch()
        // The call returns only once the status was withdrawn.
        #expect(try await signUp.value.authState == .authenticated)
        #expect(w.harness.shownStatuses.count == 1)

        // Cancel chosen on the status: the key stops blinking, nothing is made, the session stays.
        _ = try await wallet.logout()
        w.harness.autoPinentryDismisses(true)
        let stopped = await rainError { try await wallet.loginWithPasskey(authenticator: .securityKey) }
        #expect(
            stopped?.code == .userCancelled && stopped?.details.reason == "prompt_dismissed", "\(String(describing: stopped))")
        #expect(await Self.stopsBlinking(w.keys[0]))
        #expect(try await wallet.currentSession().authState == .unauthenticated)
        w.harness.autoPinentryDismisses(false)
    }

    @Test("cancelling the app's call stops the key blinking and leaves no session")
    func cancelledCall() async throws {
        let w = try await Self.start([(.manual, nil)])
        defer { w.stop() }
        let wallet = w.wallet
        let signUp = Task { try await wallet.signUpWithPasskey(authenticator: .securityKey) }
        #expect(await Self.blinking(w.keys[0]))
        signUp.cancel()
        _ = await signUp.result
        #expect(await Self.stopsBlinking(w.keys[0]))
        #expect(w.keys[0].credentialCount == 0)
        // The daemon closed the key: nothing of the ceremony is left pending.
        #expect(await eventually(timeout: .seconds(20)) { !w.keys[0].isOpen })
        // The daemon is free for the next ceremony.
        w.keys[0].setTouchPolicy(.immediately)
        #expect(try await w.wallet.signUpWithPasskey(authenticator: .securityKey).authState == .authenticated)
    }

    @Test("the platform authenticator is RAIN_404 naming what to configure")
    func platformUnavailable() async throws {
        let w = try await Self.start([])
        defer { w.stop() }
        let error = await rainError { try await w.wallet.signUpWithPasskey(authenticator: .platform) }
        #expect(error?.code == .unavailable)
        #expect(error?.details.reason == "platform_authenticator_unavailable")
        #expect(error?.message.contains("tpm2") == true)
        let cli = try await w.harness.runCLI(["passkey", "signup", "--authenticator", "platform"])
        #expect(cli.status != 0)
        #expect(cli.stderr.contains("RAIN_404"), "\(cli)")
    }
}
