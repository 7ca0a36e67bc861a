import RainCore

/// The send limits `insertChallenge` enforces inside its transaction (DESIGN §6).
///
/// Every code sent counts (login codes and contact verifications alike, whatever became of them),
/// per contact and per account key; a refused send is not stored and so never counts.
public struct CodeSendLimits: Sendable, Equatable {
    /// The least time between two sends to one contact (30 s by default).
    public var contactCooldown: Duration
    /// The window `contactMaxSends` is counted over (15 minutes by default).
    public var contactWindow: Duration
    /// The most sends to one contact within `contactWindow` (5 by default).
    public var contactMaxSends: Int
    /// The window `accountMaxSends` is counted over (1 hour by default).
    public var accountWindow: Duration
    /// The most sends for one account key (across its contacts) within `accountWindow` (10 by
    /// default).
    public var accountMaxSends: Int

    /// Creates limits; the defaults are DESIGN §6's.
    public init(
        contactCooldown: Duration = .seconds(30), contactWindow: Duration = .seconds(900), contactMaxSends: Int = 5,
        accountWindow: Duration = .seconds(3600), accountMaxSends: Int = 10
    ) {
        self.contactCooldown = contactCooldown
        self.contactWindow = contactWindow
        self.contactMaxSends = contactMaxSends
        self.accountWindow = accountWindow
        self.accountMaxSends = accountMaxSends
    }

    /// No limit at all (for tests that send many codes quickly).
    public static let unlimited = CodeSendLimits(
        contactCooldown: .zero, contactWindow: .zero, contactMaxSends: .max, accountWindow: .zero,
        accountMaxSends: .max)

    /// The longest time a send can still count against a limit: stored challenges must be kept at
    /// least this long after they were created (pruning keeps them).
    public var longestWindow: Duration { max(contactCooldown, contactWindow, accountWindow) }
}

/// Which send limit refused a code.
public enum CodeSendLimit: String, Sendable, Equatable, CaseIterable {
    /// Too soon after the last send to the same contact.
    case contactCooldown
    /// Too many sends to the same contact within the contact window.
    case contactWindow
    /// Too many sends for the same account (across its contacts) within the account window.
    case accountWindow
}
