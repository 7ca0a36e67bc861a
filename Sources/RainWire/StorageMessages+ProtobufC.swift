internal import CProtobufC
internal import CRainProto
import RainCore

// Swift ⇄ protobuf-c for the storage methods (proto/storage.proto).

extension StorageStatusRequest {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> StorageStatusRequest {
        try unpackMessage(bytes, name: "StorageStatusRequest", rain__wallet__v1__storage_status_request__init) {
            _ throws(RainError) in StorageStatusRequest()
        }
    }
    public func encode() throws(RainError) -> [UInt8] { [] }
}

extension StorageStatusResponse {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> StorageStatusResponse {
        try unpackMessage(bytes, name: "StorageStatusResponse", rain__wallet__v1__storage_status_response__init) {
            (p) throws(RainError) in
            let m = p.pointee
            let keys = try readList(m.keys, count: m.n_keys) { (p) throws(RainError) in
                try p.map { (k) throws(RainError) in
                    StorageStatus.Key(
                        slot: try readString(k.pointee.slot, field: "slot"),
                        keyID: try readString(k.pointee.key_id, field: "key_id"),
                        algorithm: try readString(k.pointee.algorithm, field: "algorithm"),
                        protects: try readString(k.pointee.protects, field: "protects"))
                }
            }
            let unavailable = try readString(m.unavailable, field: "unavailable")
            let to = try readString(m.migration_to, field: "migration_to")
            let step = try readString(m.migration_step, field: "migration_step")
            return StorageStatusResponse(
                status: StorageStatus(
                    provider: try readString(m.provider, field: "provider"),
                    location: try readString(m.location, field: "location"), keys: keys,
                    unavailable: unavailable.isEmpty ? nil : unavailable,
                    migration: to.isEmpty ? nil : StorageStatus.Migration(to: to, step: step)))
        }
    }
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__storage_status_response__init)
        m.provider = try arena.string(status.provider, field: "provider")
        m.location = try arena.string(status.location, field: "location")
        (m.n_keys, m.keys) = try arena.list(status.keys) { (k) throws(RainError) in
            var c = cMessage(rain__wallet__v1__storage_key_info__init)
            c.slot = try arena.string(k.slot, field: "slot")
            c.key_id = try arena.string(k.keyID, field: "key_id")
            c.algorithm = try arena.string(k.algorithm, field: "algorithm")
            c.protects = try arena.string(k.protects, field: "protects")
            return arena.box(c)
        }
        m.unavailable = try arena.string(status.unavailable ?? "", field: "unavailable")
        m.migration_to = try arena.string(status.migration?.to ?? "", field: "migration_to")
        m.migration_step = try arena.string(status.migration?.step ?? "", field: "migration_step")
        return packMessage(&m)
    }
}

extension StorageBackupRequest {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> StorageBackupRequest {
        try unpackMessage(bytes, name: "StorageBackupRequest", rain__wallet__v1__storage_backup_request__init) {
            (p) throws(RainError) in StorageBackupRequest(passphrase: readBytes(p.pointee.passphrase))
        }
    }
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__storage_backup_request__init)
        m.passphrase = arena.bytes(passphrase)
        return packMessage(&m)
    }
}

extension StorageBackupResponse {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> StorageBackupResponse {
        try unpackMessage(bytes, name: "StorageBackupResponse", rain__wallet__v1__storage_backup_response__init) {
            (p) throws(RainError) in
            StorageBackupResponse(backup: readBytes(p.pointee.backup), keyID: try readString(p.pointee.key_id, field: "key_id"))
        }
    }
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__storage_backup_response__init)
        m.backup = arena.bytes(backup)
        m.key_id = try arena.string(keyID, field: "key_id")
        return packMessage(&m)
    }
}

extension StorageMigrateRequest {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> StorageMigrateRequest {
        try unpackMessage(bytes, name: "StorageMigrateRequest", rain__wallet__v1__storage_migrate_request__init) {
            (p) throws(RainError) in StorageMigrateRequest(to: try readString(p.pointee.to, field: "to"))
        }
    }
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__storage_migrate_request__init)
        m.to = try arena.string(to, field: "to")
        return packMessage(&m)
    }
}

extension StorageMigrateProgress {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> StorageMigrateProgress {
        try unpackMessage(bytes, name: "StorageMigrateProgress", rain__wallet__v1__storage_migrate_progress__init) {
            (p) throws(RainError) in StorageMigrateProgress(line: try readString(p.pointee.line, field: "line"))
        }
    }
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__storage_migrate_progress__init)
        m.line = try arena.string(line, field: "line")
        return packMessage(&m)
    }
}
