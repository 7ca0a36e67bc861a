import RainCore
import Synchronization

/// The accounts one call of the authority read or changed, collected while it runs: the server
/// that serves the call (`AuthorityService`) holds the call's answer until no device can still
/// answer from a read of those accounts that the call made stale (`ReadLeases`), and counts a
/// device that read them among their readers.
///
/// The authority notes every account whose Account/Get or Wallet/Get answer a call can change or
/// end: the account behind a token (every call with a session's token), the account a login
/// logged in to (its other sessions revoked), a passkey added to, a family revoked as stolen. A
/// change it failed to note would be answered stale by a device for up to one lease, so each such
/// path has a test that its account is noted.
///
/// ```swift
/// let (result, accounts) = await TouchedAccounts.collect { () async throws(RainError) in
///     try await authority.confirmLoginCode(request, caller: caller)
/// }
/// ```
public final class TouchedAccounts: Sendable {
    @TaskLocal private static var collector: TouchedAccounts?

    private let accounts = Mutex<Set<String>>([])

    private init() {}

    /// The collector of the call running in this task, to note from a closure that runs
    /// elsewhere (a store transaction's decision); nil outside a collected call.
    public static var current: TouchedAccounts? { collector }

    /// Notes `accountID` for the call running in this task (nothing outside a collected call).
    public static func note(_ accountID: String) { collector?.note(accountID) }

    /// Notes `accountID` for this collector's call.
    public func note(_ accountID: String) {
        guard !accountID.isEmpty else { return }
        _ = accounts.withLock { $0.insert(accountID) }
    }

    /// Runs `body` and returns its outcome with the accounts it noted (its own, not an enclosing
    /// call's).
    public static func collect<T>(_ body: () async throws(RainError) -> T) async -> (Result<T, RainError>, Set<String>) {
        let own = TouchedAccounts()
        let result: Result<T, RainError> = await $collector.withValue(own) {
            do throws(RainError) {
                return .success(try await body())
            } catch {
                return .failure(error)
            }
        }
        return (result, own.accounts.withLock { $0 })
    }
}
