import RainCore
import RainCrypto

/// `discouraged`, `preferred` or `required` (`UserVerificationRequirement`).
public enum UserVerificationRequirement: String, Sendable, Hashable, Codable, CaseIterable {
    /// The RP does not want user verification.
    case discouraged
    /// The RP prefers user verification but accepts its absence.
    case preferred
    /// The RP refuses a ceremony without user verification (the UV flag).
    case required
}

/// A credential that passed registration: what to store in the account's credential record.
public struct VerifiedCredential: Sendable {
    /// The credential ID (`rawId`), at most 1023 bytes. The caller must refuse one already
    /// registered to any account (§7.1 step 26).
    public var credentialID: [UInt8]
    /// The credential public key; store `publicKey.encoded` (COSE_Key) and `publicKey.algorithm`.
    public var publicKey: COSEPublicKey
    /// The signature counter at registration.
    public var signCount: UInt32
    /// The authenticator's AAGUID (16 bytes; zeros for most passkey providers).
    public var aaguid: [UInt8]
    /// BE: the credential may be synced to other devices. Fixed for the credential's lifetime.
    public var isBackupEligible: Bool
    /// BS: the credential is backed up now.
    public var isBackedUp: Bool
    /// UV: the user was verified.
    public var isUserVerified: Bool
    /// The attestation format: `none` or `packed` (self attestation).
    public var attestationFormat: String
    /// The transports the client reported, if any.
    public var transports: [String]
}

/// What the relying party stored for a credential, as needed to verify an assertion.
public struct StoredCredential: Sendable {
    /// The credential ID.
    public var id: [UInt8]
    /// The COSE_Key bytes stored at registration (`VerifiedCredential.publicKey.encoded`).
    public var publicKey: [UInt8]
    /// The last accepted signature counter.
    public var signCount: UInt32
    /// BE as registered.
    public var isBackupEligible: Bool
    /// The user handle of the account that owns the credential; when set, a response that carries a
    /// different `userHandle` is refused.
    public var userHandle: [UInt8]?

    /// Creates the record.
    public init(id: [UInt8], publicKey: [UInt8], signCount: UInt32, isBackupEligible: Bool, userHandle: [UInt8]? = nil) {
        self.id = id
        self.publicKey = publicKey
        self.signCount = signCount
        self.isBackupEligible = isBackupEligible
        self.userHandle = userHandle
    }
}

/// An assertion that passed authentication: the state to write back to the credential record.
public struct VerifiedAssertion: Sendable {
    /// The credential ID.
    public var credentialID: [UInt8]
    /// The new signature counter to store.
    public var signCount: UInt32
    /// BS now: store it.
    public var isBackedUp: Bool
    /// UV: the user was verified.
    public var isUserVerified: Bool
    /// The user handle the authenticator returned, if any.
    public var userHandle: [UInt8]?
}

/// A WebAuthn relying party: builds ceremony options (begin) and verifies responses (finish) with
/// every check of WebAuthn §7.1 and §7.2 that applies to passkeys with `none` or `packed` self
/// attestation.
///
/// Pure: it keeps no state, stores nothing and reads no clock. The caller keeps each ceremony's
/// challenge (random, single use, with an expiry), looks up stored credentials, refuses credential
/// IDs already registered, and writes back sign counts.
///
/// Every refusal is RAIN_102 whose `details.reason` is a ``WebAuthnFailure`` raw value naming the
/// check, and whose message says what failed.
public struct RelyingParty: Sendable {
    /// The RP ID: the passkey domain, for example `example.com`.
    public var rpID: String
    /// A name for people (shown by some authenticators).
    public var rpName: String
    /// The exact origins accepted in `clientDataJSON.origin`; see ``origins(domain:androidCertificateSHA256:)``.
    public var allowedOrigins: Set<String>
    /// The algorithms offered in `pubKeyCredParams` and accepted at registration, preferred first.
    public var algorithms: [COSEAlgorithm]
    /// User verification asked for; `required` also makes the verifier require the UV flag.
    public var userVerification: UserVerificationRequirement
    /// The ceremony timeout offered to clients, in milliseconds.
    public var timeoutMilliseconds: UInt32

    /// Creates a relying party.
    /// - Parameters:
    ///   - rpID: the passkey domain.
    ///   - rpName: a name for people.
    ///   - allowedOrigins: accepted origins (`https://<rpID>`, Android app origins).
    ///   - algorithms: offered algorithms; ES256, EdDSA and RS256 by default.
    ///   - userVerification: `preferred` by default.
    ///   - timeoutMilliseconds: 5 minutes by default.
    public init(
        rpID: String, rpName: String, allowedOrigins: Set<String>, algorithms: [COSEAlgorithm] = COSEAlgorithm.supported,
        userVerification: UserVerificationRequirement = .preferred, timeoutMilliseconds: UInt32 = 300_000
    ) {
        self.rpID = rpID
        self.rpName = rpName
        self.allowedOrigins = allowedOrigins
        self.algorithms = algorithms
        self.userVerification = userVerification
        self.timeoutMilliseconds = timeoutMilliseconds
    }

    // MARK: - Begin

    /// A fresh random challenge.
    /// - Parameter byteCount: at least 16; 32 by default.
    /// - Throws: RAIN_102 for fewer than 16 bytes; RAIN_502 when the generator fails.
    public static func makeChallenge(byteCount: Int = 32) throws(RainError) -> [UInt8] {
        guard byteCount >= 16 else { throw RainError.invalid("a challenge has at least 16 bytes", field: "byteCount") }
        return try SecureRandom.bytes(count: byteCount)
    }

    /// A fresh random user handle (32 bytes): opaque, never personal data, at most 64 bytes by spec.
    /// - Throws: RAIN_502 when the generator fails.
    public static func makeUserHandle() throws(RainError) -> [UInt8] {
        try SecureRandom.bytes(count: 32)
    }

    /// The origins of a passkey domain: `https://<domain>` and, for each Android signing
    /// certificate's SHA-256 fingerprint, `android:apk-key-hash:<base64url of the 32 bytes>`.
    public static func origins(domain: String, androidCertificateSHA256: [[UInt8]] = []) -> Set<String> {
        var origins: Set<String> = ["https://" + domain]
        for fingerprint in androidCertificateSHA256 { origins.insert(androidOrigin(certificateSHA256: fingerprint)) }
        return origins
    }

    /// `android:apk-key-hash:<base64url>` for a signing certificate's SHA-256 fingerprint.
    public static func androidOrigin(certificateSHA256: [UInt8]) -> String {
        "android:apk-key-hash:" + Base64URL.encode(certificateSHA256)
    }

    /// Parses a SHA-256 certificate fingerprint as printed by `keytool` or the Play Console
    /// (`AB:CD:…`, 32 colon-separated hex pairs) or as 64 hex digits.
    /// - Returns: the 32 bytes, or nil when the text is neither form.
    public static func certificateSHA256(fingerprint: String) -> [UInt8]? {
        let digits =
            fingerprint.contains(":")
            ? fingerprint.split(separator: ":", omittingEmptySubsequences: false)
                .map(String.init) : [fingerprint]
        if digits.count > 1, !digits.allSatisfy({ $0.count == 2 }) { return nil }
        guard let bytes = Hex.decode(digits.joined()), bytes.count == 32 else { return nil }
        return bytes
    }

    /// Registration options (`PublicKeyCredentialCreationOptionsJSON`) for a new passkey:
    /// discoverable (`residentKey: required`), this RP's algorithms, attestation `none`.
    /// - Parameters:
    ///   - challenge: from ``makeChallenge(byteCount:)``; keep it to verify the response.
    ///   - user: the account's user handle and names.
    ///   - excludeCredentialIDs: the account's existing credential IDs, so an authenticator that
    ///     already holds one does not create another.
    public func creationOptions(
        challenge: [UInt8], user: PublicKeyCredentialUserEntityJSON, excludeCredentialIDs: [[UInt8]] = []
    ) -> PublicKeyCredentialCreationOptionsJSON {
        PublicKeyCredentialCreationOptionsJSON(
            rp: PublicKeyCredentialRpEntity(id: rpID, name: rpName), user: user, challenge: challenge,
            pubKeyCredParams: algorithms.map { PublicKeyCredentialParameters(alg: $0) }, timeout: timeoutMilliseconds,
            excludeCredentials: excludeCredentialIDs.map { PublicKeyCredentialDescriptorJSON(id: $0) },
            authenticatorSelection: AuthenticatorSelectionCriteria(
                residentKey: "required", requireResidentKey: true, userVerification: userVerification.rawValue),
            attestation: "none")
    }

    /// Authentication options (`PublicKeyCredentialRequestOptionsJSON`).
    /// - Parameters:
    ///   - challenge: from ``makeChallenge(byteCount:)``; keep it to verify the response.
    ///   - allowCredentialIDs: empty for a discoverable login (the user picks a passkey);
    ///     the account's credential IDs when the account is already known.
    public func requestOptions(challenge: [UInt8], allowCredentialIDs: [[UInt8]] = []) -> PublicKeyCredentialRequestOptionsJSON {
        PublicKeyCredentialRequestOptionsJSON(
            challenge: challenge, timeout: timeoutMilliseconds, rpId: rpID,
            allowCredentials: allowCredentialIDs.map { PublicKeyCredentialDescriptorJSON(id: $0) },
            userVerification: userVerification.rawValue)
    }

    // MARK: - Finish

    /// Verifies a registration response against this relying party; see
    /// ``verifyRegistration(response:expectedChallenge:rpID:allowedOrigins:allowedAlgorithms:requireUserVerification:)``.
    public func verifyRegistration(
        _ response: RegistrationResponseJSON, expectedChallenge: [UInt8]
    ) throws(RainError) -> VerifiedCredential {
        try Self.verifyRegistration(
            response: response, expectedChallenge: expectedChallenge, rpID: rpID, allowedOrigins: allowedOrigins,
            allowedAlgorithms: algorithms.map(\.rawValue), requireUserVerification: userVerification == .required)
    }

    /// Verifies an authentication response against this relying party; see
    /// ``verifyAuthentication(response:expectedChallenge:rpID:allowedOrigins:credential:requireUserVerification:allowCredentialIDs:)``.
    public func verifyAuthentication(
        _ response: AuthenticationResponseJSON, expectedChallenge: [UInt8], credential: StoredCredential,
        allowCredentialIDs: [[UInt8]] = []
    ) throws(RainError) -> VerifiedAssertion {
        try Self.verifyAuthentication(
            response: response, expectedChallenge: expectedChallenge, rpID: rpID, allowedOrigins: allowedOrigins,
            credential: credential, requireUserVerification: userVerification == .required,
            allowCredentialIDs: allowCredentialIDs)
    }

    /// Verifies a registration response (WebAuthn §7.1).
    ///
    /// Checks, in order (each failure's `details.reason` in parentheses): `type` is `public-key`
    /// (`credential_type_invalid`); `id` is base64url of `rawId` (`id_mismatch`); `clientDataJSON`
    /// parses (`malformed_client_data`), its `type` is `webauthn.create` (`client_data_type_mismatch`),
    /// its `challenge` is the expected one, compared in constant time (`challenge_mismatch`), its
    /// `origin` is allowed (`origin_not_allowed`), `crossOrigin` is absent or false
    /// (`cross_origin_not_allowed`) and there is no `topOrigin` (`top_origin_unexpected`); the
    /// attestation object and authenticator data parse (`malformed_attestation_object`,
    /// `malformed_authenticator_data`); `rpIdHash` is SHA-256 of `rpID` (`rp_id_hash_mismatch`); UP
    /// is set (`user_not_present`); UV is set when required (`user_not_verified`); BS is not set
    /// without BE (`backup_state_without_eligibility`); AT is set with attested credential data
    /// (`attested_credential_data_missing`); the credential ID has at most 1023 bytes
    /// (`credential_id_too_long`) and equals `rawId` (`credential_id_mismatch`); the COSE key parses
    /// and is on its curve (`malformed_public_key`, `unsupported_public_key`,
    /// `public_key_not_on_curve`); its algorithm was offered (`algorithm_not_allowed`) and matches
    /// `response.publicKeyAlgorithm` when present (`public_key_algorithm_mismatch`);
    /// `response.authenticatorData`, when present, is the attestation object's
    /// (`authenticator_data_mismatch`); the attestation is `none` with an empty statement
    /// (`attestation_statement_not_empty`) or `packed` self attestation
    /// (`attestation_certificate_unsupported` for `x5c`, `malformed_attestation_statement`,
    /// `attestation_algorithm_mismatch`, `attestation_signature_invalid`), nothing else
    /// (`attestation_format_unsupported`).
    ///
    /// Not checked here (the caller's part): that the challenge is live and unused, and that the
    /// credential ID is not registered yet.
    /// - Parameters:
    ///   - response: the decoded response (see ``WebAuthnJSONForm/decode(json:)``).
    ///   - expectedChallenge: the challenge sent in the options.
    ///   - rpID: the RP ID.
    ///   - allowedOrigins: exact origins accepted.
    ///   - allowedAlgorithms: the COSE algorithms offered in `pubKeyCredParams`.
    ///   - requireUserVerification: whether UV must be set.
    /// - Returns: the credential to store.
    /// - Throws: RAIN_102 with one of the reasons above.
    public static func verifyRegistration(
        response: RegistrationResponseJSON, expectedChallenge: [UInt8], rpID: String, allowedOrigins: Set<String>,
        allowedAlgorithms: [Int], requireUserVerification: Bool
    ) throws(RainError) -> VerifiedCredential {
        try checkCredentialIdentity(type: response.type, id: response.id, rawID: response.rawId.bytes)
        let clientDataJSON = response.response.clientDataJSON.bytes
        try checkClientData(
            clientDataJSON, expectedType: CollectedClientData.createType, expectedChallenge: expectedChallenge,
            allowedOrigins: allowedOrigins)

        let attestation = try AttestationObject(parsing: response.response.attestationObject.bytes)
        let authData = attestation.authenticatorData
        try checkAuthenticatorData(authData, rpID: rpID, requireUserVerification: requireUserVerification)

        guard authData.flags.contains(.attestedCredentialData), let attested = authData.attestedCredentialData else {
            throw RainError.webAuthn(
                .attestedCredentialDataMissing, "the authenticator data has no attested credential data (AT is not set)")
        }
        guard attested.credentialID.count <= 1023 else {
            throw RainError.webAuthn(
                .credentialIDTooLong, "the credential ID has \(attested.credentialID.count) bytes, more than 1023")
        }
        guard attested.credentialID == response.rawId.bytes else {
            throw RainError.webAuthn(
                .credentialIDMismatch, "rawId differs from the credential ID in the authenticator data", field: "rawId")
        }
        let publicKey = try COSEPublicKey(encoded: attested.publicKeyBytes)
        guard allowedAlgorithms.contains(publicKey.algorithm.rawValue) else {
            throw RainError.webAuthn(
                .algorithmNotAllowed, "the credential uses \(publicKey.algorithm), which was not offered")
        }
        if let claimed = response.response.publicKeyAlgorithm, claimed != publicKey.algorithm.rawValue {
            throw RainError.webAuthn(
                .publicKeyAlgorithmMismatch,
                "response.publicKeyAlgorithm is \(claimed) but the credential key is \(publicKey.algorithm)",
                field: "response.publicKeyAlgorithm")
        }
        if let copy = response.response.authenticatorData, copy.bytes != attestation.authenticatorDataBytes {
            throw RainError.webAuthn(
                .authenticatorDataMismatch, "response.authenticatorData differs from the attestation object's",
                field: "response.authenticatorData")
        }
        try checkAttestationStatement(
            attestation, publicKey: publicKey, clientDataHash: SHA256.hash(clientDataJSON))

        return VerifiedCredential(
            credentialID: attested.credentialID, publicKey: publicKey, signCount: authData.signCount,
            aaguid: attested.aaguid, isBackupEligible: authData.flags.contains(.backupEligible),
            isBackedUp: authData.flags.contains(.backupState), isUserVerified: authData.flags.contains(.userVerified),
            attestationFormat: attestation.format, transports: response.response.transports ?? [])
    }

    /// Verifies an authentication response (WebAuthn §7.2) against the stored credential it names.
    ///
    /// Checks, in order (each failure's `details.reason` in parentheses): `type` is `public-key`
    /// (`credential_type_invalid`); `id` is base64url of `rawId` (`id_mismatch`); `rawId` is the
    /// stored credential's ID (`credential_mismatch`); it is in `allowCredentialIDs` when that is not
    /// empty (`credential_not_allowed`); `userHandle`, when both it and the stored one are present,
    /// matches (`user_handle_mismatch`); `clientDataJSON` as for registration, with type
    /// `webauthn.get`; the authenticator data parses (`malformed_authenticator_data`); `rpIdHash`, UP,
    /// UV and BS-without-BE as for registration; BE is as registered (`backup_eligibility_changed`);
    /// the signature over `authenticatorData ‖ SHA-256(clientDataJSON)` verifies with the stored key
    /// (`signature_invalid`); when either counter is non-zero, the new one is greater than the stored
    /// one (`sign_count_regression`).
    /// - Parameters:
    ///   - response: the decoded response; look the credential up by `response.rawId.bytes` (and the
    ///     RP ID) first.
    ///   - expectedChallenge: the challenge sent in the options.
    ///   - rpID: the RP ID.
    ///   - allowedOrigins: exact origins accepted.
    ///   - credential: the stored credential.
    ///   - requireUserVerification: whether UV must be set.
    ///   - allowCredentialIDs: the options' `allowCredentials`, empty when none were named.
    /// - Returns: the state to write back (sign count, backup state).
    /// - Throws: RAIN_102 with one of the reasons above, or a key error if the stored key is corrupt.
    public static func verifyAuthentication(
        response: AuthenticationResponseJSON, expectedChallenge: [UInt8], rpID: String, allowedOrigins: Set<String>,
        credential: StoredCredential, requireUserVerification: Bool, allowCredentialIDs: [[UInt8]] = []
    ) throws(RainError) -> VerifiedAssertion {
        let rawID = response.rawId.bytes
        try checkCredentialIdentity(type: response.type, id: response.id, rawID: rawID)
        guard rawID == credential.id else {
            throw RainError.webAuthn(.credentialMismatch, "the response is for another credential", field: "rawId")
        }
        if !allowCredentialIDs.isEmpty, !allowCredentialIDs.contains(rawID) {
            throw RainError.webAuthn(
                .credentialNotAllowed, "the credential is not one of those allowed for this ceremony", field: "rawId")
        }
        // Some clients send an empty string for "no user handle".
        let userHandle = response.response.userHandle.flatMap { $0.bytes.isEmpty ? nil : $0.bytes }
        if let userHandle, let expected = credential.userHandle, userHandle != expected {
            throw RainError.webAuthn(
                .userHandleMismatch, "userHandle is not the handle of the credential's account",
                field: "response.userHandle")
        }
        let clientDataJSON = response.response.clientDataJSON.bytes
        try checkClientData(
            clientDataJSON, expectedType: CollectedClientData.getType, expectedChallenge: expectedChallenge,
            allowedOrigins: allowedOrigins)

        let authDataBytes = response.response.authenticatorData.bytes
        let authData = try AuthenticatorData(parsing: authDataBytes)
        try checkAuthenticatorData(authData, rpID: rpID, requireUserVerification: requireUserVerification)
        guard authData.flags.contains(.backupEligible) == credential.isBackupEligible else {
            throw RainError.webAuthn(
                .backupEligibilityChanged,
                "the backup eligibility (BE) flag differs from the one registered with the credential")
        }

        let publicKey = try COSEPublicKey(encoded: credential.publicKey)
        let signed = authDataBytes + SHA256.hash(clientDataJSON)
        guard publicKey.isValidSignature(response.response.signature.bytes, for: signed) else {
            throw RainError.webAuthn(
                .signatureInvalid, "the assertion signature does not verify with the credential's \(publicKey.algorithm) key",
                field: "response.signature")
        }
        if authData.signCount != 0 || credential.signCount != 0, authData.signCount <= credential.signCount {
            throw RainError.webAuthn(
                .signCountRegression,
                "the signature counter went from \(credential.signCount) to \(authData.signCount): the authenticator may be cloned"
            )
        }
        return VerifiedAssertion(
            credentialID: rawID, signCount: authData.signCount, isBackedUp: authData.flags.contains(.backupState),
            isUserVerified: authData.flags.contains(.userVerified), userHandle: userHandle)
    }

    // MARK: - Checks shared by both ceremonies

    private static func checkCredentialIdentity(type: String, id: String, rawID: [UInt8]) throws(RainError) {
        guard type == "public-key" else {
            throw RainError.webAuthn(
                .credentialTypeInvalid, "the credential type is \"\(type)\", not \"public-key\"", field: "type")
        }
        guard let decoded = Base64URL.decode(id), decoded == rawID else {
            throw RainError.webAuthn(.idMismatch, "id is not the base64url encoding of rawId", field: "id")
        }
    }

    private static func checkClientData(
        _ bytes: [UInt8], expectedType: String, expectedChallenge: [UInt8], allowedOrigins: Set<String>
    ) throws(RainError) {
        let clientData = try CollectedClientData(parsing: bytes)
        guard clientData.type == expectedType else {
            throw RainError.webAuthn(
                .clientDataTypeMismatch, "clientDataJSON.type is \"\(clientData.type)\", not \"\(expectedType)\"")
        }
        guard let challenge = clientData.challengeBytes, !expectedChallenge.isEmpty,
            constantTimeEquals(challenge, expectedChallenge)
        else {
            throw RainError.webAuthn(.challengeMismatch, "clientDataJSON.challenge is not this ceremony's challenge")
        }
        guard allowedOrigins.contains(clientData.origin) else {
            throw RainError.webAuthn(.originNotAllowed, "origin \"\(clientData.origin)\" is not allowed for this domain")
        }
        guard clientData.crossOrigin != true else {
            throw RainError.webAuthn(.crossOriginNotAllowed, "the ceremony ran in a cross-origin frame (crossOrigin is true)")
        }
        if let top = clientData.topOrigin {
            throw RainError.webAuthn(.topOriginUnexpected, "unexpected topOrigin \"\(top)\": framing is not allowed")
        }
    }

    private static func checkAuthenticatorData(
        _ authData: AuthenticatorData, rpID: String, requireUserVerification: Bool
    ) throws(RainError) {
        guard constantTimeEquals(authData.rpIDHash, SHA256.hash(Array(rpID.utf8))) else {
            throw RainError.webAuthn(.rpIDHashMismatch, "the authenticator data is for another RP ID than \(rpID)")
        }
        guard authData.flags.contains(.userPresent) else {
            throw RainError.webAuthn(.userNotPresent, "the user-present (UP) flag is not set")
        }
        if requireUserVerification, !authData.flags.contains(.userVerified) {
            throw RainError.webAuthn(.userNotVerified, "user verification is required and the UV flag is not set")
        }
        if authData.flags.contains(.backupState), !authData.flags.contains(.backupEligible) {
            throw RainError.webAuthn(
                .backupStateWithoutEligibility, "the backup state (BS) flag is set without backup eligibility (BE)")
        }
    }

    private static func checkAttestationStatement(
        _ attestation: AttestationObject, publicKey: COSEPublicKey, clientDataHash: [UInt8]
    ) throws(RainError) {
        let entries = attestation.statement.mapEntries ?? []
        switch attestation.format {
        case "none":
            guard entries.isEmpty else {
                throw RainError.webAuthn(.attestationStatementNotEmpty, "attestation \"none\" with a non-empty attStmt")
            }
        case "packed":
            if attestation.statement["x5c"] != nil {
                throw RainError.webAuthn(
                    .attestationCertificateUnsupported,
                    "packed attestation with a certificate chain (x5c) is not accepted: only self attestation or \"none\"; "
                        + "request attestation \"none\"")
            }
            let known: Set<CBORValue> = [.text("alg"), .text("sig")]
            guard entries.allSatisfy({ known.contains($0.key) }),
                let alg = attestation.statement["alg"]?.integerValue,
                let signature = attestation.statement["sig"]?.bytesValue
            else {
                throw RainError.webAuthn(
                    .malformedAttestationStatement, "a packed attStmt must hold exactly an integer alg and a byte-string sig")
            }
            guard alg == Int64(publicKey.algorithm.rawValue) else {
                throw RainError.webAuthn(
                    .attestationAlgorithmMismatch,
                    "packed self attestation uses algorithm \(alg) but the credential key is \(publicKey.algorithm)")
            }
            guard publicKey.isValidSignature(signature, for: attestation.authenticatorDataBytes + clientDataHash) else {
                throw RainError.webAuthn(
                    .attestationSignatureInvalid, "the packed self-attestation signature does not verify with the credential key")
            }
        default:
            throw RainError.webAuthn(
                .attestationFormatUnsupported,
                "attestation format \"\(attestation.format)\" is not accepted: only \"none\" and packed self attestation")
        }
    }
}
