import FoundationEssentials
import Glibc
import RainCore

/// Writes results: human text by default, JSON with `--json` (camelCase keys, RFC 3339 UTC times).
struct Output: Sendable {
    let isJSON: Bool

    func line(_ s: String) {
        // Unbuffered write(2): output appears at once even when stdout is a pipe (watch).
        let bytes = Array((s + "\n").utf8)
        bytes.withUnsafeBytes { buf in
            var offset = 0
            while offset < buf.count, let base = buf.baseAddress {
                let n = Glibc.write(1, base + offset, buf.count - offset)
                if n <= 0 { return }
                offset += n
            }
        }
    }

    /// Progress and hints go to stderr so stdout stays machine-readable.
    func note(_ s: String) {
        guard !isJSON else { return }
        StandardErrorSink().write(s)
    }

    /// Prints a JSON value (dictionaries, arrays, strings, numbers, booleans, nil as null).
    func json(_ value: Any?) {
        line(Self.render(value))
    }

    /// Prints a command's result: `json` with `--json`, else the line `text`. Each is built only
    /// when it is printed.
    func result(json value: @autoclosure () -> Any?, text: @autoclosure () -> String) {
        if isJSON { json(value()) } else { line(text()) }
    }

    /// Prints a session: its `status --json` object with `extra`'s members added, or `heading`
    /// (when given) and its human lines.
    func session(_ session: SessionSnapshot, heading: String? = nil, adding extra: [String: Any?] = [:]) {
        if isJSON {
            json(session.jsonObject.merging(extra) { $1 })
        } else {
            if let heading { line(heading) }
            session.humanLines.forEach(line)
        }
    }

    static func render(_ value: Any?) -> String {
        JSONText.text(normalize(value)) ?? "null"
    }

    private static func normalize(_ value: Any?) -> Any {
        switch value {
        case nil: return Optional<Any>.none as Any
        case let d as [String: Any?]: return d.mapValues { normalize($0) }
        case let a as [Any?]: return a.map { normalize($0) }
        case let date as Date: return RFC3339.string(from: date)
        case let some?: return some
        }
    }
}

extension SessionSnapshot {
    /// The `status --json` object.
    var jsonObject: [String: Any?] {
        let state: String?
        switch sessionState {
        case .active: state = "active"
        case .expired: state = "expired"
        case .loading, .none: state = nil
        }
        return [
            "authState": authState.rawValue, "sessionState": state, "expiresAt": expiresAt, "accountId": accountID,
            "walletId": walletID, "hasActiveSession": hasActiveSession, "contact": contact?.value,
            "storageWarning": storageWarning,
            "authorityLink": authorityLink.map(\.jsonObject),
            "storage": storage.map(\.jsonObject),
        ]
    }

    /// The link to the authority in words, for `status` and `info`; nil from a daemon that does
    /// not report it.
    var authorityLinkLine: String? { authorityLink?.line }

    /// Human lines for `status`.
    var humanLines: [String] {
        var lines = ["auth state:     \(authState.rawValue)"]
        switch sessionState {
        case .active(let at):
            let left = Int(at.timeIntervalSinceNow.rounded())
            lines.append("session:        active, expires \(RFC3339.string(from: at)) (in \(left / 60)m \(left % 60)s)")
        case .expired: lines.append("session:        expired (log in again)")
        case .loading: lines.append("session:        loading")
        case .none: lines.append("session:        none (log in with: rainwallet login --email ADDR)")
        }
        if let accountID { lines.append("account:        \(accountID)") }
        if let walletID { lines.append("wallet:         \(walletID)") }
        if let contact { lines.append("contact:        \(contact.value)") }
        if storageWarning == SessionSnapshot.sessionNotPersisted {
            lines.append(
                "storage:        the refreshed session is not saved yet; free disk space in the daemon's state directory")
        } else if let storageWarning {
            lines.append("storage:        \(storageWarning)")
        }
        lines += authorityLink?.lines ?? []
        if let storage { lines.append(storage.line) }
        return lines
    }
}

extension AuthorityLinkState {
    /// The `authorityLink` object of `--json`.
    var jsonObject: [String: Any?] {
        [
            "state": phase.rawValue, "lastError": lastError, "since": since,
            "revocationStream": revocationStream.map { stream -> [String: Any?] in
                ["state": stream.word, "lastError": stream.lastError, "since": stream.since]
            },
        ]
    }

    /// The link in words.
    var line: String {
        let since = RFC3339.string(from: since)
        switch phase {
        case .connected:
            return "authority:      connected"
        case .degraded:
            return "authority:      degraded since \(since): \(lastError ?? "no answer"); calls may fail until it answers"
        case .unreachable:
            return "authority:      unreachable since \(since): \(lastError ?? "no answer"); "
                + "calls that need it fail until it is back"
        }
    }

    /// The link and its revocation stream in words.
    var lines: [String] {
        guard let stream = revocationStream else { return [line] }
        let streamLine =
            stream.isUp
            ? "revocations:    stream up"
            : "revocations:    stream down since \(RFC3339.string(from: stream.since)): \(stream.lastError ?? "closed"); "
                + "a login elsewhere reaches this device at its next call"
        return [line, streamLine]
    }
}

extension StorageHealthState {
    /// The `storage` object of `--json`.
    var jsonObject: [String: Any?] { ["state": word, "lastError": lastError, "since": since] }

    /// The keys in words.
    var line: String {
        guard !isAvailable else { return "keys:           available" }
        return "keys:           UNAVAILABLE since \(RFC3339.string(from: since)): \(lastError ?? "the key provider failed"); "
            + "this device's failure, not the authority's"
    }
}
