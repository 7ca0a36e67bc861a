import FoundationEssentials
import Glibc
import RainCore

/// The `smtp` and `sms` objects of a `codeSender` setting (the device daemon's `config.json`,
/// or the file `rainwalletd authority --code-sender FILE` reads): parsed and checked once, turned
/// into a sender at start (docs/operations.md "Sending codes").
///
/// ```json
/// {"type": "smtp",
///  "smtp": {"host": "smtp.example.com", "port": 587, "security": "starttls",
///           "credentialsFile": "/etc/rainwallet/smtp-credentials", "from": "codes@example.com"},
///  "sms": {"url": "https://sms.example.com/send", "api": "webhook", "secretFile": "/etc/rainwallet/sms-secret",
///          "allowedCountryCodes": ["1", "44"]}}
/// ```
///
/// Types `smtp` and `sms` take both objects; the type names the one that must be there. Email
/// goes through `smtp`, phone numbers through `sms`; a contact kind without its object is
/// refused with RAIN_102 (nothing is sent, the send-limit slot is given back). Secrets are never
/// in the config: only the paths of 0600 files, read when the sender is made.
public struct CodeSenderConfiguration: Sendable, Equatable {
    /// The email sender's settings.
    public var smtp: SMTPSettings?
    /// The SMS sender's settings.
    public var sms: SMSSettings?
    /// The object as configured, for the canonical form the security settings compare.
    public var json: JSONValue

    /// The `codeSender` keys this type reads beside `type`.
    public static let keys: Set<String> = ["smtp", "sms"]

    /// Parses the `codeSender` object of type `smtp` or `sms` at `path`.
    /// - Throws: RAIN_102 (`details.field` the key path) for a missing, unknown or invalid key.
    public static func parse(_ value: JSONValue, path: String) throws(RainError) -> CodeSenderConfiguration {
        let r = Reader()
        let dict = try r.object(value, path, allowed: keys.union(["type"]))
        let type = try r.string(dict["type"] ?? .null, "\(path).type")
        var configuration = CodeSenderConfiguration(json: value)
        if let v = dict["smtp"] { configuration.smtp = try r.smtp(v, "\(path).smtp") }
        if let v = dict["sms"] { configuration.sms = try r.sms(v, "\(path).sms") }
        switch type {
        case "smtp" where configuration.smtp == nil, "sms" where configuration.sms == nil:
            throw RainError.invalid("\(path).\(type) is required for type \"\(type)\"", field: "\(path).\(type)")
        case "smtp", "sms": return configuration
        default:
            throw RainError.invalid("\(path).type must be \"smtp\" or \"sms\" here", field: "\(path).type")
        }
    }

    /// Reads JSON values, naming the key path in every error.
    struct Reader {
        func fail(_ path: String, _ why: String) -> RainError { RainError.invalid("\(path): \(why)", field: path) }

        func object(_ value: JSONValue, _ path: String, allowed: Set<String>) throws(RainError) -> [String: JSONValue] {
            guard case .object(let dict) = value else { throw fail(path, "must be an object") }
            if let unknown = dict.keys.sorted().first(where: { !allowed.contains($0) }) {
                throw fail("\(path).\(unknown)", "unknown key; allowed here: \(allowed.sorted().joined(separator: ", "))")
            }
            return dict
        }

        func string(_ value: JSONValue, _ path: String) throws(RainError) -> String {
            guard case .string(let s) = value else { throw fail(path, "must be a string") }
            return s
        }

        func optionalString(_ dict: [String: JSONValue], _ key: String, _ path: String) throws(RainError) -> String? {
            try dict[key].map { (v) throws(RainError) in try string(v, "\(path).\(key)") }
        }

        func required(_ dict: [String: JSONValue], _ key: String, _ path: String) throws(RainError) -> String {
            guard let v = dict[key] else { throw fail("\(path).\(key)", "is required") }
            return try string(v, "\(path).\(key)")
        }

        func integer(_ value: JSONValue, _ path: String, _ range: ClosedRange<Int>) throws(RainError) -> Int {
            guard case .number(let d) = value, d == d.rounded(), d >= Double(range.lowerBound),
                d <= Double(range.upperBound)
            else { throw fail(path, "must be a whole number from \(range.lowerBound) to \(range.upperBound)") }
            return Int(d)
        }

        func seconds(_ dict: [String: JSONValue], _ key: String, _ path: String, default value: Duration)
            throws(RainError) -> Duration
        {
            guard let v = dict[key] else { return value }
            guard case .number(let d) = v, d.isFinite, d >= 0.1, d <= 300 else {
                throw fail("\(path).\(key)", "must be seconds from 0.1 to 300")
            }
            return .milliseconds(Int64(d * 1000))
        }

        func path(_ dict: [String: JSONValue], _ key: String, _ path: String) throws(RainError) -> String? {
            guard let file = try optionalString(dict, key, path) else { return nil }
            guard file.hasPrefix("/") else { throw fail("\(path).\(key)", "must be an absolute path") }
            return file
        }

        func appNames(_ dict: [String: JSONValue], _ path: String) throws(RainError) -> [String: String] {
            guard let v = dict["appNames"] else { return [:] }
            guard case .object(let names) = v else { throw fail("\(path).appNames", "must be an object of app id to name") }
            var out: [String: String] = [:]
            for (app, name) in names { out[app] = try string(name, "\(path).appNames.\(app)") }
            return out
        }

        /// The keys both gateways take: how to reach them (`caFile`, the timeouts) and the
        /// messages' wording (`appNames`, `templates`).
        let gatewayKeys: Set<String> = ["caFile", "connectTimeoutSeconds", "timeoutSeconds", "appNames", "templates"]

        /// Reads each purpose's entry of `dict["templates"]`, if any, with `read` (given the entry,
        /// its purpose and its path).
        func templates(
            _ dict: [String: JSONValue], _ path: String,
            _ read: (JSONValue, CodeMessagePurpose, String) throws(RainError) -> Void
        ) throws(RainError) {
            guard let v = dict["templates"] else { return }
            let purposes = try object(v, "\(path).templates", allowed: Set(CodeMessagePurpose.allCases.map(\.rawValue)))
            for purpose in CodeMessagePurpose.allCases {
                guard let t = purposes[purpose.rawValue] else { continue }
                try read(t, purpose, "\(path).templates.\(purpose.rawValue)")
            }
        }

        func smtp(_ value: JSONValue, _ path: String) throws(RainError) -> SMTPSettings {
            let dict = try object(
                value, path, allowed: gatewayKeys.union(["host", "port", "security", "credentialsFile", "from", "fromName"]))
            let securityText = try optionalString(dict, "security", path) ?? "starttls"
            guard let security = SMTPSettings.Security(rawValue: securityText) else {
                throw fail("\(path).security", "must be \"starttls\", \"tls\" or \"none\"")
            }
            let port =
                try dict["port"].map { (v) throws(RainError) in try integer(v, "\(path).port", 1...65535) }
                ?? (security == .implicitTLS ? 465 : 587)
            var s = SMTPSettings(
                host: try required(dict, "host", path), port: port, security: security,
                from: try required(dict, "from", path), credentialsFile: try self.path(dict, "credentialsFile", path),
                fromName: try optionalString(dict, "fromName", path), caFile: try self.path(dict, "caFile", path),
                connectTimeout: try seconds(dict, "connectTimeoutSeconds", path, default: .seconds(10)),
                timeout: try seconds(dict, "timeoutSeconds", path, default: .seconds(30)),
                appNames: try appNames(dict, path))
            try templates(dict, path) { (t, purpose, p) throws(RainError) in
                let parts = try object(t, p, allowed: ["subject", "text", "html"])
                var template = s.templates[purpose] ?? SMTPSettings.defaultTemplates[.login]
                if let v = try optionalString(parts, "subject", p) { template?.subject = v }
                if let v = try optionalString(parts, "text", p) { template?.text = v }
                if let v = try optionalString(parts, "html", p) { template?.html = v }
                s.templates[purpose] = template
            }
            try s.validate(path: path)
            return s
        }

        func sms(_ value: JSONValue, _ path: String) throws(RainError) -> SMSSettings {
            let dict = try object(
                value, path,
                allowed: gatewayKeys.union([
                    "url", "api", "secretFile", "accountId", "tokenFile", "from", "hourlyBudget", "allowedCountryCodes",
                ]))
            let api: SMSSettings.API
            switch try required(dict, "api", path) {
            case "webhook":
                guard let file = try self.path(dict, "secretFile", path) else {
                    throw fail("\(path).secretFile", "is required for api \"webhook\"")
                }
                api = .webhook(secretFile: file)
            case "form":
                guard let file = try self.path(dict, "tokenFile", path) else {
                    throw fail("\(path).tokenFile", "is required for api \"form\"")
                }
                api = .form(
                    accountID: try required(dict, "accountId", path), tokenFile: file, from: try required(dict, "from", path))
            default:
                throw fail("\(path).api", "must be \"webhook\" or \"form\"")
            }
            guard case .array(let codes)? = dict["allowedCountryCodes"] else {
                throw fail(
                    "\(path).allowedCountryCodes", "is required: the country calling codes SMS may go to, like [\"1\", \"44\"]")
            }
            var allowed: [String] = []
            for (i, code) in codes.enumerated() { allowed.append(try string(code, "\(path).allowedCountryCodes[\(i)]")) }
            var s = SMSSettings(
                url: try required(dict, "url", path), api: api, allowedCountryCodes: allowed,
                hourlyBudget: try dict["hourlyBudget"].map { (v) throws(RainError) in
                    try integer(v, "\(path).hourlyBudget", 1...1_000_000)
                } ?? 100,
                caFile: try self.path(dict, "caFile", path),
                connectTimeout: try seconds(dict, "connectTimeoutSeconds", path, default: .seconds(10)),
                timeout: try seconds(dict, "timeoutSeconds", path, default: .seconds(30)),
                appNames: try appNames(dict, path))
            try templates(dict, path) { (t, purpose, p) throws(RainError) in s.templates[purpose] = try string(t, p) }
            try s.validate(path: path)
            return s
        }
    }
}
