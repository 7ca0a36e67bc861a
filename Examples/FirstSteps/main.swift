import Foundation
import RainWallet

// Your app's own profile: the first program that uses a profile owns it (the user approves it once).
let wallet = RainProvider(RainWalletConfig(profile: "my-wallet-app"))
let email = CommandLine.arguments.dropFirst().first ?? "you@example.com"

/// One line the user types; nil at the end of input.
func ask(_ question: String) -> String? {
    print(question, terminator: "")
    fflush(nil)  // shown before the wait, also when stdout is a pipe
    return readLine()?.trimmingCharacters(in: .whitespaces)
}

do {
    try await wallet.awaitSessionRestore()
    if try await !wallet.hasActiveSession() {
        try await wallet.sendLoginCode(to: .email(email))
        print("We sent a code to \(email).")
        while true {
            guard let code = ask("Code: ") else { throw RainError(.invalidArgument, "no code was entered") }
            do {
                try await wallet.confirmLoginCode(code)
                break
            } catch let error as RainError where error == .invalidLoginCode {
                // As the guide shows: an inline error, and the user tries again while attempts remain.
                print("That code didn't work. Check it and try again.")
                if error.details.attemptsRemaining == 0 { throw error }
            }
        }
    }
    let account = try await wallet.account()
    let addresses = try await wallet.getWallet()
    print("Logged in: account \(account.accountID), Ethereum \(addresses.ethereumAddress), Solana \(addresses.solanaAddress)")
    _ = try await wallet.logout()
    print("Logged out.")
} catch let error as RainError {
    print("error: \(error.code): \(error.message)")
    exit(1)
}
