import Dispatch
import FoundationEssentials
import RainCore
import RainCrypto
import RainWebAuthn
import Synchronization

/// A software WebAuthn authenticator for development and tests: it creates ES256 or EdDSA passkeys,
/// keeps their private keys in a JSON file (mode 0600, replaced atomically), and answers ceremonies
/// as a platform authenticator behind a browser would, W3C JSON in and out.
///
/// It is not a secure authenticator: the keys lie in a file in clear. Use it for the CLI's
/// development mode and for tests, never to protect real funds.
public final class SoftAuthenticator: PasskeyAuthenticator {
    /// The attestation the authenticator returns at registration.
    public enum Attestation: String, Sendable, Hashable, CaseIterable {
        /// Format `none`, an empty statement.
        case none
        /// Format `packed`, self attestation: signed with the new credential's own key, no certificate.
        case packedSelf
    }

    /// How the authenticator behaves.
    public struct Configuration: Sendable {
        /// The attestation returned at registration; `none` by default.
        public var attestation: Attestation
        /// The algorithms it can create keys for, in its own order of preference; the first one
        /// the RP offers wins. ES256 then EdDSA by default.
        public var supportedAlgorithms: [COSEAlgorithm]
        /// Whether it verifies the user (sets UV); true by default.
        public var isUserVerifying: Bool
        /// Whether new credentials are backup eligible (BE) and backed up (BS); false by default.
        public var createsSyncedCredentials: Bool
        /// Whether it keeps a signature counter; when false every counter is 0, as with many
        /// platform passkeys. True by default.
        public var usesSignCounter: Bool
        /// The AAGUID written into attested credential data; by default the development
        /// authenticator's own (`PasskeyKind.fileAAGUID`), so an account's list shows these
        /// passkeys as kept in a file.
        public var aaguid: [UInt8]

        /// Creates a configuration.
        public init(
            attestation: Attestation = .none, supportedAlgorithms: [COSEAlgorithm] = [.es256, .edDSA],
            isUserVerifying: Bool = true, createsSyncedCredentials: Bool = false, usesSignCounter: Bool = true,
            aaguid: [UInt8] = PasskeyKind.fileAAGUID
        ) {
            self.attestation = attestation
            self.supportedAlgorithms = supportedAlgorithms
            self.isUserVerifying = isUserVerifying
            self.createsSyncedCredentials = createsSyncedCredentials
            self.usesSignCounter = usesSignCounter
            self.aaguid = aaguid
        }
    }

    /// A credential held by the authenticator, without its private key.
    public struct CredentialSummary: Sendable, Hashable {
        /// The credential ID.
        public var id: [UInt8]
        /// The RP ID (passkey domain) it belongs to.
        public var rpID: String
        /// Its algorithm.
        public var algorithm: COSEAlgorithm
        /// The user handle the RP gave it.
        public var userHandle: [UInt8]
        /// The account name the RP gave it.
        public var userName: String
        /// Its signature counter.
        public var signCount: UInt32
    }

    /// The key file.
    public let path: String
    /// The behaviour.
    public let configuration: Configuration
    private let isDismissingState = Mutex(false)
    /// Serializes reads and writes of the key file within this process.
    private let fileLock = Mutex(())
    private let queue = DispatchQueue(label: "rain.soft-authenticator")

    /// An authenticator whose keys live in `path` (created on the first registration).
    /// - Parameters:
    ///   - path: the key file.
    ///   - configuration: the behaviour.
    public init(path: String, configuration: Configuration = Configuration()) {
        self.path = path
        self.configuration = configuration
    }

    /// Simulates the user dismissing the system sheet: while true, every ceremony throws RAIN_401.
    public func setDismissing(_ dismissing: Bool) {
        isDismissingState.withLock { $0 = dismissing }
    }

    /// Whether ceremonies are being dismissed; see ``setDismissing(_:)``.
    public var isDismissing: Bool { isDismissingState.withLock { $0 } }

    /// The credentials in the key file.
    /// - Throws: RAIN_102 for a key file that is readable by others or invalid; RAIN_502 on I/O errors.
    public func credentials() throws(RainError) -> [CredentialSummary] {
        let file = try fileLock.withLock { (_) throws(RainError) -> SoftAuthenticatorFile in
            try SoftAuthenticatorFile.load(from: path)
        }
        return file.credentials.map {
            CredentialSummary(
                id: $0.id.bytes, rpID: $0.rpId, algorithm: $0.alg, userHandle: $0.userHandle.bytes, userName: $0.userName,
                signCount: $0.signCount)
        }
    }

    // MARK: - Registration

    /// Creates a passkey (`navigator.credentials.create()` through a browser).
    ///
    /// The RP ID is `options.rp.id`, or the origin's host when absent; an `https` origin must be that
    /// domain or a subdomain of it. The first algorithm of `pubKeyCredParams` this authenticator
    /// supports is used. The credential is saved before the response is returned.
    /// - Parameters:
    ///   - options: the RP's options.
    ///   - origin: the caller's origin (`https://<domain>` or `android:apk-key-hash:…`).
    ///   - attestation: overrides the configured attestation for this ceremony.
    /// - Returns: the W3C response.
    /// - Throws: RAIN_401 (`details.reason` `dismissed`) while dismissing; RAIN_102 when the origin
    ///   may not use the RP ID (`rp_id_not_allowed`), no offered algorithm is supported
    ///   (`algorithm_not_supported`), the user handle is not 1–64 bytes (`invalid_user_handle`), the
    ///   authenticator already holds an excluded credential (`credential_excluded`) or user
    ///   verification is required but off (`user_verification_unavailable`); RAIN_502 on I/O errors.
    public func register(
        options: PublicKeyCredentialCreationOptionsJSON, origin: String, attestation: Attestation? = nil
    ) throws(RainError) -> RegistrationResponseJSON {
        try checkNotDismissed()
        let rpID = try Self.rpID(requested: options.rp.id, origin: origin)
        let userHandle = options.user.id.bytes
        guard (1...64).contains(userHandle.count) else {
            throw Self.refusal("the user handle must have 1 to 64 bytes", reason: "invalid_user_handle")
        }
        let offered =
            options.pubKeyCredParams.isEmpty
            ? [COSEAlgorithm.es256, .rs256] : options.pubKeyCredParams.filter { $0.type == "public-key" }.map(\.alg)
        guard let algorithm = offered.first(where: { configuration.supportedAlgorithms.contains($0) }) else {
            throw Self.refusal(
                "none of the offered algorithms (\(offered.map(\.description).joined(separator: ", "))) is supported",
                reason: "algorithm_not_supported")
        }
        if options.authenticatorSelection?.userVerification == UserVerificationRequirement.required.rawValue,
            !configuration.isUserVerifying
        {
            throw Self.refusal(
                "user verification is required but this authenticator does not verify users",
                reason: "user_verification_unavailable")
        }

        let key = try SoftPrivateKey(generating: algorithm)
        let credentialID = try SecureRandom.bytes(count: 32)
        let publicKey = key.publicKey
        var flags: AuthenticatorData.Flags = [.userPresent]
        if configuration.isUserVerifying { flags.insert(.userVerified) }
        if configuration.createsSyncedCredentials { flags.formUnion([.backupEligible, .backupState]) }
        let authData = AuthenticatorData(
            rpIDHash: SHA256.hash(Array(rpID.utf8)), flags: flags, signCount: 0,
            attestedCredentialData: AuthenticatorData.AttestedCredentialData(
                aaguid: configuration.aaguid, credentialID: credentialID, publicKeyBytes: publicKey.encoded))
        let authDataBytes = authData.encoded
        let clientDataJSON = CollectedClientData(
            type: CollectedClientData.createType, challenge: options.challenge.bytes, origin: origin
        ).serialized

        let statement: CBORValue
        let format: String
        switch attestation ?? configuration.attestation {
        case .none:
            format = "none"
            statement = .map([])
        case .packedSelf:
            format = "packed"
            let signature = try key.signature(for: authDataBytes + SHA256.hash(clientDataJSON))
            statement = .map([
                .init(.text("alg"), .integer(Int64(algorithm.rawValue))), .init(.text("sig"), .bytes(signature)),
            ])
        }
        let attestationObject = AttestationObject(format: format, statement: statement, authenticatorData: authData)

        let stored = SoftAuthenticatorFile.Credential(
            id: Base64URLBytes(credentialID), rpId: rpID, alg: algorithm, privateKey: Base64URLBytes(key.rawRepresentation),
            userHandle: Base64URLBytes(userHandle), userName: options.user.name, userDisplayName: options.user.displayName,
            signCount: 0, isBackupEligible: configuration.createsSyncedCredentials,
            isBackedUp: configuration.createsSyncedCredentials, createdAt: Date().timeIntervalSince1970)
        let excluded = Set((options.excludeCredentials ?? []).map(\.id.bytes))
        try fileLock.withLock { (_) throws(RainError) in
            var file = try SoftAuthenticatorFile.load(from: path)
            if file.credentials.contains(where: { $0.rpId == rpID && excluded.contains($0.id.bytes) }) {
                throw Self.refusal(
                    "this authenticator already holds a credential of the account for \(rpID)", reason: "credential_excluded")
            }
            file.credentials.append(stored)
            try file.save(to: path)
        }

        return RegistrationResponseJSON(
            rawId: credentialID,
            response: AuthenticatorAttestationResponseJSON(
                clientDataJSON: clientDataJSON, attestationObject: attestationObject.encoded, authenticatorData: authDataBytes,
                transports: ["internal"], publicKey: publicKey.subjectPublicKeyInfo,
                publicKeyAlgorithm: algorithm.rawValue),
            authenticatorAttachment: "platform")
    }

    // MARK: - Authentication

    /// Produces an assertion (`navigator.credentials.get()` through a browser).
    ///
    /// Chooses the newest credential for the RP ID (`options.rpId`, or the origin's host), among
    /// `allowCredentials` when that is not empty; increments its counter (unless counters are off)
    /// and saves the file before returning.
    /// - Parameters:
    ///   - options: the RP's options.
    ///   - origin: the caller's origin.
    /// - Returns: the W3C response, with the credential's user handle.
    /// - Throws: RAIN_401 while dismissing (`dismissed`) or when no credential matches
    ///   (`no_credentials`); RAIN_102 for an origin that may not use the RP ID (`rp_id_not_allowed`)
    ///   or required user verification while it is off (`user_verification_unavailable`); RAIN_102
    ///   for an invalid key file; RAIN_502 on I/O errors.
    public func authenticate(
        options: PublicKeyCredentialRequestOptionsJSON, origin: String
    ) throws(RainError) -> AuthenticationResponseJSON {
        try checkNotDismissed()
        let rpID = try Self.rpID(requested: options.rpId, origin: origin)
        if options.userVerification == UserVerificationRequirement.required.rawValue, !configuration.isUserVerifying {
            throw Self.refusal(
                "user verification is required but this authenticator does not verify users",
                reason: "user_verification_unavailable")
        }
        let allowed = Set((options.allowCredentials ?? []).map(\.id.bytes))
        let clientDataJSON = CollectedClientData(
            type: CollectedClientData.getType, challenge: options.challenge.bytes, origin: origin
        ).serialized
        let configuration = self.configuration
        let path = self.path

        return try fileLock.withLock { (_) throws(RainError) -> AuthenticationResponseJSON in
            var file = try SoftAuthenticatorFile.load(from: path)
            guard
                let index = file.credentials.lastIndex(where: {
                    $0.rpId == rpID && (allowed.isEmpty || allowed.contains($0.id.bytes))
                })
            else {
                throw RainError(
                    .userCancelled, "no passkey for \(rpID) in \(path)", details: RainError.Details(reason: "no_credentials"))
            }
            var credential = file.credentials[index]
            let key = try SoftPrivateKey(algorithm: credential.alg, rawRepresentation: credential.privateKey.bytes)
            if configuration.usesSignCounter { credential.signCount &+= 1 }
            var flags: AuthenticatorData.Flags = [.userPresent]
            if configuration.isUserVerifying { flags.insert(.userVerified) }
            if credential.isBackupEligible { flags.insert(.backupEligible) }
            if credential.isBackedUp { flags.insert(.backupState) }
            let authData = AuthenticatorData(
                rpIDHash: SHA256.hash(Array(rpID.utf8)), flags: flags, signCount: credential.signCount
            ).encoded
            let signature = try key.signature(for: authData + SHA256.hash(clientDataJSON))
            file.credentials[index] = credential
            try file.save(to: path)
            return AuthenticationResponseJSON(
                rawId: credential.id.bytes,
                response: AuthenticatorAssertionResponseJSON(
                    clientDataJSON: clientDataJSON, authenticatorData: authData, signature: signature,
                    userHandle: credential.userHandle.bytes),
                authenticatorAttachment: "platform")
        }
    }

    // MARK: - PasskeyAuthenticator

    /// Decodes the options, runs ``register(options:origin:attestation:)`` off the concurrency pool
    /// and encodes the response.
    /// - Throws: as ``register(options:origin:attestation:)``; RAIN_102 `malformed_response` for
    ///   options JSON that does not decode.
    public func createCredential(optionsJSON: String, origin: String) async throws(RainError) -> String {
        let options = try PublicKeyCredentialCreationOptionsJSON.decode(json: optionsJSON)
        return try await queue.runBlocking { () throws(RainError) -> String in
            try self.register(options: options, origin: origin).jsonString()
        }
    }

    /// Decodes the options, runs ``authenticate(options:origin:)`` off the concurrency pool and
    /// encodes the response.
    /// - Throws: as ``authenticate(options:origin:)``; RAIN_102 `malformed_response` for options
    ///   JSON that does not decode.
    public func getAssertion(optionsJSON: String, origin: String) async throws(RainError) -> String {
        let options = try PublicKeyCredentialRequestOptionsJSON.decode(json: optionsJSON)
        return try await queue.runBlocking { () throws(RainError) -> String in
            try self.authenticate(options: options, origin: origin).jsonString()
        }
    }

    // MARK: - Helpers

    private func checkNotDismissed() throws(RainError) {
        if isDismissing {
            throw RainError(
                .userCancelled, "the user dismissed the passkey sheet", details: RainError.Details(reason: "dismissed"))
        }
    }

    /// The RP ID for a ceremony, checked against the origin as a browser does: an `https` origin's
    /// host must be the RP ID or a subdomain of it; an Android app origin may use any RP ID (the
    /// platform checks the site's assetlinks.json).
    static func rpID(requested: String?, origin: String) throws(RainError) -> String {
        if origin.hasPrefix("android:apk-key-hash:") {
            guard let requested, !requested.isEmpty else {
                throw refusal("an Android app origin needs an explicit RP ID", reason: "rp_id_not_allowed")
            }
            return requested
        }
        guard let components = URLComponents(string: origin), components.scheme == "https",
            let host = components.host?.lowercased(), !host.isEmpty, components.path.isEmpty
        else {
            throw refusal("origin \(origin) is not an https origin", reason: "rp_id_not_allowed")
        }
        let rpID = (requested ?? host).lowercased()
        guard host == rpID || host.hasSuffix("." + rpID) else {
            throw refusal("origin \(origin) may not use RP ID \(rpID)", reason: "rp_id_not_allowed")
        }
        return rpID
    }

    private static func refusal(_ message: String, reason: String) -> RainError {
        RainError(.invalidArgument, message, details: RainError.Details(reason: reason))
    }
}
