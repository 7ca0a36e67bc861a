import Foundation
import RainKeyStore
import RainTestSupport
import RainWallet
import Testing

/// `Passkey/Run` with the platform authenticator of a real `rainwalletd-test` whose keys are in a
/// software TPM (swtpm, one per test): each ceremony is confirmed on the prompt (user presence),
/// then the PIN is typed (the keys' TPM authorization value: user verification).
@Suite("The TPM platform authenticator run by the daemon")
struct PlatformPasskeyTests {
    static let pin = "135790"

    /// Sets `tpm`'s dictionary-attack parameters to 5 tries, one forgotten every 60 s: never the
    /// reference defaults (3 tries, 1,000 s), and none forgotten while a test runs.
    static func limitLockout(_ tpm: SoftwareTPM) throws {
        let scratch = "/tmp/rain-da-\(UUID().uuidString.prefix(8).lowercased())"
        try FileManager.default.createDirectory(
            atPath: scratch, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        try TPM2KeyProvider(stateDirectory: scratch, tcti: tpm.tcti)
            .setDictionaryAttackParameters(maximumTries: 5, recoveryInterval: 60, lockoutRecovery: 10)
    }

    /// A daemon on its own swtpm, whose dictionary-attack parameters are set first
    /// (`limitLockout`).
    static func start() async throws -> (SoftwareTPM, DaemonHarness) {
        let tpm = try SoftwareTPM()
        do {
            try limitLockout(tpm)
            let harness = try await DaemonHarness.start(
                config: #"""
                    {"storage": {"provider": "tpm2", "tcti": "\#(tpm.tcti)"},
                     "profiles": {"default": {"passkeyDomain": "example.com"}}}
                    """#)
            return (tpm, harness)
        } catch {
            tpm.stop()
            throw error
        }
    }

    @Test(
        "sign up (the PIN chosen, typed twice), log out, log in, restart and log in again: one account, its passkey listed as platform, each ceremony confirmed then verified by the PIN"
    )
    func signUpLogInRestart() async throws {
        let (tpm, h) = try await Self.start()
        defer {
            h.shutdown()
            tpm.stop()
        }
        let wallet = RainProvider(RainWalletConfig(passkeyDomain: "example.com", socketPath: h.socketPath))
        h.autoPinentryTypes(secrets: [Self.pin, Self.pin, Self.pin, Self.pin, Self.pin])

        let created = try await wallet.signUpWithPasskey(authenticator: .platform)
        #expect(created.authState == .authenticated)
        let prompts = h.answeredPrompts.map(DaemonHarness.unescaped)
        #expect(
            prompts.contains { $0.contains("create a passkey for example.com in this device's TPM") }, "\(prompts)")
        let account = try await wallet.account()
        #expect(account.passkeys.map(\.kind) == [.platform], "\(account.passkeys)")

        _ = try await wallet.logout()
        let again = try await wallet.loginWithPasskey(authenticator: .platform)
        #expect(again.accountID == created.accountID)
        #expect(
            h.answeredPrompts.map(DaemonHarness.unescaped).contains {
                $0.contains("log in to example.com with this device's passkey")
            })

        // Through the CLI too, which says what the prompt will ask.
        _ = try await wallet.logout()
        let cli = try await h.runCLI(["passkey", "login", "--authenticator", "platform"])
        #expect(cli.status == 0 && cli.stdout.contains("type the PIN of this device's passkeys"), "\(cli)")
        #expect(try await wallet.currentSession().accountID == created.accountID)

        try await h.restart()
        _ = try await wallet.logout()
        let afterRestart = try await wallet.loginWithPasskey(authenticator: .platform)
        #expect(afterRestart.accountID == created.accountID)
        // No PIN reaches the daemon's log.
        #expect(!h.log.contains(Self.pin))
    }

    @Test(
        "a wrong PIN ends the login with RAIN_202 platform_pin_invalid and the tries left, counted by the TPM; the session stays out; the right PIN then logs in; two different new PINs make nothing"
    )
    func wrongPINThenRight() async throws {
        let (tpm, h) = try await Self.start()
        defer {
            h.shutdown()
            tpm.stop()
        }
        let wallet = RainProvider(RainWalletConfig(passkeyDomain: "example.com", socketPath: h.socketPath))
        h.autoPinentryTypes(secrets: [Self.pin, "246802"])
        let mismatch = await rainError { try await wallet.signUpWithPasskey(authenticator: .platform) }
        #expect(mismatch?.details.reason == "platform_pin_mismatch", "\(String(describing: mismatch))")
        #expect(try await wallet.currentSession().authState == .unauthenticated)

        h.autoPinentryTypes(secrets: [Self.pin, Self.pin])
        let created = try await wallet.signUpWithPasskey(authenticator: .platform)
        _ = try await wallet.logout()

        h.autoPinentryTypes(secrets: ["000000"])
        let wrong = await rainError { try await wallet.loginWithPasskey(authenticator: .platform) }
        #expect(wrong?.code == .unauthorized && wrong?.details.reason == "platform_pin_invalid", "\(String(describing: wrong))")
        // 5 tries, one spent: the daemon keeps one back, so 3 are left.
        #expect(wrong?.details.attemptsRemaining == 3, "\(String(describing: wrong))")
        #expect(try await wallet.currentSession().authState == .unauthenticated)

        h.autoPinentryTypes(secrets: [Self.pin])
        let prompt = h.answeredPrompts.count
        let loggedIn = try await wallet.loginWithPasskey(authenticator: .platform)
        #expect(loggedIn.accountID == created.accountID)
        // The PIN prompt said how many tries were left.
        let asked = h.answeredPrompts.dropFirst(prompt).map(DaemonHarness.unescaped)
        #expect(
            asked.contains { $0.contains("the PIN of this device's passkeys (3 tries left before the TPM locks)") },
            "\(asked)")
    }

    @Test(
        "the seed's rules with the platform and the security-key authenticators: sign-up creates the wallet and is refused over a live session, a login over a passkey session is refused, a dismissed prompt is RAIN_401 with the session untouched"
    )
    func seedRules() async throws {
        let (tpm, h) = try await Self.start()
        defer {
            h.shutdown()
            tpm.stop()
        }
        let wallet = RainProvider(RainWalletConfig(passkeyDomain: "example.com", socketPath: h.socketPath))
        h.autoPinentryTypes(secrets: [Self.pin, Self.pin])
        let created = try await wallet.signUpWithPasskey(authenticator: .platform)
        #expect(created.authState == .authenticated, "\(created)")
        #expect(try await wallet.getWallet().ethereumAddress.hasPrefix("0x"))

        for authenticator in [BuiltInAuthenticator.platform, .securityKey] {
            let again = await rainError { try await wallet.signUpWithPasskey(authenticator: authenticator) }
            #expect(again?.details.reason == "session_live", "\(authenticator): \(String(describing: again))")
            let login = await rainError { try await wallet.loginWithPasskey(authenticator: authenticator) }
            #expect(login?.details.reason == "passkey_session_live", "\(authenticator): \(String(describing: login))")
        }

        // Logged in by code instead, a passkey login dismissed on the prompt leaves that session.
        _ = try await wallet.logout()
        let code = try await h.logIn(wallet, .email("platform-rules@example.com")).session
        h.autoPinentryDismisses(true)
        let dismissed = await rainError { try await wallet.loginWithPasskey(authenticator: .platform) }
        h.autoPinentryDismisses(false)
        #expect(dismissed?.code == .userCancelled, "\(String(describing: dismissed))")
        let after = try await wallet.currentSession()
        #expect(after.authState == .authenticated && after.accountID == code.accountID, "\(after)")
    }

    @Test(
        "a platform passkey removed from the account is forgotten by this device too: it offers none at the next login, and a new one can be made for the account"
    )
    func removedPasskeyIsForgotten() async throws {
        let (tpm, h) = try await Self.start()
        defer {
            h.shutdown()
            tpm.stop()
        }
        let wallet = RainProvider(RainWalletConfig(passkeyDomain: "example.com", socketPath: h.socketPath))
        // Sign up (the PIN twice), then a backup email, so the passkey is not the last way in.
        h.autoPinentryTypes(secrets: [Self.pin, Self.pin, Self.pin, Self.pin])
        let created = try await wallet.signUpWithPasskey(authenticator: .platform)
        try await wallet.sendContactVerificationCode(to: .email("forget@example.com"))
        try await wallet.confirmContactVerification(try await h.waitForCode(for: "forget@example.com"))
        let passkey = try #require(try await wallet.account().passkeys.first?.credentialID)
        #expect(try await wallet.removePasskey(id: passkey).passkeys.isEmpty)

        // This device offers nothing (not a passkey the authority no longer knows).
        _ = try await wallet.logout()
        let none = await rainError { try await wallet.loginWithPasskey(authenticator: .platform) }
        #expect(none?.details.reason == "platform_no_credentials", "\(String(describing: none))")

        // In by code, and a new platform passkey for the same account: the old one is not in the way.
        try await h.logIn(wallet, .email("forget@example.com"))
        try await wallet.addPasskey(authenticator: .platform)
        _ = try await wallet.logout()
        #expect(try await wallet.loginWithPasskey(authenticator: .platform).accountID == created.accountID)
    }
}
