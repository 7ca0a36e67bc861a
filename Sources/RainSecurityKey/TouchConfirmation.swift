import RainCore
import RainCrypto
import RainWebAuthn

/// A security key registered to confirm actions with a touch: the credential the daemon made on it
/// for ``TouchConfirmation/relyingPartyID``, kept sealed with the daemon's state.
public struct ConfirmationKey: Sendable, Equatable {
    /// The credential ID the key returned (non-resident: the key finds its private key in it).
    public var credentialID: [UInt8]
    /// The credential's public key as COSE_Key bytes (ES256).
    public var publicKey: [UInt8]
    /// The key's product name, to tell keys apart in listings; empty when the key gave none.
    public var name: String

    /// A registered key.
    public init(credentialID: [UInt8], publicKey: [UInt8], name: String) {
        self.credentialID = credentialID
        self.publicKey = publicKey
        self.name = name
    }
}

/// Why a touch confirmation failed: the `details.reason` of its `RainError`.
public enum TouchConfirmationFailure: String, Sendable, CaseIterable {
    /// Nobody touched the confirmation key within the prompt's time limit (RAIN_401).
    case timeout = "confirmation_key_timeout"
    /// No plugged key holds a registered confirmation credential (RAIN_404).
    case missing = "confirmation_key_missing"
    /// The assertion does not confirm this action: an unknown credential, another relying party,
    /// no user presence, or a signature over another challenge (RAIN_401).
    case refused = "confirmation_key_refused"
}

/// A security key's touch as a second confirmation of an action, after the typed code.
///
/// The daemon is both client and relying party here, so there is no client data JSON: the
/// `clientDataHash` handed to the key *is* the challenge, the SHA-256 of the prompt's full text,
/// its random code and the request's bytes. The key signs `authenticatorData ‖ challenge`; a
/// signature for one action therefore never verifies for another, even an identical request
/// asked twice (its code differs).
public enum TouchConfirmation {
    /// The relying-party ID of the daemon's confirmation credentials. `.invalid` is reserved
    /// (RFC 2606): no website can ever be this relying party, so a site cannot ask the key for an
    /// assertion that would pass for a confirmation, nor the daemon's credential for a site's.
    public static let relyingPartyID = "rainwalletd.confirm.invalid"
    /// The relying-party name stored with the credential on keys that keep one.
    public static let relyingPartyName = "rainwalletd confirmations"
    /// The words shown while the daemon waits for the touch.
    public static let touchStatus = "touch your confirmation key"

    /// Separates this hash's inputs from any other use of SHA-256 in the daemon.
    private static let domain = Array("rainwalletd touch confirmation v1".utf8)

    /// The challenge of one confirmation.
    /// - Parameters:
    ///   - promptText: everything the prompt showed (app, profile, action, details).
    ///   - code: the random code the prompt showed and the user typed.
    ///   - request: the request's bytes as the daemon received them.
    /// - Returns: 32 bytes, the `clientDataHash` handed to the key.
    public static func challenge(promptText: String, code: String, request: [UInt8]) -> [UInt8] {
        var input = domain
        for field in [Array(promptText.utf8), Array(code.utf8), request] {
            // Each field is length-prefixed so that moving bytes between fields changes the hash.
            let count = UInt32(clamping: field.count)
            input += [
                UInt8(count >> 24), UInt8(truncatingIfNeeded: count >> 16), UInt8(truncatingIfNeeded: count >> 8),
                UInt8(truncatingIfNeeded: count),
            ]
            input += field
        }
        return SHA256.hash(input)
    }

    /// Checks that `assertion` confirms the action whose challenge is `challenge`.
    ///
    /// The credential must be one of `keys`, the authenticator data must name
    /// ``relyingPartyID`` and carry UP, and the signature must verify over
    /// `authenticatorData ‖ challenge` with that credential's key.
    /// - Throws: RAIN_401 `confirmation_key_refused` saying which check failed.
    public static func verify(
        _ assertion: SecurityKeyAssertion, challenge: [UInt8], keys: [ConfirmationKey]
    ) throws(RainError) {
        guard let key = keys.first(where: { $0.credentialID == assertion.credentialID }) else {
            throw refused("the security key signed with a credential that is not a registered confirmation key")
        }
        let data: AuthenticatorData
        do throws(RainError) {
            data = try AuthenticatorData(parsing: assertion.authenticatorData)
        } catch {
            throw refused("the confirmation key's authenticator data does not parse: \(error.message)")
        }
        guard data.rpIDHash == SHA256.hash(Array(relyingPartyID.utf8)) else {
            throw refused("the assertion was made for another relying party than \(relyingPartyID)")
        }
        guard data.flags.contains(.userPresent) else {
            throw refused("the confirmation key was not touched (no user presence in the assertion)")
        }
        let publicKey: COSEPublicKey
        do throws(RainError) {
            publicKey = try COSEPublicKey(encoded: key.publicKey)
        } catch {
            throw refused("the stored confirmation key does not parse: remove it and add it again (\(error.message))")
        }
        guard publicKey.isValidSignature(assertion.signature, for: assertion.authenticatorData + challenge) else {
            throw refused("the confirmation key's signature does not verify for this action")
        }
    }

    /// The confirmation key in a new credential made for ``relyingPartyID``.
    /// - Parameters:
    ///   - registration: what the key returned for `makeCredential`.
    ///   - name: the key's product name.
    /// - Throws: RAIN_102 when the credential is not for ``relyingPartyID``, lacks UP or its
    ///   public key is not an ES256 key.
    public static func key(from registration: SecurityKeyRegistration, name: String) throws(RainError) -> ConfirmationKey {
        let data = try AuthenticatorData(parsing: registration.authenticatorData)
        guard data.rpIDHash == SHA256.hash(Array(relyingPartyID.utf8)), data.flags.contains(.userPresent),
            let attested = data.attestedCredentialData, attested.credentialID == registration.credentialID
        else {
            throw RainError.invalid(
                "the security key returned a credential that is not a confirmation credential: try another key",
                field: "registration", reason: "confirmation_key_invalid")
        }
        let publicKey = try COSEPublicKey(encoded: attested.publicKeyBytes)
        guard publicKey.algorithm == .es256 else {
            throw RainError.invalid(
                "the security key made a \(publicKey.algorithm) credential; confirmation keys are ES256: try another key",
                field: "registration", reason: "confirmation_key_invalid")
        }
        return ConfirmationKey(credentialID: registration.credentialID, publicKey: attested.publicKeyBytes, name: name)
    }

    private static func refused(_ message: String) -> RainError {
        RainError(.userCancelled, message, details: .init(reason: TouchConfirmationFailure.refused.rawValue))
    }
}
