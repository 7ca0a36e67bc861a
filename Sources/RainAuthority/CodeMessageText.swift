import Foundation
import RainAuthorityAPI
import RainCore
import RainSystem

/// What the SMTP and SMS senders share: templates filled with the code, the app's name and the
/// expiry; the refusal of control characters (no header injection); the secret files.
///
/// Placeholders: `{{code}}`, `{{app}}` (the app's name: `appNames[appId]`, else the app id),
/// `{{minutes}}` (whole minutes until expiry, rounded up) and `{{expires}}` (the expiry in UTC,
/// RFC 3339).
public enum CodeMessageText {
    /// The text of `template` for `message`; `escape` is applied to every value (HTML escaping
    /// for an HTML part).
    static func render(
        _ template: String, _ message: CodeMessage, appName: String, escape: (String) -> String = { $0 }
    ) -> String {
        let seconds = max(0, message.expiresAt.unixMilliseconds - message.delivery.sentAt.unixMilliseconds) / 1000
        let values: [(String, String)] = [
            ("{{code}}", message.delivery.code), ("{{app}}", escape(appName)),
            ("{{minutes}}", String((seconds + 59) / 60)),
            ("{{expires}}", RFC3339.string(from: message.expiresAt)),
        ]
        var out = template
        for (key, value) in values { out = out.replacingOccurrences(of: key, with: value) }
        return out
    }

    /// Replaces the code with `******`: the only form of a message body a log may hold.
    static func masked(_ text: String, code: String) -> String {
        code.isEmpty ? text : text.replacingOccurrences(of: code, with: String(repeating: "*", count: code.count))
    }

    /// True for a Unicode control character (C0, DEL, C1) or a line or paragraph separator.
    static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar.value == 0x2028
            || scalar.value == 0x2029
    }

    /// Refuses a one-line value (a contact, an address, an app name, a subject) holding CR, LF or
    /// any other control character: it would end a header and start another.
    /// - Throws: RAIN_102 (`details.field` `field`).
    public static func requireSingleLine(_ value: String, field: String) throws(RainError) {
        if value.unicodeScalars.contains(where: isControl) {
            throw RainError.invalid(
                "\(field) holds a line break or another control character, which could forge message headers; remove it",
                field: field)
        }
    }

    /// Refuses a body template holding a control character other than a line feed or a tab.
    /// - Throws: RAIN_102 (`details.field` `field`).
    static func requireBodyText(_ value: String, field: String) throws(RainError) {
        if value.unicodeScalars.contains(where: { isControl($0) && $0 != "\n" && $0 != "\t" }) {
            throw RainError.invalid(
                "\(field) holds a control character (only line feeds and tabs may be in a body); remove it",
                field: field)
        }
    }

    /// `&`, `<`, `>`, `"` and `'` as HTML entities.
    static func htmlEscaped(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for c in text {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(c)
            }
        }
        return out
    }

    /// Reads a secret (a password, a token, an HMAC key) from a file the daemon's user owns with
    /// mode 0600 (or stricter): a regular file, not a symbolic link. Secrets are never in the
    /// config itself nor on the command line (`ps` shows it). One trailing newline is dropped.
    /// - Throws: RAIN_102 (`details.field` `field`) for a missing, empty, linked, foreign or
    ///   group/other-readable file, naming the fix; RAIN_502 when it cannot be read.
    public static func readSecretFile(_ path: String, field: String) throws(RainError) -> String {
        guard path.hasPrefix("/") else {
            throw RainError.invalid("\(field) must be an absolute path (\(path))", field: field)
        }
        if let status = try Syscall.linkStatus(path), !status.isSymbolicLink, status.permissions & 0o077 != 0 {
            throw RainError.invalid(
                "the secret file \(path) has mode \(status.octalPermissions), readable by other users; run chmod 600 \(path)",
                field: field)
        }
        guard
            let bytes = try OwnedPath.readTrustedFile(
                path, owners: [geteuid()], name: "the secret file", field: field, limit: 64 << 10)
        else {
            throw RainError.invalid("the secret file \(path) does not exist; create it with mode 0600", field: field)
        }
        var text = String(decoding: bytes, as: UTF8.self)
        if text.hasSuffix("\r\n") {
            text.removeLast(1)
        } else if text.hasSuffix("\n") {
            text.removeLast()
        }
        guard !text.isEmpty else { throw RainError.invalid("the secret file \(path) is empty", field: field) }
        return text
    }

    /// True for a host name that is this machine: `localhost`, `127.0.0.0/8` or `::1`.
    static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host == "[::1]" || host.hasPrefix("127.")
    }
}
