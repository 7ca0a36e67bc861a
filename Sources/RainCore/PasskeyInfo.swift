import FoundationEssentials

/// One passkey of an account, as the account is shown: which domain it belongs to and when it was
/// created and last used. Carries no key material.
public struct PasskeyInfo: Sendable, Equatable, Hashable {
    /// The credential id, base64url without padding.
    public var credentialID: String
    /// The domain (WebAuthn rpId) the passkey was registered for.
    public var rpID: String
    /// When it was registered.
    public var createdAt: Date
    /// When it last logged in; nil when it never did.
    public var lastUsedAt: Date?
    /// What holds it, as its registration said.
    public var kind: PasskeyKind

    /// Creates a summary.
    public init(credentialID: String, rpID: String, createdAt: Date, lastUsedAt: Date?, kind: PasskeyKind = .unknown) {
        self.credentialID = credentialID
        self.rpID = rpID
        self.createdAt = createdAt
        self.lastUsedAt = lastUsedAt
        self.kind = kind
    }
}

/// What holds a passkey, as the authority classified its registration: by the authenticator's
/// AAGUID where it is one of RainWallet's own, otherwise by the attachment and transports the
/// client reported. Shown to the user; never a security decision (a client can report anything).
public enum PasskeyKind: String, Sendable, Hashable, CaseIterable {
    /// The daemon's TPM-bound platform authenticator, or another platform authenticator.
    case platform
    /// A roaming authenticator: a USB, NFC or Bluetooth security key, or a phone (hybrid).
    case securityKey = "security-key"
    /// The development authenticator whose keys sit in a file (`SoftAuthenticator`).
    case file
    /// Registered before kinds were recorded, or reported nothing to tell.
    case unknown = ""

    /// The AAGUID of RainWallet's TPM-bound platform authenticator.
    public static let platformAAGUID: [UInt8] = [
        0x52, 0x61, 0x69, 0x6E, 0x54, 0x50, 0x4D, 0x32, 0x9B, 0x1D, 0x4C, 0x6E, 0xA8, 0x3F, 0x21, 0x07,
    ]
    /// The AAGUID of the development authenticator (`SoftAuthenticator`): its keys are in a file.
    public static let fileAAGUID: [UInt8] = [
        0x52, 0x61, 0x69, 0x6E, 0x46, 0x49, 0x4C, 0x45, 0x3C, 0x7A, 0x45, 0x91, 0xB2, 0x6D, 0x0E, 0x58,
    ]

    /// Classifies a registration.
    /// - Parameters:
    ///   - aaguid: the authenticator's AAGUID from the attested credential data.
    ///   - attachment: the response's `authenticatorAttachment` (`platform`, `cross-platform`), if any.
    ///   - transports: the response's `transports`.
    public static func classify(aaguid: [UInt8], attachment: String?, transports: [String]) -> PasskeyKind {
        if aaguid == platformAAGUID { return .platform }
        if aaguid == fileAAGUID { return .file }
        if attachment == "cross-platform" || transports.contains(where: { ["usb", "nfc", "ble", "hybrid"].contains($0) }) {
            return .securityKey
        }
        if attachment == "platform" || transports.contains("internal") { return .platform }
        return .unknown
    }

    /// How the CLI and the docs name it: its raw value, `unknown` for none.
    public var displayName: String { self == .unknown ? "unknown" : rawValue }
}

extension RainError {
    /// RAIN_102 `credential_unknown` for a passkey to remove that the account does not hold.
    public static func unknownPasskey() -> RainError {
        .invalid(
            "this account has no passkey with that id: `rainwallet passkey list` shows its passkeys",
            field: "credentialId", reason: "credential_unknown")
    }

    /// RAIN_102 `last_login_method`: removing this passkey would leave the account no way to log in.
    public static func lastLoginMethod() -> RainError {
        .invalid(
            "this passkey is the account's only way to log in: add a backup email (`rainwallet contact add`) "
                + "or another passkey first", field: "credentialId", reason: "last_login_method")
    }
}
