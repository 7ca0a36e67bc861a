import RainCore

/// Why a WebAuthn input was refused: the stable `details.reason` of the RAIN_102 error, one per check.
///
/// Callers and tests match on these values, never on the message.
public enum WebAuthnFailure: String, Sendable, Hashable, CaseIterable {
    // Malformed input.
    /// The response or options JSON does not decode, or a base64url field is not base64url.
    case malformedResponse = "malformed_response"
    /// `clientDataJSON` is not UTF-8 JSON with string `type`, `challenge` and `origin`.
    case malformedClientData = "malformed_client_data"
    /// CBOR is truncated, has trailing bytes, exceeds a limit, uses indefinite lengths, tags,
    /// floats, duplicate map keys or non-minimal heads, or is not valid UTF-8 where text is required.
    case malformedCBOR = "malformed_cbor"
    /// The attestation object is not a map with text `fmt`, map `attStmt` and bytes `authData`.
    case malformedAttestationObject = "malformed_attestation_object"
    /// The authenticator data is too short, too long, or its flags disagree with its contents.
    case malformedAuthenticatorData = "malformed_authenticator_data"
    /// The COSE key lacks a required parameter or has one of the wrong type or length.
    case malformedPublicKey = "malformed_public_key"
    /// The COSE key type, algorithm or curve is not ES256 (EC2 P-256), EdDSA (OKP Ed25519) or
    /// RS256 (RSA, 2048–8192 bits).
    case unsupportedPublicKey = "unsupported_public_key"
    /// The public key's point is not on its curve.
    case publicKeyNotOnCurve = "public_key_not_on_curve"

    // Checks of §7.1 and §7.2.
    /// The credential `type` is not `public-key`.
    case credentialTypeInvalid = "credential_type_invalid"
    /// The credential `id` is not the base64url encoding of `rawId`.
    case idMismatch = "id_mismatch"
    /// `clientDataJSON.type` is not `webauthn.create` (registration) or `webauthn.get` (authentication).
    case clientDataTypeMismatch = "client_data_type_mismatch"
    /// `clientDataJSON.challenge` is not the challenge of this ceremony.
    case challengeMismatch = "challenge_mismatch"
    /// `clientDataJSON.origin` is not one of the allowed origins.
    case originNotAllowed = "origin_not_allowed"
    /// `clientDataJSON.crossOrigin` is true: the ceremony ran in a cross-origin frame.
    case crossOriginNotAllowed = "cross_origin_not_allowed"
    /// `clientDataJSON.topOrigin` is present: this relying party does not expect to be framed.
    case topOriginUnexpected = "top_origin_unexpected"
    /// The authenticator data's `rpIdHash` is not SHA-256 of the RP ID.
    case rpIDHashMismatch = "rp_id_hash_mismatch"
    /// The UP (user present) flag is not set.
    case userNotPresent = "user_not_present"
    /// User verification is required and the UV flag is not set.
    case userNotVerified = "user_not_verified"
    /// The BS (backup state) flag is set without the BE (backup eligible) flag.
    case backupStateWithoutEligibility = "backup_state_without_eligibility"
    /// The BE flag differs from the one stored when the credential was registered.
    case backupEligibilityChanged = "backup_eligibility_changed"
    /// Registration: the AT flag is not set or there is no attested credential data.
    case attestedCredentialDataMissing = "attested_credential_data_missing"
    /// The credential ID is longer than 1023 bytes.
    case credentialIDTooLong = "credential_id_too_long"
    /// Registration: `rawId` differs from the credential ID in the authenticator data.
    case credentialIDMismatch = "credential_id_mismatch"
    /// The credential key's algorithm is not among those offered in `pubKeyCredParams`.
    case algorithmNotAllowed = "algorithm_not_allowed"
    /// `response.publicKeyAlgorithm` differs from the algorithm of the credential key.
    case publicKeyAlgorithmMismatch = "public_key_algorithm_mismatch"
    /// `response.authenticatorData` differs from the authenticator data in the attestation object.
    case authenticatorDataMismatch = "authenticator_data_mismatch"
    /// The attestation format is neither `none` nor `packed`.
    case attestationFormatUnsupported = "attestation_format_unsupported"
    /// Format `none` with a non-empty attestation statement.
    case attestationStatementNotEmpty = "attestation_statement_not_empty"
    /// A `packed` statement without an integer `alg` and a byte-string `sig`, or with unknown members.
    case malformedAttestationStatement = "malformed_attestation_statement"
    /// A `packed` statement with a certificate chain (`x5c`): only self attestation is accepted.
    case attestationCertificateUnsupported = "attestation_certificate_unsupported"
    /// A `packed` self attestation whose `alg` is not the credential key's algorithm.
    case attestationAlgorithmMismatch = "attestation_algorithm_mismatch"
    /// A `packed` self-attestation signature that does not verify with the credential key.
    case attestationSignatureInvalid = "attestation_signature_invalid"
    /// Authentication: the response names a different credential than the stored one it is checked against.
    case credentialMismatch = "credential_mismatch"
    /// Authentication: the credential is not in the ceremony's `allowCredentials`.
    case credentialNotAllowed = "credential_not_allowed"
    /// Authentication: `userHandle` is not the user handle of the credential's account.
    case userHandleMismatch = "user_handle_mismatch"
    /// Authentication: the assertion signature does not verify with the stored key.
    case signatureInvalid = "signature_invalid"
    /// Authentication: the signature counter did not increase (a possible cloned authenticator).
    /// A counter that is 0 both stored and received is accepted (an authenticator without a counter).
    case signCountRegression = "sign_count_regression"

    // Checks that need storage: the relying party's caller makes them with these reasons.
    /// Registration: the credential ID is already registered to an account (§7.1 step 26).
    case credentialAlreadyRegistered = "credential_already_registered"
    /// Authentication: no stored credential has this ID for this RP ID.
    case credentialUnknown = "credential_unknown"
    /// Authentication: the credential is registered for another RP ID than the ceremony's (a
    /// passkey of the domain an app used before it moved).
    case credentialOtherDomain = "passkey_other_domain"
    /// The challenge is unknown, already used or expired.
    case challengeExpired = "challenge_expired"
}

extension RainError {
    /// RAIN_102 for a refused WebAuthn input: `details.reason` is `failure.rawValue`, `details.field`
    /// names the part of the input when one applies.
    public static func webAuthn(_ failure: WebAuthnFailure, _ message: String, field: String? = nil) -> RainError {
        RainError.invalid(message, field: field, reason: failure.rawValue)
    }

    /// The WebAuthn check this error reports, when it is one.
    public var webAuthnFailure: WebAuthnFailure? {
        guard code == .invalidArgument, let reason = details.reason else { return nil }
        return WebAuthnFailure(rawValue: reason)
    }
}
