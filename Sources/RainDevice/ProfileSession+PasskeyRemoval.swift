import RainAuthorityAPI
import RainCore
import RainCrypto
import RainTransport
import RainWire

/// Removing one of the account's passkeys (`Passkey/Remove`): the route asks the user about the
/// passkey `describePasskeyRemoval` found, then `removePasskey` removes exactly that one.
extension ProfileSession {
    /// What the user confirms: the passkey's domain, kind, creation and last use, read from the
    /// account as the authority lists it now. The user is not asked about a removal the authority
    /// would refuse (it checks again, atomically, when it removes).
    /// - Throws: RAIN_102 `credential_unknown` when the account holds no passkey of that id,
    ///   `last_login_method` when it is the account's only way to log in; RAIN_201 without a live
    ///   session; the account read's errors.
    func describePasskeyRemoval(_ credentialID: String) async throws(RainError) -> ConfirmationDetails {
        let account = try await account()
        guard let passkey = account.passkeys.first(where: { $0.credentialID == credentialID }) else {
            throw RainError.unknownPasskey()
        }
        guard account.passkeys.count > 1 || !account.contacts.isEmpty else {
            throw RainError.lastLoginMethod()
        }
        let used = passkey.lastUsedAt.map { "last used \(RFC3339.string(from: $0))" } ?? "never used to log in"
        return ConfirmationDetails(
            action: "remove a passkey for \(passkey.rpID) from the account (it will no longer log in)",
            lines: [
                "Domain: \(passkey.rpID)", "Kind: \(passkey.kind.displayName)",
                "Created: \(RFC3339.string(from: passkey.createdAt)), \(used)",
            ],
            closing: "Passkey id: \(credentialID)", auditDetail: "\(passkey.rpID) \(passkey.kind.displayName)",
            fingerprint: Self.removalFingerprint(credentialID))
    }

    /// Removes the passkey the user confirmed (`confirmed`, from `describePasskeyRemoval`): never
    /// another one than the prompt named.
    /// - Returns: the account after the removal.
    /// - Throws: RAIN_102 `credential_unknown` or `last_login_method` (nothing removed); RAIN_201
    ///   without a live session; RAIN_301/501 when the authority cannot be reached or did not
    ///   answer (not retried: ask `Account/Get` whether it is gone).
    func removePasskey(_ credentialID: String, confirmed: ConfirmationDetails?) async throws(RainError) -> AccountResponse {
        guard let confirmed, confirmed.fingerprint == Self.removalFingerprint(credentialID) else {
            throw RainError(.internalError, "the passkey removed must be the one the user confirmed")
        }
        let info = try await withSession(what: "remove the passkey", transientRetries: 0) {
            (authority, appID, token, proof) async throws(RainError) in
            try await authority.removePasskey(
                AuthorityRemovePasskeyRequest(appID: appID, accessToken: token, credentialID: credentialID),
                caller: AuthorityCaller(proof: proof))
        }
        logger.info("passkey.removed", ["profile": runtime.name])
        return AccountResponse(info)
    }

    static func removalFingerprint(_ credentialID: String) -> [UInt8] {
        SHA256.hash(Array("passkey-removal".utf8) + [0] + Array(credentialID.utf8))
    }
}
