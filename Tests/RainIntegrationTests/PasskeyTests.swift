import Foundation
import Synchronization
import RainSoftAuthenticator
import RainTestSupport
import RainWallet
import RainWire
import Testing

/// Passkey ceremonies end to end: library → daemon → embedded authority, with the software
/// authenticator as the anchor.
@Suite("Passkeys end to end")
struct PasskeyIntegrationTests {
    static let config = #"{"profiles": {"default": {"passkeyDomain": "example.com"}}}"#

    static func provider(_ h: DaemonHarness, domain: String? = "example.com", profile: String = "default") -> RainProvider {
        RainProvider(RainWalletConfig(passkeyDomain: domain, profile: profile, socketPath: h.socketPath))
    }

    static func authenticator(_ h: DaemonHarness, _ name: String = "authenticator") -> SoftAuthenticator {
        SoftAuthenticator(path: "\(h.directory)/\(name).json")
    }

    @Test("sign up, log out, log in: the same account and wallet")
    func signUpLogOutLogIn() async throws {
        let h = try await DaemonHarness.start(config: Self.config)
        defer { h.shutdown() }
        let wallet = Self.provider(h)
        let anchor = Self.authenticator(h)
        let created = try await wallet.signUpWithPasskey(anchor: anchor)
        #expect(created.authState == .authenticated)
        let info = try await wallet.getWallet()
        #expect(info.ethereumAddress.hasPrefix("0x"))
        #expect(!info.solanaAddress.isEmpty)
        _ = try await wallet.logout()
        let again = try await wallet.loginWithPasskey(anchor: anchor)
        #expect(again.accountID == created.accountID)
        #expect(again.walletID == created.walletID)
        #expect(try await wallet.getWallet().ethereumAddress == info.ethereumAddress)
    }

    @Test("a passkey added to a code account logs in to the same account and wallet")
    func addToCodeAccount() async throws {
        let h = try await DaemonHarness.start(config: Self.config)
        defer { h.shutdown() }
        let wallet = Self.provider(h)
        let anchor = Self.authenticator(h)
        let code = try await h.logIn(wallet, .email("user@example.com")).session
        try await wallet.addPasskey(anchor: anchor)
        #expect(try await wallet.currentSession().accountID == code.accountID)
        // Over a live code session, a passkey login replaces it.
        let replaced = try await wallet.loginWithPasskey(anchor: anchor)
        #expect(replaced.accountID == code.accountID)
        #expect(replaced.walletID == code.walletID)
        // Over a live passkey session, a passkey login is refused.
        let refused = await rainError { try await wallet.loginWithPasskey(anchor: anchor) }
        #expect(refused?.code == .invalidArgument)
        #expect(refused?.details.reason == "passkey_session_live")
        _ = try await wallet.logout()
        let login = try await wallet.loginWithPasskey(anchor: anchor)
        #expect(login.accountID == code.accountID)
        #expect(login.walletID == code.walletID)
    }

    @Test("a dismissed authenticator is RAIN_401 and leaves the session untouched")
    func cancel() async throws {
        let h = try await DaemonHarness.start(config: Self.config)
        defer { h.shutdown() }
        let wallet = Self.provider(h)
        let anchor = Self.authenticator(h)
        let signedUp = try await wallet.signUpWithPasskey(anchor: anchor)
        anchor.setDismissing(true)
        let add = await rainError { try await wallet.addPasskey(anchor: anchor) }
        #expect(add?.code == .userCancelled)
        _ = try await wallet.logout()
        let login = await rainError { try await wallet.loginWithPasskey(anchor: anchor) }
        #expect(login?.code == .userCancelled)
        #expect(try await wallet.currentSession().authState != .authenticated)
        anchor.setDismissing(false)
        #expect(try await wallet.loginWithPasskey(anchor: anchor).accountID == signedUp.accountID)
        anchor.setDismissing(true)
        // Dismissed over a live session: still the same session.
        let before = try await wallet.currentSession()
        _ = try await wallet.logout()
        _ = try await h.logIn(wallet, .email("cancel@example.com"))
        let during = try await wallet.currentSession()
        #expect(await rainError { try await wallet.loginWithPasskey(anchor: anchor) }?.code == .userCancelled)
        let after = try await wallet.currentSession()
        #expect(after.accountID == during.accountID)
        #expect(after.authState == .authenticated)
        #expect(before.accountID == signedUp.accountID)
    }

    @Test("sign-up is refused during a live session, and makes a wallet different from a code account's")
    func signUpRules() async throws {
        let h = try await DaemonHarness.start(config: Self.config)
        defer { h.shutdown() }
        let wallet = Self.provider(h)
        let anchor = Self.authenticator(h)
        let code = try await h.logIn(wallet, .email("code@example.com")).session
        let codeWallet = try await wallet.getWallet()
        let refused = await rainError { try await wallet.signUpWithPasskey(anchor: anchor) }
        #expect(refused?.code == .invalidArgument)
        #expect(refused?.details.reason == "session_live")
        #expect(try await wallet.currentSession().accountID == code.accountID)
        _ = try await wallet.logout()
        let created = try await wallet.signUpWithPasskey(anchor: anchor)
        #expect(created.accountID != code.accountID)
        #expect(try await wallet.getWallet().ethereumAddress != codeWallet.ethereumAddress)
    }

    @Test("a replayed response and a used ceremony are refused with RAIN_102")
    func replay() async throws {
        let h = try await DaemonHarness.start(config: Self.config)
        defer { h.shutdown() }
        let wallet = Self.provider(h)
        let anchor = Self.authenticator(h)
        _ = try await wallet.signUpWithPasskey(anchor: anchor)
        _ = try await wallet.logout()
        // A recording anchor keeps the assertion it produced.
        let recorder = RecordingAuthenticator(anchor)
        _ = try await wallet.loginWithPasskey(anchor: recorder)
        _ = try await wallet.logout()
        let replayed = await rainError { try await wallet.loginWithPasskey(anchor: ReplayingAuthenticator(recorder.last)) }
        #expect(replayed?.code == .invalidArgument)
        #expect(replayed?.details.reason == "challenge_mismatch")
        #expect(try await wallet.currentSession().authState != .authenticated)
    }

    @Test("Finish refuses an unknown ceremony and a ceremony used once already")
    func ceremonyReuse() async throws {
        let h = try await DaemonHarness.start(config: Self.config)
        defer { h.shutdown() }
        let wallet = Self.provider(h)
        let anchor = Self.authenticator(h)
        _ = try await wallet.signUpWithPasskey(anchor: anchor)
        _ = try await wallet.logout()
        let unknown = await rainError {
            _ = try await wallet.call(
                Method.passkeyFinish, FinishPasskeyRequest(ceremonyID: "pkc_nope", responseJSON: "{}"),
                as: FinishPasskeyResponse.self)
        }
        #expect(unknown?.code == .invalidArgument)
        #expect(unknown?.details.reason == "challenge_expired")

        let begun = try await wallet.call(Method.passkeyBeginLogin, BeginPasskeyRequest(), as: BeginPasskeyResponse.self)
        #expect(begun.origin == "https://example.com")
        let response = try await anchor.getAssertion(optionsJSON: begun.optionsJSON, origin: begun.origin)
        let finish = FinishPasskeyRequest(ceremonyID: begun.ceremonyID, responseJSON: response)
        _ = try await wallet.call(Method.passkeyFinish, finish, as: FinishPasskeyResponse.self)
        _ = try await wallet.logout()
        let reused = await rainError { _ = try await wallet.call(Method.passkeyFinish, finish, as: FinishPasskeyResponse.self) }
        #expect(reused?.code == .invalidArgument)
        #expect(reused?.details.reason == "challenge_expired")
        #expect(try await wallet.currentSession().authState != .authenticated)

        // Cancel consumes the ceremony; the session is untouched.
        let cancelled = try await wallet.call(Method.passkeyBeginLogin, BeginPasskeyRequest(), as: BeginPasskeyResponse.self)
        _ = try await wallet.call(
            Method.passkeyCancel, CancelPasskeyRequest(ceremonyID: cancelled.ceremonyID), as: CancelPasskeyResponse.self)
        let late = try await anchor.getAssertion(optionsJSON: cancelled.optionsJSON, origin: cancelled.origin)
        let refused = await rainError {
            _ = try await wallet.call(
                Method.passkeyFinish, FinishPasskeyRequest(ceremonyID: cancelled.ceremonyID, responseJSON: late),
                as: FinishPasskeyResponse.self)
        }
        #expect(refused?.details.reason == "challenge_expired")
    }

    @Test("without a passkey domain every passkey call is RAIN_102")
    func noDomain() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let anchor = Self.authenticator(h)
        let local = await rainError { try await Self.provider(h, domain: nil).signUpWithPasskey(anchor: anchor) }
        #expect(local?.code == .invalidArgument)
        let cli = try await h.runCLI(["passkey", "login", "--authenticator", "\(h.directory)/a.json"])
        #expect(cli.status == 3, "\(cli)")
    }

    @Test("passkeys of two domains on one account")
    func twoDomains() async throws {
        let config = #"""
            {"profiles": {"default": {"passkeyDomain": "example.com"},
                          "web2": {"appID": "default", "passkeyDomain": "example.org"}}}
            """#
        let h = try await DaemonHarness.start(config: config)
        defer { h.shutdown() }
        let anchor = Self.authenticator(h)
        let com = Self.provider(h)
        let org = Self.provider(h, domain: "example.org", profile: "web2")
        // Both profiles belong to app "default": one contact, one account.
        let account = try await h.logIn(com, .email("two@example.com")).session
        try await com.addPasskey(anchor: anchor)
        // (The harness's outbox helpers read the app named like the profile: "default" here.)
        try await org.sendLoginCode(to: .email("two@example.com"))
        let code = try await h.waitForCode(for: "two@example.com", count: 2, profile: "default")
        #expect(try await org.confirmLoginCodeReturningSession(code).session.accountID == account.accountID)
        try await org.addPasskey(anchor: anchor)
        #expect(anchor.credentialsCount(rpIDs: ["example.com", "example.org"]) == 2)
        for wallet in [org, com] {
            _ = try await wallet.logout()
            let login = try await wallet.loginWithPasskey(anchor: anchor)
            #expect(login.accountID == account.accountID)
            #expect(login.walletID == account.walletID)
        }
    }

    @Test("the CLI signs up and logs in with the software authenticator")
    func cli() async throws {
        let h = try await DaemonHarness.start(config: Self.config)
        defer { h.shutdown() }
        let file = "\(h.directory)/cli-authenticator.json"
        let signup = try await h.runCLI(["--json", "passkey", "signup", "--authenticator", file])
        #expect(signup.status == 0, "\(signup)")
        let account = try #require(try jsonObject(signup.stdout)["accountId"] as? String)
        #expect(fileMode(file)?.permissions == 0o600)
        #expect(try await h.runCLI(["logout"]).status == 0)
        let login = try await h.runCLI(["--json", "passkey", "login", "--authenticator", file, "--domain", "example.com"])
        #expect(login.status == 0, "\(login)")
        #expect(try jsonObject(login.stdout)["accountId"] as? String == account)
        let again = try await h.runCLI(["passkey", "signup", "--authenticator", file])
        #expect(again.status == 3, "\(again)")
        // An authenticator without a passkey for the domain answers like a dismissed sheet: exit 9.
        #expect(try await h.runCLI(["logout"]).status == 0)
        let empty = try await h.runCLI(["passkey", "login", "--authenticator", "\(h.directory)/empty.json"])
        #expect(empty.status == 9, "\(empty)")
        let help = try await h.runCLI(["passkey", "add", "--help"])
        #expect(help.status == 0)
        #expect(help.stdout.contains("--authenticator KIND"))
        #expect(help.stdout.contains("--key-file FILE"))
    }
}

/// Passes ceremonies to another authenticator and keeps the last response.
final class RecordingAuthenticator: PasskeyAuthenticator {
    let inner: SoftAuthenticator
    private let lastResponse = Mutex("")
    init(_ inner: SoftAuthenticator) { self.inner = inner }
    var last: String { lastResponse.withLock { $0 } }
    func createCredential(optionsJSON: String, origin: String) async throws(RainError) -> String {
        let r = try await inner.createCredential(optionsJSON: optionsJSON, origin: origin)
        lastResponse.withLock { $0 = r }
        return r
    }
    func getAssertion(optionsJSON: String, origin: String) async throws(RainError) -> String {
        let r = try await inner.getAssertion(optionsJSON: optionsJSON, origin: origin)
        lastResponse.withLock { $0 = r }
        return r
    }
}

/// Answers every ceremony with one recorded response.
struct ReplayingAuthenticator: PasskeyAuthenticator {
    let response: String
    init(_ response: String) { self.response = response }
    func createCredential(optionsJSON: String, origin: String) async throws(RainError) -> String { response }
    func getAssertion(optionsJSON: String, origin: String) async throws(RainError) -> String { response }
}

extension SoftAuthenticator {
    /// How many credentials it holds for these rpIds.
    func credentialsCount(rpIDs: Set<String>) -> Int {
        ((try? credentials()) ?? []).filter { rpIDs.contains($0.rpID) }.count
    }
}
