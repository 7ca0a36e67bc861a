import FoundationEssentials
import RainCore
import RainCrypto

/// What the daemon remembers of prompt places, kept in the sealed approvals record (`apps.json`).
///
/// Trusting the first place (with nothing to confirm it on) is only safe while no place has ever
/// existed. Once one has, closing it (killing its shell) must not make the next `rainwallet prompt
/// here` a first place again: a program of the user could register a terminal it holds and answer
/// every prompt itself. So the record says a place existed, and from then on a new place is
/// confirmed on the display when there is one, on the place still open, or, on a machine with
/// neither, by the secret the user chose when registering the first place, followed by a wait
/// (`moveWait`) and audited, so that a stolen secret still gives the user time to notice.
///
/// A program that holds the storage key can rewrite this record (as it can the approvals): the
/// record stops programs that reach the wallet through the socket, not those that read the state
/// directory's keys.
public struct PromptPlaceHistory: Codable, Sendable, Equatable {
    /// The secret that confirms a new place when no place and no display are left: only its
    /// PBKDF2-HMAC-SHA256, never the text.
    public struct Secret: Codable, Sendable, Equatable {
        /// The salt (16 random bytes), base64.
        public var salt: String
        /// PBKDF2-HMAC-SHA256(secret, salt, iterations), base64.
        public var hash: String
        /// The PBKDF2 iteration count.
        public var iterations: Int
    }

    /// A new place confirmed by the secret, registered once the wait is over.
    public struct PendingMove: Codable, Sendable, Equatable {
        /// The terminal asked for.
        public var place: PromptPlace
        /// When it may take over (Unix milliseconds).
        public var movesAtMilliseconds: Int64

        /// A move to `place` that takes over at `movesAtMilliseconds`.
        public init(place: PromptPlace, movesAtMilliseconds: Int64) {
            self.place = place
            self.movesAtMilliseconds = movesAtMilliseconds
        }
    }

    /// When the first place was registered (ISO 8601, UTC).
    public var firstRegisteredAt: String
    /// The place secret, when one was chosen.
    public var secret: Secret?
    /// Wrong secrets in a row since the last right one or the last lock.
    public var failedTries: Int
    /// No secret is checked before this time (Unix milliseconds).
    public var lockedUntilMilliseconds: Int64?
    /// The move under way.
    public var pendingMove: PendingMove?

    /// The secret's least length, in characters.
    public static let minimumSecretLength = 8
    /// PBKDF2 iterations for a new secret (OWASP's figure for PBKDF2-HMAC-SHA256).
    public static let iterations = 600_000
    /// Wrong secrets before the lock.
    public static let triesBeforeLock = 5
    /// How long the lock lasts.
    public static let lockDuration: Duration = .seconds(600)
    /// How long a move confirmed by the secret waits before it takes over.
    public static let moveWait: Duration = .seconds(600)

    /// A history that begins with a place registered at `time`.
    public init(firstRegisteredAt time: Date) {
        firstRegisteredAt = AppApprovals.timestamp(time)
        failedTries = 0
    }

    /// A secret the user chose, as kept.
    /// - Parameter iterations: PBKDF2 iterations (tests lower it).
    /// - Throws: RAIN_102 `prompt_secret_too_short` (field `secret`) below `minimumSecretLength`.
    public static func makeSecret(_ text: String, iterations: Int = iterations) throws(RainError) -> Secret {
        guard text.count >= minimumSecretLength else {
            throw RainError(
                .invalidArgument,
                "the place secret must have at least \(minimumSecretLength) characters: choose a longer one",
                details: RainError.Details(reason: PromptReason.secretTooShort, field: "secret"))
        }
        let salt = try SymmetricKey.random(byteCount: 16).withUnsafeBytes { Array($0) }
        let hash = try derive(text, salt: salt, iterations: iterations)
        return Secret(salt: Data(salt).base64EncodedString(), hash: Data(hash).base64EncodedString(), iterations: iterations)
    }

    /// Whether `text` is the secret (constant time over the derived bytes).
    public static func matches(_ text: String, _ secret: Secret) throws(RainError) -> Bool {
        guard let salt = Data(base64Encoded: secret.salt), let expected = Data(base64Encoded: secret.hash),
            secret.iterations >= 1
        else {
            throw RainError(.internalError, "the recorded place secret cannot be read")
        }
        return constantTimeEquals(try derive(text, salt: Array(salt), iterations: secret.iterations), Array(expected))
    }

    private static func derive(_ text: String, salt: [UInt8], iterations: Int) throws(RainError) -> [UInt8] {
        try PBKDF2HMACSHA256.deriveKey(password: Array(text.utf8), salt: salt, iterations: iterations)
            .withUnsafeBytes { Array($0) }
    }

    /// How long the lock still lasts at `now`; nil when no lock holds.
    public func lockRemaining(at now: Date) -> Duration? {
        guard let until = lockedUntilMilliseconds else { return nil }
        let left = until - Self.milliseconds(now)
        return left > 0 ? .milliseconds(left) : nil
    }

    /// Counts a wrong secret; the fifth in a row locks for `lockDuration`.
    /// - Returns: the error to answer once the history is saved: RAIN_401 `prompt_secret_wrong`
    ///   with the tries left, or RAIN_302 `prompt_secret_locked` with retry-after.
    public mutating func recordWrongSecret(at now: Date) -> RainError {
        failedTries += 1
        guard failedTries >= Self.triesBeforeLock else {
            let left = Self.triesBeforeLock - failedTries
            return RainError(
                .userCancelled,
                "that is not the place secret; \(left) \(left == 1 ? "try" : "tries") left before a \(Self.lockDuration.components.seconds / 60)-minute lock",
                details: RainError.Details(attemptsRemaining: UInt32(left), reason: PromptReason.secretWrong, field: "secret"))
        }
        failedTries = 0
        lockedUntilMilliseconds = Self.milliseconds(now) + Self.lockDuration.milliseconds
        return Self.locked(Self.lockDuration)
    }

    /// RAIN_302 `prompt_secret_locked`, with retry-after.
    public static func locked(_ remaining: Duration) -> RainError {
        RainError(
            .refused,
            "\(triesBeforeLock) wrong place secrets in a row: no secret is checked for \(minutes(remaining)); try again then",
            details: RainError.Details(
                reason: PromptReason.secretLocked, retryAfterMilliseconds: UInt64(max(0, remaining.milliseconds))))
    }

    /// RAIN_302 `prompt_move_waiting`: the move to `terminal` was confirmed and takes over once
    /// `remaining` has passed.
    public static func waiting(_ terminal: String, _ remaining: Duration) -> RainError {
        RainError(
            .refused,
            "the place secret is right; the prompts move to \(terminal) after a wait of \(minutes(remaining)) (a stolen "
                + "secret leaves the user that long to notice in `rainwallet audit`): run `rainwallet prompt here` "
                + "there again then",
            details: RainError.Details(
                reason: PromptReason.moveWaiting, retryAfterMilliseconds: UInt64(max(0, remaining.milliseconds))))
    }

    /// A wait as people read it: "10 min", "40 s".
    public static func minutes(_ d: Duration) -> String {
        let seconds = max(0, d.components.seconds)
        return seconds >= 60 ? "\((seconds + 59) / 60) min" : "\(seconds) s"
    }

    /// A time as Unix milliseconds.
    public static func milliseconds(_ time: Date) -> Int64 { Int64((time.timeIntervalSince1970 * 1000).rounded()) }
}
