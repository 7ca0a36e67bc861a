import FoundationEssentials
import Glibc
import RainCommandLine
import RainCore
import RainWallet

/// `rainwallet audit [--since TIME] [--json] [--verify]`: the daemon's audit log of sensitive
/// operations, read through the daemon (the CLI never opens the file).
enum AuditCommand: CLICommand {
    static let declaration = Command(
        name: "audit", abstract: "show the audit log of sensitive operations, or check it",
        discussion: """
            Shows what rainwalletd recorded: logins, logouts, revocations, exports, passkeys and
            contacts added, app approvals and refusals, prompt results and settings changes, each
            with its time (UTC), profile, app (path, hash prefix, pid) and result. Never a secret.

            Each entry carries the SHA-256 of the one before it. --verify checks that chain
            through every file kept and exits 1 naming the first broken line (edited, deleted,
            reordered, truncated); a torn last line (a crash mid-write) is reported but is not
            tampering (exit 0). With a remote authority it also says whether, when the daemon
            started, the log held the head it keeps at the authority, and exits 1 when it did not
            (anchor_mismatch: the log was cut or rewritten while the daemon was stopped). Only the
            daemon's own uid may read the log.
            """,
        options: [
            Command.Option(
                "--since", value: "TIME",
                help: "only entries from TIME on: ISO 8601 (2026-12-01T20:00:00Z, 2026-12-01) or an age (90s, 30m, 1h, 2d, 1w)"),
            .flag("--verify", help: "check the hash chain instead of listing; exit 1 naming the first broken line"),
        ],
        json: .init(
            .lines,
            [
                .init("seq", "the entry's number, from 1, across rotated files"),
                .init("time", "ISO 8601 UTC with milliseconds"),
                .init("event", "login, logout, revocation, export, passkey_added, contact_added, app_refused, …"),
                .init("profile", "the profile, when the event concerns one"),
                .init(
                    "app", "the caller",
                    fields: [
                        .init("path", "executable (and script)"), .init("hash", "12 hex digits of its SHA-256"),
                        .init("scriptHash", "for an interpreter, 12 hex digits of the script's SHA-256"),
                        .init("pid", "process id"), .init("uid", "user id"),
                        .init("unit", "the systemd unit it ran in, when it ran in one"),
                        .init("flatpak", "its Flatpak app id, when it ran sandboxed"),
                    ]),
                .init("result", "ok, refused, cancelled or failed"),
                .init("code", "the error's code when it failed"), .init("reason", "the error's reason"),
                .init("detail", "a short precision (code, passkey, recovery_phrase, …)"),
                .init("count", "how many identical refusals the entry stands for"),
                .init("prev", "SHA-256 of the previous line"),
            ],
            note: "one entry per line, exactly as written; with --verify one object: "
                + "{intact, problem, file, line, entries, message, anchor}"),
        exitStatuses: [
            .init(0, "listed, or the chain is intact (a torn last line included)"),
            .init(1, "--verify found a broken line, or a log that does not hold its anchor (RAIN_502, reason audit_log_broken)"),
            .init(5, "not the daemon's uid (RAIN_202)"),
            .init(64, "a --since that is not a time"),
        ])

    static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
        let since = try parsed.value("--since").map { try parseSince($0, now: Date()) }
        let isVerify = parsed.flag("--verify")
        let response = try await context.provider.readAuditLog(since: since, verify: isVerify)
        if isVerify {
            try report(response.verification, context.output)
            return
        }
        if context.output.isJSON {
            for line in response.lines { context.output.line(line) }
        } else {
            if response.lines.isEmpty { context.output.note("no entries") }
            for row in table(response.lines) { context.output.line(row) }
        }
        if response.isTruncated {
            context.output.note("older entries were left out: narrow with --since")
        }
    }

    /// Prints the verification; throws when a line is broken.
    static func report(_ found: AuditLogVerification?, _ output: Output) throws {
        guard let found else { throw RainError(.internalError, "the daemon did not verify the audit log") }
        let isIntact = found.problem.isEmpty || found.problem == "torn"
        if output.isJSON {
            output.json([
                "intact": isIntact, "problem": found.problem.isEmpty ? nil : found.problem,
                "file": found.file.isEmpty ? nil : found.file, "line": found.line == 0 ? nil : Int(found.line),
                "entries": Int(found.entries), "message": found.message,
                "anchor": found.anchor.isEmpty ? nil : found.anchor,
            ])
        } else if isIntact {
            output.line(found.message)
        }
        guard isIntact else {
            throw RainError(
                .internalError, "the audit log was tampered with: \(found.message)",
                details: .init(reason: "audit_log_broken"))
        }
    }

    /// `--since`: ISO 8601 (a full time, or a date meaning its midnight UTC) or an age before `now`
    /// (`90s`, `30m`, `1h`, `2d`, `1w`).
    /// - Throws: a usage error for anything else.
    static func parseSince(_ text: String, now: Date) throws -> Date {
        let trimmed = text.trimmingWhitespace()
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604_800]
        if let unit = trimmed.last, let seconds = units[unit], let count = Int(trimmed.dropLast()), count >= 0 {
            return now.addingTimeInterval(-Double(count) * seconds)
        }
        if let date = try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(trimmed) { return date }
        if let date = try? Date.ISO8601FormatStyle().parse(trimmed) { return date }
        if let date = try? Date.ISO8601FormatStyle().year().month().day().parse(trimmed) { return date }
        throw UsageError(
            "--since \(text): give an ISO 8601 time (2026-12-01T20:00:00Z or 2026-12-01) or an age like 30m, 1h, 2d",
            word: "--since")
    }

    /// The entries as an aligned table: TIME, EVENT, PROFILE, RESULT, APP, DETAIL.
    static func table(_ lines: [String]) -> [String] {
        var rows = [["TIME", "EVENT", "PROFILE", "RESULT", "APP", "DETAIL"]]
        for line in lines {
            guard let value = try? JSONDecoder().decode(JSONValue.self, from: Data(line.utf8)), let object = value.plainObject
            else {
                rows.append(["?", "(not an entry)", "", "", "", String(line.prefix(60))])
                continue
            }
            var result = object["result"] as? String ?? "?"
            if let code = object["code"] as? String { result += " \(code)" }
            if let reason = object["reason"] as? String { result += " \(reason)" }
            if let count = object["count"] as? Int { result += " ×\(count)" }
            var app = "daemon"
            if let a = object["app"] as? [String: Any] {
                let pid = (a["pid"] as? Int).map { "pid \($0)" } ?? ""
                if let path = a["path"] as? String {
                    let script = (a["scriptHash"] as? String).map { ", script \($0)" } ?? ""
                    app = "\(path) (\(a["hash"] as? String ?? "?")\(script)) \(pid)"
                } else {
                    app = "\(pid) uid \((a["uid"] as? Int).map(String.init) ?? "?")"
                }
            }
            rows.append([
                object["time"] as? String ?? "?", object["event"] as? String ?? "?", object["profile"] as? String ?? "-",
                result, app, object["detail"] as? String ?? "",
            ])
        }
        var widths = [Int](repeating: 0, count: 6)
        for row in rows { for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) } }
        return rows.map { row in
            row.enumerated().map { i, cell in
                i == row.count - 1 ? cell : paddedUTF16(cell, toLength: widths[i])
            }.joined(separator: "  ").trimmingWhitespace()
        }
    }

    /// `cell` cut or padded with spaces to `length` UTF-16 units, as `NSString.padding(toLength:)`.
    static func paddedUTF16(_ cell: String, toLength length: Int) -> String {
        let units = cell.utf16.count
        if units < length { return cell + String(repeating: " ", count: length - units) }
        return String(decoding: Array(cell.utf16.prefix(length)), as: UTF16.self)
    }
}

extension JSONValue {
    /// The object as `JSONSerialization` gives it: strings, whole numbers as `Int`, other numbers
    /// as `Double`, booleans, nested objects and arrays; nil when this is not an object.
    fileprivate var plainObject: [String: Any]? {
        guard case .object(let members) = self else { return nil }
        return members.mapValues { $0.plainValue }
    }

    private var plainValue: Any {
        switch self {
        case .null: return Optional<Any>.none as Any
        case .bool(let flag): return flag
        case .number(let number): return Int(exactly: number).map { $0 as Any } ?? number
        case .string(let text): return text
        case .array(let elements): return elements.map { $0.plainValue }
        case .object(let members): return members.mapValues { $0.plainValue }
        }
    }
}
