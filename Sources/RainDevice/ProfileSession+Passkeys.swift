import RainAuthorityAPI
import RainCore
import RainWire

/// Passkey ceremonies: sign-up, login and add, each begun at the authority and finished with the
/// authenticator's response. One ceremony is pending per profile (`Challenges.passkey`); a new
/// begin replaces it.
extension ProfileSession {
    /// The profile's passkey domain, or RAIN_102 when there is none (every passkey call needs one).
    func requirePasskeyDomain() async throws(RainError) -> String {
        await restore()
        guard let passkeyDomain else {
            throw RainError.invalid(
                "profile \(runtime.name) has no passkey domain: set RainWalletConfig(passkeyDomain:) or \"passkeyDomain\" in the daemon's config",
                field: "passkeyDomain", reason: "no_passkey_domain")
        }
        return passkeyDomain
    }

    /// Begins a passkey sign-up: a new account and wallet when it finishes.
    /// - Throws: RAIN_102 without a passkey domain (`no_passkey_domain`) or while a session is live
    ///   (`session_live`: log out first).
    public func beginPasskeySignUp() async throws(RainError) -> BeginPasskeyResponse {
        let domain = try await requirePasskeyDomain()
        try requireNoSession()
        let ceremony = try await context.authority.beginPasskeyRegistration(
            beginRequest(domain: domain), caller: AuthorityCaller(holder: context.device))
        return remember(ceremony, kind: .signUp, domain: domain)
    }

    /// Begins a passkey login. Over a live code session the login replaces it when it finishes
    /// (so a user who logged in by code can switch to their passkey); over a live passkey session it
    /// is refused.
    /// - Throws: RAIN_102 without a passkey domain, or over a live passkey session
    ///   (`passkey_session_live`).
    public func beginPasskeyLogin() async throws(RainError) -> BeginPasskeyResponse {
        let domain = try await requirePasskeyDomain()
        try requireNoPasskeySession()
        let ceremony = try await context.authority.beginPasskeyAuthentication(
            beginRequest(domain: domain), caller: .anonymous)
        return remember(ceremony, kind: .login, domain: domain)
    }

    /// Begins adding a passkey to the live session's account.
    /// - Throws: RAIN_102 without a passkey domain; RAIN_201 without a live session.
    public func beginPasskeyAdd() async throws(RainError) -> BeginPasskeyResponse {
        let domain = try await requirePasskeyDomain()
        let request = beginRequest(domain: domain)
        let ceremony = try await withSession(what: "add a passkey", transientRetries: 0) {
            (authority, _, token, proof) async throws(RainError) in
            var withToken = request
            withToken.accessToken = token
            return try await authority.beginPasskeyRegistration(withToken, caller: AuthorityCaller(proof: proof))
        }
        return remember(ceremony, kind: .add, domain: domain)
    }

    /// Finishes this profile's pending ceremony with the authenticator's response. A sign-up or
    /// login stores its session exactly like a code login; an add leaves the session as it is.
    ///
    /// The finish carries an idempotency key per logical finish (this ceremony, this
    /// response). When its outcome is unknown (RAIN_501 `outcome_unknown`, RAIN_301) the ceremony
    /// stays pending and the key is kept, so the caller's repeat gets the first outcome (the same
    /// session), never a second one; any other answer ends the ceremony here.
    /// - Throws: RAIN_102 `no_passkey_domain` on a profile without a passkey domain;
    ///   `challenge_expired` when `ceremonyID` is not this profile's pending
    ///   ceremony (unknown, finished, cancelled or expired); the sign-up and login rules again
    ///   (a session may have started meanwhile); the authority's refusal of the response.
    public func finishPasskey(ceremonyID: String, responseJSON: String) async throws(RainError) -> FinishPasskeyResponse {
        // No ceremony can begin without a domain: the missing domain is what the client must fix.
        _ = try await requirePasskeyDomain()
        guard let ceremony = challenges.passkey, ceremony.id == ceremonyID else {
            throw RainError.invalid(
                "no such passkey ceremony is pending on this profile; begin a new one", field: "ceremonyId",
                reason: "challenge_expired")
        }
        let key = try idempotencyKey(.passkeyFinish, for: [ceremonyID, responseJSON])
        loginsInFlight += 1
        defer { loginsInFlight -= 1 }
        let request = PasskeyFinishRequest(
            appID: appID, deviceID: context.deviceID, ceremonyID: ceremonyID, responseJSON: responseJSON,
            devicePublicKey: context.device.signer.publicKey.wireBytes, idempotencyKey: key)
        do {
            let response = try await finish(ceremony, request)
            settle(.passkeyFinish, key: key)
            return response
        } catch {
            settle(.passkeyFinish, key: key, after: error)
            if !Self.isOutcomeUnknown(error) { endCeremony(ceremonyID) }
            throw error
        }
    }

    /// Sends the finish of `ceremony` and applies its outcome.
    private func finish(_ ceremony: PendingPasskey, _ request: PasskeyFinishRequest) async throws(RainError)
        -> FinishPasskeyResponse
    {
        switch ceremony.kind {
        case .signUp:
            try requireNoSession()
            guard let result = try await context.authority.finishPasskeyRegistration(request, caller: .anonymous).login else {
                throw RainError(.internalError, "the passkey sign-up returned no session")
            }
            endCeremony(request.ceremonyID)
            try await adopt(result, contact: nil, method: StoredSession.passkeyMethod)
            return FinishPasskeyResponse(session: runtime.snapshot(), isAccountCreated: true)
        case .login:
            try requireNoPasskeySession()
            let replaced = session
            // A login's answer must carry the login (an added passkey's carries none).
            guard let result = try await context.authority.finishPasskeyAuthentication(request, caller: .anonymous).login
            else {
                throw RainError(.provider, "the authority answered the passkey login without a session")
            }
            endCeremony(request.ceremonyID)
            try await adopt(result, contact: nil, method: StoredSession.passkeyMethod)
            if let replaced, replaced.refreshToken != result.tokens.refreshToken {
                // The code session this login replaced ends at the authority too (best effort;
                // the authority already replaced it when both belong to the same account).
                do {
                    _ = try await context.authority.revokeSession(
                        AuthorityRevokeSessionRequest(appID: appID, refreshToken: replaced.refreshToken),
                        caller: AuthorityCaller(holder: context.device))
                } catch {
                    logger.warning("passkey.replace_revoke_failed", ["profile": runtime.name, "error": error.code.description])
                }
            }
            return FinishPasskeyResponse(session: runtime.snapshot(), isAccountCreated: false)
        case .add:
            guard session != nil else { throw noSessionError() }
            _ = try await context.authority.finishPasskeyRegistration(request, caller: .anonymous)
            endCeremony(request.ceremonyID)
            logger.info("passkey.added", ["profile": runtime.name])
            return FinishPasskeyResponse(session: runtime.snapshot(), isAccountCreated: false)
        }
    }

    /// Cancels a ceremony (the client's authenticator was dismissed): it is consumed at the
    /// authority and the session is untouched. Unknown ceremonies succeed silently.
    /// - Throws: RAIN_102 `no_passkey_domain` on a profile without a passkey domain.
    public func cancelPasskey(ceremonyID: String) async throws(RainError) -> CancelPasskeyResponse {
        // Like every passkey call: without a domain there is nothing it could cancel.
        _ = try await requirePasskeyDomain()
        if challenges.passkey?.id == ceremonyID { challenges.passkey = nil }
        _ = try await context.authority.cancelPasskeyCeremony(
            AuthorityPasskeyCancelRequest(appID: appID, deviceID: context.deviceID, ceremonyID: ceremonyID),
            caller: .anonymous)
        logger.info("passkey.cancelled", ["profile": runtime.name])
        return CancelPasskeyResponse()
    }

    /// The ceremony finished: it is no longer this profile's pending one.
    private func endCeremony(_ id: String) {
        if challenges.passkey?.id == id { challenges.passkey = nil }
    }

    /// What the authority needs to begin a ceremony on `domain` (without an access token).
    private func beginRequest(domain: String) -> PasskeyBeginRequest {
        PasskeyBeginRequest(
            appID: appID, deviceID: context.deviceID, rpID: domain,
            origins: runtime.settings.passkeyOrigins(domain: domain))
    }

    /// Keeps the ceremony as this profile's pending one (a new begin replaces it).
    private func remember(_ ceremony: PasskeyCeremony, kind: PasskeyCeremonyKind, domain: String)
        -> BeginPasskeyResponse
    {
        challenges.passkey = PendingPasskey(id: ceremony.ceremonyID, kind: kind)
        logger.info("passkey.begin", ["profile": runtime.name, "kind": kind.rawValue])
        return BeginPasskeyResponse(
            ceremonyID: ceremony.ceremonyID, optionsJSON: ceremony.optionsJSON, origin: "https://" + domain,
            expiresAt: ceremony.expiresAt)
    }

    /// RAIN_102 `session_live` while a session is live (a sign-up needs a logged-out profile).
    private func requireNoSession() throws(RainError) {
        guard session == nil else {
            throw RainError.invalid(
                "a session is live on profile \(runtime.name); log out before signing up with a passkey",
                reason: "session_live")
        }
    }

    /// RAIN_102 `passkey_session_live` over a live passkey session.
    private func requireNoPasskeySession() throws(RainError) {
        guard session?.loginMethod != StoredSession.passkeyMethod else {
            throw RainError.invalid(
                "a passkey session is live on profile \(runtime.name); log out before logging in with a passkey again",
                reason: "passkey_session_live")
        }
    }
}
