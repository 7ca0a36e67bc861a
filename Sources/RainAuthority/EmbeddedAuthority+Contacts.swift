import FoundationEssentials
import Glibc
import RainAuthorityAPI
import RainCore
import RainStore
import RainWire

/// Backup contacts: a live session attaches a verified email or phone number to its
/// account with the login-code machinery (a challenge of purpose `verify_contact`, bound to the
/// account). A contact belongs to at most one account: another account's contact is refused
/// (RAIN_302 `contact_owned_by_another_account`) inside the confirming transaction, never moved or
/// merged. The send answers the same whoever owns the contact (it delivers the code and counts
/// against the send limits), so only someone who reads the contact's codes learns that another
/// account owns it: a send is no oracle of which addresses have accounts. Verifying a contact
/// already on the account succeeds again (idempotent); a second contact of a kind is added beside
/// the first.
extension EmbeddedAuthority {
    /// The `details.reason` of a contact another account owns.
    public static let contactOwnedReason = "contact_owned_by_another_account"

    /// Sends a verification code (see `Authority.sendContactVerificationCode`), counted against
    /// the caller's source, or this daemon's uid for a caller in-process.
    public func sendContactVerificationCode(_ request: AuthoritySendContactVerificationRequest, caller: AuthorityCaller)
        async throws(RainError) -> SendCodeResult
    {
        guard let contact = request.contact else {
            throw RainError.invalid("the request names no contact", field: "contact")
        }
        try Self.requireNormalized(contact)
        try requireServed(request.appID)
        try Self.requireIdentifier(request.deviceID, field: "deviceId")
        let access = try await liveAccess(appID: request.appID, accessToken: request.accessToken, proof: caller.proof)
        let accountID = access.account.id
        // Who owns the contact is not looked at here: the confirm says it, after the right code.
        return try await issueCode(
            appID: request.appID, deviceID: request.deviceID, contact: contact, purpose: .verifyContact,
            targetAccountID: accountID, source: caller.source ?? localSource, deadline: caller.deadline)
    }

    /// Confirms a verification code (see `Authority.confirmContactVerification`), its wrong guesses
    /// counted against the caller's source, or this daemon's uid for a caller in-process. A repeat
    /// with the first confirm's idempotency key gets its outcome (the account with the contact,
    /// read again) instead of a used challenge; nothing is applied twice.
    public func confirmContactVerification(
        _ request: AuthorityConfirmContactVerificationRequest, caller: AuthorityCaller
    ) async throws(RainError) -> AccountInfo {
        let (appID, deviceID, accessToken) = (request.appID, request.deviceID, request.accessToken)
        let (challengeID, code, idempotencyKey) = (request.challengeID, request.code, request.idempotencyKey)
        let (proof, source) = (caller.proof, caller.source ?? localSource)
        let access = try await liveAccess(appID: appID, accessToken: accessToken, proof: proof)
        let accountID = access.account.id
        let now = clock.now
        let idempotency = try IdempotentCall(
            contactVerification: idempotencyKey, appID: appID, deviceID: deviceID, challengeID: challengeID,
            code: code, keys: keys)
        if let idempotency, let first = try await store.idempotentOutcome(keyHash: idempotency.keyHash, now: now) {
            return try await repeatedVerification(
                first, idempotency, appID: appID, accessToken: accessToken, accountID: accountID, proof: proof)
        }
        // A login challenge, or one sent for another device or account, is not this verification.
        guard let challenge = try await store.challenge(id: challengeID),
            challenge.appID == appID, challenge.deviceID == deviceID, challenge.purpose == .verifyContact,
            challenge.targetAccountID == accountID
        else {
            throw RainError.invalid(
                "no pending verification code; send a new one", field: "challengeId", reason: Self.noPendingCode)
        }
        do {
            // The session's device key: `liveAccess` checked that the caller proved it.
            try await checkCode(
                code, against: challenge, now: now,
                guesser: CodeGuesser(
                    deviceKey: access.session.devicePublicKey ?? [], appID: appID, deviceID: deviceID, source: source))
        } catch {
            // The first confirm with this key (on another instance, or another task) committed
            // after the key was looked up above: the challenge is used now, and its outcome answers.
            if let idempotency, challenge.state == .used,
                let first = try await store.idempotentOutcome(keyHash: idempotency.keyHash, now: now)
            {
                return try await repeatedVerification(
                    first, idempotency, appID: appID, accessToken: accessToken, accountID: accountID, proof: proof)
            }
            throw error
        }

        let outcome = try await store.completeContactVerification(
            ContactVerificationCompletion(
                challengeID: challenge.id, appID: appID, deviceID: deviceID, accountID: accountID,
                contact: challenge.contact, now: now,
                idempotency: try idempotency?.outcome(expiresAt: challenge.expiresAt)))
        switch outcome {
        case .repeated(let first):
            // A repeat that raced its first confirm: the first one won.
            guard let idempotency else {
                throw RainError(.internalError, "the verification could not be completed; try again")
            }
            return try await repeatedVerification(
                first, idempotency, appID: appID, accessToken: accessToken, accountID: accountID, proof: proof)
        case .challengeUnavailable(let current):
            throw Self.challengeTaken(current, now: now, code: "verification code", call: "verification")
        case .ownedByAnotherAccount:
            logger.info(
                "contact.refused",
                [
                    "app": appID, "account": accountID, "kind": challenge.contact.kindName,
                    "reason": Self.contactOwnedReason, "challenge": challenge.id,
                ])
            throw Self.contactOwned(challenge.contact)
        case .verified(let wasAlreadyAttached):
            logger.info(
                "contact.verified",
                [
                    "app": appID, "account": accountID, "kind": challenge.contact.kindName,
                    "contact": ContactRedaction.redacted(challenge.contact), "alreadyAttached": String(wasAlreadyAttached),
                ])
        }
        // Read again so the answer lists the new contact.
        return try await accountInfo(try await liveAccess(appID: appID, accessToken: accessToken, proof: proof))
    }

    /// The answer to a repeat of a verification that went through: the account as it is now (with
    /// the contact). RAIN_102 `idempotency_key_reused` for another call's key, or a verification
    /// of another account.
    private func repeatedVerification(
        _ first: IdempotentOutcome, _ idempotency: IdempotentCall, appID: String, accessToken: String,
        accountID: String, proof: DeviceProof
    ) async throws(RainError) -> AccountInfo {
        _ = try idempotency.open(first)
        guard first.accountID == accountID else { throw IdempotentCall.reused }
        logger.info("contact.repeated", ["app": appID, "account": accountID])
        return try await accountInfo(try await liveAccess(appID: appID, accessToken: accessToken, proof: proof))
    }

    /// RAIN_302 for a contact another account owns.
    static func contactOwned(_ contact: RainWalletContact) -> RainError {
        RainError(
            .refused,
            "this \(contact.kindName == "email" ? "email address" : "phone number") belongs to another account; "
                + "accounts are never merged: log in with it instead, or use another one",
            details: RainError.Details(reason: contactOwnedReason, field: contact.kindName))
    }
}
