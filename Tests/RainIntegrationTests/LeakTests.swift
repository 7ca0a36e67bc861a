import Foundation
import RainTestSupport
import RainTransport
import RainWallet
import RainWire
import Testing

/// Calls with a day-long `timeout_ms` and a flood of invented profile names do not grow the real
/// daemon: without the defences each run grows it by many MiB, with them it stays within the
/// bound of 4 MiB.
@Suite("No leak per call or per profile name (daemon VmRSS)", .serialized)
struct LeakTests {
    /// The daemon's resident memory in KiB.
    static func residentKiB(_ pid: Int32) throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") })
        return try #require(Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]))
    }

    static let day: UInt32 = 86_400_000

    @Test("20,000 calls with a day-long timeout_ms grow the daemon's VmRSS by less than 4 MiB")
    func dayLongTimeouts() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let pid = try #require(h.pid)
        let conn = try ClientConnection(path: h.socketPath)
        defer { conn.close() }
        let payload = try AwaitRestoreRequest(timeoutMilliseconds: 1).encode()
        func calls(_ n: Int) async throws {
            for _ in 0..<n {
                _ = try await conn.call(method: Method.sessionAwaitRestore, payload: payload, timeoutMilliseconds: Self.day)
            }
        }
        try await calls(2_000)  // warm-up: pools, caches, the allocator's arenas
        let before = try Self.residentKiB(pid)
        try await calls(20_000)
        let after = try Self.residentKiB(pid)
        #expect(after - before < 4 * 1024, "VmRSS \(before) KiB → \(after) KiB")
        print("dayLongTimeouts: VmRSS \(before) KiB → \(after) KiB after 20,000 calls")
    }

    @Test("2,000 connections that each pass per-app access once grow the daemon's VmRSS by less than 4 MiB")
    func connectionsWithCallerIdentity() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let pid = try #require(h.pid)
        let payload = try AwaitRestoreRequest(timeoutMilliseconds: 1).encode()
        // Each connection's first profile call reads its caller's identity and decides; closing it
        // must drop all of that.
        func connections(_ n: Int) async throws {
            for _ in 0..<n {
                let conn = try ClientConnection(path: h.socketPath)
                _ = try await conn.call(method: Method.sessionAwaitRestore, payload: payload)
                conn.close()
            }
        }
        try await connections(300)
        let before = try Self.residentKiB(pid)
        try await connections(2_000)
        let after = try Self.residentKiB(pid)
        #expect(after - before < 4 * 1024, "VmRSS \(before) KiB → \(after) KiB")
        print("connectionsWithCallerIdentity: VmRSS \(before) KiB → \(after) KiB after 2,000 connections")
    }

    @Test("5,000 invented profile names grow the daemon's VmRSS by less than 4 MiB")
    func profileFlood() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let pid = try #require(h.pid)
        let conn = try ClientConnection(path: h.socketPath)
        defer { conn.close() }
        let payload = try AwaitRestoreRequest(timeoutMilliseconds: 1000).encode()
        func flood(_ range: Range<Int>) async throws {
            for i in range {
                // AwaitRestore waits for the new profile's restore, so each one is idle afterwards.
                _ = try await conn.call(
                    method: Method.sessionAwaitRestore, payload: payload,
                    metadata: [MetadataEntry(key: profileMetadataKey, value: "flood-\(i)")])
            }
        }
        try await flood(0..<500)
        let before = try Self.residentKiB(pid)
        try await flood(500..<5_500)
        let after = try Self.residentKiB(pid)
        #expect(after - before < 4 * 1024, "VmRSS \(before) KiB → \(after) KiB")
        print("profileFlood: VmRSS \(before) KiB → \(after) KiB after 5,000 names")
        // The default profile and the newest names are served as before.
        let provider = h.provider()
        try await provider.awaitSessionRestore()
        let state = try await provider.currentSession()
        #expect(state.authState == .unauthenticated)
    }
}
