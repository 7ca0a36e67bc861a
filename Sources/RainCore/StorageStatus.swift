import FoundationEssentials

/// Where a daemon's keys are (`storage status` of `rainwalletd` and of `rainwallet`): the key
/// provider, the keys it holds and what each protects, a migration under way, and why the provider
/// cannot be used now. Built by the daemon; both commands print it with ``humanLines(command:)`` and
/// ``jsonText``, so they say the same thing.
public struct StorageStatus: Sendable, Equatable {
    /// One key of the provider.
    public struct Key: Sendable, Equatable {
        /// `storage`, `authority-master` or `device`.
        public var slot: String
        /// The key's id (a hash prefix of its public part or of the key: never the key).
        public var keyID: String
        /// Its algorithm (`aes-256-gcm`, `ecdsa-p256`, …).
        public var algorithm: String
        /// What it protects, for people.
        public var protects: String

        public init(slot: String, keyID: String, algorithm: String, protects: String) {
            self.slot = slot
            self.keyID = keyID
            self.algorithm = algorithm
            self.protects = protects
        }
    }

    /// A migration under way: its target and its last durable step.
    public struct Migration: Sendable, Equatable {
        public var to: String
        public var step: String

        public init(to: String, step: String) {
            self.to = to
            self.step = step
        }
    }

    /// `tpm2`, `secret-service` or `file`.
    public var provider: String
    /// Where the provider keeps the keys, for people.
    public var location: String
    /// The keys it holds.
    public var keys: [Key]
    /// Why the provider cannot be used now (`RAIN_501: …`), or nil.
    public var unavailable: String?
    /// A migration under way, or nil.
    public var migration: Migration?

    public init(provider: String, location: String, keys: [Key], unavailable: String?, migration: Migration?) {
        self.provider = provider
        self.location = location
        self.keys = keys
        self.unavailable = unavailable
        self.migration = migration
    }

    /// The status as JSON: `provider`, `location`, `keys` (`slot`, `keyId`, `algorithm`,
    /// `protects`), `unavailable` and `migration` (`to`, `step`) when there are.
    public var jsonValue: JSONValue {
        var root: [String: JSONValue] = [
            "provider": .string(provider), "location": .string(location),
            "keys": .array(
                keys.map {
                    .object([
                        "slot": .string($0.slot), "keyId": .string($0.keyID), "algorithm": .string($0.algorithm),
                        "protects": .string($0.protects),
                    ])
                }),
        ]
        if let unavailable { root["unavailable"] = .string(unavailable) }
        if let migration { root["migration"] = .object(["to": .string(migration.to), "step": .string(migration.step)]) }
        return .object(root)
    }

    /// ``jsonValue`` on one line, keys sorted.
    public var jsonText: String { jsonValue.compactText }

    /// The status for people, one line each.
    /// - Parameter command: the command that finishes a pending migration (`rainwalletd storage
    ///   migrate` offline, `rainwallet storage migrate` on the running daemon).
    public func humanLines(command: String) -> [String] {
        var lines = ["provider: \(provider) (\(location))"]
        if let unavailable { lines.append("unavailable: \(unavailable)") }
        for key in keys {
            lines.append("\(key.slot): \(key.algorithm) key \(key.keyID) protects \(key.protects)")
        }
        if let migration {
            lines.append(
                "migration to \(migration.to) pending after step \(migration.step): run `\(command) --to \(migration.to)`")
        }
        return lines
    }
}
