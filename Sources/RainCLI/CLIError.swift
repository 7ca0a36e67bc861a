import FoundationEssentials
import RainCommandLine
import RainCore

/// The one place that turns any error into what the CLI prints and its exit status (DESIGN §7).
public enum ErrorPresentation {
    /// The exit status of each Rain error code, with what it means; any other code exits 1.
    static let table: [(code: RainError.Code, status: Int32, meaning: String)] = [
        (.notInitialized, 2, "daemon not reachable"),
        (.invalidArgument, 3, "invalid argument"),
        (.chainNotSupported, 12, "chain not supported"),
        (.sessionExpired, 4, "no session"),
        (.unauthorized, 5, "unauthorized"),
        (.invalidLoginCode, 6, "invalid code"),
        (.network, 7, "network"),
        (.refused, 8, "refused"),
        (.userCancelled, 9, "cancelled"),
        (.unavailable, 10, "unavailable"),
        (.invalidAmount, 13, "invalid amount"),
        (.provider, 11, "provider"),
        (.internalError, 1, "internal"),
    ]

    /// The exit status of a Rain error code.
    public static func exitStatus(for code: RainError.Code) -> Int32 {
        table.first { $0.code == code }?.status ?? 1
    }

    /// Every exit status of the CLI, for its help: 0, usage (64), then the table.
    static var exitStatuses: [Command.ExitStatus] {
        [Command.ExitStatus(0, "ok"), Command.ExitStatus(UsageError.exitStatus, "usage")]
            + table.map { Command.ExitStatus($0.status, "\($0.meaning) (\($0.code))") }
    }

    /// Text for stderr and the exit status.
    public static func present(_ error: any Error) -> (text: String, status: Int32) {
        switch error {
        case let usage as UsageError:
            var text = "error: \(usage.message)"
            if let help = usage.help, !help.isEmpty { text += "\n\n\(help)" }
            return (text, UsageError.exitStatus)
        case let rain as RainError:
            // The message may quote an app's path, which any program of the user chooses.
            var text = "error: \(rain.code): \(Logger.escapingHiddenCharacters(rain.message))"
            var extras: [String] = []
            if let a = rain.details.attemptsRemaining { extras.append("attempts remaining: \(a)") }
            // A send-limit refusal's message already says when to try again (`retryAfter`).
            if rain.details.retryAfter == nil, let r = rain.details.retryAfterMilliseconds {
                extras.append("retry after: \(Double(r) / 1000) s")
            }
            if rain.details.isAuthorityUnreachable { extras.append("the authority could not be reached") }
            if !extras.isEmpty { text += " (\(extras.joined(separator: "; ")))" }
            return (text, exitStatus(for: rain.code))
        default:
            return ("error: RAIN_502: internal error: \(error)", 1)
        }
    }

    /// The `--json` form of a usage error (exit 64): the shape of every other failure's, with code
    /// RAIN_102, `reason` "usage" and `field` the word at fault: `{"error": {"code": "RAIN_102",
    /// "message": "unknown command `stauts`; did you mean `status`?", "reason": "usage", "field": "stauts"}}`.
    public static func jsonObject(_ usage: UsageError) -> [String: Any?] {
        var object: [String: Any?] = [
            "code": RainError.Code.invalidArgument.description, "message": usage.message, "reason": "usage",
        ]
        if let word = usage.word { object["field"] = word }
        return ["error": object]
    }

    /// The `--json` form of an error: `{"error": {"code": "RAIN_302", "message", ...}}` with the
    /// details that are set (`reason`, `field`, `attemptsRemaining`, `limit`, `retryAfter` as RFC
    /// 3339 UTC, `retryAfterSeconds` rounded up, `authorityUnreachable`).
    public static func jsonObject(_ rain: RainError) -> [String: Any?] {
        let d = rain.details
        var object: [String: Any?] = ["code": rain.code.description, "message": rain.message]
        if let v = d.reason { object["reason"] = v }
        if let v = d.field { object["field"] = v }
        if let v = d.attemptsRemaining { object["attemptsRemaining"] = Int(v) }
        if let v = d.limit { object["limit"] = v }
        if let v = d.retryAfter { object["retryAfter"] = RFC3339.string(from: v, fractional: true) }
        if let v = d.retryAfterMilliseconds { object["retryAfterSeconds"] = Int((v + 999) / 1000) }
        if d.isAuthorityUnreachable { object["authorityUnreachable"] = true }
        return ["error": object]
    }
}
