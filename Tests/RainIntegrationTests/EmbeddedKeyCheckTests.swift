import Foundation
import RainCore
import RainCrypto
import RainTestSupport
import Testing

@testable import RainStore

/// A device daemon's embedded authority records its master key's check in its store, as the
/// authority server does, and refuses to start with another key than the store's.
@Suite("Embedded authority key check (processes)")
struct EmbeddedKeyCheckTests {
    @Test(
        "a device daemon's first start records its master key in the embedded store; a start with another master key is refused (78) and leaves the store as it was"
    )
    func deviceRecordsAndChecksItsMasterKey() async throws {
        let h = try await DaemonHarness.start(config: StorageTests.fileConfig)
        defer { h.shutdown() }
        _ = try await h.stop()
        let keyFile = "\(h.stateDirectory)/authority/authority.key"
        let database = "\(h.stateDirectory)/authority/authority.sqlite3"
        let master = try #require(try KeyFile.load(at: keyFile))
        func recorded() throws -> String? {
            try SQLiteConnection(path: database, createIfMissing: false)
                .query("SELECT key_id FROM store_key_check", values: [], operation: "read the check")
                .first.map { try $0.text(0, "read the check") }
        }
        #expect(try recorded() == master.keyID)

        // Another master key in the provider (a backup of another state directory restored).
        let other = SymmetricKey(bytes: Array(repeating: 7, count: 32))
        try KeyFile.write(other, to: keyFile)
        let refused = try await h.runDaemon(arguments: h.daemonArguments)
        #expect(refused.status == 78, "\(refused.output)")
        #expect(refused.output.contains(master.keyID) && refused.output.contains(other.keyID), "\(refused.output)")
        #expect(refused.output.contains("storage restore"), "\(refused.output)")
        #expect(try recorded() == master.keyID)
    }
}
