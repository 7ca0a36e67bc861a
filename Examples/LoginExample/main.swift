// The seed's Swift snippets (authentication options: login by code, passkeys, sessions) as an app
// writes them, as top-level code: `swift build` compiles them with the package, so a change to the
// library that breaks one of them breaks the build.
//
// Run it against a daemon with a development outbox (for example one from `scripts/harness up`):
//
//     RAINWALLET_SOCKET=/path/to/rainwalletd.sock .build/debug/rainwallet-example-login
//
// It restores the session, logs in by code if there is none (typing a wrong code first, then the
// one the outbox holds), binds a login gate to `authState`, offers the passkey calls (the sheet is
// dismissed), reads the wallet, tries an export and logs out. It exits 0 when every step behaved
// as the seed says.
import Foundation
import RainWallet

// MARK: the app's UI, reduced to lines on stdout

func showInlineError(_ message: String) { print("inline error: \(message)") }
func updateLoginGate(_ state: AuthState) { print("login gate: \(state.rawValue)") }

/// The window the system's passkey sheet presents from. Here the user dismisses the sheet: each
/// passkey call throws RAIN_401 and leaves the session as it was.
struct DismissedSheet: PasskeyAuthenticator {
    func createCredential(optionsJSON: String, origin: String) async throws(RainError) -> String {
        throw RainError(.userCancelled, "the user dismissed the passkey sheet")
    }
    func getAssertion(optionsJSON: String, origin: String) async throws(RainError) -> String {
        throw RainError(.userCancelled, "the user dismissed the passkey sheet")
    }
}
let window = DismissedSheet()

/// The code the user types: the latest one of the development outbox (a real app asks the user).
func codeTheUserTyped(_ wallet: RainProvider) async throws -> String {
    guard let code = try await wallet.devOutbox().last?.code else {
        throw RainError(.invalidArgument, "no code in the daemon's development outbox: run this against a harness daemon")
    }
    return code
}

/// A code of the right shape that is not `code`.
func mistyped(_ code: String) -> String { String(format: "%06d", ((Int(code) ?? 0) + 1) % 1_000_000) }

// MARK: set up your domain

let wallet = RainProvider(RainWalletConfig(passkeyDomain: "example.com"))

// Any RainError the steps below do not handle ends the example with its code and message (for
// example RAIN_101 without a daemon, RAIN_302 when the daemon's send limits refuse another code).
do {
    // MARK: sessions: restore, expiry

    wallet.onSessionExpired { reason in
        print("session expired: \(reason.rawValue)")  // on a background queue: hop to the UI before touching it
    }
    try await wallet.awaitSessionRestore()
    if try await wallet.hasActiveSession() {
        print("restored a session: no login screen")
    } else {
        // MARK: logging in with a one-time code
        try await wallet.sendLoginCode(to: .email("user@example.com"))
        let code = try await codeTheUserTyped(wallet)

        // The user mistypes first: the seed's catch shows the inline error, the challenge stays.
        do {
            try await wallet.confirmLoginCode(mistyped(code))
        } catch let error as RainError where error == .invalidLoginCode {
            showInlineError("That code didn't work. Check it and try again.")
        }

        do {
            try await wallet.confirmLoginCode(code)
        } catch let error as RainError where error == .invalidLoginCode {
            showInlineError("That code didn't work. Check it and try again.")
        }
    }

    // MARK: observe: the login gate

    for await state in wallet.authState {
        updateLoginGate(state)
        if state != .loading { break }
    }

    // MARK: logging in with a passkey: offer the right action

    do {
        try await wallet.signUpWithPasskey(anchor: window)  // brand-new user: new account + new wallet
    } catch let error as RainError where error == .invalidArgument {
        print("sign-up refused over a live session (log out first): \(error.code)")
    } catch let error as RainError where error == .userCancelled {
        print("passkey sheet dismissed: \(error.code)")
    }
    do {
        try await wallet.loginWithPasskey(anchor: window)  // returning user with a passkey
    } catch let error as RainError where error == .userCancelled {
        print("passkey sheet dismissed: \(error.code)")
    }
    do {
        try await wallet.addPasskey(anchor: window)  // logged-in user (by code) adds a passkey
    } catch let error as RainError where error == .userCancelled {
        print("passkey sheet dismissed: \(error.code)")
    }

    // MARK: the wallet, and export

    let account = try await wallet.getWallet()
    print("wallet \(account.walletID): \(account.ethereumAddress) \(account.solanaAddress)")
    do {
        let words = try await wallet.exportRecoveryPhrase()
        print("recovery phrase: \(words.count) words (shown to the user, kept nowhere)")
    } catch let error as RainError where error == .unauthorized {
        print("export is off for this profile: \(error.code)")
    }

    try await wallet.refreshSession()
    let ended = try await wallet.logout()
    print("logged out (had a session: \(ended.hadSession))")
} catch let error as RainError {
    FileHandle.standardError.write(Data("rainwallet-example-login: \(error)\n".utf8))
    exit(1)
}
