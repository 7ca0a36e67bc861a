import RainCore

// The storage methods (`Method.storageStatus`, `storageBackup`, `storageMigrate`; proto/storage.proto).

/// `Storage/GetStatus` request.
public struct StorageStatusRequest: WireMessage, Equatable {
    public init() {}
}

/// `Storage/GetStatus` response: the daemon's key provider, its keys, a pending migration.
public struct StorageStatusResponse: WireMessage, Equatable {
    public var status: StorageStatus
    public init(status: StorageStatus) { self.status = status }
}

/// `Storage/Backup` request: the passphrase the master key's backup is sealed under.
public struct StorageBackupRequest: WireMessage, Equatable, CustomStringConvertible {
    public var passphrase: [UInt8]
    public init(passphrase: [UInt8]) { self.passphrase = passphrase }
    /// Never the passphrase.
    public var description: String { "StorageBackupRequest(passphrase: <redacted>)" }
}

/// `Storage/Backup` response: the sealed backup (the file's bytes) and the master key's id.
public struct StorageBackupResponse: WireMessage, Equatable {
    public var backup: [UInt8]
    public var keyID: String
    public init(backup: [UInt8], keyID: String) {
        self.backup = backup
        self.keyID = keyID
    }
}

/// `Storage/Migrate` request: the target provider (`tpm2`, `secret-service`, `file`).
public struct StorageMigrateRequest: WireMessage, Equatable {
    public var to: String
    public init(to: String) { self.to = to }
}

/// One message of the `Storage/Migrate` stream: a step done, for people.
public struct StorageMigrateProgress: WireMessage, Equatable {
    public var line: String
    public init(line: String) { self.line = line }
}
