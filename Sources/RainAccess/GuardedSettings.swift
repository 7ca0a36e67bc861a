import FoundationEssentials
import RainCore
import RainCrypto

/// The security settings a program of the user must not be able to change by editing the config
/// and restarting the daemon: the pinentry program, the pre-approved apps, `allowExport`, the
/// storage provider and TCTI, `allowedUIDs` and the code sender.
///
/// They are a flat map (`profiles.default.allowExport` → `true`) so that the daemon can say exactly
/// which change waits for the user's confirmation. The last confirmed settings are kept as a
/// `SealedRecord` (`<state>/confirmed-settings.json`); until the user confirms a change on the
/// prompt, the daemon runs with the confirmed values.
public struct GuardedSettings: SealedRecordValue, Equatable {
    /// Setting → its canonical value.
    public var values: [String: String]

    /// Settings.
    public init(_ values: [String: String] = [:]) {
        self.values = values
    }

    /// `<state>/confirmed-settings.json`.
    public static let sealedFile = SealedRecordFile(
        fileName: "confirmed-settings.json", purpose: "settings", name: "confirmed settings",
        startOver: "remove the file to confirm the config again")

    /// One setting that differs between the confirmed settings and the config.
    public struct Change: Sendable, Equatable, CustomStringConvertible {
        /// The setting (`profiles.default.allowExport`).
        public var key: String
        /// Its confirmed value (nil: not set).
        public var confirmed: String?
        /// The config's value (nil: removed).
        public var requested: String?

        /// A change.
        public init(key: String, confirmed: String?, requested: String?) {
            self.key = key
            self.confirmed = confirmed
            self.requested = requested
        }

        /// `profiles.default.allowExport: false → true`.
        public var description: String {
            "\(key): \(confirmed ?? "(not set)") → \(requested ?? "(not set)")"
        }
    }

    /// What `requested` changes compared with these (confirmed) settings, sorted by key.
    public func changes(to requested: GuardedSettings) -> [Change] {
        Set(values.keys).union(requested.values.keys).sorted().compactMap { key in
            let old = values[key]
            let new = requested.values[key]
            return old == new ? nil : Change(key: key, confirmed: old, requested: new)
        }
    }

    /// A hash of the settings (SHA-256 of their sorted JSON, hex), shown in messages and the audit.
    public var digest: String {
        Hex.encode(SHA256.hash(Array(Self.encode(self))))
    }

    static func encode(_ settings: GuardedSettings) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return (try? encoder.encode(settings)).map { Array($0) } ?? []
    }
}
