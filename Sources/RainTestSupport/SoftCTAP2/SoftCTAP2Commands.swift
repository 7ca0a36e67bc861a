import RainCore
import RainCrypto
import RainWebAuthn

/// The CTAP2 commands of the software authenticator: its credentials, its PIN and their rules.
///
/// Not thread-safe: `SoftCTAP2Authenticator` calls it from its one worker queue only.
final class SoftCTAP2Commands {
    /// How the authenticator attests new credentials.
    enum Attestation { case none, packedSelf }

    struct Credential {
        var id: [UInt8]
        var rpID: String
        var userID: [UInt8]
        var userName: String?
        var isResident: Bool
        var key: P256PrivateKey
        var signCount: UInt32 = 0
    }

    /// The PIN/UV auth token of the last good PIN, and what it may be used for.
    struct Token {
        var key: SymmetricKey
        var permissions: Int64
        var rpID: String?
    }

    static let maximumPINRetries = 8
    /// Wrong PINs in a row before the authenticator wants a power cycle.
    static let maximumConsecutiveFailures = 3
    static let permissionMakeCredential: Int64 = 0x01
    static let permissionGetAssertion: Int64 = 0x02
    static let maximumMessageSize: Int64 = 1200

    let aaguid: [UInt8]
    var attestation: Attestation
    private(set) var credentials: [Credential] = []
    private var pinHash: [UInt8]?
    var pinRetries = maximumPINRetries
    private var consecutiveFailures = 0
    private var pinProtocol: SoftCTAP2PINProtocol
    private var token: Token?
    private var pendingAssertions: (clientDataHash: [UInt8], flags: AuthenticatorData.Flags, credentials: [Credential])?

    init(aaguid: [UInt8], attestation: Attestation) throws {
        self.aaguid = aaguid
        self.attestation = attestation
        pinProtocol = try SoftCTAP2PINProtocol()
    }

    var hasPIN: Bool { pinHash != nil }

    /// Unplugged and plugged in again: the PIN may be tried again (if tries are left) and every
    /// key agreement and token is forgotten.
    func powerCycle() throws {
        consecutiveFailures = 0
        token = nil
        pendingAssertions = nil
        try pinProtocol.regenerate()
    }

    /// Sets the PIN directly (a key bought with a PIN already set).
    func setPINDirectly(_ pin: String) {
        pinHash = Array(SHA256.hash(Array(pin.utf8)).prefix(16))
        pinRetries = Self.maximumPINRetries
    }

    /// Handles one CTAPHID_CBOR message: the command byte then CBOR; returns the status byte then CBOR.
    /// - Parameter userPresence: blinks until touched; nil when touched, else the status to return.
    func handle(_ message: [UInt8], userPresence: () -> CTAPStatus?) -> [UInt8] {
        guard let command = message.first else { return [CTAPStatus.invalidCommand.code] }
        do {
            let parameters: CBORValue
            if message.count > 1 {
                do { parameters = try CBORDecoder.decode(Array(message.dropFirst())) } catch { throw CTAPStatus.invalidCBOR }
            } else {
                parameters = .map([])
            }
            let response: CBORValue?
            switch command {
            case 0x01: response = try makeCredential(parameters, userPresence: userPresence)
            case 0x02: response = try getAssertion(parameters, userPresence: userPresence)
            case 0x04: response = getInfo()
            case 0x06: response = try clientPIN(parameters)
            case 0x08: response = try getNextAssertion()
            default: throw CTAPStatus.invalidCommand
            }
            return [0] + (response.map(CBOREncoder.encode) ?? [])
        } catch let status as CTAPStatus {
            return [status.code]
        } catch {
            return [CTAPStatus.other.code]
        }
    }

    // MARK: - authenticatorGetInfo

    private func getInfo() -> CBORValue {
        .map([
            .init(.integer(1), .array([.text("FIDO_2_0"), .text("FIDO_2_1")])),
            .init(.integer(3), .bytes(aaguid)),
            .init(
                .integer(4),
                .map([
                    .init(.text("rk"), .bool(true)), .init(.text("up"), .bool(true)),
                    .init(.text("clientPin"), .bool(hasPIN)), .init(.text("pinUvAuthToken"), .bool(true)),
                ])),
            .init(.integer(5), .integer(Self.maximumMessageSize)),
            .init(.integer(6), .array([.integer(SoftCTAP2PINProtocol.number)])),
        ])
    }

    // MARK: - authenticatorMakeCredential

    private func makeCredential(_ parameters: CBORValue, userPresence: () -> CTAPStatus?) throws -> CBORValue {
        guard let clientDataHash = parameters[1]?.bytesValue, let rp = parameters[2],
            let rpID = rp["id"]?.textValue, let user = parameters[3], let userID = user["id"]?.bytesValue,
            let algorithms = parameters[4]?.arrayElements
        else { throw CTAPStatus.missingParameter }
        guard algorithms.contains(where: { $0["alg"]?.integerValue == -7 }) else { throw CTAPStatus.unsupportedAlgorithm }
        let options = parameters[7]
        if case .bool(true) = options?["uv"] { throw CTAPStatus.invalidOption }
        let isResident: Bool
        if case .bool(true) = options?["rk"] { isResident = true } else { isResident = false }
        if let param = parameters[8]?.bytesValue, param.isEmpty {
            // A zero-length pinUvAuthParam asks for a touch only (CTAP 2.1 §6.1.2 step 1): how a
            // client lets the user choose one of several keys (libfido2's fido_dev_get_touch_begin).
            if let status = userPresence() { throw status }
            throw hasPIN ? CTAPStatus.pinInvalid : CTAPStatus.pinNotSet
        }
        let isVerified = try checkPINUVAuth(
            parameters[8], protocolNumber: parameters[9], clientDataHash: clientDataHash,
            permission: Self.permissionMakeCredential, rpID: rpID)

        let excluded = (parameters[5]?.arrayElements ?? []).compactMap { $0["id"]?.bytesValue }
        if credentials.contains(where: { $0.rpID == rpID && excluded.contains($0.id) }) {
            // The user touches before learning the key is already registered (CTAP 2.1 §6.1.2 step 6).
            if let refusal = userPresence() { throw refusal }
            throw CTAPStatus.credentialExcluded
        }
        if let refusal = userPresence() { throw refusal }

        let key = try P256PrivateKey()
        let id = try SecureRandom.bytes(count: 32)
        if isResident {
            // One discoverable credential per account and relying party: a new one replaces it.
            credentials.removeAll { $0.isResident && $0.rpID == rpID && $0.userID == userID }
        }
        credentials.append(
            Credential(id: id, rpID: rpID, userID: userID, userName: user["name"]?.textValue, isResident: isResident, key: key))
        var flags: AuthenticatorData.Flags = [.userPresent, .attestedCredentialData]
        if isVerified { flags.insert(.userVerified) }
        let authData = AuthenticatorData(
            rpIDHash: SHA256.hash(Array(rpID.utf8)), flags: flags, signCount: 0,
            attestedCredentialData: .init(
                aaguid: aaguid, credentialID: id, publicKeyBytes: COSEPublicKey(p256: key.publicKey).encoded)
        ).encoded
        let format: String
        let statement: CBORValue
        switch attestation {
        case .none:
            format = "none"
            statement = .map([])
        case .packedSelf:
            format = "packed"
            let signature = try key.signature(for: authData + clientDataHash)
            statement = .map([.init(.text("alg"), .integer(-7)), .init(.text("sig"), .bytes(signature))])
        }
        return .map([.init(.integer(1), .text(format)), .init(.integer(2), .bytes(authData)), .init(.integer(3), statement)])
    }

    // MARK: - authenticatorGetAssertion

    private func getAssertion(_ parameters: CBORValue, userPresence: () -> CTAPStatus?) throws -> CBORValue {
        guard let rpID = parameters[1]?.textValue, let clientDataHash = parameters[2]?.bytesValue else {
            throw CTAPStatus.missingParameter
        }
        let options = parameters[5]
        if case .bool(true) = options?["uv"] { throw CTAPStatus.invalidOption }
        var wantsPresence = true
        if case .bool(false) = options?["up"] { wantsPresence = false }
        let isVerified = try checkPINUVAuth(
            parameters[6], protocolNumber: parameters[7], clientDataHash: clientDataHash,
            permission: Self.permissionGetAssertion, rpID: rpID)

        let allowed = (parameters[3]?.arrayElements ?? []).compactMap { $0["id"]?.bytesValue }
        let found: [Credential] =
            allowed.isEmpty
            ? credentials.filter { $0.isResident && $0.rpID == rpID }.reversed()
            : credentials.filter { $0.rpID == rpID && allowed.contains($0.id) }
        guard !found.isEmpty else { throw CTAPStatus.noCredentials }
        if wantsPresence, let refusal = userPresence() { throw refusal }

        var flags: AuthenticatorData.Flags = []
        if wantsPresence { flags.insert(.userPresent) }
        if isVerified { flags.insert(.userVerified) }
        // With an allow list the authenticator answers with one credential (CTAP 2.1 §6.2.2).
        let answered = allowed.isEmpty ? found : Array(found.prefix(1))
        pendingAssertions = answered.count > 1 ? (clientDataHash, flags, Array(answered.dropFirst())) : nil
        return try assertion(
            answered[0], clientDataHash: clientDataHash, flags: flags, count: answered.count > 1 ? answered.count : nil)
    }

    private func getNextAssertion() throws -> CBORValue {
        guard var pending = pendingAssertions, !pending.credentials.isEmpty else { throw CTAPStatus.notAllowed }
        let next = pending.credentials.removeFirst()
        pendingAssertions = pending.credentials.isEmpty ? nil : pending
        return try assertion(next, clientDataHash: pending.clientDataHash, flags: pending.flags, count: nil)
    }

    private func assertion(_ credential: Credential, clientDataHash: [UInt8], flags: AuthenticatorData.Flags, count: Int?) throws
        -> CBORValue
    {
        guard let index = credentials.firstIndex(where: { $0.id == credential.id }) else { throw CTAPStatus.noCredentials }
        credentials[index].signCount += 1
        let authData = AuthenticatorData(
            rpIDHash: SHA256.hash(Array(credential.rpID.utf8)), flags: flags, signCount: credentials[index].signCount,
            attestedCredentialData: nil
        ).encoded
        let signature = try credential.key.signature(for: authData + clientDataHash)
        var entries: [CBORValue.MapEntry] = [
            .init(.integer(1), .map([.init(.text("id"), .bytes(credential.id)), .init(.text("type"), .text("public-key"))])),
            .init(.integer(2), .bytes(authData)), .init(.integer(3), .bytes(signature)),
        ]
        if credential.isResident { entries.append(.init(.integer(4), .map([.init(.text("id"), .bytes(credential.userID))]))) }
        if let count { entries.append(.init(.integer(5), .integer(Int64(count)))) }
        return .map(entries)
    }

    /// Checks `pinUvAuthParam` against the token: true when present and right (UV), false when
    /// absent and allowed; throws when wrong, or absent while a PIN is set and a credential is made.
    private func checkPINUVAuth(
        _ param: CBORValue?, protocolNumber: CBORValue?, clientDataHash: [UInt8], permission: Int64, rpID: String
    ) throws -> Bool {
        guard let param = param?.bytesValue else {
            if hasPIN && permission == Self.permissionMakeCredential { throw CTAPStatus.pinRequired }
            return false
        }
        guard protocolNumber?.integerValue == SoftCTAP2PINProtocol.number else { throw CTAPStatus.invalidParameter }
        guard let token, SoftCTAP2PINProtocol.verify(key: token.key, message: clientDataHash, signature: param),
            token.permissions & permission != 0, token.rpID == nil || token.rpID == rpID
        else { throw CTAPStatus.pinAuthInvalid }
        // The token's relying party is fixed by its first use (CTAP 2.1 §6.1.2 step 11).
        self.token?.rpID = rpID
        return true
    }

    // MARK: - authenticatorClientPIN

    private func clientPIN(_ parameters: CBORValue) throws -> CBORValue? {
        guard let subcommand = parameters[2]?.integerValue else { throw CTAPStatus.missingParameter }
        // getPINRetries needs no protocol, and libfido2 sends 1 with it whatever the key offers.
        if subcommand != 0x01, let number = parameters[1]?.integerValue, number != SoftCTAP2PINProtocol.number {
            throw CTAPStatus.invalidParameter
        }
        switch subcommand {
        case 0x01:
            return .map([.init(.integer(3), .integer(Int64(pinRetries))), .init(.integer(4), .bool(false))])
        case 0x02:
            return .map([.init(.integer(1), pinProtocol.keyAgreementCOSE)])
        case 0x03:
            guard !hasPIN else { throw CTAPStatus.notAllowed }
            let (shared, newPINEnc, param) = try pinChangeInputs(parameters)
            guard SoftCTAP2PINProtocol.verify(key: shared.hmacKey, message: newPINEnc, signature: param) else {
                throw CTAPStatus.pinAuthInvalid
            }
            try storeNewPIN(newPINEnc, shared: shared)
            return nil
        case 0x04:
            guard hasPIN else { throw CTAPStatus.pinNotSet }
            try checkNotBlocked()
            let (shared, newPINEnc, param) = try pinChangeInputs(parameters)
            guard let pinHashEnc = parameters[6]?.bytesValue else { throw CTAPStatus.missingParameter }
            guard SoftCTAP2PINProtocol.verify(key: shared.hmacKey, message: newPINEnc + pinHashEnc, signature: param) else {
                throw CTAPStatus.pinAuthInvalid
            }
            try checkPINHash(pinHashEnc, shared: shared)
            try storeNewPIN(newPINEnc, shared: shared)
            return nil
        case 0x05, 0x09:
            guard hasPIN else { throw CTAPStatus.pinNotSet }
            try checkNotBlocked()
            guard let platformKey = parameters[3], let pinHashEnc = parameters[6]?.bytesValue else {
                throw CTAPStatus.missingParameter
            }
            var permissions = Self.permissionMakeCredential | Self.permissionGetAssertion
            if subcommand == 0x09 {
                guard let asked = parameters[9]?.integerValue, asked != 0 else { throw CTAPStatus.missingParameter }
                permissions = asked
            }
            let shared = try pinProtocol.sharedSecret(platformKey: platformKey)
            try checkPINHash(pinHashEnc, shared: shared)
            let tokenKey = try SymmetricKey.random(byteCount: 32)
            token = Token(key: tokenKey, permissions: permissions, rpID: subcommand == 0x09 ? parameters[0x0A]?.textValue : nil)
            let encrypted = try SoftCTAP2PINProtocol.encrypt(tokenKey.withUnsafeBytes { Array($0) }, key: shared.aesKey)
            return .map([.init(.integer(2), .bytes(encrypted))])
        default:
            throw CTAPStatus.invalidParameter
        }
    }

    private func pinChangeInputs(_ parameters: CBORValue) throws -> (SoftCTAP2PINProtocol.SharedSecret, [UInt8], [UInt8]) {
        guard let platformKey = parameters[3], let param = parameters[4]?.bytesValue,
            let newPINEnc = parameters[5]?.bytesValue
        else { throw CTAPStatus.missingParameter }
        return (try pinProtocol.sharedSecret(platformKey: platformKey), newPINEnc, param)
    }

    private func checkNotBlocked() throws {
        guard pinRetries > 0 else { throw CTAPStatus.pinBlocked }
        guard consecutiveFailures < Self.maximumConsecutiveFailures else { throw CTAPStatus.pinAuthBlocked }
    }

    /// One PIN try: the counter goes down first, so pulling the key mid-check costs a try.
    private func checkPINHash(_ pinHashEnc: [UInt8], shared: SoftCTAP2PINProtocol.SharedSecret) throws {
        pinRetries -= 1
        let offered = try SoftCTAP2PINProtocol.decrypt(pinHashEnc, key: shared.aesKey)
        guard let pinHash, offered == pinHash else {
            try pinProtocol.regenerate()
            consecutiveFailures += 1
            if pinRetries == 0 { throw CTAPStatus.pinBlocked }
            if consecutiveFailures >= Self.maximumConsecutiveFailures { throw CTAPStatus.pinAuthBlocked }
            throw CTAPStatus.pinInvalid
        }
        pinRetries = Self.maximumPINRetries
        consecutiveFailures = 0
    }

    private func storeNewPIN(_ newPINEnc: [UInt8], shared: SoftCTAP2PINProtocol.SharedSecret) throws {
        let padded = try SoftCTAP2PINProtocol.decrypt(newPINEnc, key: shared.aesKey)
        guard padded.count >= 64 else { throw CTAPStatus.pinPolicyViolation }
        let pin = Array(padded.prefix { $0 != 0 })
        guard pin.count >= 4, pin.count <= 63 else { throw CTAPStatus.pinPolicyViolation }
        pinHash = Array(SHA256.hash(pin).prefix(16))
        pinRetries = Self.maximumPINRetries
        consecutiveFailures = 0
    }
}
