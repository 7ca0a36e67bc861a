import Foundation
import RainCore
import Testing

@testable import RainConfig
@testable import RainDevice

/// `ConfigSchema` (the rainwallet-config(5) page) and `DaemonConfig.parse` agree key for key: a
/// key in the table the parser refuses, or a key the parser takes the table lacks, fails here.
@Suite struct ConfigSchemaTests {
    /// Keys that need others beside them to parse.
    static let requirements: [String: [(String, JSONValue)]] = [
        "codeSender.command": [("codeSender.type", .string("command"))],
        "codeSender.timeoutSeconds": [
            ("codeSender.type", .string("command")), ("codeSender.command", .array([.string("/usr/bin/true")])),
        ],
        "codeSender.smtp": [("codeSender.type", .string("smtp"))],
        "codeSender.sms": [("codeSender.type", .string("sms"))],
        "access.apps.NAME[].sha256": [("access.apps.NAME[].path", .string("/usr/bin/mywallet"))],
        "access.apps.NAME[].allowWritableCode": [("access.apps.NAME[].path", .string("/usr/bin/mywallet"))],
        "remoteAuthority.ca": [("remoteAuthority.address", .string("authority.example.com:7420"))],
        "remoteAuthority.caSHA256": [
            ("remoteAuthority.address", .string("authority.example.com:7420")),
            ("remoteAuthority.ca", .string("/etc/rainwallet/authority-ca.pem")),
        ],
    ]

    /// Sets `path` (`NAME` → a profile called `app`, `key[]` → the first item of an array) in `root`.
    static func insert(_ value: JSONValue, at path: String, into root: inout JSONValue) {
        func insert(_ parts: ArraySlice<Substring>, into node: inout JSONValue) {
            guard let first = parts.first else {
                node = value
                return
            }
            var key = String(first)
            let isArray = key.hasSuffix("[]")
            if isArray { key.removeLast(2) }
            if key == "NAME" { key = "app" }
            guard case .object(var dict) = node else { return }
            var child = dict[key] ?? (isArray ? .array([.object([:])]) : .object([:]))
            if isArray {
                guard case .array(var items) = child, var item = items.first else { return }
                insert(parts.dropFirst(), into: &item)
                items[0] = item
                child = .array(items)
            } else {
                insert(parts.dropFirst(), into: &child)
            }
            dict[key] = child
            node = .object(dict)
        }
        insert(path.split(separator: ".")[...], into: &root)
    }

    static func parse(_ config: JSONValue) throws -> DaemonConfig {
        try DaemonConfig.parse(try JSONEncoder().encode(config), source: "test")
    }

    @Test("every key of the table parses with its example", arguments: ConfigSchema.keys.map(\.path))
    func everyListedKeyIsAccepted(_ path: String) throws {
        let key = try #require(ConfigSchema.keys.first { $0.path == path })
        var config = JSONValue.object([:])
        for (other, value) in Self.requirements[path] ?? [] { Self.insert(value, at: other, into: &config) }
        Self.insert(key.example, at: path, into: &config)
        #expect(throws: Never.self, "\(path) = \(key.example)") { _ = try Self.parse(config) }
    }

    /// Every object of the config (a path whose keys are fixed, `profiles.NAME` say) and the keys
    /// the table lists in it.
    static var objects: [String: Set<String>] {
        var objects: [String: Set<String>] = [:]
        for key in ConfigSchema.keys {
            let parts = key.path.split(separator: ".").map(String.init)
            for i in parts.indices where !parts[i].hasPrefix("NAME") {
                let child = parts[i].hasSuffix("[]") ? String(parts[i].dropLast(2)) : parts[i]
                objects[parts[..<i].joined(separator: "."), default: []].insert(child)
            }
        }
        return objects
    }

    @Test("every key the parser takes is in the table")
    func everyAcceptedKeyIsListed() throws {
        let objects = Self.objects
        #expect(objects.count >= 8, "\(objects.keys.sorted())")
        for (path, listed) in objects {
            // An unknown key is refused with the keys the parser allows there.
            var config = JSONValue.object([:])
            if path.isEmpty {
                config = .object(["zzUnknown": .number(1)])
            } else {
                Self.insert(.object(["zzUnknown": .number(1)]), at: path, into: &config)
            }
            do {
                _ = try Self.parse(config)
                Issue.record("\(path): an unknown key was accepted")
            } catch let error as RainError {
                #expect(error.code == .invalidArgument)
                let allowed = try #require(error.message.components(separatedBy: "allowed here: ").last, "\(error.message)")
                let parsed = Set(allowed.components(separatedBy: ", "))
                #expect(
                    parsed == listed,
                    "\(path.isEmpty ? "the top level" : path): parser allows \(parsed.sorted()), table lists \(listed.sorted())")
            }
        }
    }

    @Test("the defaults shown are the parser's")
    func defaultsMatchTheParser() throws {
        let defaults = DaemonConfig()
        let key = { (path: String) in ConfigSchema.keys.first { $0.path == path }?.defaultValue }
        #expect(key("authority.codeLifetimeSeconds") == ConfigSchema.seconds(defaults.authority.codeLifetime))
        #expect(key("storage.tcti") == "\"\(defaults.storage.tcti)\"")
        #expect(key("authority.sendLimits.contactMaxSends") == "\(defaults.authority.sendLimits.contactMaxSends)")
        #expect(
            key("profiles.NAME.sessionPolicy.refreshBufferSeconds")
                == ConfigSchema.seconds(ProfileSettings.defaults(for: "app").sessionPolicy.refreshBuffer))
    }
}

/// `codeSender` types `smtp` and `sms` in `config.json`.
@Suite struct ProviderCodeSenderConfigTests {
    @Test("a config with smtp and sms parses to the providers setting, and round-trips through its canonical JSON")
    func providers() throws {
        let json = """
            {"codeSender": {"type": "smtp",
              "smtp": {"host": "smtp.example.com", "from": "codes@example.com",
                       "credentialsFile": "/etc/rainwallet/smtp-credentials"},
              "sms": {"url": "https://sms.example.com/send", "api": "webhook", "secretFile": "/etc/rainwallet/sms-secret",
                      "allowedCountryCodes": ["1"]}}}
            """
        let config = try DaemonConfig.parse(Data(json.utf8), source: "test")
        guard case .providers(let providers) = config.codeSender else {
            Issue.record("not a providers setting: \(config.codeSender)")
            return
        }
        #expect(providers.smtp?.port == 587)
        #expect(providers.sms?.hourlyBudget == 100)
        let again = try DaemonConfig.parse(
            Data(#"{"codeSender": \#(DaemonConfig.canonical(DaemonConfig.json(config.codeSender)))}"#.utf8), source: "test")
        #expect(again.codeSender == config.codeSender)
    }

    @Test("an invalid smtp object is RAIN_102 naming the key and the file")
    func invalid() throws {
        let json =
            #"{"codeSender": {"type": "smtp", "smtp": {"host": "smtp.example.com", "from": "codes@example.com", "port": 0}}}"#
        do {
            _ = try DaemonConfig.parse(Data(json.utf8), source: "config.json")
            Issue.record("accepted")
        } catch {
            #expect(error.code == .invalidArgument)
            #expect(error.details.field == "codeSender.smtp.port")
            #expect(error.message.hasPrefix("config.json: "))
        }
    }
}
