import FoundationEssentials
import RainCore
import RainCrypto

/// Binary data carried in the W3C JSON forms as base64url text without padding
/// (`Base64URLString`). Decoding also accepts padded text; anything else is refused.
public struct Base64URLBytes: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The bytes.
    public var bytes: [UInt8]

    /// Wraps `bytes`.
    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    /// The base64url text.
    public var description: String { Base64URL.encode(bytes) }

    /// Decodes base64url text (padded or not); anything else is a decoding error.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let bytes = Base64URL.decode(text) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "not base64url")
        }
        self.bytes = bytes
    }

    /// Encodes base64url text without padding.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(Base64URL.encode(bytes))
    }
}

/// The relying party (`PublicKeyCredentialRpEntity`).
public struct PublicKeyCredentialRpEntity: Sendable, Hashable, Codable {
    /// The RP ID: the passkey domain. Absent means the caller's origin's effective domain.
    public var id: String?
    /// A name for people.
    public var name: String

    /// Creates the entity.
    public init(id: String?, name: String) {
        self.id = id
        self.name = name
    }
}

/// The user account (`PublicKeyCredentialUserEntityJSON`).
public struct PublicKeyCredentialUserEntityJSON: Sendable, Hashable, Codable {
    /// The user handle: 1 to 64 opaque bytes, never personal data.
    public var id: Base64URLBytes
    /// An account name for people (for example an email address or a generated label).
    public var name: String
    /// A display name.
    public var displayName: String

    /// Creates the entity.
    public init(id: [UInt8], name: String, displayName: String) {
        self.id = Base64URLBytes(id)
        self.name = name
        self.displayName = displayName
    }
}

/// One acceptable credential type and algorithm (`PublicKeyCredentialParameters`).
public struct PublicKeyCredentialParameters: Sendable, Hashable, Codable {
    /// Always `public-key`.
    public var type: String
    /// The COSE algorithm.
    public var alg: COSEAlgorithm

    /// A `public-key` entry for `alg`.
    public init(alg: COSEAlgorithm, type: String = "public-key") {
        self.type = type
        self.alg = alg
    }
}

/// A credential named in `excludeCredentials` or `allowCredentials`
/// (`PublicKeyCredentialDescriptorJSON`).
public struct PublicKeyCredentialDescriptorJSON: Sendable, Hashable, Codable {
    /// Always `public-key`.
    public var type: String
    /// The credential ID.
    public var id: Base64URLBytes
    /// Transport hints (`internal`, `hybrid`, `usb`, …), when known.
    public var transports: [String]?

    /// A `public-key` descriptor.
    public init(id: [UInt8], transports: [String]? = nil, type: String = "public-key") {
        self.type = type
        self.id = Base64URLBytes(id)
        self.transports = transports
    }
}

/// `AuthenticatorSelectionCriteria`.
public struct AuthenticatorSelectionCriteria: Sendable, Hashable, Codable {
    /// `platform` or `cross-platform`, when the RP cares.
    public var authenticatorAttachment: String?
    /// `discouraged`, `preferred` or `required`.
    public var residentKey: String?
    /// Level 1 form of `residentKey: required`.
    public var requireResidentKey: Bool?
    /// `discouraged`, `preferred` or `required`.
    public var userVerification: String?

    /// Creates criteria.
    public init(
        authenticatorAttachment: String? = nil, residentKey: String? = nil, requireResidentKey: Bool? = nil,
        userVerification: String? = nil
    ) {
        self.authenticatorAttachment = authenticatorAttachment
        self.residentKey = residentKey
        self.requireResidentKey = requireResidentKey
        self.userVerification = userVerification
    }
}

/// Options for `navigator.credentials.create()` in JSON form (WebAuthn L3
/// `PublicKeyCredentialCreationOptionsJSON`).
public struct PublicKeyCredentialCreationOptionsJSON: Sendable, Hashable, Codable {
    /// The relying party.
    public var rp: PublicKeyCredentialRpEntity
    /// The account the credential is for.
    public var user: PublicKeyCredentialUserEntityJSON
    /// The ceremony's random challenge.
    public var challenge: Base64URLBytes
    /// Acceptable algorithms, most preferred first.
    public var pubKeyCredParams: [PublicKeyCredentialParameters]
    /// How long the client may take, in milliseconds.
    public var timeout: UInt32?
    /// Credentials the account already has, so an authenticator does not create a second one.
    public var excludeCredentials: [PublicKeyCredentialDescriptorJSON]?
    /// Which authenticators the RP wants, and whether the credential must be discoverable.
    public var authenticatorSelection: AuthenticatorSelectionCriteria?
    /// Hints for the client's user interface (`security-key`, `client-device`, `hybrid`).
    public var hints: [String]?
    /// `none`, `indirect`, `direct` or `enterprise`.
    public var attestation: String?
    /// Preferred attestation formats, most preferred first.
    public var attestationFormats: [String]?
    /// Extension inputs, passed through.
    public var extensions: JSONValue?

    /// Creates options.
    public init(
        rp: PublicKeyCredentialRpEntity, user: PublicKeyCredentialUserEntityJSON, challenge: [UInt8],
        pubKeyCredParams: [PublicKeyCredentialParameters], timeout: UInt32? = nil,
        excludeCredentials: [PublicKeyCredentialDescriptorJSON]? = nil,
        authenticatorSelection: AuthenticatorSelectionCriteria? = nil, hints: [String]? = nil,
        attestation: String? = "none", attestationFormats: [String]? = nil, extensions: JSONValue? = nil
    ) {
        self.rp = rp
        self.user = user
        self.challenge = Base64URLBytes(challenge)
        self.pubKeyCredParams = pubKeyCredParams
        self.timeout = timeout
        self.excludeCredentials = excludeCredentials
        self.authenticatorSelection = authenticatorSelection
        self.hints = hints
        self.attestation = attestation
        self.attestationFormats = attestationFormats
        self.extensions = extensions
    }
}

/// Options for `navigator.credentials.get()` in JSON form (WebAuthn L3
/// `PublicKeyCredentialRequestOptionsJSON`).
public struct PublicKeyCredentialRequestOptionsJSON: Sendable, Hashable, Codable {
    /// The ceremony's random challenge.
    public var challenge: Base64URLBytes
    /// How long the client may take, in milliseconds.
    public var timeout: UInt32?
    /// The RP ID (the passkey domain).
    public var rpId: String?
    /// The acceptable credentials; empty or absent lets the user pick any discoverable one.
    public var allowCredentials: [PublicKeyCredentialDescriptorJSON]?
    /// `discouraged`, `preferred` or `required`.
    public var userVerification: String?
    /// Hints for the client's user interface (`security-key`, `client-device`, `hybrid`).
    public var hints: [String]?
    /// Extension inputs, passed through.
    public var extensions: JSONValue?

    /// Creates options.
    public init(
        challenge: [UInt8], timeout: UInt32? = nil, rpId: String?, allowCredentials: [PublicKeyCredentialDescriptorJSON]? = nil,
        userVerification: String? = nil, hints: [String]? = nil, extensions: JSONValue? = nil
    ) {
        self.challenge = Base64URLBytes(challenge)
        self.timeout = timeout
        self.rpId = rpId
        self.allowCredentials = allowCredentials
        self.userVerification = userVerification
        self.hints = hints
        self.extensions = extensions
    }
}

/// `AuthenticatorAttestationResponseJSON`.
public struct AuthenticatorAttestationResponseJSON: Sendable, Hashable, Codable {
    /// The client data the signature covers (UTF-8 JSON).
    public var clientDataJSON: Base64URLBytes
    /// The CBOR attestation object `{fmt, attStmt, authData}`.
    public var attestationObject: Base64URLBytes
    /// A copy of the authenticator data inside `attestationObject`, when the client adds it.
    public var authenticatorData: Base64URLBytes?
    /// How the client reached the authenticator (`internal`, `hybrid`, `usb`, …).
    public var transports: [String]?
    /// The credential key as a DER SubjectPublicKeyInfo, when the client adds it.
    public var publicKey: Base64URLBytes?
    /// The credential key's COSE algorithm, when the client adds it.
    public var publicKeyAlgorithm: Int?

    /// Creates the response.
    public init(
        clientDataJSON: [UInt8], attestationObject: [UInt8], authenticatorData: [UInt8]? = nil, transports: [String]? = nil,
        publicKey: [UInt8]? = nil, publicKeyAlgorithm: Int? = nil
    ) {
        self.clientDataJSON = Base64URLBytes(clientDataJSON)
        self.attestationObject = Base64URLBytes(attestationObject)
        self.authenticatorData = authenticatorData.map(Base64URLBytes.init)
        self.transports = transports
        self.publicKey = publicKey.map(Base64URLBytes.init)
        self.publicKeyAlgorithm = publicKeyAlgorithm
    }
}

/// The result of `navigator.credentials.create()` in JSON form (`RegistrationResponseJSON`).
public struct RegistrationResponseJSON: Sendable, Hashable, Codable {
    /// The credential ID as base64url text.
    public var id: String
    /// The credential ID.
    public var rawId: Base64URLBytes
    /// The authenticator's response.
    public var response: AuthenticatorAttestationResponseJSON
    /// `platform` or `cross-platform`.
    public var authenticatorAttachment: String?
    /// Client extension outputs, passed through (required by the spec, tolerated when absent).
    public var clientExtensionResults: JSONValue?
    /// Always `public-key`.
    public var type: String

    /// Creates the response; `id` is the base64url form of `rawId`.
    public init(
        rawId: [UInt8], response: AuthenticatorAttestationResponseJSON, authenticatorAttachment: String? = nil,
        clientExtensionResults: JSONValue? = .emptyObject, type: String = "public-key"
    ) {
        self.id = Base64URL.encode(rawId)
        self.rawId = Base64URLBytes(rawId)
        self.response = response
        self.authenticatorAttachment = authenticatorAttachment
        self.clientExtensionResults = clientExtensionResults
        self.type = type
    }
}

/// `AuthenticatorAssertionResponseJSON`.
public struct AuthenticatorAssertionResponseJSON: Sendable, Hashable, Codable {
    /// The client data the signature covers (UTF-8 JSON).
    public var clientDataJSON: Base64URLBytes
    /// The authenticator data the signature covers.
    public var authenticatorData: Base64URLBytes
    /// The assertion signature over `authenticatorData ‖ SHA-256(clientDataJSON)`.
    public var signature: Base64URLBytes
    /// The user handle the credential was created with (always present for discoverable credentials).
    public var userHandle: Base64URLBytes?
    /// An attestation object, only when the RP asked for attestation in an assertion.
    public var attestationObject: Base64URLBytes?

    /// Creates the response.
    public init(
        clientDataJSON: [UInt8], authenticatorData: [UInt8], signature: [UInt8], userHandle: [UInt8]? = nil,
        attestationObject: [UInt8]? = nil
    ) {
        self.clientDataJSON = Base64URLBytes(clientDataJSON)
        self.authenticatorData = Base64URLBytes(authenticatorData)
        self.signature = Base64URLBytes(signature)
        self.userHandle = userHandle.map(Base64URLBytes.init)
        self.attestationObject = attestationObject.map(Base64URLBytes.init)
    }
}

/// The result of `navigator.credentials.get()` in JSON form (`AuthenticationResponseJSON`).
public struct AuthenticationResponseJSON: Sendable, Hashable, Codable {
    /// The credential ID as base64url text.
    public var id: String
    /// The credential ID.
    public var rawId: Base64URLBytes
    /// The authenticator's response.
    public var response: AuthenticatorAssertionResponseJSON
    /// `platform` or `cross-platform`.
    public var authenticatorAttachment: String?
    /// Client extension outputs, passed through (required by the spec, tolerated when absent).
    public var clientExtensionResults: JSONValue?
    /// Always `public-key`.
    public var type: String

    /// Creates the response; `id` is the base64url form of `rawId`.
    public init(
        rawId: [UInt8], response: AuthenticatorAssertionResponseJSON, authenticatorAttachment: String? = nil,
        clientExtensionResults: JSONValue? = .emptyObject, type: String = "public-key"
    ) {
        self.id = Base64URL.encode(rawId)
        self.rawId = Base64URLBytes(rawId)
        self.response = response
        self.authenticatorAttachment = authenticatorAttachment
        self.clientExtensionResults = clientExtensionResults
        self.type = type
    }
}

/// The W3C JSON forms read from and written to JSON text.
public protocol WebAuthnJSONForm: Codable, Sendable {}

extension PublicKeyCredentialCreationOptionsJSON: WebAuthnJSONForm {}
extension PublicKeyCredentialRequestOptionsJSON: WebAuthnJSONForm {}
extension RegistrationResponseJSON: WebAuthnJSONForm {}
extension AuthenticationResponseJSON: WebAuthnJSONForm {}

extension WebAuthnJSONForm {
    /// The longest JSON text accepted, in bytes.
    public static var maximumJSONByteCount: Int { 256 * 1024 }

    /// Decodes JSON text. Unknown members are ignored, as the W3C forms are extensible.
    /// - Parameter json: the text.
    /// - Throws: RAIN_102 with `details.reason` `malformed_response` naming the problem (not JSON, a
    ///   missing or mistyped member, text that is not base64url, longer than 256 KiB).
    public static func decode(json: String) throws(RainError) -> Self {
        try decode(jsonBytes: Array(json.utf8))
    }

    /// Decodes JSON bytes; see ``decode(json:)``.
    public static func decode(jsonBytes: [UInt8]) throws(RainError) -> Self {
        guard jsonBytes.count <= maximumJSONByteCount else {
            throw RainError.webAuthn(.malformedResponse, "\(Self.self) is longer than \(maximumJSONByteCount) bytes")
        }
        do {
            return try JSONDecoder().decode(Self.self, from: Data(jsonBytes))
        } catch {
            throw RainError.webAuthn(.malformedResponse, "\(Self.self) does not decode: \(Self.describe(error))")
        }
    }

    /// The JSON text, keys sorted, binary members in base64url without padding.
    /// - Throws: RAIN_502 if encoding fails (it does not for values built by this module).
    public func jsonString() throws(RainError) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do {
            return String(decoding: try encoder.encode(self), as: UTF8.self)
        } catch {
            throw RainError(.internalError, "cannot encode \(Self.self) as JSON", underlying: SendableErrorDescription(error))
        }
    }

    /// A short description of a decoding error: what is wrong and where.
    static func describe(_ error: any Error) -> String {
        guard let error = error as? DecodingError else { return "not JSON" }
        func path(_ context: DecodingError.Context) -> String {
            let keys = context.codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue }
            return keys.isEmpty ? "the top level" : keys.joined(separator: ".")
        }
        switch error {
        case .keyNotFound(let key, let context):
            let parent = path(context)
            return "missing \(parent == "the top level" ? key.stringValue : parent + "." + key.stringValue)"
        case .typeMismatch(_, let context): return "wrong type at \(path(context))"
        case .valueNotFound(_, let context): return "null at \(path(context))"
        case .dataCorrupted(let context):
            return context.codingPath.isEmpty ? "not JSON" : "\(context.debugDescription) at \(path(context))"
        @unknown default: return "not JSON"
        }
    }
}
