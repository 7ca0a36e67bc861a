import Foundation
import RainCore
import RainCrypto
import RainTestSupport
import RainWire
import Testing

@testable import RainDevice

/// Advances the manual clock while `task` runs, so its backoff sleeps end.
func pumpClock<T: Sendable>(_ f: SchedulerFixture, until task: Task<T, any Error>) async {
    for _ in 0..<400 {
        f.clock.advance(by: .milliseconds(250))
        try? await Task.sleep(for: .milliseconds(2))
    }
    _ = await task.result
}

@Suite struct WalletSessionTests {
    @Test func walletShowsBothAddressesOfTheSessionsAccount() async throws {
        let f = try await SchedulerFixture()
        try await f.login()
        let wallet = try await f.session.wallet()
        let account = try await f.session.account()
        #expect(wallet.walletID == account.walletID)
        #expect(wallet.ethereumAddress.hasPrefix("0x"))
        #expect(EthereumAddress.checksummed(wallet.ethereumAddress.lowercased()) == wallet.ethereumAddress)
        #expect(Base58.decode(wallet.solanaAddress)?.count == 32)
    }

    @Test func walletReadIsRetriedOnTransientFailures() async throws {
        let f = try await SchedulerFixture()
        try await f.login()
        f.authority.failNextReads(2)
        let session = f.session
        let task = Task { try await session.wallet() }
        await pumpClock(f, until: task)
        let wallet = try await task.value
        #expect(wallet.walletID.hasPrefix("wal_"))
        #expect(f.authority.walletCalls == 3)
    }

    @Test func walletReadGivesUpAfterTheRetriesWithRAIN301() async throws {
        let f = try await SchedulerFixture()
        try await f.login()
        f.authority.failNextReads(10)
        let session = f.session
        let task = Task { try await session.wallet() }
        await pumpClock(f, until: task)
        let error = await #expect(throws: RainError.self) { try await task.value }
        #expect(error?.code == .network)
        #expect(f.authority.walletCalls == 3)
    }

    @Test func walletReadOfARevokedSessionEndsItWithRevokedElsewhere() async throws {
        let f = try await SchedulerFixture()
        try await f.login()
        let watcher = f.watch(1)[0]
        try await f.loginOnAnotherDevice()
        let error = await #expect(throws: RainError.self) { try await f.session.wallet() }
        #expect(error?.code == .sessionExpired)
        #expect(f.runtime.snapshot().authState == .unauthenticated)
        #expect(watcher.all.contains { $0.kind == .sessionExpired && $0.expiryReason == .revokedElsewhere })
    }

    @Test func exportIsRefusedWithRAIN202WithoutAllowExportEvenWithASession() async throws {
        let f = try await SchedulerFixture(allowExport: false)
        try await f.login()
        let phrase = await #expect(throws: RainError.self) { try await f.session.exportRecoveryPhrase() }
        #expect(phrase?.code == .unauthorized)
        for chain in RainChain.allCases {
            let key = await #expect(throws: RainError.self) { try await f.session.exportPrivateKey(chain: chain) }
            #expect(key?.code == .unauthorized)
        }
        let unnamed = await #expect(throws: RainError.self) { try await f.session.exportPrivateKey(chain: nil) }
        #expect(unnamed?.code == .unauthorized)
        #expect(f.authority.exportCalls == 0)
    }

    @Test func exportWithoutASessionIsRAIN201() async throws {
        let f = try await SchedulerFixture(allowExport: true)
        let phrase = await #expect(throws: RainError.self) { try await f.session.exportRecoveryPhrase() }
        #expect(phrase?.code == .sessionExpired)
        let key = await #expect(throws: RainError.self) { try await f.session.exportPrivateKey(chain: .ethereum) }
        #expect(key?.code == .sessionExpired)
        #expect(f.authority.exportCalls == 0)
    }

    @Test func exportIsAllowedWithAllowExportAndReDerivesTheWallet() async throws {
        let f = try await SchedulerFixture(allowExport: true)
        try await f.login()
        let wallet = try await f.session.wallet()
        let words = try await f.session.exportRecoveryPhrase().words
        #expect(words.count == 12)
        let keys = try WalletKeys.derive(entropy: try BIP39.entropy(fromMnemonic: words))
        #expect(keys.ethereumAddress == wallet.ethereumAddress)
        #expect(keys.solanaAddress == wallet.solanaAddress)

        let ethereum = try await f.session.exportPrivateKey(chain: .ethereum)
        #expect(ethereum.chain == .ethereum)
        #expect(ethereum.privateKey == keys.ethereumPrivateKeyHex)
        #expect(ethereum.privateKey.count == 66)
        let solana = try await f.session.exportPrivateKey(chain: .solana)
        #expect(solana.chain == .solana)
        #expect(solana.privateKey == keys.solanaKeypairBase58)
        let noChain = await #expect(throws: RainError.self) { try await f.session.exportPrivateKey(chain: nil) }
        #expect(noChain?.code == .invalidArgument)
        #expect(f.authority.exportCalls == 3)

        // Nothing secret is logged or stored on the device.
        let log = f.logSink.captured.joined(separator: "\n")
        #expect(log.contains("wallet.exported"))
        #expect(!log.contains(words.joined(separator: " ")))
        #expect(!log.contains(String(ethereum.privateKey.dropFirst(2))))
        let stored = try #require(await f.storage.load(profile: "default"))
        #expect(!"\(stored)".contains(words.joined(separator: " ")))
    }

    @Test func exportIsNotRetriedOnATransientFailure() async throws {
        let f = try await SchedulerFixture(allowExport: true)
        try await f.login()
        f.authority.failNextExports(1)
        let error = await #expect(throws: RainError.self) { try await f.session.exportRecoveryPhrase() }
        #expect(error?.code == .network)
        #expect(f.authority.exportCalls == 1)
        // The next call (the user's own retry) works.
        #expect(try await f.session.exportRecoveryPhrase().words.count == 12)
    }
}
