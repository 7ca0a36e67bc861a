import Foundation
import RainCore
import RainCrypto
import RainStore
import RainWire

/// Issue 20: a confirm whose answer was lost can be asked again. The device sends a random
/// idempotency key per logical confirm; the authority stores the first login's outcome with it,
/// in the login's own transaction, and a repeat within the challenge's lifetime gets that outcome
/// back (the same account, wallet and tokens) instead of a second login, on any instance sharing
/// the store.
///
/// What is stored is the key's keyed hash and the tokens sealed (AES-256-GCM) under a key derived
/// from the idempotency key, bound to the app, device and challenge: the store alone cannot give
/// the tokens away, and a key reused for another confirm opens nothing.
struct IdempotentConfirm {
    /// The shortest and longest key accepted, in bytes.
    static let keyByteCounts = 16...64
    /// `details.reason` of the RAIN_102 for a key used for another confirm.
    static let reusedReason = "idempotency_key_reused"

    let keyHash: [UInt8]
    private let sealKey: SymmetricKey
    private let binding: [UInt8]
    private let challengeID: String

    /// nil for a request without a key.
    /// - Throws: RAIN_102 (field `idempotencyKey`) for a key of the wrong size.
    init?(_ request: ConfirmCodeRequest, keys: AuthorityKeys) throws(RainError) {
        let key = request.idempotencyKey
        guard !key.isEmpty else { return nil }
        guard Self.keyByteCounts.contains(key.count) else {
            throw RainError.invalid(
                "the idempotency key is \(Self.keyByteCounts.lowerBound) to \(Self.keyByteCounts.upperBound) bytes",
                field: "idempotencyKey")
        }
        keyHash = keys.tokenHash("idempotency:" + Data(key).base64EncodedString())
        sealKey = try HKDFSHA256.deriveKey(from: SymmetricKey(bytes: key), salt: [], info: "rain/idempotent-login/v1")
        binding = Array("\(request.appID)\u{0}\(request.deviceID)\u{0}\(request.challengeID)".utf8)
        challengeID = request.challengeID
    }

    /// The login's tokens, sealed for its repeats; `issuedAt` lets a repeat hand back the access
    /// token's remaining lifetime.
    func seal(_ tokens: SessionTokens, issuedAt: Date) throws(RainError) -> [UInt8] {
        let plaintext =
            Array(tokens.accessToken.utf8) + [0] + Array(tokens.refreshToken.utf8) + [0]
            + Array("\(tokens.accessLifetime.milliseconds) \(issuedAt.unixMilliseconds)".utf8)
        return try AESGCM.seal(plaintext, using: sealKey, authenticating: binding).combined
    }

    /// The first login's outcome, for this repeat.
    /// - Throws: RAIN_102 `idempotency_key_reused` when the key belongs to another confirm (another
    ///   challenge, app or device).
    func result(of first: IdempotentLogin, now: Date) throws(RainError) -> LoginResult {
        let reused = RainError.invalid(
            "this idempotency key belongs to another confirm; send a new key for a new confirm",
            field: "idempotencyKey", reason: Self.reusedReason)
        guard first.challengeID == challengeID,
            let box = try? AESGCM.SealedBox(combined: first.sealedTokens),
            let plaintext = try? AESGCM.open(box, using: sealKey, authenticating: binding)
        else { throw reused }
        let parts = plaintext.split(separator: 0, maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3,
            let numbers = String(bytes: parts[2], encoding: .utf8)?.split(separator: " "), numbers.count == 2,
            let lifetime = Int64(numbers[0]), let issuedAt = Int64(numbers[1]),
            let access = String(bytes: parts[0], encoding: .utf8), let refresh = String(bytes: parts[1], encoding: .utf8)
        else { throw reused }
        let left = max(0, lifetime - (now.unixMilliseconds - issuedAt))
        return LoginResult(
            accountID: first.accountID, walletID: first.walletID, accountCreated: first.accountCreated,
            tokens: SessionTokens(accessToken: access, refreshToken: refresh, accessLifetime: .milliseconds(left)))
    }
}
