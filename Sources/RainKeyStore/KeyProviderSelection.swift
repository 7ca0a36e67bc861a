import FoundationEssentials
import Glibc
import RainCore
import RainCrypto
import RainSystem

/// Makes the provider of a kind. The one place that names every provider: adding one is a case here.
public enum KeyProviders {
    /// The TCTI `storage.tcti` defaults to: the kernel's TPM resource manager.
    public static let defaultTCTI = "device:/dev/tpmrm0"

    /// The provider of `kind` for `stateDirectory`. Cheap: nothing is opened until it is used.
    /// - Parameter tcti: the TPM's TCTI (`device:/dev/tpmrm0`, `swtpm:path=…`), for `tpm2` only.
    /// - Throws: RAIN_501 (`details.reason` `provider_not_built`) for a provider this build lacks
    ///   (none today; kept so that a build without one says so).
    public static func make(kind: KeyProviderKind, stateDirectory: String, tcti: String = defaultTCTI) throws(RainError)
        -> any KeyProvider
    {
        switch kind {
        case .file:
            return FileKeyProvider(stateDirectory: stateDirectory)
        case .tpm2:
            return TPM2KeyProvider(stateDirectory: stateDirectory, tcti: tcti)
        case .secretService:
            return SecretServiceKeyProvider(stateDirectory: stateDirectory)
        }
    }

    static func notBuilt(_ kind: KeyProviderKind) -> RainError {
        RainError(
            .provider, "the \(kind.rawValue) key provider is not built into this rainwalletd; use storage.provider \"file\"",
            details: RainError.Details(reason: "provider_not_built"))
    }
}

/// The provider a state directory uses, recorded in `<state>/key-provider` (one word and a newline,
/// written atomically). Written once by the first start, changed only by `storage migrate`.
public enum KeyProviderRecord {
    /// The record's file name in the state directory.
    public static let fileName = "key-provider"

    /// The record's path.
    public static func path(stateDirectory: String) -> String { "\(stateDirectory)/\(fileName)" }

    /// The recorded provider, or nil when none was recorded.
    /// - Throws: RAIN_102 (field `key-provider`) when the file does not name a provider.
    public static func read(stateDirectory: String) throws(RainError) -> KeyProviderKind? {
        let file = path(stateDirectory: stateDirectory)
        guard let bytes = try AtomicFile.read(file, limit: 64, options: [.noFollow]) else { return nil }
        let text = String(decoding: bytes, as: UTF8.self).trimmingWhitespaceAndNewlines()
        guard let kind = KeyProviderKind(rawValue: text) else {
            throw RainError.invalid(
                "\(file) does not name a key provider (tpm2, secret-service or file); restore it or remove it with the keys",
                field: "key-provider")
        }
        return kind
    }

    /// Records `kind` (temp file, fsync, rename, fsync of the directory).
    /// - Throws: RAIN_502 on I/O errors.
    public static func write(_ kind: KeyProviderKind, stateDirectory: String) throws(RainError) {
        try AtomicFile.write(Array((kind.rawValue + "\n").utf8), to: path(stateDirectory: stateDirectory), mode: 0o600)
    }
}

/// Which provider a daemon uses: the record when there is one, else the config's choice (`auto`:
/// the strongest available), recorded for the next starts.
public struct KeyProviderSelection: Sendable {
    /// The provider chosen.
    public var kind: KeyProviderKind
    /// Whether this start made the choice (and wrote the record).
    public var isNewlyRecorded: Bool
    /// Whether an existing install without a record was recorded as `file` (its key files were there).
    public var isLegacyInstall: Bool
    /// The provider the config names when it differs from the record but is one end of the
    /// migration under way (accepted: the start finishes the migration).
    public var configuredDuringMigration: KeyProviderKind? = nil

    /// Makes a provider of a kind (tests inject fakes).
    public typealias Factory = @Sendable (KeyProviderKind) throws(RainError) -> any KeyProvider

    /// Resolves the provider of `stateDirectory` and records a new choice.
    ///
    /// - a record exists: it is used; a config naming another provider is RAIN_102 (field
    ///   `storage.provider`) saying to run `storage migrate --to` that provider, unless a
    ///   migration is under way between the two (`migrating`): a kill half-way leaves the record
    ///   on either side of the config, and the start that finishes the migration must not be refused;
    /// - no record, but the key files of the `file` provider are there (an install older than
    ///   providers): `file` is recorded;
    /// - no record: the config's provider, or for `auto` the strongest whose `checkAvailable`
    ///   passes (a Secret Service that answers but is locked counts: it is there, the user unlocks
    ///   it), else `file`.
    /// - Throws: RAIN_102 as above or for a damaged record; RAIN_502 on I/O.
    /// - Parameter migrating: the two ends (`from`, `to`) of the migration whose journal is in the
    ///   state directory, if one is.
    public static func resolve(
        choice: KeyProviderChoice, stateDirectory: String,
        migrating: (from: KeyProviderKind, to: KeyProviderKind)? = nil, make: Factory
    ) throws(RainError) -> KeyProviderSelection {
        if let recorded = try KeyProviderRecord.read(stateDirectory: stateDirectory) {
            if case .provider(let wanted) = choice, wanted != recorded {
                // The record and the config are the two ends of the migration under way.
                if let migrating, Set([wanted, recorded]) == Set([migrating.from, migrating.to]) {
                    return KeyProviderSelection(
                        kind: recorded, isNewlyRecorded: false, isLegacyInstall: false, configuredDuringMigration: wanted)
                }
                throw RainError.invalid(
                    """
                    storage.provider is \(wanted.rawValue) but this state directory's keys are in \(recorded.rawValue); \
                    run `rainwalletd storage migrate --to \(wanted.rawValue)` (daemon stopped) to move them, or set \
                    storage.provider to \(recorded.rawValue) or auto
                    """, field: "storage.provider")
            }
            return KeyProviderSelection(kind: recorded, isNewlyRecorded: false, isLegacyInstall: false)
        }
        let kind: KeyProviderKind
        var isLegacy = false
        if hasFileKeys(stateDirectory: stateDirectory) {
            if case .provider(let wanted) = choice, wanted != .file {
                throw RainError.invalid(
                    """
                    storage.provider is \(wanted.rawValue) but this state directory holds the keys of the file provider; \
                    run `rainwalletd storage migrate --to \(wanted.rawValue)` (daemon stopped) to move them, or set \
                    storage.provider to file or auto
                    """, field: "storage.provider")
            }
            kind = .file
            isLegacy = true
        } else {
            switch choice {
            case .provider(let wanted): kind = wanted
            case .auto: kind = strongestAvailable(make: make)
            }
        }
        try KeyProviderRecord.write(kind, stateDirectory: stateDirectory)
        return KeyProviderSelection(kind: kind, isNewlyRecorded: true, isLegacyInstall: isLegacy)
    }

    /// Whether the `file` provider's key files are in `stateDirectory` (an install from before providers).
    public static func hasFileKeys(stateDirectory: String) -> Bool {
        let files = FileKeyProvider(stateDirectory: stateDirectory)
        return [files.path(of: .storage), files.path(of: .authorityMaster), files.deviceKeyPath].contains {
            FileManager.default.fileExists(atPath: $0)
        }
    }

    /// The strongest provider that is there: tpm2 when it can make the keys' primary key (not
    /// only answer: an owner hierarchy with a password would leave the daemon loading for good),
    /// then a Secret Service that answers (even locked), else `file`.
    static func strongestAvailable(make: Factory) -> KeyProviderKind {
        for kind in KeyProviderKind.strongestFirst where kind != .file {
            guard let provider = try? make(kind) else { continue }
            do {
                try provider.checkUsable()
                return kind
            } catch {
                // A locked keyring is there: the user unlocks it, and a weaker provider is never chosen silently.
                if kind == .secretService, error.details.reason == "keyring_locked" { return kind }
            }
        }
        return .file
    }
}
