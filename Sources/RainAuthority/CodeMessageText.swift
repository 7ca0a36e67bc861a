import FoundationEssentials
import Glibc
import RainAuthorityAPI
import RainCodeSenderSettings
import RainCore
import RainSystem

// The settings' checks (one-line values, bodies, loopback hosts) are in RainConfig, with the
// templates they check; what a sender does with a message is here.
extension CodeMessageText {
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
        for (key, value) in values { out = out.replacing(key, with: value) }
        return out
    }

    /// Replaces the code with `******`: the only form of a message body a log may hold.
    static func masked(_ text: String, code: String) -> String {
        code.isEmpty ? text : text.replacing(code, with: String(repeating: "*", count: code.count))
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

}
