import FoundationEssentials

/// The one error type of RainWallet: a Rain error code, a message for people, typed details and,
/// for debugging only, an underlying cause.
///
/// Errors compare by code, so `catch let e as RainError where e == .invalidLoginCode` reads as in
/// Rain's mobile SDK. Messages never contain a code, token or key.
public struct RainError: Error, Sendable, CustomStringConvertible {
    /// A Rain error number. Prints as `RAIN_203`. Unknown numbers are kept as they are.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public var rawValue: UInt32
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        public init(_ rawValue: UInt32) { self.rawValue = rawValue }
        public var description: String { "RAIN_\(rawValue)" }

        /// RAIN_101: not initialized; the daemon is not running or not reachable.
        public static let notInitialized = Code(101)
        /// RAIN_102: invalid configuration or argument, unknown method, undecodable payload, or a call
        /// not allowed in the current state.
        public static let invalidArgument = Code(102)
        /// RAIN_104: the chain a signature names is not one the wallet supports.
        public static let chainNotSupported = Code(104)
        /// RAIN_201: no session, or the session expired or was revoked.
        public static let sessionExpired = Code(201)
        /// RAIN_202: the caller may not do this.
        public static let unauthorized = Code(202)
        /// RAIN_203: invalid login or verification code (wrong, expired, locked).
        public static let invalidLoginCode = Code(203)
        /// RAIN_301: the authority could not be reached (transient).
        public static let network = Code(301)
        /// RAIN_302: the authority refused (rate limit, contact owned by another account).
        public static let refused = Code(302)
        /// RAIN_401: the user dismissed or cancelled the passkey ceremony.
        public static let userCancelled = Code(401)
        /// RAIN_404: wallet or account unavailable.
        public static let unavailable = Code(404)
        /// RAIN_406: an amount outside its type's range (a uint256 above 2^256 - 1, a negative
        /// unsigned value).
        public static let invalidAmount = Code(406)
        /// RAIN_501: provider error: the authority or the code sender failed.
        public static let provider = Code(501)
        /// RAIN_502: internal error.
        public static let internalError = Code(502)
    }

    /// Typed details that help a caller react without parsing the message.
    public struct Details: Sendable, Equatable {
        /// RAIN_203: wrong attempts left before the code locks.
        public var attemptsRemaining: UInt32?
        /// A machine-readable reason, for example `wrong`, `expired`, `locked`.
        public var reason: String?
        /// RAIN_302: how long until the call may be retried, in milliseconds.
        public var retryAfterMilliseconds: UInt64?
        /// The argument or configuration key that is wrong.
        public var field: String?
        /// Logout: the authority could not be reached (the local session was wiped anyway).
        public var isAuthorityUnreachable: Bool
        /// RAIN_302 from a code send limit: which one (`contact_cooldown`, `contact_window`,
        /// `account_window`).
        public var limit: String?
        /// RAIN_302: when the call may be retried, on the authority's clock (millisecond precision).
        public var retryAfter: Date?

        public init(
            attemptsRemaining: UInt32? = nil, reason: String? = nil, retryAfterMilliseconds: UInt64? = nil,
            field: String? = nil, isAuthorityUnreachable: Bool = false, limit: String? = nil, retryAfter: Date? = nil
        ) {
            self.limit = limit
            self.retryAfter = retryAfter
            self.attemptsRemaining = attemptsRemaining
            self.reason = reason
            self.retryAfterMilliseconds = retryAfterMilliseconds
            self.field = field
            self.isAuthorityUnreachable = isAuthorityUnreachable
        }

        /// True when no detail is set.
        public var isEmpty: Bool { self == Details() }
    }

    /// The Rain error code.
    public var code: Code
    /// A message for people. Never contains secrets.
    public var message: String
    /// Typed details.
    public var details: Details
    /// The underlying cause, for debugging only; never sent over the wire.
    public var underlying: (any Error & Sendable)?

    /// Creates an error.
    public init(_ code: Code, _ message: String, details: Details = Details(), underlying: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message
        self.details = details
        self.underlying = underlying
    }

    /// A code-only value for comparisons such as `error == .invalidLoginCode`.
    public init(code: Code) { self.init(code, code.description) }

    public var description: String { "\(code): \(message)" }

    public static let notInitialized = RainError(code: .notInitialized)
    public static let invalidArgument = RainError(code: .invalidArgument)
    public static let sessionExpired = RainError(code: .sessionExpired)
    public static let unauthorized = RainError(code: .unauthorized)
    public static let invalidLoginCode = RainError(code: .invalidLoginCode)
    public static let network = RainError(code: .network)
    public static let refused = RainError(code: .refused)
    public static let userCancelled = RainError(code: .userCancelled)
    public static let unavailable = RainError(code: .unavailable)
    public static let provider = RainError(code: .provider)
    public static let internalError = RainError(code: .internalError)

    /// RAIN_202's reason for a sensitive request that was queued before the daemon read the
    /// caller's identity: it may have been written by the program the caller ran before an exec.
    /// Retryable: the client library sends it again, once, on the same connection.
    public static let sentBeforeIdentityReason = "sent_before_identity"

    /// The refusal of a sensitive request queued before the caller's identity was read.
    public static func sentBeforeIdentity() -> RainError {
        RainError(
            .unauthorized,
            """
            this request reached rainwalletd before it had read which program opened the connection: send it \
            again on the same connection
            """, details: .init(reason: sentBeforeIdentityReason, retryAfterMilliseconds: 0))
    }
}

extension RainError: Equatable {
    /// Errors are equal when their codes are equal.
    public static func == (lhs: RainError, rhs: RainError) -> Bool { lhs.code == rhs.code }
}

extension RainError {
    /// RAIN_102 naming the argument that is wrong.
    public static func invalid(_ message: String, field: String? = nil, reason: String? = nil) -> RainError {
        RainError(.invalidArgument, message, details: Details(reason: reason, field: field))
    }

    /// Wraps any error as RAIN_502 unless it already is a `RainError`.
    public static func wrapping(_ error: any Error, context: String) -> RainError {
        if let rain = error as? RainError { return rain }
        return RainError(.internalError, "internal error: \(context)", underlying: SendableErrorDescription(error))
    }
}

/// A `Sendable` record of a non-`Sendable` error's description, for `RainError.underlying`.
public struct SendableErrorDescription: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ error: any Error) { self.description = String(describing: error) }
}
