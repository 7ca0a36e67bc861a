import Foundation
import RainSoftAuthenticator
import RainTestSupport
import RainWallet
import RainWire
import Testing

/// Backup contacts end to end: library and CLI → daemon → embedded authority.
@Suite("Backup contacts end to end")
struct ContactIntegrationTests {
    static let config = PasskeyIntegrationTests.config

    @Test("passkey sign-up needs a backup email; a verified one logs in by code to the same account and wallet")
    func passkeyThenBackupEmailThenCodeLogin() async throws {
        let h = try await DaemonHarness.start(config: Self.config)
        defer { h.shutdown() }
        let wallet = PasskeyIntegrationTests.provider(h)
        let anchor = PasskeyIntegrationTests.authenticator(h)
        let created = try await wallet.signUpWithPasskey(anchor: anchor)
        let before = try await wallet.account()
        #expect(before.needsBackupEmail)
        #expect(before.contacts.isEmpty)
        #expect(before.passkeys.count == 1)
        #expect(before.passkeys.first?.rpID == "example.com")
        let addresses = try await wallet.getWallet()

        let info = try await h.provider().daemonInfo()
        #expect(info.capabilities.contains("contacts"))

        let sent = try await wallet.sendContactVerificationCode(to: .email("  Backup@Example.com "))
        #expect(sent.contact == .email("backup@example.com"))
        let code = try await h.waitForCode(for: "backup@example.com")
        let wrong = await rainError { try await wallet.confirmContactVerification(wrongCode(for: code)) }
        #expect(wrong?.code == .invalidLoginCode)
        #expect(wrong?.details.attemptsRemaining == 2)
        let after = try await wallet.confirmContactVerification(code)
        #expect(!after.needsBackupEmail)
        #expect(after.contacts == [.email("backup@example.com")])
        #expect(try await wallet.account().needsBackupEmail == false)

        _ = try await wallet.logout()
        let login = try await h.logIn(wallet, .email("backup@example.com"))
        #expect(!login.accountCreated)
        #expect(login.session.accountID == created.accountID)
        #expect(login.session.walletID == created.walletID)
        #expect(try await wallet.getWallet().ethereumAddress == addresses.ethereumAddress)
    }

    @Test("verification needs a live session, and refuses malformed input before any request")
    func needsSession() async throws {
        let h = try await DaemonHarness.start(config: Self.config)
        defer { h.shutdown() }
        let wallet = h.provider()
        let none = await rainError { try await wallet.sendContactVerificationCode(to: .email("a@example.com")) }
        #expect(none?.code == .sessionExpired)
        let bad = await rainError { try await wallet.sendContactVerificationCode(to: .email("not-an-email")) }
        #expect(bad?.code == .invalidArgument)
        let malformed = await rainError { try await wallet.confirmContactVerification("12ab") }
        #expect(malformed?.code == .invalidArgument)
        try await h.logIn(wallet, .email("user@example.com"))
        let nothingPending = await rainError { try await wallet.confirmContactVerification("123456") }
        #expect(nothingPending?.details.reason == "no_pending_code")
    }

    @Test(
        "probing for another account's address gets the answer any address gets: sent, a code in the outbox; only its right code says RAIN_302 (exit 8 in the CLI)"
    )
    func ownedByAnotherAccount() async throws {
        let h = try await DaemonHarness.start(config: Self.config)
        defer { h.shutdown() }
        let wallet = h.provider()
        for owner in ["owner@example.com", "owner2@example.com"] {
            try await h.logIn(wallet, .email(owner))
            _ = try await wallet.logout()
        }
        let mine = try await h.logIn(wallet, .email("me@example.com")).session

        // The probe: an owned address and a free one answer alike, and each gets its code.
        let free = try await wallet.sendContactVerificationCode(to: .email("free@example.com"))
        #expect(free.contact == .email("free@example.com"))
        _ = try await h.waitForCode(for: "free@example.com")
        let owned = try await wallet.sendContactVerificationCode(to: .email("owner@example.com"))
        #expect(owned.contact == .email("owner@example.com"))
        #expect(owned.expiresAt.timeIntervalSince(free.expiresAt) >= 0)
        #expect(owned.expiresAt.timeIntervalSince(free.expiresAt) < 60)
        let code = try await h.waitForCode(for: "owner@example.com", count: 2)

        // A wrong code is wrong, as for any contact; the right one (only the owner reads it) says
        // whose the contact is.
        let wrong = await rainError { try await wallet.confirmContactVerification(wrongCode(for: code)) }
        #expect(wrong?.code == .invalidLoginCode)
        #expect(wrong?.details.reason == "wrong")
        let refused = await rainError { try await wallet.confirmContactVerification(code) }
        #expect(refused?.code == .refused)
        #expect(refused?.details.reason == "contact_owned_by_another_account")

        let add = try await h.runCLI(["contact", "add", "--email", "owner2@example.com"])
        #expect(add.status == 0, "\(add)")
        let cliCode = try await h.waitForCode(for: "owner2@example.com", count: 2)
        let confirm = try await h.runCLI(["contact", "confirm", cliCode])
        #expect(confirm.status == 8, "\(confirm)")
        #expect(try await wallet.account().contacts == [.email("me@example.com")])
        #expect(try await wallet.currentSession().accountID == mine.accountID)
    }

    @Test("CLI: contact add and confirm, then account shows contacts, passkeys and backup status")
    func cliHappyPath() async throws {
        let h = try await DaemonHarness.start(config: Self.config)
        defer { h.shutdown() }
        let file = "\(h.directory)/cli-authenticator.json"
        // Not a terminal: the sign-up only hints at a backup email.
        let signup = try await h.runCLI(["passkey", "signup", "--authenticator", file])
        #expect(signup.status == 0, "\(signup)")
        #expect(signup.stderr.contains("rainwallet contact add --email"), "\(signup)")
        let before = try await h.runCLI(["account"])
        #expect(before.status == 0, "\(before)")
        #expect(before.stdout.contains("backup email: none — add one with rainwallet contact add --email ADDR"), "\(before)")
        #expect(before.stdout.contains("passkey:  example.com"), "\(before)")

        let add = try await h.runCLI(["contact", "add", "--email", "cli-backup@example.com"])
        #expect(add.status == 0, "\(add)")
        let code = try await h.waitForCode(for: "cli-backup@example.com")
        let wrong = try await h.runCLI(["contact", "confirm", wrongCode(for: code)])
        #expect(wrong.status == 6, "\(wrong)")
        let confirm = try await h.runCLI(["--json", "contact", "confirm", code])
        #expect(confirm.status == 0, "\(confirm)")
        let json = try jsonObject(confirm.stdout)
        #expect(json["needsBackupEmail"] as? Bool == false)
        let contacts = try #require(json["contacts"] as? [[String: Any]])
        #expect(contacts.first?["value"] as? String == "cli-backup@example.com")

        let account = try await h.runCLI(["--json", "account"])
        let accountJSON = try jsonObject(account.stdout)
        #expect(accountJSON["needsBackupEmail"] as? Bool == false)
        let passkeys = try #require(accountJSON["passkeys"] as? [[String: Any]])
        #expect(passkeys.first?["domain"] as? String == "example.com")
        #expect(passkeys.first?["createdAt"] is String)

        let help = try await h.runCLI(["contact", "add", "--help"])
        #expect(help.status == 0)
        #expect(help.stdout.contains("--email ADDR"))
        let confirmHelp = try await h.runCLI(["contact", "confirm", "--help"])
        #expect(confirmHelp.status == 0)
        #expect(confirmHelp.stdout.contains("contact confirm [CODE]"))
    }
}
