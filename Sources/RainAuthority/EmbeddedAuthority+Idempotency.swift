import FoundationEssentials
import Glibc
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainStore
import RainWire

/// A call whose answer was lost can be asked again: a login code confirm, a passkey
/// finish, a contact verification. The device sends a random idempotency key per logical call;
/// the authority stores the first outcome with it, in the transaction that applies the call's
/// effect, and a repeat within the challenge's (or ceremony's) lifetime gets that outcome back (the
/// same account, wallet and tokens; the contact verified) instead of a second effect, on any
/// instance sharing the store.
///
/// What is stored is the key's keyed hash, the call's kind, the SHA-256 of the first request and
/// its outcome sealed (AES-256-GCM) under a key derived from the idempotency key, bound to the app,
/// device and challenge: the store alone cannot give the tokens away, a key reused for another call
/// opens nothing, and a key replayed with another payload (another code, another assertion) is
/// refused instead of being answered with the first call's outcome.
struct IdempotentCall {
    /// The shortest and longest key accepted, in bytes.
    static let keyByteCounts = 16...64
    /// `details.reason` of the RAIN_102 for a key used for another call.
    static let reusedReason = "idempotency_key_reused"

    let kind: IdempotentCallKind
    let keyHash: [UInt8]
    /// The SHA-256 of the request's fields (see `requestHash(_:fields:)`).
    let requestHash: [UInt8]
    /// The challenge (or passkey ceremony) the call uses.
    let challengeID: String
    private let sealKey: SymmetricKey
    private let binding: [UInt8]

    /// nil for a request without a key.
    /// - Parameter request: every field of the request that says what the call does, in a fixed
    ///   order; hashed, so a repeat must carry the same ones.
    /// - Throws: RAIN_102 (field `idempotencyKey`) for a key of the wrong size.
    init?(
        _ kind: IdempotentCallKind, key: [UInt8], appID: String, deviceID: String, challengeID: String,
        request: [[UInt8]], keys: AuthorityKeys
    ) throws(RainError) {
        guard !key.isEmpty else { return nil }
        guard Self.keyByteCounts.contains(key.count) else {
            throw RainError.invalid(
                "the idempotency key is \(Self.keyByteCounts.lowerBound) to \(Self.keyByteCounts.upperBound) bytes",
                field: "idempotencyKey")
        }
        self.kind = kind
        keyHash = keys.tokenHash("idempotency:" + Data(key).base64EncodedString())
        requestHash = Self.requestHash(kind, fields: request)
        // The login code's derivation and binding as they were before the other kinds: a confirm
        // sealed by the previous version still opens.
        sealKey = try HKDFSHA256.deriveKey(from: SymmetricKey(bytes: key), salt: [], info: "rain/idempotent-login/v1")
        binding = Array("\(appID)\u{0}\(deviceID)\u{0}\(challengeID)".utf8)
        self.challengeID = challengeID
    }

    /// A login code confirm's key; the whole request is hashed.
    init?(_ request: ConfirmCodeRequest, keys: AuthorityKeys) throws(RainError) {
        try self.init(
            .loginCode, key: request.idempotencyKey, appID: request.appID, deviceID: request.deviceID,
            challengeID: request.challengeID,
            request: [
                Array(request.appID.utf8), Array(request.deviceID.utf8), Array(request.challengeID.utf8),
                Array(request.code.utf8), request.devicePublicKey, request.idempotencyKey,
            ], keys: keys)
    }

    /// A passkey finish's key; the whole request is hashed.
    init?(_ request: PasskeyFinishRequest, keys: AuthorityKeys) throws(RainError) {
        try self.init(
            .passkeyFinish, key: request.idempotencyKey, appID: request.appID, deviceID: request.deviceID,
            challengeID: request.ceremonyID,
            request: [
                Array(request.appID.utf8), Array(request.deviceID.utf8), Array(request.ceremonyID.utf8),
                Array(request.responseJSON.utf8), request.devicePublicKey, request.idempotencyKey,
            ], keys: keys)
    }

    /// A contact verification confirm's key. The access token and the device's proof are not
    /// hashed: a repeat carries a fresh proof, and a token refreshed meanwhile; the account they
    /// name is checked against the first call's instead (`repeatedVerification`).
    init?(
        contactVerification key: [UInt8], appID: String, deviceID: String, challengeID: String, code: String,
        keys: AuthorityKeys
    ) throws(RainError) {
        try self.init(
            .contactVerification, key: key, appID: appID, deviceID: deviceID, challengeID: challengeID,
            request: [Array(appID.utf8), Array(deviceID.utf8), Array(challengeID.utf8), Array(code.utf8), key],
            keys: keys)
    }

    /// A signature's key: the call's kind and the whole request are hashed; the seal is bound to
    /// the app, the device and the wallet.
    init?(signature request: AuthoritySignRequest, deviceID: String, walletID: String, keys: AuthorityKeys)
        throws(RainError)
    {
        try self.init(
            .signature, key: request.request.idempotencyKey, appID: request.appID, deviceID: deviceID,
            challengeID: walletID, request: [Array(request.kind.utf8), request.request.encode()], keys: keys)
    }

    /// The SHA-256 of a request: a label and the call's kind, then each field with its length
    /// (4 bytes, big-endian) first, so no two different lists of fields hash alike.
    static func requestHash(_ kind: IdempotentCallKind, fields: [[UInt8]]) -> [UInt8] {
        var bytes = Array("rain/idempotent-request/v1\u{0}\(kind.rawValue)\u{0}".utf8)
        for field in fields {
            let count = UInt32(truncatingIfNeeded: field.count)
            bytes += [UInt8(count >> 24), UInt8((count >> 16) & 0xFF), UInt8((count >> 8) & 0xFF), UInt8(count & 0xFF)]
            bytes += field
        }
        return SHA256.hash(bytes)
    }

    /// The claim a passkey finish takes on its key with its ceremony.
    var claim: IdempotentClaim { IdempotentClaim(kind: kind, keyHash: keyHash, requestHash: requestHash) }

    /// The outcome of a call without a login (a contact verified, a passkey added), for its repeats.
    func outcome(expiresAt: Date) throws(RainError) -> IdempotentOutcomeInput {
        try input(sealing: [], expiresAt: expiresAt)
    }

    /// An answer sealed for the call's repeats (a signature's response).
    func outcome(sealing answer: [UInt8], expiresAt: Date) throws(RainError) -> IdempotentOutcomeInput {
        try input(sealing: answer, expiresAt: expiresAt)
    }

    /// A login's outcome, its tokens sealed for its repeats; `issuedAt` lets a repeat hand back the
    /// access token's remaining lifetime.
    func outcome(of tokens: SessionTokens, issuedAt: Date, expiresAt: Date) throws(RainError) -> IdempotentOutcomeInput {
        let plaintext =
            Array(tokens.accessToken.utf8) + [0] + Array(tokens.refreshToken.utf8) + [0]
            + Array("\(tokens.accessLifetime.milliseconds) \(issuedAt.unixMilliseconds)".utf8)
        return try input(sealing: plaintext, expiresAt: expiresAt)
    }

    private func input(sealing plaintext: [UInt8], expiresAt: Date) throws(RainError) -> IdempotentOutcomeInput {
        IdempotentOutcomeInput(
            kind: kind, keyHash: keyHash, challengeID: challengeID, requestHash: requestHash,
            sealedTokens: try AESGCM.seal(plaintext, using: sealKey, authenticating: binding).combined,
            expiresAt: expiresAt)
    }

    /// The first call's outcome opened: empty for a call without a login.
    /// - Throws: RAIN_102 `idempotency_key_reused` when the key belongs to another call (another
    ///   kind, challenge, app or device) or came with another request (another code, another
    ///   assertion); RAIN_501 `outcome_unknown` while the first call (a passkey finish) still runs.
    func open(_ first: IdempotentOutcome) throws(RainError) -> [UInt8] {
        guard first.kind == kind, first.challengeID == challengeID else { throw Self.reused }
        // A row without a hash was written by the previous version during an upgrade; it lives only
        // as long as its challenge and its seal still binds app, device and challenge.
        guard first.requestHash.isEmpty || constantTimeEquals(first.requestHash, requestHash) else {
            throw Self.reused
        }
        if first.isPending {
            throw RainError(
                .provider, "the first request with this idempotency key is still running; ask again in a moment",
                details: RainError.Details(reason: AuthorityOutcome.unknownReason))
        }
        guard let box = try? AESGCM.SealedBox(combined: first.sealedTokens),
            let plaintext = try? AESGCM.open(box, using: sealKey, authenticating: binding)
        else { throw Self.reused }
        return plaintext
    }

    /// The first login's outcome, for this repeat; nil when the first call logged nobody in (a
    /// passkey added).
    /// - Throws: as `open`.
    func login(of first: IdempotentOutcome, now: Date) throws(RainError) -> LoginResult? {
        let plaintext = try open(first)
        guard !plaintext.isEmpty else { return nil }
        let parts = plaintext.split(separator: 0, maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3,
            let numbers = String(bytes: parts[2], encoding: .utf8)?.split(separator: " "), numbers.count == 2,
            let lifetime = Int64(numbers[0]), let issuedAt = Int64(numbers[1]),
            let access = String(bytes: parts[0], encoding: .utf8), let refresh = String(bytes: parts[1], encoding: .utf8)
        else { throw Self.reused }
        let left = max(0, lifetime - (now.unixMilliseconds - issuedAt))
        return LoginResult(
            accountID: first.accountID, walletID: first.walletID, accountCreated: first.accountCreated,
            tokens: SessionTokens(accessToken: access, refreshToken: refresh, accessLifetime: .milliseconds(left)))
    }

    /// The first login's outcome, for a repeat of a call that always logs in.
    /// - Throws: as `open`; RAIN_102 `idempotency_key_reused` when the first call logged nobody in.
    func requiredLogin(of first: IdempotentOutcome, now: Date) throws(RainError) -> LoginResult {
        guard let login = try login(of: first, now: now) else { throw Self.reused }
        return login
    }

    /// RAIN_102 `idempotency_key_reused`: the key belongs to another call.
    static var reused: RainError {
        RainError.invalid(
            "this idempotency key belongs to another request; send a new key for a new request",
            field: "idempotencyKey", reason: Self.reusedReason)
    }
}
