import FoundationEssentials
import RainAccess
import RainConfig
import RainCore
import RainWire
import Synchronization

/// The security settings' confirmation.
///
/// The daemon runs on the last confirmed `GuardedSettings` (a `SealedRecord`); a config edit of a
/// guarded key waits until the user confirms it on the prompt (`rainwallet settings confirm`),
/// which records it, to take effect at the next start. Keys set by `/etc/rainwallet/policy.json`
/// need no confirmation and cannot be changed by the config. The first start of a new state
/// directory records the config's settings (nothing to compare with yet), audited; a record
/// missing from an existing one counts as the defaults.
public final class SettingsGuard: Sendable {
    /// The config's settings now (re-read on every status, so an edit is seen without a restart),
    /// with the policy's keys already applied.
    public typealias Requested = @Sendable () throws(RainError) -> GuardedSettings

    private let store: ConfirmedSettingsStore?
    private let requested: Requested
    private let policyKeys: [String]
    private let confirmed: Mutex<GuardedSettings>

    /// What the start found.
    public enum Start: Sendable, Equatable {
        /// The first start: the config's settings were recorded as confirmed.
        case recorded
        /// The config matches the confirmed settings.
        case unchanged
        /// These changes wait for confirmation; the daemon runs on the confirmed settings.
        case waiting([GuardedSettings.Change])
    }

    /// What `start` found, and the settings to run with.
    public let start: Start
    /// The settings the daemon runs with.
    public let running: GuardedSettings

    /// Loads (or records, the first time) the confirmed settings.
    /// - Parameters:
    ///   - store: the sealed record (nil: in memory, tests).
    ///   - policy: the keys `/etc/rainwallet/policy.json` sets.
    ///   - requested: the config's settings (policy applied), re-read on each status.
    ///   - isNewState: whether the state directory was just created (its storage key is new). Only
    ///     then is a missing record the first start, which records the config's settings; in a
    ///     state directory that existed, a missing record was removed (by a program that wants its
    ///     edit taken) or predates this version: the defaults run until the user confirms.
    /// - Throws: RAIN_102 `record_tampered` when the record was changed outside rainwalletd.
    public init(
        store: ConfirmedSettingsStore?, policy: GuardedSettings, isNewState: Bool = true,
        requested: @escaping Requested
    ) throws(RainError) {
        self.store = store
        self.requested = requested
        policyKeys = policy.values.keys.sorted()
        let now = try requested()
        var confirmed: GuardedSettings
        if var stored = try store?.load() {
            // Keys guarded since a later version: a record made before holds none of them, and what
            // the daemon ran with then is not known. The start that finds one missing records what
            // it runs with (trust on first sight, as a new state directory does).
            let unrecorded = Self.guardedSinceLater.filter { stored.values[$0] == nil }
            if !unrecorded.isEmpty {
                for key in unrecorded { stored.values[key] = now.values[key] }
                try store?.save(stored)
            }
            // The policy's keys hold whatever was confirmed before.
            confirmed = stored.overridden(by: policy)
            let changes = confirmed.changes(to: now)
            start = changes.isEmpty ? .unchanged : .waiting(changes)
        } else if isNewState {
            confirmed = now
            try store?.save(now)
            start = .recorded
        } else {
            confirmed = DaemonConfig().guarded.overridden(by: policy)
            let changes = confirmed.changes(to: now)
            if changes.isEmpty { try store?.save(confirmed) }
            start = changes.isEmpty ? .unchanged : .waiting(changes)
        }
        running = confirmed
        self.confirmed = Mutex(confirmed)
    }

    /// The keys a record made by an older version lacks: `remoteAuthority`.
    static let guardedSinceLater = ["remoteAuthority"]

    /// An audit detail naming `keys` (never their values: a code sender's command or URL may hold
    /// a credential), within `AuditLog.maximumDetailLength`: as many keys as fit, then how many
    /// more.
    public static func auditDetail(_ lead: String, keys: [String]) -> String {
        for shown in stride(from: keys.count, through: 0, by: -1) {
            var text = "\(lead): " + keys.prefix(shown).joined(separator: ", ")
            if shown < keys.count { text += (shown == 0 ? "" : ", ") + "… and \(keys.count - shown) more" }
            if text.count <= AuditLog.maximumDetailLength { return text }
        }
        return "\(lead): \(keys.count) keys"
    }

    /// The confirmed digest, the changes waiting and the policy's keys.
    public func status() throws(RainError) -> GetSettingsResponse {
        let now = try requested()
        let confirmed = self.confirmed.withLock { $0 }
        return GetSettingsResponse(
            confirmedDigest: confirmed.digest,
            pending: confirmed.changes(to: now).map {
                SettingChange(key: $0.key, confirmed: $0.confirmed, requested: $0.requested)
            },
            fixedByPolicy: policyKeys, requestedDigest: now.digest)
    }

    /// Records the config's settings as confirmed once the user confirms them on the prompt.
    /// - Parameters:
    ///   - requestedDigest: the digest the user was shown (`status().requestedDigest`).
    ///   - ask: shows the prompt with the changes; throws when not confirmed.
    /// - Throws: RAIN_102 `settings_changed` when the config changed since the digest was read,
    ///   `no_settings_change` when nothing waits; the prompt's errors.
    public func confirm(
        requestedDigest: String, ask: @Sendable (_ changes: [GuardedSettings.Change]) async throws(RainError) -> Void
    ) async throws(RainError) -> String {
        let now = try requested()
        guard now.digest == requestedDigest else {
            throw RainError.invalid(
                "the config changed since the settings were read: run `rainwallet settings` again and check the changes",
                field: "requested_digest", reason: "settings_changed")
        }
        let changes = confirmed.withLock { $0 }.changes(to: now)
        guard !changes.isEmpty else {
            throw RainError.invalid("no settings change waits for confirmation", field: "settings", reason: "no_settings_change")
        }
        try await ask(changes)
        try store?.save(now)
        confirmed.withLock { $0 = now }
        return now.digest
    }
}
