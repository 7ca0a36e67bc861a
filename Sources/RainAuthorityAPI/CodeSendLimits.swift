import FoundationEssentials
import Glibc
import RainCore
import RainTransport

/// The send limits `insertChallenge` enforces inside its transaction, and the wrong-guess budgets
/// every code check spends (docs/operations.md "Send limits").
///
/// Every code sent counts (login codes and contact verifications alike, whatever became of them);
/// a refused send is not stored and so never counts. The per-app limits (per contact and per
/// account key of one app) keep one app's users apart; the limits across apps (per contact, and
/// per source: the uid of the daemon whose embedded authority sends, or the source address of a
/// remote authority's caller) cannot be sidestepped by picking another app id or profile.
public struct CodeSendLimits: Sendable, Equatable {
    /// The least time between two sends to one contact in one app (30 s by default).
    public var contactCooldown: Duration
    /// The window `contactMaxSends` is counted over (15 minutes by default).
    public var contactWindow: Duration
    /// The most sends to one contact in one app within `contact_window` (5 by default).
    public var contactMaxSends: Int
    /// The window `accountMaxSends` is counted over (1 hour by default).
    public var accountWindow: Duration
    /// The most sends for one account key (across its contacts) within `account_window` (10 by
    /// default).
    public var accountMaxSends: Int
    /// The window `contactAllAppsMaxSends` is counted over (15 minutes by default).
    public var contactAllAppsWindow: Duration
    /// The most sends to one contact across every app within `contact_all_apps_window` (10 by
    /// default).
    public var contactAllAppsMaxSends: Int
    /// The window `sourceMaxSends` is counted over (1 minute by default).
    public var sourceWindow: Duration
    /// The most sends from one source (a daemon's uid, or a caller's address) across every app
    /// and contact within `source_window` (20 by default).
    public var sourceMaxSends: Int
    /// The window the wrong-guess budgets are counted over (1 hour by default).
    public var guessWindow: Duration
    /// The most wrong codes one device key may submit within `guessWindow`, across every app,
    /// account and challenge (20 by default). The per-code lock stops guessing at one code; this
    /// stops a device that spreads its guesses over many accounts.
    public var deviceKeyMaxWrongGuesses: Int
    /// The most wrong codes from one source (a daemon's uid, or a caller's address, an IPv6 one as
    /// its /64) within `guessWindow`, whatever the device key (500 by default): a caller can mint
    /// device keys, not addresses. High enough that an office behind one address is not locked out
    /// by one typist.
    public var sourceMaxWrongGuesses: Int

    /// Creates limits; the defaults are the ones docs/operations.md "Send limits" documents.
    public init(
        contactCooldown: Duration = .seconds(30), contactWindow: Duration = .seconds(900), contactMaxSends: Int = 5,
        accountWindow: Duration = .seconds(3600), accountMaxSends: Int = 10,
        contactAllAppsWindow: Duration = .seconds(900), contactAllAppsMaxSends: Int = 10,
        sourceWindow: Duration = .seconds(60), sourceMaxSends: Int = 20,
        guessWindow: Duration = .seconds(3600), deviceKeyMaxWrongGuesses: Int = 20, sourceMaxWrongGuesses: Int = 500
    ) {
        self.contactCooldown = contactCooldown
        self.contactWindow = contactWindow
        self.contactMaxSends = contactMaxSends
        self.accountWindow = accountWindow
        self.accountMaxSends = accountMaxSends
        self.contactAllAppsWindow = contactAllAppsWindow
        self.contactAllAppsMaxSends = contactAllAppsMaxSends
        self.sourceWindow = sourceWindow
        self.sourceMaxSends = sourceMaxSends
        self.guessWindow = guessWindow
        self.deviceKeyMaxWrongGuesses = deviceKeyMaxWrongGuesses
        self.sourceMaxWrongGuesses = sourceMaxWrongGuesses
    }

    /// No limit at all (for tests that send many codes quickly).
    public static let unlimited = CodeSendLimits(
        contactCooldown: .zero, contactWindow: .zero, contactMaxSends: .max, accountWindow: .zero,
        accountMaxSends: .max, contactAllAppsWindow: .zero, contactAllAppsMaxSends: .max, sourceWindow: .zero,
        sourceMaxSends: .max, guessWindow: .zero, deviceKeyMaxWrongGuesses: .max, sourceMaxWrongGuesses: .max)

    /// The longest time a send or a wrong guess can still count against a limit: stored challenges
    /// and wrong guesses must be kept at least this long (pruning keeps them).
    public var longestWindow: Duration {
        max(contactCooldown, contactWindow, accountWindow, contactAllAppsWindow, sourceWindow, guessWindow)
    }

    /// Whether either wrong-guess budget is on (a zero window, or no maximum, turns one off).
    public var hasGuessBudgets: Bool {
        guessWindow > .zero && (deviceKeyMaxWrongGuesses < Int.max || sourceMaxWrongGuesses < Int.max)
    }
}

/// Which wrong-guess budget refused to check a code (`CodeSendLimits.deviceKeyMaxWrongGuesses`,
/// `CodeSendLimits.sourceMaxWrongGuesses`). The raw values are the `reason` and `limit` of the
/// RAIN_302 (snake_case, as every reason), named like `CodeSendLimit`'s.
public enum CodeGuessLimit: String, Sendable, Equatable, CaseIterable {
    /// Too many wrong codes from the same device key within the guess window.
    case deviceKeyGuessWindow = "device_key_guess_window"
    /// Too many wrong codes from the same source (a daemon's uid, or a caller's address) within
    /// the guess window.
    case sourceGuessWindow = "source_guess_window"
}

/// Which send limit refused a code. The raw values are the `reason` and `limit` of the RAIN_302.
public enum CodeSendLimit: String, Sendable, Equatable, CaseIterable {
    /// Too soon after the last send to the same contact in the same app.
    case contactCooldown = "contact_cooldown"
    /// Too many sends to the same contact in the same app within the contact window.
    case contactWindow = "contact_window"
    /// Too many sends for the same account (across its contacts) within the account window.
    case accountWindow = "account_window"
    /// Too many sends to the same contact across every app within its window.
    case contactAllAppsWindow = "contact_all_apps_window"
    /// Too many sends from the same source (a daemon's uid, or a caller's address) within the
    /// source window.
    case sourceWindow = "source_window"
}

/// Where a code send comes from, for `CodeSendLimits.sourceMaxSends`: the uid of the device daemon
/// whose embedded authority sends, or the source address of a remote authority's caller. Never
/// chosen by the caller: the authority takes it from what the kernel says about the connection.
public struct SendSource: Sendable, Hashable, CustomStringConvertible {
    /// The stored form (`uid:1000`, `ip:192.0.2.7`, `ip:2001:db8::1`).
    public let key: String

    /// The source of a local caller with this uid (a device daemon's own embedded authority, or a
    /// Unix-socket caller).
    public static func uid(_ uid: UInt32) -> SendSource { SendSource(key: "uid:\(uid)") }

    /// The source of a TCP caller at this numeric address. An IPv6 address counts as its /64
    /// network (`ip:2001:db8:1:2::/64`): one host usually holds a whole /64, and could otherwise
    /// pick a new address for every send.
    public static func address(_ address: String) -> SendSource {
        guard address.contains(":"), let network = ipv6Network64(address) else { return SendSource(key: "ip:\(address)") }
        return SendSource(key: "ip:\(network)/64")
    }

    /// The /64 network of an IPv6 address in its canonical text form, or nil when `text` is not
    /// one.
    private static func ipv6Network64(_ text: String) -> String? {
        var address = in6_addr()
        guard inet_pton(AF_INET6, text, &address) == 1 else { return nil }
        // The network: the first 8 bytes, the interface part zeroed.
        let network = withUnsafeBytes(of: &address) { Array($0.prefix(8)) } + [UInt8](repeating: 0, count: 8)
        return TCPSocket.addressText(network)
    }

    /// A TCP caller whose address the server could not read: every such caller shares it.
    public static let unknownAddress = SendSource(key: "ip:unknown")

    /// The stored form.
    public var description: String { key }
}
