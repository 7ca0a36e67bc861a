import Dispatch
import FoundationEssentials
import RainCore
import RainCrypto
import RainKeyStore
import RainWebAuthn

/// The platform authenticator Linux lacks: passkeys whose ES256 keys are made and used inside the
/// TPM, W3C JSON in and out (the shape of `SoftAuthenticator`'s).
///
/// - Each credential's P-256 key is created inside the TPM under the `tpm2` provider's storage
///   primary key; only its blob (useless on any other TPM) is kept, in the sealed credential file
///   (`PlatformCredentialStore`), which is also the only way from a credential ID to its key.
/// - UP is set only after `hooks.confirmPresence` returned. UV is set only when the key's TPM
///   authorization value, the PIN, was used to sign: the TPM checked it, not this code.
/// - The PIN is chosen at the first passkey made while none is set (`hooks.askPIN(.choose)`); every
///   later passkey gets it too. PIN keys are subject to the TPM's dictionary-attack lockout; before
///   each PIN is asked the TPM's counter is read, and no PIN is asked once a wrong one would leave
///   the TPM fewer than one try short of its lockout (see docs/security.md).
/// - Attestation `none` (its own AAGUID, `PasskeyKind.platformAAGUID`), BE and BS clear: the key cannot leave this TPM.
/// - The signature counter is always 0, which WebAuthn reads as "no counter": the key cannot be
///   cloned (`fixedTPM`), so a counter would detect nothing, and one written back on every
///   sign-in would turn a state directory restored from a backup into a "cloned authenticator"
///   at every relying party.
///
/// Ceremonies are serialized on one queue per instance; the TPM work runs there, off the Swift
/// concurrency pool, and the hooks are awaited in between.
public final class TPM2PlatformAuthenticator: PasskeyAuthenticator {
    /// A credential of the platform authenticator, without its key.
    public struct Credential: Sendable, Hashable {
        /// The credential ID.
        public var id: [UInt8]
        /// The relying party (passkey domain) it is limited to.
        public var rpID: String
        /// The user handle the relying party gave it.
        public var userHandle: [UInt8]
        /// The account name the relying party gave it.
        public var userName: String
        /// When it was created.
        public var createdAt: Date
        /// Whether signing with it needs the PIN (sets UV).
        public var isPINProtected: Bool
    }

    /// The TPM that holds the keys.
    public let provider: TPM2KeyProvider
    /// The directory of the sealed credential file.
    public let directory: String
    private let store: PlatformCredentialStore
    private let hooks: PlatformAuthenticatorHooks
    private let clock: any RainClock
    private let queue = DispatchQueue(label: "rain.platform-authenticator")

    /// A fixed digest the PIN check key signs: what it signs does not matter, only that the TPM
    /// accepted the PIN.
    private static let pinCheckDigest = SHA256.hash(Array("rain platform authenticator PIN check".utf8))

    /// An authenticator whose keys live in the TPM of `provider`.
    /// - Parameters:
    ///   - provider: the daemon's `tpm2` key provider.
    ///   - storageKey: the daemon's storage key (`KeySlot.storage`); the credential file is sealed
    ///     with a key derived from it.
    ///   - directory: where the sealed credential file lives (created 0700 on the first passkey).
    ///   - hooks: how the user confirms presence and gives the PIN.
    ///   - clock: the creation time of new passkeys.
    /// - Throws: RAIN_502 when the file key cannot be derived.
    public init(
        provider: TPM2KeyProvider, storageKey: SymmetricKey, directory: String, hooks: PlatformAuthenticatorHooks,
        clock: any RainClock = SystemClock()
    ) throws(RainError) {
        self.provider = provider
        self.directory = directory
        self.store = try PlatformCredentialStore(directory: directory, storageKey: storageKey)
        self.hooks = hooks
        self.clock = clock
    }

    /// The platform authenticator of the daemon's key provider, or an error saying there is none.
    ///
    /// Only the `tpm2` provider can hold its keys: with any other the platform authenticator is
    /// unavailable, never replaced by keys in software.
    /// - Parameters: as ``init(provider:storageKey:directory:hooks:clock:)``, with `provider` any provider.
    /// - Throws: RAIN_404 `platform_authenticator_unavailable` naming the provider in use and the
    ///   setting to change (`storage.provider: tpm2`).
    public static func make(
        provider: any KeyProvider, storageKey: SymmetricKey, directory: String, hooks: PlatformAuthenticatorHooks,
        clock: any RainClock = SystemClock()
    ) throws(RainError) -> TPM2PlatformAuthenticator {
        guard let tpm = provider as? TPM2KeyProvider else {
            throw RainError.platform(
                .unavailable, .unavailable,
                "the platform authenticator keeps passkeys in a TPM, and this daemon's keys are in \(provider.location) "
                    + "(storage.provider \(provider.kind.rawValue)): on a machine with a TPM 2.0, set storage.provider: "
                    + "tpm2 and run `rainwalletd storage migrate --to tpm2`; or use a security key or a passkey "
                    + "of your own app")
        }
        return try TPM2PlatformAuthenticator(
            provider: tpm, storageKey: storageKey, directory: directory, hooks: hooks, clock: clock)
    }

    /// The sealed credential file.
    public var credentialFile: String { store.path }

    /// The passkeys held, oldest first.
    /// - Throws: RAIN_102 `platform_store_damaged`; RAIN_502 on I/O.
    public func credentials() async throws(RainError) -> [Credential] {
        let store = self.store
        let contents = try await queue.runBlocking { () throws(RainError) in try store.load() }
        return contents.credentials.map(Self.summary)
    }

    /// Whether a PIN was chosen.
    /// - Throws: as ``credentials()``.
    public func hasPIN() async throws(RainError) -> Bool {
        let store = self.store
        return try await queue.runBlocking { () throws(RainError) in try store.load().pinCheckKey != nil }
    }

    /// Forgets a passkey: its entry leaves the sealed file, and with it the only copy of its key
    /// blob, so the TPM can never load the key again (the TPM itself holds nothing to remove).
    /// - Parameters:
    ///   - id: the credential ID.
    ///   - rpID: the relying party it must belong to; a passkey of another one is not removed.
    /// - Returns: whether a passkey was removed.
    /// - Throws: RAIN_102 `platform_store_damaged`; RAIN_502 on I/O.
    @discardableResult
    public func removeCredential(id: [UInt8], rpID: String) async throws(RainError) -> Bool {
        let store = self.store
        return try await queue.runBlocking { () throws(RainError) -> Bool in
            var contents = try store.load()
            let before = contents.credentials.count
            contents.credentials.removeAll { $0.id.bytes == id && $0.rpId == rpID }
            guard contents.credentials.count != before else { return false }
            try store.save(contents)
            return true
        }
    }

    // MARK: - Registration

    /// Creates a passkey (`navigator.credentials.create()`).
    ///
    /// In order: the RP ID is checked against the origin, ES256 must be offered, no excluded
    /// credential may be held; the user confirms presence; the PIN is chosen (first PIN) or entered
    /// and checked by the TPM; the key is made in the TPM with the PIN as its authorization value;
    /// the credential is saved before the response is returned.
    /// - Parameters:
    ///   - options: the RP's options.
    ///   - origin: the caller's origin (`https://<domain>` or an Android app origin).
    /// - Returns: the W3C response: attestation `none`, UP, UV when the PIN was used, BE/BS clear.
    /// - Throws: RAIN_102 `rp_id_not_allowed`, `algorithm_not_supported`, `invalid_user_handle`,
    ///   `credential_excluded`, `user_verification_unavailable` (UV required and no PIN chosen),
    ///   `platform_pin_policy`; RAIN_401 from the hooks, `platform_pin_cancelled`; RAIN_202
    ///   `platform_pin_invalid` (with `attemptsRemaining`); RAIN_302 `platform_pin_tries_exhausted`
    ///   (with `retryAfterMilliseconds`), `platform_busy`; RAIN_501 from the TPM (`tpm_lockout`,
    ///   `tpm_key_lost`, `tpm_unavailable`, …).
    public func register(
        options: PublicKeyCredentialCreationOptionsJSON, origin: String
    ) async throws(RainError) -> RegistrationResponseJSON {
        let rpID = try Self.rpID(requested: options.rp.id, origin: origin)
        let userHandle = options.user.id.bytes
        guard (1...64).contains(userHandle.count) else {
            throw RainError.platformRefusal("the user handle must have 1 to 64 bytes", reason: "invalid_user_handle")
        }
        let offered =
            options.pubKeyCredParams.isEmpty
            ? [COSEAlgorithm.es256] : options.pubKeyCredParams.filter { $0.type == "public-key" }.map(\.alg)
        guard offered.contains(.es256) else {
            throw RainError.platformRefusal(
                "the platform authenticator makes ES256 keys, and the site offers only "
                    + offered.map(\.description).joined(separator: ", "),
                reason: "algorithm_not_supported")
        }
        let isUVRequired =
            options.authenticatorSelection?.userVerification == UserVerificationRequirement.required.rawValue
        let excluded = Set((options.excludeCredentials ?? []).map(\.id.bytes))
        let (store, provider) = (self.store, self.provider)

        let contents = try await queue.runBlocking { () throws(RainError) in try store.load() }
        if contents.credentials.contains(where: { $0.rpId == rpID && excluded.contains($0.id.bytes) }) {
            throw RainError.platformRefusal(
                "this machine already holds a passkey of the account for \(rpID)", reason: "credential_excluded")
        }
        try await hooks.confirmPresence(
            PlatformPresenceRequest(ceremony: .registration, rpID: rpID, userName: options.user.name))

        let pin: PlatformPIN?
        var newPINCheckKey: TPM2PasskeyKey?
        if let checkBlob = contents.pinCheckKey {
            let checkKey = try TPM2PasskeyKey(blob: checkBlob.bytes, path: store.path)
            pin = try await enteredPIN(rpID: rpID) { (pin) throws(RainError) in
                _ = try provider.signWithPasskeyKey(
                    digest: Self.pinCheckDigest, key: checkKey, authorization: pin.secret, path: store.path)
            }.pin
        } else if let chosen = try await hooks.askPIN(.choose(rpID: rpID)) {
            pin = chosen
            newPINCheckKey = try await queue.runBlocking { () throws(RainError) in
                try provider.createPasskeyKey(authorization: chosen.secret)
            }
        } else {
            guard !isUVRequired else {
                throw RainError.platformRefusal(
                    "the site requires user verification, which needs a platform authenticator PIN: choose one",
                    reason: "user_verification_unavailable")
            }
            pin = nil
        }

        let key = try await queue.runBlocking { () throws(RainError) in
            try provider.createPasskeyKey(authorization: pin?.secret)
        }
        let credentialID = try SecureRandom.bytes(count: 32)
        let publicKey = COSEPublicKey(p256: key.publicKey)
        var flags: AuthenticatorData.Flags = [.userPresent]
        if pin != nil { flags.insert(.userVerified) }
        let authData = AuthenticatorData(
            rpIDHash: SHA256.hash(Array(rpID.utf8)), flags: flags, signCount: 0,
            attestedCredentialData: AuthenticatorData.AttestedCredentialData(
                // Its own AAGUID (no attestation statement vouches for it): how the account's list
                // tells these passkeys from a security key's.
                aaguid: PasskeyKind.platformAAGUID, credentialID: credentialID, publicKeyBytes: publicKey.encoded))
        let clientDataJSON = CollectedClientData(
            type: CollectedClientData.createType, challenge: options.challenge.bytes, origin: origin
        ).serialized

        let credential = PlatformCredentialStore.Credential(
            id: Base64URLBytes(credentialID), rpId: rpID, userHandle: Base64URLBytes(userHandle), userName: options.user.name,
            userDisplayName: options.user.displayName, createdAt: clock.now.timeIntervalSince1970,
            keyBlob: Base64URLBytes(key.blob), isPINProtected: pin != nil)
        let pinCheckBlob = newPINCheckKey.map { Base64URLBytes($0.blob) }
        try await queue.runBlocking { () throws(RainError) in
            // Read again: another ceremony may have saved since this one read the file.
            var current = try store.load()
            if let pinCheckBlob {
                guard current.pinCheckKey == nil else {
                    throw RainError.platform(
                        .refused, .busy, "another passkey ceremony chose the platform authenticator's PIN meanwhile: try again")
                }
                current.pinCheckKey = pinCheckBlob
            }
            current.credentials.append(credential)
            try store.save(current)
        }

        let attestation = AttestationObject(format: "none", statement: .map([]), authenticatorData: authData)
        return RegistrationResponseJSON(
            rawId: credentialID,
            response: AuthenticatorAttestationResponseJSON(
                clientDataJSON: clientDataJSON, attestationObject: attestation.encoded, authenticatorData: authData.encoded,
                transports: ["internal"], publicKey: publicKey.subjectPublicKeyInfo,
                publicKeyAlgorithm: COSEAlgorithm.es256.rawValue),
            authenticatorAttachment: "platform")
    }

    // MARK: - Authentication

    /// Produces an assertion (`navigator.credentials.get()`), signed by the TPM.
    ///
    /// Chooses the newest passkey of the RP ID (`options.rpId`, or the origin's host), among
    /// `allowCredentials` when that is not empty, and of `userHandle`'s account when given: a
    /// credential ID of another relying party or account is not a candidate, whatever the options
    /// say. Then the user confirms presence, and for a PIN-protected passkey enters the PIN, which
    /// the TPM checks as it signs.
    /// - Parameters:
    ///   - options: the RP's options.
    ///   - origin: the caller's origin.
    ///   - userHandle: the account the caller expects, or nil for any (a discoverable sign-in).
    /// - Returns: the W3C response, with the passkey's user handle; the counter is 0.
    /// - Throws: RAIN_401 `platform_no_credentials` when no passkey matches, `platform_pin_cancelled`
    ///   or the hooks' RAIN_401; RAIN_102 `rp_id_not_allowed`, `user_verification_unavailable` (UV
    ///   required for a passkey without PIN), `platform_store_damaged`; RAIN_202
    ///   `platform_pin_invalid`; RAIN_302 `platform_pin_tries_exhausted`; RAIN_501 from the TPM
    ///   (`tpm_key_lost` for a state directory copied from another machine, `tpm_lockout`, …).
    public func authenticate(
        options: PublicKeyCredentialRequestOptionsJSON, origin: String, userHandle: [UInt8]? = nil
    ) async throws(RainError) -> AuthenticationResponseJSON {
        let rpID = try Self.rpID(requested: options.rpId, origin: origin)
        let allowed = Set((options.allowCredentials ?? []).map(\.id.bytes))
        let (store, provider) = (self.store, self.provider)
        let contents = try await queue.runBlocking { () throws(RainError) in try store.load() }
        guard
            let credential = contents.credentials.last(where: {
                $0.rpId == rpID && (allowed.isEmpty || allowed.contains($0.id.bytes))
                    && (userHandle == nil || userHandle == $0.userHandle.bytes)
            })
        else {
            throw RainError.platform(
                .userCancelled, .noCredentials, "this machine holds no platform passkey for \(rpID) that the site accepts")
        }
        if options.userVerification == UserVerificationRequirement.required.rawValue, !credential.isPINProtected {
            throw RainError.platformRefusal(
                "the site requires user verification, and this passkey was made without a PIN: register a new one "
                    + "with a PIN",
                reason: "user_verification_unavailable")
        }
        let key = try TPM2PasskeyKey(blob: credential.keyBlob.bytes, path: store.path)
        try await hooks.confirmPresence(
            PlatformPresenceRequest(ceremony: .authentication, rpID: rpID, userName: credential.userName))

        var flags: AuthenticatorData.Flags = [.userPresent]
        if credential.isPINProtected { flags.insert(.userVerified) }
        let authData = AuthenticatorData(rpIDHash: SHA256.hash(Array(rpID.utf8)), flags: flags, signCount: 0).encoded
        let clientDataJSON = CollectedClientData(
            type: CollectedClientData.getType, challenge: options.challenge.bytes, origin: origin
        ).serialized
        let digest = SHA256.hash(authData + SHA256.hash(clientDataJSON))

        let signature: [UInt8]
        if credential.isPINProtected {
            signature = try await enteredPIN(rpID: rpID) { (pin) throws(RainError) -> [UInt8] in
                try provider.signWithPasskeyKey(digest: digest, key: key, authorization: pin.secret, path: store.path)
            }.result
        } else {
            signature = try await queue.runBlocking { () throws(RainError) in
                try provider.signWithPasskeyKey(digest: digest, key: key, authorization: nil, path: store.path)
            }
        }
        return AuthenticationResponseJSON(
            rawId: credential.id.bytes,
            response: AuthenticatorAssertionResponseJSON(
                clientDataJSON: clientDataJSON, authenticatorData: authData, signature: signature,
                userHandle: credential.userHandle.bytes),
            authenticatorAttachment: "platform")
    }

    // MARK: - PasskeyAuthenticator

    /// Decodes the options, runs ``register(options:origin:)`` and encodes the response.
    /// - Throws: as ``register(options:origin:)``; RAIN_102 `malformed_response` for options JSON that
    ///   does not decode.
    public func createCredential(optionsJSON: String, origin: String) async throws(RainError) -> String {
        let options = try PublicKeyCredentialCreationOptionsJSON.decode(json: optionsJSON)
        return try await register(options: options, origin: origin).jsonString()
    }

    /// Decodes the options, runs ``authenticate(options:origin:userHandle:)`` and encodes the response.
    /// - Throws: as ``authenticate(options:origin:userHandle:)``; RAIN_102 `malformed_response` for
    ///   options JSON that does not decode.
    public func getAssertion(optionsJSON: String, origin: String) async throws(RainError) -> String {
        let options = try PublicKeyCredentialRequestOptionsJSON.decode(json: optionsJSON)
        return try await authenticate(options: options, origin: origin).jsonString()
    }

    // MARK: - The PIN

    /// Reads the TPM's dictionary-attack state, refuses when no try is left short of its lockout,
    /// asks the PIN and runs `use` with it on the queue (the TPM checks it there).
    /// - Returns: the PIN and what `use` returned.
    /// - Throws: RAIN_302 `platform_pin_tries_exhausted`; RAIN_401 `platform_pin_cancelled`; RAIN_202
    ///   `platform_pin_invalid` when the TPM refused the PIN; what `use` and the hook throw.
    private func enteredPIN<R: Sendable>(
        rpID: String, _ use: @escaping @Sendable (PlatformPIN) throws(RainError) -> R
    ) async throws(RainError) -> (pin: PlatformPIN, result: R) {
        let provider = self.provider
        let status = try await queue.runBlocking { () throws(RainError) in try provider.dictionaryAttackStatus() }
        try Self.checkTriesLeft(status)
        let triesLeft = status.isProtecting ? status.triesLeft : nil
        guard let pin = try await hooks.askPIN(.enter(rpID: rpID, triesLeft: triesLeft)) else {
            throw RainError.platform(.userCancelled, .pinCancelled, "no PIN was given for the platform authenticator")
        }
        do throws(RainError) {
            let result = try await queue.runBlocking { () throws(RainError) in try use(pin) }
            return (pin, result)
        } catch  where error.details.reason == TPM2KeyProvider.authorizationFailedReason {
            let after = try await queue.runBlocking { () throws(RainError) in try provider.dictionaryAttackStatus() }
            throw Self.wrongPIN(after)
        }
    }

    /// Refuses to ask for a PIN when a wrong one would bring the TPM to its lockout.
    /// - Throws: RAIN_302 `platform_pin_tries_exhausted` with when to try again.
    package static func checkTriesLeft(_ status: TPM2DictionaryAttackStatus) throws(RainError) {
        guard status.isProtecting, status.triesLeft == 0 else { return }
        throw RainError.platform(
            .refused, .pinTriesExhausted,
            "too many wrong PINs: one more would lock the TPM for every program that uses it "
                + "(\(status.failedTries) of its \(status.maximumTries) counted)\(Self.whenToRetry(status))",
            retryAfterMilliseconds: retryAfterSeconds(status).map { UInt64($0) * 1000 })
    }

    /// RAIN_202 `platform_pin_invalid` after the TPM refused a PIN, with the tries left.
    package static func wrongPIN(_ status: TPM2DictionaryAttackStatus) -> RainError {
        guard status.isProtecting else {
            return RainError.platform(.unauthorized, .pinInvalid, "wrong PIN for the platform authenticator")
        }
        let left = status.triesLeft
        let rest = left == 0 ? "no try is left\(whenToRetry(status))" : "\(left) \(left == 1 ? "try" : "tries") left"
        return RainError.platform(
            .unauthorized, .pinInvalid, "wrong PIN for the platform authenticator: \(rest)", attemptsRemaining: left,
            retryAfterMilliseconds: left == 0 ? retryAfterSeconds(status).map { UInt64($0) * 1000 } : nil)
    }

    /// Seconds until the TPM has forgotten enough wrong tries for one more to be safe: it forgets one
    /// every `recoveryInterval`, and a try is safe once `failedTries ≤ maximumTries - 2`. Nil when
    /// that never comes (a TPM that allows fewer than 2 wrong tries).
    package static func retryAfterSeconds(_ status: TPM2DictionaryAttackStatus) -> UInt32? {
        guard status.maximumTries >= 2, status.isProtecting else { return nil }
        let excess = status.failedTries + 2 - min(status.maximumTries, status.failedTries + 2)
        return max(excess, 1) * status.recoveryInterval
    }

    private static func whenToRetry(_ status: TPM2DictionaryAttackStatus) -> String {
        guard let seconds = retryAfterSeconds(status) else {
            return ": this TPM allows fewer than 2 wrong tries, so the PIN cannot be asked safely; raise its limit "
                + "(tpm2_dictionarylockout)"
        }
        return ": the TPM forgets one every \(status.recoveryInterval) s; try again in \(seconds) s"
    }

    // MARK: - Helpers

    private static func summary(_ stored: PlatformCredentialStore.Credential) -> Credential {
        Credential(
            id: stored.id.bytes, rpID: stored.rpId, userHandle: stored.userHandle.bytes, userName: stored.userName,
            createdAt: Date(timeIntervalSince1970: stored.createdAt), isPINProtected: stored.isPINProtected)
    }

    /// The RP ID of a ceremony, checked against the origin as a browser does (as the software
    /// authenticator does): an `https` origin's host is the RP ID or a subdomain of it; an Android
    /// app origin names its RP ID explicitly.
    static func rpID(requested: String?, origin: String) throws(RainError) -> String {
        if origin.hasPrefix("android:apk-key-hash:") {
            guard let requested, !requested.isEmpty else {
                throw RainError.platformRefusal("an Android app origin needs an explicit RP ID", reason: "rp_id_not_allowed")
            }
            return requested.lowercased()
        }
        guard let components = URLComponents(string: origin), components.scheme == "https",
            let host = components.host?.lowercased(), !host.isEmpty, components.path.isEmpty
        else {
            throw RainError.platformRefusal("origin \(origin) is not an https origin", reason: "rp_id_not_allowed")
        }
        let rpID = (requested ?? host).lowercased()
        guard !rpID.isEmpty, host == rpID || host.hasSuffix("." + rpID) else {
            throw RainError.platformRefusal("origin \(origin) may not use RP ID \(rpID)", reason: "rp_id_not_allowed")
        }
        return rpID
    }
}
