import FoundationEssentials
import RainCore
internal import RainWire

/// The mobile SDK's spellings of what the provider does, beside this library's own, so that code
/// written against Rain's iOS or Android SDK reads the same here (docs/mobile-sdk-map.md). Where
/// the two differ, the difference has a reason given in the map.
extension RainProvider {
    /// Waits up to `timeoutMs` milliseconds for the stored session to load, as the Android SDK's
    /// `awaitSessionRestore(timeoutMs)`: a timeout returns normally with `authState` still
    /// `loading`; 0 does not wait. Then, like `awaitSessionRestore()`, it throws what the daemon
    /// refused of `RainWalletConfig`.
    /// - Throws: RAIN_102 for a negative `timeoutMs` (field `timeoutMs`), before any request, and
    ///   as `awaitSessionRestore()` does: RAIN_102 naming `passkeyDomain` or `sessionPolicy.<key>`,
    ///   RAIN_202 `not_profile_owner`, RAIN_101 when the daemon is not running (at once: a missing
    ///   daemon is not waited for; `serviceState` follows it).
    nonisolated(nonsending) public func awaitSessionRestore(timeoutMs: Int64) async throws {
        guard timeoutMs >= 0 else {
            throw RainError.invalid("timeoutMs is \(timeoutMs); give 0 or more milliseconds", field: "timeoutMs")
        }
        try await awaitRestore(milliseconds: UInt64(timeoutMs))
    }

    /// `awaitSessionRestore(timeoutMs:)` with the wait in seconds, as the iOS SDK's
    /// `awaitSessionRestore(timeout:)` (which does not throw there: here the daemon may be missing
    /// or refuse the configuration, so it throws, and needs `try`).
    /// - Throws: RAIN_102 for a negative or non-finite `timeout` (field `timeout`), before any
    ///   request; otherwise as `awaitSessionRestore(timeoutMs:)`.
    nonisolated(nonsending) public func awaitSessionRestore(timeout: TimeInterval) async throws {
        guard timeout.isFinite, timeout >= 0 else {
            throw RainError.invalid("timeout is \(timeout); give 0 or more seconds", field: "timeout")
        }
        try await awaitRestore(milliseconds: UInt64(min((timeout * 1000).rounded(.up), Double(UInt32.max))))
    }

    /// Waits up to `milliseconds` for the restore (0: not at all), then reports the configuration's
    /// refusal.
    nonisolated(nonsending) private func awaitRestore(milliseconds: UInt64) async throws(RainError) {
        if milliseconds == 0 {
            // 0 on the wire means the profile's restore timeout: a read of the state waits for nothing.
            _ = try await callBytes(Method.sessionGetState, GetSessionStateRequest())
        } else {
            let wait = UInt32(clamping: milliseconds)
            _ = try await call(
                Method.sessionAwaitRestore, AwaitRestoreRequest(timeoutMilliseconds: wait), as: SessionSnapshot.self)
        }
        if let refusal = configurationRefusal() { throw refusal }
    }

    /// The session's `AuthState` now, as the SDK's `currentAuthState()`. A call to the daemon (the
    /// state lives there), so it is `async` where the SDK's is not.
    /// - Throws: RAIN_101 when the daemon is not running.
    nonisolated(nonsending) public func currentAuthState() async throws -> AuthState {
        try await currentSession().authState
    }

    /// The session's `SessionState` now, as the SDK's `currentSessionState()`. A call to the
    /// daemon, like `currentAuthState()`.
    /// - Throws: RAIN_101 when the daemon is not running.
    nonisolated(nonsending) public func currentSessionState() async throws -> SessionState {
        try await currentSession().sessionState
    }

    /// The wallet's Ethereum address (EIP-55), as the SDK client's `getWalletAddress()`: the same
    /// as `getWallet().ethereumAddress`.
    /// - Throws: as `getWallet()`: RAIN_201 without a live session, RAIN_404 when the account has
    ///   no wallet, RAIN_301 when the authority could not be reached, RAIN_101 when the daemon is
    ///   not running.
    nonisolated(nonsending) public func getWalletAddress() async throws -> String {
        try await getWallet().ethereumAddress
    }

    /// One chain's private key, as the iOS SDK's `exportPrivateKey(_:)` (`.ethereum`, `.solana`):
    /// the same as `exportPrivateKey(chain:)`.
    /// - Throws: as `exportPrivateKey(chain:)`.
    nonisolated(nonsending) public func exportPrivateKey(_ chain: RainChain) async throws -> String {
        try await exportPrivateKey(chain: chain)
    }
}
