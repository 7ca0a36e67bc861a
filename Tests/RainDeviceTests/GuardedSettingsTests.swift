import Foundation
import RainAccess
import RainConfig
import RainCore
import Testing

@testable import RainDevice

@Suite("Guarded security settings: confirmed values, policy.json")
struct GuardedSettingsTests {
    static let full = """
        {"allowedUIDs": [1002, 1001],
         "codeSender": {"type": "command", "command": ["/usr/local/bin/send", "--quiet"], "timeoutSeconds": 2.5},
         "storage": {"provider": "tpm2", "tcti": "swtpm:path=/run/t.sock"},
         "access": {"pinentry": "/usr/bin/pinentry-tty",
                    "apps": {"myapp": [{"path": "/usr/bin/mywallet", "sha256": "\(String(repeating: "AB", count: 32))"}]}},
         "profiles": {"myapp": {"allowExport": true, "allowedUIDs": [1003], "passkeyDomain": "example.com"}}}
        """

    @Test("every guarded key is listed, and applying them back gives the same config")
    func roundTrip() throws {
        let config = try DaemonConfig.parse(Data(Self.full.utf8))
        let guarded = config.guarded
        #expect(
            guarded.values.keys.sorted() == [
                "access.apps.myapp", "access.pinentry", "allowedUIDs", "codeSender", "profiles.myapp.allowExport",
                "profiles.myapp.allowedUIDs", "remoteAuthority", "storage.provider", "storage.tcti",
            ])
        #expect(guarded.values["remoteAuthority"] == #""embedded""#)
        #expect(guarded.values["allowedUIDs"] == "[1001,1002]")
        #expect(guarded.values["access.apps.myapp"]?.contains(String(repeating: "ab", count: 32)) == true)
        #expect(try DaemonConfig().applying(guarded, source: "t").guarded == guarded)
        let applied = try config.applying(guarded, source: "t")
        #expect(applied == config)
    }

    @Test("allowWritableCode is part of the guarded apps: turning it on is a change to confirm, and it survives the round trip")
    func writableCodeIsGuarded() throws {
        let plain = try DaemonConfig.parse(Data(#"{"access": {"apps": {"*": [{"path": "/usr/bin/node /opt/w.js"}]}}}"#.utf8))
        let allowing = try DaemonConfig.parse(
            Data(#"{"access": {"apps": {"*": [{"path": "/usr/bin/node /opt/w.js", "allowWritableCode": true}]}}}"#.utf8))
        #expect(plain.access.appsAllowingWritableCode.isEmpty)
        #expect(allowing.access.appsAllowingWritableCode == ["/usr/bin/node /opt/w.js"])
        #expect(plain.guarded.changes(to: allowing.guarded).map(\.key) == ["access.apps.*"])
        #expect(try DaemonConfig().applying(allowing.guarded, source: "t").access == allowing.access)
        #expect(throws: RainError.self) {
            try DaemonConfig.parse(Data(#"{"access": {"apps": {"*": [{"path": "/usr/bin/x", "allowWritableCode": 1}]}}}"#.utf8))
        }
    }

    @Test("running on the confirmed settings undoes an edit of every guarded key, and keeps the rest")
    func confirmedSettingsWin() throws {
        let confirmed = try DaemonConfig.parse(Data(#"{"profiles": {"myapp": {"passkeyDomain": "example.com"}}}"#.utf8))
        var edited = try DaemonConfig.parse(Data(Self.full.utf8))
        edited.authority.codeLifetime = .seconds(60)
        let changes = confirmed.guarded.changes(to: edited.guarded)
        #expect(changes.map(\.key).contains("profiles.myapp.allowExport"))
        #expect(changes.map(\.key).contains("access.pinentry"))
        #expect(changes.map(\.key).contains("codeSender"))
        let running = try edited.applying(confirmed.guarded, source: "t")
        #expect(running.settings(for: "myapp").isExportAllowed == false)
        #expect(running.settings(for: "myapp").allowedUIDs.isEmpty)
        #expect(running.allowedUIDs.isEmpty)
        #expect(running.codeSender == .outbox)
        #expect(running.access == AccessSettings())
        #expect(running.storage == StorageSettings())
        #expect(running.settings(for: "myapp").passkeyDomain == "example.com", "unguarded settings stay")
        #expect(running.authority.codeLifetime == .seconds(60))
    }

    @Test("access settings are checked: absolute paths, 64 hex digits, known keys")
    func accessValidation() {
        let bad = [
            #"{"access": {"pinentry": "pinentry-tty"}}"#,
            #"{"access": {"apps": {"a": [{"path": "/x", "sha256": "abc"}]}}}"#,
            #"{"access": {"apps": {"a": [{"sha256": "abc"}]}}}"#,
            #"{"access": {"prompt": "here"}}"#,
        ]
        for text in bad {
            #expect(throws: RainError.self, "\(text)") { try DaemonConfig.parse(Data(text.utf8)) }
        }
    }

    @Test("policy.json takes only guarded keys; its values override the config's")
    func policy() throws {
        let policy = try SecurityPolicy.parse(
            Data(#"{"profiles": {"myapp": {"allowExport": false}}, "access": {"pinentry": "/usr/bin/pinentry-curses"}}"#.utf8),
            source: "policy.json")
        #expect(policy.values == ["profiles.myapp.allowExport": "false", "access.pinentry": "\"/usr/bin/pinentry-curses\""])
        let config = try DaemonConfig.parse(Data(Self.full.utf8))
        let effective = try config.applying(config.guarded.overridden(by: policy), source: "t")
        #expect(effective.settings(for: "myapp").isExportAllowed == false)
        #expect(effective.access.pinentry == "/usr/bin/pinentry-curses")
        #expect(effective.allowedUIDs == [1001, 1002], "keys the policy does not set come from the config")
        #expect(throws: RainError.self) {
            try SecurityPolicy.parse(Data(#"{"profiles": {"myapp": {"passkeyDomain": "x.com"}}}"#.utf8), source: "p")
        }
        #expect(throws: RainError.self) { try SecurityPolicy.parse(Data(#"{"authority": {}}"#.utf8), source: "p") }
    }

    @Test("a policy file not owned by root, or writable by others, is refused; none at all is an empty policy")
    func policyFileOwnership() throws {
        let directory = NSTemporaryDirectory() + "rain-policy-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = "\(directory)/policy.json"
        #expect(try SecurityPolicy.load(path: path) == GuardedSettings())
        try Data(#"{"access": {"pinentry": "/usr/bin/pinentry-tty"}}"#.utf8).write(to: URL(fileURLWithPath: path))
        chmod(path, 0o644)
        if getuid() == 0 {
            #expect(try SecurityPolicy.load(path: path).values["access.pinentry"] == "\"/usr/bin/pinentry-tty\"")
            chmod(path, 0o666)
            #expect(throws: RainError.self) { try SecurityPolicy.load(path: path) }
            chmod(path, 0o644)
            chown(path, 1000, 1000)
        }
        // Not root's (as a normal user every file it writes is its own): refused.
        #expect(throws: RainError.self) { try SecurityPolicy.load(path: path) }
    }
}
