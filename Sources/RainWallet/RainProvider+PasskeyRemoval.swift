import FoundationEssentials
internal import RainWire

/// The account's passkeys: listed with `account()` (`Account.passkeys`, each with its domain, kind
/// and creation time), removed one at a time once the user confirms.
extension RainProvider {
    /// Removes one of the account's passkeys (any domain). The daemon asks the user to confirm on
    /// its prompt, which names the passkey's domain, kind and creation time (the call waits for the
    /// answer, up to a minute). The account's last way to log in is never removed: add a backup
    /// contact or another passkey first.
    ///
    /// ```swift
    /// let account = try await wallet.account()
    /// if let old = account.passkeys.first(where: { $0.rpID == "old.example" }) {
    ///     try await wallet.removePasskey(id: old.credentialID)
    /// }
    /// ```
    /// - Parameter id: the passkey's `PasskeyInfo.credentialID`.
    /// - Returns: the account after the removal.
    /// - Throws: RAIN_102 `credential_unknown` for an id the account does not hold,
    ///   `last_login_method` when it is the account's only way to log in; RAIN_201 without a live
    ///   session; RAIN_401 when the user refused or let the prompt time out (nothing is removed);
    ///   RAIN_202 `no_prompt` when no prompt can be shown; RAIN_302 while another prompt is open;
    ///   RAIN_301 when the authority could not be reached; RAIN_101 when the daemon is not running.
    @discardableResult
    nonisolated(nonsending) public func removePasskey(id: String) async throws -> Account {
        guard !id.isEmpty else {
            throw RainError.invalid(
                "name the passkey to remove by its credentialID (Account.passkeys lists them)", field: "id",
                reason: "credential_unknown")
        }
        return Account(
            try await call(Method.passkeyRemove, PasskeyRemoveRequest(credentialID: id), as: AccountResponse.self))
    }
}
