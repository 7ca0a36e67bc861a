import Foundation
import RainCore

/// A command-line usage mistake (exit status 64).
public struct UsageError: Error, Sendable {
    public var message: String
    /// The help text of the command the mistake was made in.
    public var help: String?
    public init(_ message: String, help: String? = nil) {
        self.message = message
        self.help = help
    }
}

/// The one place that turns any error into what the CLI prints and its exit status (DESIGN §7).
public enum ErrorPresentation {
    /// The exit status of a Rain error code.
    public static func exitStatus(for code: RainError.Code) -> Int32 {
        switch code {
        case .notInitialized: return 2
        case .invalidArgument: return 3
        case .sessionExpired: return 4
        case .unauthorized: return 5
        case .invalidLoginCode: return 6
        case .network: return 7
        case .refused: return 8
        case .userCancelled: return 9
        case .unavailable: return 10
        case .provider: return 11
        default: return 1
        }
    }

    /// Text for stderr and the exit status.
    public static func present(_ error: any Error) -> (text: String, status: Int32) {
        switch error {
        case let usage as UsageError:
            var text = "error: \(usage.message)"
            if let help = usage.help { text += "\n\n\(help)" }
            return (text, 64)
        case let rain as RainError:
            var text = "error: \(rain.code): \(rain.message)"
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
