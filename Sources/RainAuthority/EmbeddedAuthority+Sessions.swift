import FoundationEssentials
import Glibc
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainStore
import RainWire

// Sessions: refreshing and ending them, the account reads a live access token allows, the device
// binding every token call checks, and moving a device to a new key.
extension EmbeddedAuthority {
    /// Rotates a session's tokens (see `Authority.refreshSession` for the rules).
    ///
    /// The lookup, the checks and the rotation or revocation run in one store transaction, so
    /// concurrent refreshes of one token are serialized: the first rotates, the others find the
    /// token just rotated out within the grace window and get the same pair.
    /// - Throws: RAIN_201 with `details.reason` `refresh_rejected`, `refresh_token_reused`,
    ///   `device_unbound`, `revoked_elsewhere`, `revoked` or `refresh_expired`; RAIN_502 when the
    ///   store fails.
    public func refreshSession(_ request: RefreshRequest, caller: AuthorityCaller) async throws(RainError)
        -> AuthorityRefreshSessionResponse
    {
        AuthorityRefreshSessionResponse(tokens: try await rotateTokens(request, proof: caller.proof))
    }

    /// The refresh's rotation (see `refreshSession`), its tokens alone.
    private func rotateTokens(_ request: RefreshRequest, proof: DeviceProof) async throws(RainError) -> SessionTokens {
        try requireServed(request.appID)
        // No proof changes nothing: the device could not prove (a TPM, a keyring), which is no theft.
        guard !proof.isEmpty else { throw DeviceBinding.proofRequired() }
        let now = clock.now
        let keys = self.keys
        let settings = self.settings
        // Noted from the store's transaction: a refresh that burns a family changes its account.
        let touched = TouchedAccounts.current
        let verdict = try await store.refreshSession(
            appID: request.appID, refreshHash: keys.tokenHash(request.refreshToken), now: now
        ) { candidate in
            if let candidate { touched?.note(candidate.session.accountID) }
            return Self.decideRefresh(candidate, request: request, proof: proof, now: now, keys: keys, settings: settings)
        }
        switch verdict.outcome {
        case .rotated(let tokens, let generation):
            logger.info(
                "session.refreshed",
                ["app": request.appID, "session": verdict.sessionID ?? "", "generation": String(generation)])
            return tokens
        case .replayed(let tokens, let generation):
            logger.info(
                "session.refresh_repeated",
                ["app": request.appID, "session": verdict.sessionID ?? "", "generation": String(generation)])
            return tokens
        case .unproven:
            throw DeviceBinding.proofRequired()
        case .refused(let reason, let revoked):
            if let revoked {
                logger.warning(
                    "session.family_revoked",
                    [
                        "app": request.appID, "session": verdict.sessionID ?? "", "device": request.deviceID,
                        "reason": revoked,
                    ])
            } else {
                logger.info(
                    "session.refresh_refused",
                    ["app": request.appID, "session": verdict.sessionID ?? "-", "reason": reason])
            }
            throw Self.sessionError(reason)
        }
    }

    /// The account behind a live access token (see `Authority.getAccountInfo`).
    /// - Throws: RAIN_201 with `details.reason` `invalid_token`, `revoked_elsewhere`, `revoked` or
    ///   `access_expired` (a revoked session reports its revocation even once the token expired);
    ///   RAIN_502 when the store fails.
    public func getAccountInfo(_ request: AuthorityAccountInfoRequest, caller: AuthorityCaller) async throws(RainError)
        -> AccountInfo
    {
        let (appID, accessToken, proof) = (request.appID, request.accessToken, caller.proof)
        // One trip to the store: the session and the passkeys together (the hottest authority read).
        let (access, passkeys) = try await liveAccess(appID: appID, accessToken: accessToken, proof: proof) {
            (hash) throws(RainError) -> (AccountAccess, [PasskeyCredentialRecord])? in
            try await store.accountAccessWithPasskeys(appID: appID, accessHash: hash)
        }
        return try Self.accountInfo(access, passkeys: passkeys)
    }

    /// The account of a live session with its contacts, backup status and passkeys.
    /// - Throws: RAIN_404 when the account has no wallet; RAIN_502 when the store fails.
    func accountInfo(_ access: AccountAccess) async throws(RainError) -> AccountInfo {
        try Self.accountInfo(access, passkeys: try await store.passkeyCredentials(accountID: access.account.id))
    }

    /// The account of a live session with its contacts, backup status and these passkeys.
    /// - Throws: RAIN_404 when the account has no wallet.
    static func accountInfo(_ access: AccountAccess, passkeys records: [PasskeyCredentialRecord]) throws(RainError)
        -> AccountInfo
    {
        guard !access.account.walletID.isEmpty else { throw Self.noWallet() }
        let passkeys = records.map {
            PasskeyInfo(
                credentialID: Base64URL.encode($0.credentialID), rpID: $0.rpID, createdAt: $0.createdAt,
                lastUsedAt: $0.lastUsedAt, kind: PasskeyKind(rawValue: $0.kind) ?? .unknown)
        }
        // Every stored contact is verified (attached only by a confirmed code).
        return AccountInfo(
            accountID: access.account.id, walletID: access.account.walletID, createdAt: access.account.createdAt,
            contacts: access.contacts, needsBackupEmail: !AccountInfo.hasEmail(access.contacts), passkeys: passkeys)
    }

    /// The session behind a live access token, with its account, used by a caller that proved the
    /// session's device key.
    /// - Throws: RAIN_201 with `details.reason` `invalid_token`, `revoked_elsewhere`, `revoked`,
    ///   `access_expired`, `device_unbound` or `refresh_rejected` (another key: the session is now
    ///   revoked); RAIN_501 `device_proof_required`; RAIN_502 when the store fails.
    func liveAccess(appID: String, accessToken: String, proof: DeviceProof) async throws(RainError) -> AccountAccess {
        let (access, _) = try await liveAccess(appID: appID, accessToken: accessToken, proof: proof) {
            (hash) throws(RainError) -> (AccountAccess, Void)? in
            try await store.accountAccess(appID: appID, accessHash: hash).map { ($0, ()) }
        }
        return access
    }

    /// The live session behind `accessToken`, proven by the device it is bound to and marked used,
    /// with what `read` fetched alongside it (given the token's hash) in the same trip to the store.
    /// - Throws: like `liveAccess(appID:accessToken:proof:)`.
    func liveAccess<Extra>(
        appID: String, accessToken: String, proof: DeviceProof,
        read: (_ accessHash: [UInt8]) async throws(RainError) -> (AccountAccess, Extra)?
    ) async throws(RainError) -> (AccountAccess, Extra) {
        try requireServed(appID)
        guard !proof.isEmpty else { throw DeviceBinding.proofRequired() }
        let now = clock.now
        guard let found = try await read(keys.tokenHash(accessToken)) else {
            throw Self.sessionError(RefreshRefusal.invalidToken)
        }
        // Every call with a token reads or changes its account (`TouchedAccounts`).
        TouchedAccounts.note(found.0.account.id)
        try Self.requireLive(found.0, now: now)
        try await requireBinding(found.0.session, proof: proof)
        await markUsed(found.0)
        return found
    }

    /// How a session relates to a caller's proof.
    enum DeviceBindingCheck: Equatable {
        /// A proven key is the session's device key or its pending one.
        case bound
        /// The session has no device key (issued unbound, or before schema version 2).
        case unbound
        /// The caller proved no key.
        case unproven
        /// The caller proved other keys only: the token was copied.
        case otherKey
    }

    /// Compares the session's keys (wire bytes: Ed25519 or P-256) with the proven ones.
    static func binding(of session: SessionRecord, proof: DeviceProof) -> DeviceBindingCheck {
        guard let key = session.devicePublicKey else { return .unbound }
        if proof.isEmpty { return .unproven }
        if proof.contains(wireBytes: key) { return .bound }
        if let pending = session.pendingDevicePublicKey, proof.contains(wireBytes: pending) { return .bound }
        return .otherKey
    }

    /// Throws unless `proof` holds the session's key: RAIN_501 without a proof (nothing changes),
    /// RAIN_201 `device_unbound` for a session without a key, and for a proof by another key
    /// RAIN_201 `refresh_rejected` after revoking the session family (`stolen_token`).
    func requireBinding(_ session: SessionRecord, proof: DeviceProof) async throws(RainError) {
        switch Self.binding(of: session, proof: proof) {
        case .bound:
            return
        case .unproven:
            throw DeviceBinding.proofRequired()
        case .unbound:
            throw Self.sessionError(RefreshRefusal.deviceUnbound)
        case .otherKey:
            try await store.revokeSession(id: session.id, reason: SessionRevokeReason.stolenToken, now: clock.now)
            throw stolenFamilyRevoked(session)
        }
    }

    /// Records the first use of a session's current pair (`SessionRecord.isPairUsed`): from then
    /// on a repeat of the previous refresh token outside the grace window is reuse. Writes only
    /// when the mark is not set yet. A failure to mark is logged and the call goes on: it is a
    /// read, and the pair then stays recoverable a little longer.
    func markUsed(_ access: AccountAccess) async {
        guard !access.session.isPairUsed else { return }
        do {
            try await store.markPairUsed(sessionID: access.session.id, accessHash: access.session.accessHash)
        } catch {
            logger.warning("session.mark_used_failed", ["session": access.session.id, "error": error.code.description])
        }
    }

    /// Throws RAIN_201 unless the session behind `access` is unrevoked and its access token unexpired.
    static func requireLive(_ access: AccountAccess, now: Date) throws(RainError) {
        if access.session.revokedAt != nil {
            throw sessionError(
                access.session.revokeReason == SessionRevokeReason.revokedElsewhere
                    ? RefreshRefusal.revokedElsewhere : RefreshRefusal.revoked)
        }
        guard now < access.session.accessExpiresAt else { throw sessionError(RefreshRefusal.accessExpired) }
    }

    /// Revokes the session holding `refreshToken` as its current or previous refresh token (reason
    /// `logout`); unknown tokens succeed. The device binding is that of every other token call: a
    /// proof by another key than the session's (or its pending one) is a copied token, so the
    /// session family is revoked as stolen (`stolen_token`, not `logout`) and the call is refused.
    /// The lookup, the check and the revocation run in one store transaction.
    /// - Throws: RAIN_501 `device_proof_required` without a proof; RAIN_201 `refresh_rejected`
    ///   for a proof by another key; RAIN_502 when the store fails.
    public func revokeSession(_ request: AuthorityRevokeSessionRequest, caller: AuthorityCaller) async throws(RainError)
        -> AuthorityRevokeSessionResponse
    {
        let (appID, refreshToken, proof) = (request.appID, request.refreshToken, caller.proof)
        try requireServed(appID)
        guard !proof.isEmpty else { throw DeviceBinding.proofRequired() }
        let touched = TouchedAccounts.current
        let verdict = try await store.refreshSession(
            appID: appID, refreshHash: keys.tokenHash(refreshToken), now: clock.now
        ) { candidate in
            if let candidate { touched?.note(candidate.session.accountID) }
            return Self.decideLogout(candidate, proof: proof)
        }
        switch verdict {
        case .nothing:
            return AuthorityRevokeSessionResponse()
        case .loggedOut:
            logger.info("session.logout", ["app": appID])
            return AuthorityRevokeSessionResponse()
        case .stolen(let session):
            throw stolenFamilyRevoked(session)
        }
    }

    /// What a logout decided.
    enum LogoutVerdict: Sendable, Equatable {
        /// An unknown, older or already revoked token: nothing to do, and a success.
        case nothing
        /// The session is revoked (`logout`).
        case loggedOut
        /// A proof by another key: the family is revoked as stolen.
        case stolen(SessionRecord)
    }

    /// The logout rules, a pure function of what the store found (it runs inside the transaction).
    /// A session without a device key (issued unbound) may still be logged out: ending it gives no
    /// one anything, and such a session serves no other call.
    static func decideLogout(_ candidate: RefreshCandidate?, proof: DeviceProof) -> (
        change: SessionRefreshChange, verdict: LogoutVerdict
    ) {
        guard let candidate, candidate.session.revokedAt == nil else { return (.none, .nothing) }
        if binding(of: candidate.session, proof: proof) == .otherKey {
            return (.revoke(reason: SessionRevokeReason.stolenToken), .stolen(candidate.session))
        }
        // Only the current or the previous refresh token logs out; an older one changes nothing.
        guard candidate.generation != .older else { return (.none, .nothing) }
        return (.revoke(reason: SessionRevokeReason.logout), .loggedOut)
    }

    /// Step 1 of a device key move (see `Authority.rebindDevice`): the device's live sessions bound
    /// to a proven key also accept the new key, and the new key gets the audit anchor of the
    /// current one. Idempotent.
    /// - Throws: RAIN_102 for a malformed key; RAIN_501 `device_proof_required` when the caller's
    ///   proof lacks the new key or holds no other key, or is another device's; RAIN_502 when the
    ///   store fails.
    public func rebindDevice(_ request: AuthorityRebindDeviceRequest, caller: AuthorityCaller) async throws(RainError)
        -> AuthorityRebindDeviceResponse
    {
        let newKey = try DevicePublicKey(wireBytes: request.newPublicKey)
        let (deviceID, proof) = (request.deviceID, caller.proof)
        try Self.requireIdentifier(deviceID, field: "deviceId")
        let current = proof.keys.filter { $0 != newKey }
        guard proof.deviceID == deviceID, proof.contains(newKey), !current.isEmpty else {
            throw DeviceBinding.proofRequired()
        }
        let changed = try await store.rebindDevice(
            deviceID: deviceID, currentKeys: current.map(\.wireBytes), newKey: newKey.wireBytes)
        try await carryAuditAnchor(from: current, to: newKey)
        logger.info("device.rebind", ["device": deviceID, "key": newKey.keyID, "sessions": String(changed)])
        return AuthorityRebindDeviceResponse()
    }

    /// Step 2 (see `Authority.confirmDeviceKey`): the device's sessions pending the key are bound
    /// to it alone. Idempotent.
    /// - Throws: RAIN_102 for a malformed key; RAIN_501 `device_proof_required` when the caller's
    ///   proof lacks the key or is another device's; RAIN_502 when the store fails.
    public func confirmDeviceKey(_ request: AuthorityConfirmDeviceKeyRequest, caller: AuthorityCaller)
        async throws(RainError) -> AuthorityConfirmDeviceKeyResponse
    {
        let key = try DevicePublicKey(wireBytes: request.devicePublicKey)
        let (deviceID, proof) = (request.deviceID, caller.proof)
        try Self.requireIdentifier(deviceID, field: "deviceId")
        guard proof.deviceID == deviceID, proof.contains(key) else { throw DeviceBinding.proofRequired() }
        let changed = try await store.confirmDeviceKey(deviceID: deviceID, key: key.wireBytes)
        logger.info("device.key_confirmed", ["device": deviceID, "key": key.keyID, "sessions": String(changed)])
        return AuthorityConfirmDeviceKeyResponse()
    }
}
