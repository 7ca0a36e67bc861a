import Foundation
import RainAccess
import RainCore
import RainCrypto
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
}
