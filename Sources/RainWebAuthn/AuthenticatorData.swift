import RainCore
import RainCrypto

/// Authenticator data (WebAuthn §6.1): `rpIdHash(32) ‖ flags(1) ‖ signCount(4, big-endian)`,
/// then attested credential data when AT is set, then a CBOR extensions map when ED is set.
public struct AuthenticatorData: Sendable, Equatable {
    /// The flags byte.
    public struct Flags: OptionSet, Sendable, Hashable {
        /// The flags byte.
        public var rawValue: UInt8
        /// Flags from their byte.
        public init(rawValue: UInt8) { self.rawValue = rawValue }

        /// UP: the user was present.
        public static let userPresent = Flags(rawValue: 0x01)
        /// UV: the user was verified.
        public static let userVerified = Flags(rawValue: 0x04)
        /// BE: the credential may be backed up (a multi-device credential).
        public static let backupEligible = Flags(rawValue: 0x08)
        /// BS: the credential is currently backed up.
        public static let backupState = Flags(rawValue: 0x10)
        /// AT: attested credential data follows.
        public static let attestedCredentialData = Flags(rawValue: 0x40)
        /// ED: an extensions map follows.
        public static let extensionData = Flags(rawValue: 0x80)
    }

    /// The attested credential data (§6.5.2).
    public struct AttestedCredentialData: Sendable, Equatable {
        /// The authenticator's AAGUID (16 bytes; all zeros for none attestation).
        public var aaguid: [UInt8]
        /// The credential ID (at most 1023 bytes for a valid registration).
        public var credentialID: [UInt8]
        /// The COSE_Key bytes as they appear in the authenticator data.
        public var publicKeyBytes: [UInt8]

        /// Creates attested credential data.
        public init(aaguid: [UInt8], credentialID: [UInt8], publicKeyBytes: [UInt8]) {
            self.aaguid = aaguid
            self.credentialID = credentialID
            self.publicKeyBytes = publicKeyBytes
        }
    }

    /// The length of the fixed part.
    public static let minimumByteCount = 37

    /// SHA-256 of the RP ID.
    public var rpIDHash: [UInt8]
    /// The flags.
    public var flags: Flags
    /// The signature counter.
    public var signCount: UInt32
    /// Present when AT is set.
    public var attestedCredentialData: AttestedCredentialData?
    /// The extensions map's bytes, present when ED is set.
    public var extensions: [UInt8]?

    /// Creates authenticator data to encode (the software authenticator's side). `flags` gets AT
    /// and ED set or cleared to match what is given.
    public init(
        rpIDHash: [UInt8], flags: Flags, signCount: UInt32, attestedCredentialData: AttestedCredentialData? = nil,
        extensions: [UInt8]? = nil
    ) {
        self.rpIDHash = rpIDHash
        var flags = flags
        if attestedCredentialData != nil { flags.insert(.attestedCredentialData) } else { flags.remove(.attestedCredentialData) }
        if extensions != nil { flags.insert(.extensionData) } else { flags.remove(.extensionData) }
        self.flags = flags
        self.signCount = signCount
        self.attestedCredentialData = attestedCredentialData
        self.extensions = extensions
    }

    /// Parses authenticator data with exact length accounting.
    /// - Parameter bytes: the authenticator data.
    /// - Throws: RAIN_102 with `details.reason` `malformed_authenticator_data`: shorter than 37 bytes,
    ///   AT set without complete attested credential data, a credential ID or key running past the
    ///   end, malformed CBOR in the key or the extensions, extensions that are not a map, ED set
    ///   without extensions, or bytes left over.
    public init(parsing bytes: [UInt8]) throws(RainError) {
        guard bytes.count >= Self.minimumByteCount else {
            throw Self.malformed("it has \(bytes.count) bytes, fewer than \(Self.minimumByteCount)")
        }
        rpIDHash = Array(bytes[0..<32])
        flags = Flags(rawValue: bytes[32])
        signCount = bytes[33..<37].reduce(0) { $0 << 8 | UInt32($1) }
        var position = Self.minimumByteCount

        if flags.contains(.attestedCredentialData) {
            guard bytes.count - position >= 18 else {
                throw Self.malformed("AT is set but the attested credential data is truncated")
            }
            let aaguid = Array(bytes[position..<(position + 16)])
            let idLength = Int(bytes[position + 16]) << 8 | Int(bytes[position + 17])
            position += 18
            guard bytes.count - position >= idLength else {
                throw Self.malformed("the credential ID declares \(idLength) bytes but fewer remain")
            }
            let credentialID = Array(bytes[position..<(position + idLength)])
            position += idLength
            let keyLength: Int
            do {
                keyLength = try CBORDecoder.itemLength(of: bytes, at: position)
            } catch {
                throw Self.malformed("the credential public key: \(error.message)")
            }
            let publicKeyBytes = Array(bytes[position..<(position + keyLength)])
            position += keyLength
            attestedCredentialData = AttestedCredentialData(
                aaguid: aaguid, credentialID: credentialID, publicKeyBytes: publicKeyBytes)
        } else {
            attestedCredentialData = nil
        }

        if flags.contains(.extensionData) {
            let decoded: (value: CBORValue, length: Int)
            do {
                decoded = try CBORDecoder.decodePrefix(bytes, at: position)
            } catch {
                throw Self.malformed("the extensions: \(error.message)")
            }
            guard decoded.value.mapEntries != nil else { throw Self.malformed("the extensions are not a CBOR map") }
            extensions = Array(bytes[position..<(position + decoded.length)])
            position += decoded.length
        } else {
            extensions = nil
        }

        guard position == bytes.count else {
            throw Self.malformed("\(bytes.count - position) bytes follow the end of the authenticator data")
        }
    }

    /// The encoded authenticator data.
    public var encoded: [UInt8] {
        var output = rpIDHash
        output.append(flags.rawValue)
        output += [
            UInt8(truncatingIfNeeded: signCount >> 24), UInt8(truncatingIfNeeded: signCount >> 16),
            UInt8(truncatingIfNeeded: signCount >> 8), UInt8(truncatingIfNeeded: signCount),
        ]
        if let data = attestedCredentialData {
            output += data.aaguid
            output += [
                UInt8(truncatingIfNeeded: data.credentialID.count >> 8), UInt8(truncatingIfNeeded: data.credentialID.count),
            ]
            output += data.credentialID
            output += data.publicKeyBytes
        }
        if let extensions { output += extensions }
        return output
    }

    private static func malformed(_ problem: String) -> RainError {
        RainError.webAuthn(.malformedAuthenticatorData, "malformed authenticator data: \(problem)")
    }
}
