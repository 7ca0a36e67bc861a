import FoundationEssentials
import RainAuthorityAPI
import RainCore
import RainWire

/// The kind of call an idempotency key belongs to (the `kind` column of
/// `idempotent_logins`). One key names one call: a key reused for another kind is refused.
package enum IdempotentCallKind: String, Sendable, Equatable {
    /// `Authority/ConfirmLoginCode` (the rows written before the column existed).
    case loginCode = "login_code"
    /// `Authority/FinishPasskeyRegistration` and `FinishPasskeyAuthentication`.
    case passkeyFinish = "passkey_finish"
    /// `Authority/ConfirmContactVerification`.
    case contactVerification = "contact_verification"
    /// `Authority/SignWithWallet`.
    case signature
}

/// A passkey finish's idempotency key, claimed with its ceremony.
package struct IdempotentClaim: Sendable, Equatable {
    /// The call.
    package var kind: IdempotentCallKind
    /// The keyed hash of the device's idempotency key.
    package var keyHash: [UInt8]
    /// The SHA-256 of the request that claims the key: a repeat that arrives while the finish runs
    /// must carry the same request.
    package var requestHash: [UInt8]

    /// Creates the claim.
    package init(kind: IdempotentCallKind, keyHash: [UInt8], requestHash: [UInt8]) {
        self.kind = kind
        self.keyHash = keyHash
        self.requestHash = requestHash
    }
}

/// What a call with an idempotency key stores with its effect, in the same transaction.
package struct IdempotentOutcomeInput: Sendable, Equatable {
    /// The call.
    package var kind: IdempotentCallKind
    /// The keyed hash of the device's idempotency key (the key itself is never stored).
    package var keyHash: [UInt8]
    /// The challenge (a confirm, a contact verification) or ceremony (a passkey finish) it used.
    package var challengeID: String
    /// The SHA-256 of the request (see `IdempotentOutcome.requestHash`).
    package var requestHash: [UInt8]
    /// The outcome (a login's tokens, or nothing), sealed under a key derived from the idempotency
    /// key and bound to the app, device and challenge: only the device that holds it can open it.
    /// Never empty (an empty value marks a passkey finish still running).
    package var sealedTokens: [UInt8]
    /// Until when a repeat gets this outcome: the challenge's or ceremony's expiry.
    package var expiresAt: Date

    /// Creates the input.
    package init(
        kind: IdempotentCallKind = .loginCode, keyHash: [UInt8], challengeID: String, requestHash: [UInt8],
        sealedTokens: [UInt8], expiresAt: Date
    ) {
        self.kind = kind
        self.keyHash = keyHash
        self.challengeID = challengeID
        self.requestHash = requestHash
        self.sealedTokens = sealedTokens
        self.expiresAt = expiresAt
    }
}

/// The first outcome of a call with an idempotency key, returned to its repeats.
package struct IdempotentOutcome: Sendable, Equatable {
    /// The call.
    package var kind: IdempotentCallKind = .loginCode
    /// The challenge (a confirm, a contact verification) or ceremony (a passkey finish) it used.
    package var challengeID: String
    /// The SHA-256 of the first request, which every repeat with its key must match: a key
    /// replayed with another payload (another code, another assertion) is another call. Empty for
    /// a row written by a version that did not record it (during a rolling upgrade).
    package var requestHash: [UInt8] = []
    /// The account it logged in to or changed; empty while a passkey finish is still running.
    package var accountID: String
    /// The account's wallet after a login; empty otherwise.
    package var walletID: String
    /// Whether the login created the account.
    package var accountCreated: Bool
    /// The sealed outcome; empty while a passkey finish that claimed the key is still running.
    package var sealedTokens: [UInt8]

    /// Whether this is a passkey finish's claim with no outcome yet (the finish is still running).
    package var isPending: Bool { sealedTokens.isEmpty }
}
