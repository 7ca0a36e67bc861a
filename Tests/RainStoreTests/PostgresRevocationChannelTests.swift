import Foundation
import RainAuthorityAPI
import RainCore
import RainTestSupport
import RainWire
import Synchronization
import Testing

@testable import RainStore

/// NOTIFYs sent while an instance's LISTEN connection was down are lost; at the LISTEN
/// reconnect the instance asks its device streams to recheck.
@Suite("PostgreSQL revocation channel")
struct PostgresRevocationChannelTests {
    /// Polls `condition` (every 10 ms, up to 30 s of real time); false when it never held.
    static func eventually(_ condition: () async throws -> Bool) async rethrows -> Bool {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            if try await condition() { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return try await condition()
    }

    @Test("LISTEN lost while another instance NOTIFYed: at the reconnect (not the first connect) every stream gets a recheck")
    func recheckAfterListenReconnect() async throws {
        let url = try await PostgresTestCluster.freshDatabaseURL(label: "relisten")
        // The test's own connections stay open while the database refuses new ones; a database's
        // connections are switched off from another one.
        let admin = try PostgresConnection(url: url)
        let server = try PostgresConnection(url: try await PostgresTestCluster.serverURL())
        let databaseName = try admin.query("SELECT current_database()", operation: "name").first?.values.first.flatMap {
            if case .text(let t) = $0 { return t }
            return nil
        }
        let database = try #require(databaseName)
        let listenerQuery = """
            SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN rain_revocations' \
            AND pid <> pg_backend_pid()
            """
        let hub = RevocationHub()
        let seen = Mutex<[AuthorityRevocation]>([])
        _ = hub.subscribe(deviceID: nil) { r in seen.withLock { $0.append(r) } }
        let channel = try PostgresRevocationChannel(
            url: url, hub: hub, logger: Logger(label: "test", minimumLevel: .error), reconnectDelay: .milliseconds(20))
        defer { channel.stop() }
        func listeners() -> Int { (try? admin.query(listenerQuery, operation: "listeners").count) ?? -1 }
        #expect(await Self.eventually { listeners() == 1 })
        // The first connect asks for nothing.
        #expect(channel.recheckCount == 0)
        #expect(seen.withLock { $0 }.isEmpty)

        // The LISTEN connection is lost and cannot come back yet; another instance NOTIFYs meanwhile.
        try server.executeSimple("ALTER DATABASE \(database) ALLOW_CONNECTIONS false", operation: "close")
        _ = try admin.query(
            "SELECT pg_terminate_backend(pid, 5000) FROM (\(listenerQuery)) AS l", operation: "terminate")
        #expect(listeners() == 0)
        let payload = #"{"i":"another-instance","a":"app","d":"device-a","r":"revoked_elsewhere"}"#
        _ = try admin.query(
            "SELECT pg_notify($1, $2)", [.text(PostgresRevocationChannel.channelName), .text(payload)], operation: "notify")
        try server.executeSimple("ALTER DATABASE \(database) ALLOW_CONNECTIONS true", operation: "open")

        // Back: every stream is asked to recheck, which catches the lost revocation.
        #expect(await Self.eventually { seen.withLock { $0 }.contains(.recheck) })
        #expect(channel.recheckCount == 1)
        #expect(!seen.withLock { $0 }.contains { $0.deviceID == "device-a" })
        #expect(listeners() == 1)
    }
}
