import Foundation
import RainAuthorityAPI
import RainCore
import RainTransport
import RainWire
import Synchronization

// Talking to the daemon directly: raw calls, and the login codes in the development outbox.
extension DaemonHarness {
    /// One unary call on a fresh connection, closed afterwards. A call not answered within
    /// `timeout` fails with RAIN_101 (the connection is closed under it).
    public func call(
        _ method: String, payload: [UInt8], profile: String = ProfileName.defaultName, timeout: Duration = .seconds(30)
    ) async throws(RainError) -> [UInt8] {
        let connection = try ClientConnection(path: socketPath)
        let watchdog = Task {
            try await Task.sleep(for: timeout)
            connection.close()
        }
        defer {
            watchdog.cancel()
            connection.close()
        }
        return try await connection.call(
            method: method, payload: payload, metadata: [MetadataEntry(key: profileMetadataKey, value: profile)])
    }

    /// The development outbox of one profile's app, oldest first (the `ListOutbox` RPC that
    /// `RainProvider.devOutbox()` makes).
    public func outbox(profile: String = ProfileName.defaultName) async throws(RainError) -> [OutboxEntry] {
        let bytes = try await call(Method.devListOutbox, payload: try ListOutboxRequest().encode(), profile: profile)
        // A profile's app id is its name unless the config says otherwise; keep only that app's codes.
        return try ListOutboxResponse.decode(bytes).entries.filter { $0.appID == profile }
    }

    /// Every code in the profile's outbox, oldest first.
    public func outboxCodes(profile: String = ProfileName.defaultName) async throws(RainError) -> [String] {
        try await outbox(profile: profile).map(\.code)
    }

    /// The newest code sent to `contact` (its normalized value, like `a@b.co` or `+15551234567`)
    /// for the profile's app.
    public func latestCode(for contact: String, profile: String = ProfileName.defaultName) async throws(RainError) -> String? {
        try await outbox(profile: profile).last { $0.contact?.value == contact }?.code
    }

    /// Polls until `contact` has at least `count` deliveries for the profile's app and returns the
    /// newest code.
    /// - Throws: `HarnessError` at the deadline (20 s by default: only a failing run waits for it).
    ///   With many integration tests in flight at once, a test's own continuation can wait long
    ///   for one of the two threads of the concurrency pool, which is why scripts/test runs a few
    ///   at a time.
    public func waitForCode(
        for contact: String, count: Int = 1, profile: String = ProfileName.defaultName, timeout: Duration = .seconds(20)
    ) async throws -> String {
        let deadline = ContinuousClock.now + timeout
        // One connection for the whole wait, polled every 50 ms: a new connection per poll would make
        // the daemon read this process's identity (per-app access) at each poll, which on a loaded
        // machine holds the CLI's own first call back past the deadline.
        let connection = try ClientConnection(path: socketPath)
        defer { connection.close() }
        let metadata = [MetadataEntry(key: profileMetadataKey, value: profile)]
        let request = try ListOutboxRequest().encode()
        while true {
            let bytes = try await connection.call(method: Method.devListOutbox, payload: request, metadata: metadata)
            let matching = try ListOutboxResponse.decode(bytes).entries.filter {
                $0.appID == profile && $0.contact?.value == contact
            }
            if matching.count >= count, let last = matching.last { return last.code }
            if ContinuousClock.now >= deadline {
                throw HarnessError("no code #\(count) for \(contact) in the outbox within \(timeout)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }
}
