import RainCore
import RainWebAuthn

/// A security key found on the system (or injected for tests), not yet opened.
public struct SecurityKeyInfo: Sendable, Hashable {
    /// The device path (`/dev/hidraw3`), which opens it.
    public var path: String
    /// The USB manufacturer string.
    public var manufacturer: String
    /// The USB product string.
    public var product: String
    /// Reached through injected io functions rather than hidraw (tests only).
    package var isInjected: Bool

    package init(path: String, manufacturer: String, product: String, isInjected: Bool) {
        self.path = path
        self.manufacturer = manufacturer
        self.product = product
        self.isInjected = isInjected
    }
}

/// What an opened key says of itself (`authenticatorGetInfo`).
public struct SecurityKeyCapabilities: Sendable, Hashable {
    /// The key speaks CTAP2 (not only U2F).
    public var isFIDO2: Bool
    /// `FIDO_2_0`, `FIDO_2_1`, `U2F_V2`, …
    public var versions: [String]
    /// The options and their values (`rk`, `up`, `clientPin`: false means "supported, not set").
    public var options: [String: Bool]
    /// The key model's AAGUID (16 bytes).
    public var aaguid: [UInt8]
    /// The PIN/UV auth protocols it offers, preferred first.
    public var pinProtocols: [UInt8]
    /// The longest CTAP2 message it takes, in bytes.
    public var maximumMessageSize: UInt64

    /// The key has a PIN set.
    public var hasPIN: Bool { options["clientPin"] == true }
}

/// The account a new credential is for.
public struct SecurityKeyUser: Sendable, Hashable {
    /// The user handle (at most 64 bytes; not personal data).
    public var id: [UInt8]
    /// The account name shown by the key's manager (an email, a phone number).
    public var name: String
    /// The display name.
    public var displayName: String

    /// Creates a user.
    public init(id: [UInt8], name: String, displayName: String) {
        self.id = id
        self.name = name
        self.displayName = displayName
    }
}

/// A new credential, as the key returned it.
public struct SecurityKeyRegistration: Sendable {
    /// The credential ID.
    public var credentialID: [UInt8]
    /// The raw authenticator data (with the attested credential data and its COSE key).
    public var authenticatorData: [UInt8]
    /// The attestation statement format (`packed`, `none`, `fido-u2f`, …).
    public var attestationFormat: String
    /// The attestation statement (a CBOR map).
    public var attestationStatement: CBORValue

    /// The WebAuthn attestation object `{fmt, attStmt, authData}`, as a browser returns it.
    /// - Throws: RAIN_102 when the authenticator data does not parse.
    public func attestationObject() throws(RainError) -> [UInt8] {
        let parsed = try AuthenticatorData(parsing: authenticatorData)
        var object = AttestationObject(format: attestationFormat, statement: attestationStatement, authenticatorData: parsed)
        // Keep the key's exact bytes: the attestation signature covers them, not a re-encoding.
        object.authenticatorDataBytes = authenticatorData
        return object.encoded
    }
}

/// One assertion, as the key returned it.
public struct SecurityKeyAssertion: Sendable {
    /// The credential that signed.
    public var credentialID: [UInt8]
    /// The raw authenticator data the signature covers.
    public var authenticatorData: [UInt8]
    /// The signature over `authenticatorData ‖ clientDataHash` (DER ECDSA for ES256).
    public var signature: [UInt8]
    /// The user handle, which discoverable credentials return.
    public var userHandle: [UInt8]?

    /// An assertion, as a key returned it (or as a test forges one).
    public init(credentialID: [UInt8], authenticatorData: [UInt8], signature: [UInt8], userHandle: [UInt8]?) {
        self.credentialID = credentialID
        self.authenticatorData = authenticatorData
        self.signature = signature
        self.userHandle = userHandle
    }
}
