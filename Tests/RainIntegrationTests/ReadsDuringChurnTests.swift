import Foundation
import RainCore
import RainTestSupport
import RainTransport
import RainWallet
import RainWire
import Testing

/// Account/Get and Wallet/Get answer from what the daemon kept for the session while the
/// authority's stamp holds, and through the session actor otherwise. Reads racing logouts, logins and refreshes must only ever
/// see a whole answer of the account or RAIN_201: never another error, a wrong account or a crash.
@Suite("Reads during session churn")
struct ReadsDuringChurnTests {
    @Test("8 connections reading while the profile logs out, logs in and refreshes: only whole answers or RAIN_201")
    func readsRaceLogoutsLoginsAndRefreshes() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let p = h.provider()
        let email = "churn@example.com"
        try await p.sendLoginCode(to: .email(email))
        try await p.confirmLoginCode(try #require(try await h.latestCode(for: email)))
        let account = try await p.account()

        // What each read saw: "ok", "signed-out", or a description of anything else.
        let outcomes = Recorder<String>()
        let stop = Recorder<Bool>()
        let metadata = [MetadataEntry(key: profileMetadataKey, value: ProfileName.defaultName)]
        try await withThrowingTaskGroup(of: Void.self) { group in
            for reader in 0..<8 {
                group.addTask {
                    let connection = try ClientConnection(path: h.socketPath)
                    defer { connection.close() }
                    var isWallet = reader % 2 == 1
                    while stop.count == 0 {
                        do {
                            if isWallet {
                                let bytes = try await connection.call(
                                    method: Method.walletGet, payload: try GetWalletRequest().encode(), metadata: metadata)
                                let wallet = try WalletResponse.decode(bytes)
                                guard wallet.walletID == account.walletID else {
                                    outcomes.append("wallet \(wallet.walletID)")
                                    continue
                                }
                            } else {
                                let bytes = try await connection.call(
                                    method: Method.accountGet, payload: try GetAccountRequest().encode(), metadata: metadata)
                                let answer = try AccountResponse.decode(bytes)
                                guard answer.accountID == account.accountID, answer.walletID == account.walletID else {
                                    outcomes.append("account \(answer.accountID)")
                                    continue
                                }
                            }
                            outcomes.append("ok")
                        } catch let error as RainError where error.code == .sessionExpired {
                            outcomes.append("signed-out")
                        } catch {
                            outcomes.append("\(error)")
                        }
                        isWallet.toggle()
                    }
                }
            }
            group.addTask {
                defer { stop.append(true) }
                for round in 1...6 {
                    _ = try await p.refreshSession()
                    _ = try await p.logout()
                    try await Task.sleep(for: .milliseconds(20))
                    try await p.sendLoginCode(to: .email(email))
                    try await p.confirmLoginCode(try await h.waitForCode(for: email, count: round + 1))
                    try await Task.sleep(for: .milliseconds(20))
                }
            }
            try await group.waitForAll()
        }
        let all = outcomes.all
        let unexpected = all.filter { $0 != "ok" && $0 != "signed-out" }
        let ok = all.count { $0 == "ok" }
        let signedOut = all.count { $0 == "signed-out" }
        #expect(unexpected.isEmpty, "unexpected answers: \(unexpected.prefix(5))")
        #expect(ok > 0 && signedOut > 0, "ok \(ok), signed out \(signedOut)")
        // The daemon is still whole and serving the last session.
        #expect(try await p.account().accountID == account.accountID)
        #expect(h.pid != nil)
    }
}
