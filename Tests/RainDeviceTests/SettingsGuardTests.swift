import Foundation
import RainAccess
import RainConfig
import RainCore
import RainCrypto
import RainWire
import Synchronization
import Testing

@testable import RainDevice

@Suite("Settings guard: a config edit waits for the user's confirmation")
struct SettingsGuardTests {
    final class Config: Sendable {
        let settings = Mutex(GuardedSettings(["profiles.a.allowExport": "false"]))
        func set(_ key: String, _ value: String) { settings.withLock { $0.values[key] = value } }
        var requested: SettingsGuard.Requested { { () throws(RainError) in self.settings.withLock { $0 } } }
    }

    static func store() throws -> (ConfirmedSettingsStore, String) {
        let directory = NSTemporaryDirectory() + "rain-settings-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return (try ConfirmedSettingsStore(stateDirectory: directory, storageKey: try SymmetricKey.random()), directory)
    }

    @Test("first start records; an edit waits and the daemon runs on the confirmed value; confirmed, the next start uses it")
    func editWaitsForConfirmation() async throws {
        let (store, directory) = try Self.store()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let config = Config()
        let first = try SettingsGuard(store: store, policy: GuardedSettings(), requested: config.requested)
        #expect(first.start == .recorded)

        config.set("profiles.a.allowExport", "true")
        let second = try SettingsGuard(store: store, policy: GuardedSettings(), requested: config.requested)
        #expect(second.start == .waiting([.init(key: "profiles.a.allowExport", confirmed: "false", requested: "true")]))
        #expect(second.running.values["profiles.a.allowExport"] == "false")
        let status = try second.status()
        #expect(status.pending.map(\.key) == ["profiles.a.allowExport"])

        // Dismissed: nothing recorded.
        await #expect(throws: RainError.self) {
            _ = try await second.confirm(requestedDigest: status.requestedDigest) { _ throws(RainError) in
                throw RainError(.userCancelled, "dismissed")
            }
        }
        #expect(
            try SettingsGuard(store: store, policy: GuardedSettings(), requested: config.requested).running.values[
                "profiles.a.allowExport"] == "false")

        // A digest from before another edit is refused.
        config.set("access.pinentry", "\"/tmp/always-ok\"")
        do throws(RainError) {
            _ = try await second.confirm(requestedDigest: status.requestedDigest) { _ throws(RainError) in }
            Issue.record("a stale digest was accepted")
        } catch {
            #expect(error.details.reason == "settings_changed")
        }

        let fresh = try second.status()
        let asked = Mutex<[String]>([])
        _ = try await second.confirm(requestedDigest: fresh.requestedDigest) { (changes) throws(RainError) in
            asked.withLock { $0 = changes.map(\.key) }
        }
        #expect(asked.withLock { $0 } == ["access.pinentry", "profiles.a.allowExport"])
        let third = try SettingsGuard(store: store, policy: GuardedSettings(), requested: config.requested)
        #expect(third.start == .unchanged)
        #expect(third.running.values["profiles.a.allowExport"] == "true")
    }

    @Test("a record made before remoteAuthority was guarded takes the authority it runs with once; after that a change waits")
    func remoteAuthorityIsRecordedOnFirstSight() async throws {
        let (store, directory) = try Self.store()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // A record from an older version: no remoteAuthority key.
        try store.save(GuardedSettings(["profiles.a.allowExport": "false"]))
        let config = Config()
        config.set("remoteAuthority", #"{"address":"a.example:7420"}"#)
        let upgraded = try SettingsGuard(store: store, policy: GuardedSettings(), requested: config.requested)
        #expect(upgraded.start == .unchanged)
        #expect(try store.load()?.values["remoteAuthority"] == #"{"address":"a.example:7420"}"#)
        config.set("remoteAuthority", #"{"address":"evil.example:7420"}"#)
        let moved = try SettingsGuard(store: store, policy: GuardedSettings(), requested: config.requested)
        #expect(
            moved.start
                == .waiting([
                    .init(
                        key: "remoteAuthority", confirmed: #"{"address":"a.example:7420"}"#,
                        requested: #"{"address":"evil.example:7420"}"#)
                ]))
        #expect(moved.running.values["remoteAuthority"] == #"{"address":"a.example:7420"}"#)
    }

    @Test("a record missing from a state directory that existed is not a first start: the defaults run until confirmed")
    func removedRecordIsNotAFirstStart() async throws {
        let (store, directory) = try Self.store()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let config = Config()
        config.set("profiles.a.allowExport", "true")
        // A program removed confirmed-settings.json and edited the config: nothing is recorded
        // for it, and the daemon runs on the defaults (export off).
        let removed = try SettingsGuard(
            store: store, policy: GuardedSettings(), isNewState: false, requested: config.requested)
        guard case .waiting(let changes) = removed.start else {
            Issue.record("started as \(removed.start)")
            return
        }
        #expect(changes.map(\.key).contains("profiles.a.allowExport"))
        #expect(removed.running.values["profiles.a.allowExport"] == nil)
        #expect(try store.load() == nil, "nothing recorded without the user")
        let applied = try DaemonConfig().applying(removed.running, source: "test")
        #expect(!applied.settings(for: "a").isExportAllowed)
        // Confirmed on the prompt, it is recorded.
        let status = try removed.status()
        _ = try await removed.confirm(requestedDigest: status.requestedDigest) { _ throws(RainError) in }
        #expect(try store.load()?.values["profiles.a.allowExport"] == "true")
    }

    @Test("the policy's keys need no confirmation and the config cannot change them")
    func policyKeys() throws {
        let (store, directory) = try Self.store()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let policy = GuardedSettings(["profiles.a.allowExport": "false"])
        let config = Config()
        _ = try SettingsGuard(
            store: store, policy: policy,
            requested: { () throws(RainError) in
                try config.requested().overridden(by: policy)
            })
        config.set("profiles.a.allowExport", "true")
        let next = try SettingsGuard(
            store: store, policy: policy,
            requested: { () throws(RainError) in
                try config.requested().overridden(by: policy)
            })
        #expect(next.start == .unchanged)
        #expect(next.running.values["profiles.a.allowExport"] == "false")
        #expect(try next.status().fixedByPolicy == ["profiles.a.allowExport"])
    }

    @Test("the settings prompt lists the changes when they fit, else their number and the digest `rainwallet settings` shows")
    func settingsPromptNamesTheDigest() async throws {
        let config = Config()
        let start = try SettingsGuard(store: nil, policy: GuardedSettings(), requested: config.requested)
        let caller = CallerIdentity(
            pid: 77, uid: 1000, executablePath: "/usr/bin/rainwallet", executableSHA256: [UInt8](repeating: 1, count: 32))
        func prompt(_ guardian: SettingsGuard) async throws -> (text: String, digest: String) {
            let status = try guardian.status()
            let text = Mutex("")
            _ = try await guardian.confirm(requestedDigest: status.requestedDigest) { (changes) throws(RainError) in
                let (action, short) = DeviceService.settingsActions(changes, digest: status.requestedDigest)
                let request = PromptRequest(action: action, caller: caller, profile: "default", shortAction: short)
                let description = try request.description(code: PromptCode(text: "K7QX"))
                _ = try Assuan.command("SETDESC", description)
                text.withLock { $0 = description }
            }
            return (text.withLock { $0 }, status.requestedDigest)
        }

        // One short change: listed with its values.
        config.set("access.pinentry", "\"/usr/bin/pinentry-tty\"")
        let one = try await prompt(start)
        #expect(one.text.contains("access.pinentry: (not set) → \"/usr/bin/pinentry-tty\""))

        // A long apps list sorts before access.pinentry and would push it off a cut list: the
        // prompt names the count and the short digest instead, which the status carries.
        let apps = (0..<12).map { "{\"path\":\"/opt/tools/some-long-directory-name/bin/tool-\($0)\"}" }
        config.set("access.apps.default", "[\(apps.joined(separator: ","))]")
        config.set("access.pinentry", "\"/tmp/always-ok\"")
        let many = try await prompt(start)
        let short = GetSettingsResponse.shortDigest(many.digest)
        #expect(short.count == GetSettingsResponse.shortDigestLength)
        #expect(many.text.contains("2 security setting changes"))
        #expect(many.text.contains("digest \(short)"))
        #expect(!many.text.contains("access.apps.default"), "a list that does not fit is not shown in part")
    }

    @Test("an audit detail names the keys, never their values, within the detail length")
    func auditDetailNamesKeysOnly() {
        #expect(
            SettingsGuard.auditDetail("keys", keys: ["codeSender", "profiles.a.allowExport"])
                == "keys: codeSender, profiles.a.allowExport")
        let many = (0..<40).map { "profiles.profile-number-\($0).allowExport" }
        let detail = SettingsGuard.auditDetail("keys", keys: many)
        #expect(detail.count <= AuditLog.maximumDetailLength)
        #expect(detail.hasPrefix("keys: profiles.profile-number-0.allowExport, "))
        let shown = detail.components(separatedBy: ", ").filter { $0.contains("profile-number") }.count
        #expect(detail.hasSuffix("… and \(40 - shown) more"), "\(detail)")
    }
}
