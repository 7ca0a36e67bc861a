import RainCore

/// What the platform authenticator asks of the person in front of the machine: the daemon answers
/// with its trusted prompt (the typed code for presence, a PIN entry for the PIN).
public struct PlatformAuthenticatorHooks: Sendable {
    /// Returns once the user confirmed this ceremony; throws (RAIN_401) when they did not. UP is set
    /// only after it returned.
    public var confirmPresence: @Sendable (PlatformPresenceRequest) async throws(RainError) -> Void
    /// Returns the PIN the user typed, or nil when they gave none: for `.choose`, nil keeps the
    /// passkey without a PIN (no UV); for `.enter`, nil cancels the ceremony (RAIN_401).
    public var askPIN: @Sendable (PlatformPINRequest) async throws(RainError) -> PlatformPIN?

    /// Hooks from two closures.
    /// - Parameters:
    ///   - confirmPresence: confirms the ceremony with the user.
    ///   - askPIN: asks the user for the PIN.
    public init(
        confirmPresence: @escaping @Sendable (PlatformPresenceRequest) async throws(RainError) -> Void,
        askPIN: @escaping @Sendable (PlatformPINRequest) async throws(RainError) -> PlatformPIN?
    ) {
        self.confirmPresence = confirmPresence
        self.askPIN = askPIN
    }
}

/// What the user is asked to confirm.
public struct PlatformPresenceRequest: Sendable, Equatable {
    /// Which ceremony.
    public enum Ceremony: Sendable, Equatable {
        /// A new passkey.
        case registration
        /// A sign-in with an existing passkey.
        case authentication
    }

    /// Which ceremony.
    public var ceremony: Ceremony
    /// The relying party (passkey domain).
    public var rpID: String
    /// The account name the relying party gave the passkey.
    public var userName: String

    /// Creates a request.
    public init(ceremony: Ceremony, rpID: String, userName: String) {
        self.ceremony = ceremony
        self.rpID = rpID
        self.userName = userName
    }
}

/// What the user is asked for.
public enum PlatformPINRequest: Sendable, Equatable {
    /// No PIN is set yet: choose one (at least `PlatformPIN.minimumDigits` digits), which every
    /// later PIN-protected passkey shares, or none (this passkey then never sets UV, and a program
    /// of the user that can open the TPM can sign with it: see docs/security.md).
    case choose(rpID: String)
    /// Enter the PIN. `triesLeft`: wrong tries before rainwallet stops asking (one short of the
    /// TPM's lockout); nil when the TPM does not count wrong tries.
    case enter(rpID: String, triesLeft: UInt32?)
}
