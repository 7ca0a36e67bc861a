import FoundationEssentials
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainStore
import RainWebAuthn
import RainWire

/// Passkeys: the relying party runs here, where the credentials live.
///
/// A ceremony is a stored, single-use 32-byte challenge bound to the app, the device, its kind
/// (sign-up, add, login) and the rpId, expiring after `AuthoritySettings.passkeyCeremonyLifetime`.
/// The finish takes the ceremony before verifying, so a response can be presented once: a failed
/// verification, a replay and a cancel all leave it used.
///
/// A finish with an idempotency key claims the key with the ceremony, in the take's
/// transaction, and records its outcome with its effect: a repeat gets the first outcome (the same
/// account, wallet and tokens; nil after an add) instead of the used ceremony, and RAIN_501
/// `outcome_unknown` while the first finish still runs. A finish that fails releases its claim.
extension EmbeddedAuthority {
    /// Starts a registration (see `Authority.beginPasskeyRegistration`).
    public func beginPasskeyRegistration(_ request: PasskeyBeginRequest, caller: AuthorityCaller) async throws(RainError)
        -> PasskeyCeremony
    {
        let proof = caller.proof
        try requireServed(request.appID)
        try Self.requireCeremonyInput(request)
        var accountID: String?
        var userHandle = try RelyingParty.makeUserHandle()
        var name = "RainWallet account"
        var exclude: [[UInt8]] = []
        if !request.accessToken.isEmpty {
            let access = try await liveAccess(appID: request.appID, accessToken: request.accessToken, proof: proof)
            accountID = access.account.id
            let existing = try await store.passkeyCredentials(accountID: access.account.id)
            // One user handle per account, so an authenticator replaces rather than duplicates.
            if let handle = existing.first?.userHandle { userHandle = handle }
            exclude = existing.filter { $0.rpID == request.rpID }.map(\.credentialID)
            if let contact = access.contacts.first { name = contact.value }
        }
        let kind: PasskeyCeremonyKind = accountID == nil ? .signUp : .add
        let challenge = try RelyingParty.makeChallenge(byteCount: 32)
        let options = relyingParty(request).creationOptions(
            challenge: challenge,
            user: PublicKeyCredentialUserEntityJSON(id: userHandle, name: name, displayName: name),
            excludeCredentialIDs: exclude)
        return try await storeCeremony(
            request, kind: kind, challenge: challenge, userHandle: userHandle, accountID: accountID,
            optionsJSON: try options.jsonString())
    }

    /// Finishes a registration (see `Authority.finishPasskeyRegistration`).
    public func finishPasskeyRegistration(_ request: PasskeyFinishRequest, caller: AuthorityCaller)
        async throws(RainError) -> PasskeyFinishResult
    {
        let login = try await finishCeremony(request, kinds: [.signUp, .add]) {
            (first, idempotency, now) throws(RainError) in
            try idempotency.login(of: first, now: now)
        } finish: { (ceremony, deviceKey, idempotency) throws(RainError) in
            try await finishRegistration(request, ceremony: ceremony, deviceKey: deviceKey, idempotency: idempotency)
        }
        return PasskeyFinishResult(login: login)
    }

    private func finishRegistration(
        _ request: PasskeyFinishRequest, ceremony: NewPasskeyCeremony, deviceKey: DevicePublicKey?,
        idempotency: IdempotentCall?
    ) async throws(RainError) -> LoginResult? {
        let response = try RegistrationResponseJSON.decode(json: request.responseJSON)
        let rp = relyingParty(rpID: ceremony.rpID, origins: ceremony.origins)
        let verified = try rp.verifyRegistration(response, expectedChallenge: ceremony.challenge)
        let now = clock.now
        guard let userHandle = ceremony.userHandle else {
            throw RainError(.internalError, "a registration ceremony has no user handle")
        }
        var credential = PasskeyCredentialRecord(
            credentialID: verified.credentialID, accountID: ceremony.accountID ?? "", appID: request.appID,
            rpID: ceremony.rpID, publicKey: verified.publicKey.encoded, algorithm: verified.publicKey.algorithm.rawValue,
            signCount: verified.signCount, isBackupEligible: verified.isBackupEligible, isBackedUp: verified.isBackedUp,
            userHandle: userHandle, createdAt: now, lastUsedAt: nil,
            kind: PasskeyKind.classify(
                aaguid: verified.aaguid, attachment: response.authenticatorAttachment, transports: verified.transports
            ).rawValue)

        if ceremony.kind == .add, let accountID = ceremony.accountID {
            TouchedAccounts.note(accountID)
            try await store.addPasskeyCredential(
                credential, idempotency: try idempotency?.outcome(expiresAt: ceremony.expiresAt))
            logger.info(
                "passkey.added",
                ["app": request.appID, "account": accountID, "rp": ceremony.rpID, "device": request.deviceID])
            return nil
        }

        let accountID = try SecureRandom.identifier(prefix: "acct")
        let walletID = try SecureRandom.identifier(prefix: "wal")
        credential.accountID = accountID
        let (session, tokens) = try newSession(deviceKey: deviceKey, now: now)
        let record = try await store.completePasskeySignUp(
            PasskeySignUpCompletion(
                appID: request.appID, deviceID: request.deviceID, accountID: accountID, walletID: walletID,
                walletKeys: try newWalletKeyMaterial(walletID: walletID), credential: credential, session: session,
                now: now,
                idempotency: try idempotency?.outcome(of: tokens, issuedAt: now, expiresAt: ceremony.expiresAt)))
        logger.info(
            "passkey.signup",
            [
                "app": request.appID, "account": record.accountID, "rp": ceremony.rpID, "device": request.deviceID,
                "deviceBound": String(deviceKey != nil),
            ])
        return LoginResult(accountID: record.accountID, walletID: record.walletID, accountCreated: true, tokens: tokens)
    }

    /// Starts a login (see `Authority.beginPasskeyAuthentication`).
    public func beginPasskeyAuthentication(_ request: PasskeyBeginRequest, caller: AuthorityCaller)
        async throws(RainError) -> PasskeyCeremony
    {
        try requireServed(request.appID)
        try Self.requireCeremonyInput(request)
        let challenge = try RelyingParty.makeChallenge(byteCount: 32)
        let options = relyingParty(request).requestOptions(challenge: challenge)
        return try await storeCeremony(
            request, kind: .login, challenge: challenge, userHandle: nil, accountID: nil,
            optionsJSON: try options.jsonString())
    }

    /// Finishes a login (see `Authority.finishPasskeyAuthentication`).
    public func finishPasskeyAuthentication(_ request: PasskeyFinishRequest, caller: AuthorityCaller)
        async throws(RainError) -> PasskeyFinishResult
    {
        let login = try await finishCeremony(request, kinds: [.login]) { (first, idempotency, now) throws(RainError) in
            try idempotency.requiredLogin(of: first, now: now)
        } finish: { (ceremony, deviceKey, idempotency) throws(RainError) in
            try await finishAuthentication(request, ceremony: ceremony, deviceKey: deviceKey, idempotency: idempotency)
        }
        return PasskeyFinishResult(login: login)
    }

    private func finishAuthentication(
        _ request: PasskeyFinishRequest, ceremony: NewPasskeyCeremony, deviceKey: DevicePublicKey?,
        idempotency: IdempotentCall?
    ) async throws(RainError) -> LoginResult {
        let response = try AuthenticationResponseJSON.decode(json: request.responseJSON)
        guard
            let stored = try await store.passkeyCredential(
                id: response.rawId.bytes, appID: request.appID, rpID: ceremony.rpID)
        else {
            // A passkey of the domain the app used before it moved is on the account still; the
            // user needs to hear which domain it belongs to, not that it is unknown.
            if let other = try await store.passkeyCredentialDomains(id: response.rawId.bytes, appID: request.appID).first {
                throw RainError.webAuthn(
                    .credentialOtherDomain,
                    "this passkey was registered for \(other); the profile now uses \(ceremony.rpID): log in with a "
                        + "code, or with a passkey added for \(ceremony.rpID)", field: "rawId")
            }
            throw RainError.webAuthn(
                .credentialUnknown, "no passkey with this id is registered for \(ceremony.rpID)", field: "rawId")
        }
        let rp = relyingParty(rpID: ceremony.rpID, origins: ceremony.origins)
        let verified = try rp.verifyAuthentication(
            response, expectedChallenge: ceremony.challenge,
            credential: StoredCredential(
                id: stored.credentialID, publicKey: stored.publicKey, signCount: stored.signCount,
                isBackupEligible: stored.isBackupEligible, userHandle: stored.userHandle))
        let now = clock.now
        let (session, tokens) = try newSession(deviceKey: deviceKey, now: now)
        let record = try await store.completePasskeyLogin(
            PasskeyLoginCompletion(
                appID: request.appID, deviceID: request.deviceID, credentialID: verified.credentialID,
                rpID: ceremony.rpID, signCount: verified.signCount, isBackedUp: verified.isBackedUp, session: session,
                now: now,
                idempotency: try idempotency?.outcome(of: tokens, issuedAt: now, expiresAt: ceremony.expiresAt)))
        publishRevocations(of: record, appID: request.appID, deviceID: request.deviceID)
        logger.info(
            "passkey.login",
            [
                "app": request.appID, "account": record.accountID, "rp": ceremony.rpID, "device": request.deviceID,
                "revokedElsewhere": String(record.revokedElsewhereCount), "deviceBound": String(deviceKey != nil),
            ])
        return LoginResult(accountID: record.accountID, walletID: record.walletID, accountCreated: false, tokens: tokens)
    }

    /// Cancels a ceremony (see `Authority.cancelPasskeyCeremony`).
    public func cancelPasskeyCeremony(_ request: AuthorityPasskeyCancelRequest, caller: AuthorityCaller)
        async throws(RainError) -> AuthorityPasskeyCancelResponse
    {
        let (appID, deviceID, ceremonyID) = (request.appID, request.deviceID, request.ceremonyID)
        let take = try await store.takePasskeyCeremony(id: ceremonyID, appID: appID, deviceID: deviceID, now: clock.now)
        if case .taken = take {
            logger.info("passkey.cancelled", ["app": appID, "ceremony": ceremonyID, "device": deviceID])
        }
        return AuthorityPasskeyCancelResponse()
    }

    /// Removes one of the account's passkeys (see `Authority.removePasskey`).
    public func removePasskey(_ request: AuthorityRemovePasskeyRequest, caller: AuthorityCaller)
        async throws(RainError) -> AccountInfo
    {
        let access = try await liveAccess(appID: request.appID, accessToken: request.accessToken, proof: caller.proof)
        let unknown = RainError.unknownPasskey()
        guard let id = Base64URL.decode(request.credentialID), !id.isEmpty else { throw unknown }
        switch try await store.removePasskeyCredential(id: id, accountID: access.account.id) {
        case .removed:
            logger.info("passkey.removed", ["app": request.appID, "account": access.account.id])
        case .unknown:
            throw unknown
        case .lastLoginMethod:
            throw RainError.lastLoginMethod()
        }
        return try await accountInfo(access)
    }

    // MARK: - Helpers

    private func relyingParty(_ request: PasskeyBeginRequest) -> RelyingParty {
        relyingParty(rpID: request.rpID, origins: request.origins)
    }

    private func relyingParty(rpID: String, origins: [String]) -> RelyingParty {
        RelyingParty(
            rpID: rpID, rpName: rpID, allowedOrigins: Set(origins),
            timeoutMilliseconds: UInt32(clamping: settings.passkeyCeremonyLifetime.milliseconds))
    }

    private func storeCeremony(
        _ request: PasskeyBeginRequest, kind: PasskeyCeremonyKind, challenge: [UInt8], userHandle: [UInt8]?,
        accountID: String?, optionsJSON: String
    ) async throws(RainError) -> PasskeyCeremony {
        let now = clock.now
        let id = try SecureRandom.identifier(prefix: "pkc")
        let expiresAt = Date(unixMilliseconds: now.adding(settings.passkeyCeremonyLifetime).unixMilliseconds)
        try await store.insertPasskeyCeremony(
            NewPasskeyCeremony(
                id: id, appID: request.appID, deviceID: request.deviceID, kind: kind, rpID: request.rpID,
                origins: request.origins, challenge: challenge, userHandle: userHandle, accountID: accountID,
                createdAt: now, expiresAt: expiresAt))
        logger.info(
            "passkey.begin", ["app": request.appID, "kind": kind.rawValue, "rp": request.rpID, "ceremony": id])
        return PasskeyCeremony(ceremonyID: id, optionsJSON: optionsJSON, expiresAt: expiresAt)
    }

    /// How a finish's take went: the ceremony is its own, or a finish with its key came first.
    /// A finish: takes the ceremony (one of `kinds`) and runs `finish` on it, releasing the
    /// idempotency key's claim when it fails; a repeat of a finished call gets `repeated`'s answer
    /// from the first outcome.
    private func finishCeremony<Answer>(
        _ request: PasskeyFinishRequest, kinds: Set<PasskeyCeremonyKind>,
        repeated: (IdempotentOutcome, IdempotentCall, Date) throws(RainError) -> Answer,
        finish: (NewPasskeyCeremony, DevicePublicKey?, IdempotentCall?) async throws(RainError) -> Answer
    ) async throws(RainError) -> Answer {
        let deviceKey = try Self.deviceKey(request.devicePublicKey)
        let idempotency = try IdempotentCall(request, keys: keys)
        switch try await takeCeremony(request, kinds: kinds, idempotency: idempotency) {
        case .repeated(let first, let idempotency):
            logger.info("passkey.repeated", ["app": request.appID, "account": first.accountID, "device": request.deviceID])
            return try repeated(first, idempotency, clock.now)
        case .taken(let ceremony):
            do {
                return try await finish(ceremony, deviceKey, idempotency)
            } catch {
                await release(idempotency)
                throw error
            }
        }
    }

    private enum FinishTake {
        case taken(NewPasskeyCeremony)
        case repeated(IdempotentOutcome, IdempotentCall)
    }

    /// Takes the ceremony for a finish: RAIN_102 `challenge_expired` unless it is pending,
    /// unexpired, bound to this app and device, and of one of `kinds`; with an idempotency key, the
    /// first finish's outcome when there was one.
    private func takeCeremony(
        _ request: PasskeyFinishRequest, kinds: Set<PasskeyCeremonyKind>, idempotency: IdempotentCall?
    ) async throws(RainError) -> FinishTake {
        let take = try await store.takePasskeyCeremony(
            id: request.ceremonyID, appID: request.appID, deviceID: request.deviceID, now: clock.now,
            claim: idempotency?.claim)
        switch take {
        case .repeated(let first):
            guard let idempotency else { throw RainError(.internalError, "a take without a key found an outcome") }
            return .repeated(first, idempotency)
        case .taken(let ceremony) where kinds.contains(ceremony.kind):
            return .taken(ceremony)
        case .taken:
            throw RainError.webAuthn(
                .challengeExpired, "this ceremony is of another kind; begin a new one", field: "ceremonyId")
        case .unknown:
            throw RainError.webAuthn(.challengeExpired, "no such passkey ceremony; begin a new one", field: "ceremonyId")
        case .used:
            throw RainError.webAuthn(
                .challengeExpired, "the passkey ceremony was already finished or cancelled; begin a new one",
                field: "ceremonyId")
        case .expired:
            throw RainError.webAuthn(.challengeExpired, "the passkey ceremony expired; begin a new one", field: "ceremonyId")
        }
    }

    /// Forgets a failed finish's claim on its key, so a repeat hears that the ceremony is
    /// used rather than still running (best effort: the claim ends with the ceremony anyway).
    private func release(_ idempotency: IdempotentCall?) async {
        guard let idempotency else { return }
        do {
            try await store.releaseIdempotentClaim(keyHash: idempotency.keyHash)
        } catch {
            logger.warning("passkey.release_failed", ["code": error.code.description])
        }
    }

    /// A new session's hashes and tokens.
    private func newSession(deviceKey: DevicePublicKey?, now: Date) throws(RainError) -> (NewSession, SessionTokens) {
        let accessToken = "rwa_" + (try SecureRandom.token())
        let refreshToken = "rwr_" + (try SecureRandom.token())
        let session = NewSession(
            id: try SecureRandom.identifier(prefix: "ses"), accessHash: keys.tokenHash(accessToken),
            refreshHash: keys.tokenHash(refreshToken), accessExpiresAt: now.adding(settings.accessTokenLifetime),
            devicePublicKey: deviceKey?.wireBytes)
        return (
            session,
            SessionTokens(accessToken: accessToken, refreshToken: refreshToken, accessLifetime: settings.accessTokenLifetime)
        )
    }

    private static func requireCeremonyInput(_ request: PasskeyBeginRequest) throws(RainError) {
        try requireIdentifier(request.appID, field: "appId")
        try requireIdentifier(request.deviceID, field: "deviceId")
        try requireIdentifier(request.rpID, field: "rpId")
        guard !request.origins.isEmpty, request.origins.allSatisfy({ !$0.isEmpty && !$0.contains("\n") }) else {
            throw RainError.invalid("a passkey ceremony needs at least one origin", field: "origins")
        }
    }
}
