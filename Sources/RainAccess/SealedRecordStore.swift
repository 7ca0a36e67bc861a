import RainCore
import RainCrypto

/// A value kept in a `SealedRecord` of its own in the state directory.
public protocol SealedRecordValue: Codable, Sendable {
    /// Where the value is kept and how its record is sealed and named.
    static var sealedFile: SealedRecordFile { get }
}

/// The file of a `SealedRecordValue` and what tells its record apart from the others.
public struct SealedRecordFile: Sendable {
    /// The file in the state directory (`apps.json`).
    public var fileName: String
    /// The HKDF purpose of the record's key: one per file, so no record's seal opens another's.
    public var purpose: String
    /// What the record is, in messages (`app approvals`).
    public var name: String
    /// What the user does when the record cannot be read (`remove the file to start over`).
    public var startOver: String
}

/// The store of one `SealedRecordValue` of a state directory: `AppApprovalStore`,
/// `ConfirmedSettingsStore`, `PromptPlaceStore`.
public struct SealedRecordStore<Value: SealedRecordValue>: Sendable {
    let record: SealedRecord

    /// The value's file in the state directory.
    public static var fileName: String { Value.sealedFile.fileName }

    /// The store of the state directory, sealed under a key derived from `storageKey` (a record
    /// sealed under one of `previousStorageKeys`, before a migration, is sealed again when read).
    /// - Throws: RAIN_502 when the key cannot be derived.
    public init(
        stateDirectory: String, storageKey: SymmetricKey, previousStorageKeys: [SymmetricKey] = []
    ) throws(RainError) {
        let file = Value.sealedFile
        record = try SealedRecord(
            path: "\(stateDirectory)/\(file.fileName)", storageKey: storageKey, previousStorageKeys: previousStorageKeys,
            purpose: file.purpose, name: file.name)
    }

    /// The file.
    public var path: String { record.path }

    /// The value recorded; nil when there is no file.
    /// - Throws: RAIN_102 `record_tampered` when the file was changed outside rainwalletd.
    public func load() throws(RainError) -> Value? {
        try record.readJSON(Value.self, startOver: Value.sealedFile.startOver)
    }

    /// Records `value` (atomically).
    /// - Throws: RAIN_502 when the file cannot be written (nothing is half-written).
    public func save(_ value: Value) throws(RainError) {
        try record.writeJSON(value)
    }
}

/// The approvals, kept in `<state>/apps.json`.
public typealias AppApprovalStore = SealedRecordStore<AppApprovals>

/// The last confirmed `GuardedSettings`, in `<state>/confirmed-settings.json`.
public typealias ConfirmedSettingsStore = SealedRecordStore<GuardedSettings>

/// The registered prompt terminal, in `<state>/prompt-place.json`.
public typealias PromptPlaceStore = SealedRecordStore<PromptPlace>
