import FoundationEssentials
import Glibc
import RainCore

/// A column value of either store's rows, read by type (nil when it is of another type).
protocol StoreColumnValue {
    /// Whether the value is NULL.
    var isNull: Bool { get }
    /// The value as text.
    var textValue: String? { get }
    /// The value as an integer.
    var integerValue: Int64? { get }
    /// The value as bytes (a BLOB in SQLite, a `bytea` in PostgreSQL).
    var bytesValue: [UInt8]? { get }
    /// The value as yes/no (an INTEGER 0/1 in SQLite, a BOOLEAN in PostgreSQL).
    var flagValue: Bool? { get }
}

/// A result row of either store, with the typed reads the record decoders need. Each read throws
/// RAIN_502 naming `operation` when the column is missing or of another type.
protocol StoreRow {
    /// The row's column value type.
    associatedtype Value: StoreColumnValue
    /// The columns, in order.
    var values: [Value] { get }
}

extension StoreRow {
    /// Whether the column is NULL.
    func isNull(_ index: Int) -> Bool { index < values.count && values[index].isNull }

    /// The column as text.
    func text(_ index: Int, _ operation: String) throws(RainError) -> String {
        try read(index, operation) { $0.textValue }
    }

    /// The column as an integer.
    func integer(_ index: Int, _ operation: String) throws(RainError) -> Int64 {
        try read(index, operation) { $0.integerValue }
    }

    /// The column as bytes.
    func bytes(_ index: Int, _ operation: String) throws(RainError) -> [UInt8] {
        try read(index, operation) { $0.bytesValue }
    }

    /// A yes/no column.
    func flag(_ index: Int, _ operation: String) throws(RainError) -> Bool {
        try read(index, operation) { $0.flagValue }
    }

    /// The column as text, or nil when it is NULL.
    func optionalText(_ index: Int, _ operation: String) throws(RainError) -> String? {
        if isNull(index) { return nil }
        return try text(index, operation)
    }

    /// The column as an integer, or nil when it is NULL.
    func optionalInteger(_ index: Int, _ operation: String) throws(RainError) -> Int64? {
        if isNull(index) { return nil }
        return try integer(index, operation)
    }

    /// The column as bytes, or nil when it is NULL.
    func optionalBytes(_ index: Int, _ operation: String) throws(RainError) -> [UInt8]? {
        if isNull(index) { return nil }
        return try bytes(index, operation)
    }

    /// The column read by `value`; RAIN_502 naming `operation` when it is missing or of another type.
    private func read<T>(_ index: Int, _ operation: String, _ value: (Value) -> T?) throws(RainError) -> T {
        guard index < values.count, let result = value(values[index]) else {
            throw StoreRecords.typeError(operation, column: index)
        }
        return result
    }
}

/// The column lists and row decoders both stores share: the tables have the same columns in
/// SQLite and PostgreSQL, so a record is read the same way from either.
enum StoreRecords {
    /// RAIN_502 for a column that is missing or of another type than the read expects.
    static func typeError(_ operation: String, column: Int) -> RainError {
        RainError(.internalError, "authority store: cannot \(operation): unexpected value type in column \(column)")
    }

    /// The columns `wallet` reads, in order.
    static let walletColumns =
        "id, account_id, created_at, entropy_ciphertext, entropy_key_id, ethereum_address, solana_address"

    static func wallet(_ row: some StoreRow, _ op: String) throws(RainError) -> WalletRecord {
        WalletRecord(
            id: try row.text(0, op), accountID: try row.text(1, op),
            createdAt: Date(unixMilliseconds: try row.integer(2, op)), entropyCiphertext: try row.optionalBytes(3, op),
            entropyKeyID: try row.optionalText(4, op), ethereumAddress: try row.optionalText(5, op),
            solanaAddress: try row.optionalText(6, op))
    }

    /// The columns `session` reads, in order, qualified with `alias`.
    static func sessionColumns(_ alias: String) -> String {
        [
            "id", "app_id", "account_id", "device_id", "access_hash", "refresh_hash", "access_expires_at",
            "created_at", "revoked_at", "revoke_reason", "device_public_key", "previous_refresh_hash", "rotated_at",
            "refresh_generation", "pending_device_public_key", "pair_used",
        ].map { "\(alias).\($0)" }.joined(separator: ", ")
    }

    /// How many columns `sessionColumns` names.
    static let sessionColumnCount = 16

    /// A session from the first `sessionColumnCount` columns of a row.
    static func session(_ row: some StoreRow, _ op: String) throws(RainError) -> SessionRecord {
        SessionRecord(
            id: try row.text(0, op), appID: try row.text(1, op), accountID: try row.text(2, op),
            deviceID: try row.text(3, op), accessHash: try row.bytes(4, op), refreshHash: try row.bytes(5, op),
            accessExpiresAt: Date(unixMilliseconds: try row.integer(6, op)),
            createdAt: Date(unixMilliseconds: try row.integer(7, op)),
            revokedAt: try row.optionalInteger(8, op).map { Date(unixMilliseconds: $0) },
            revokeReason: try row.optionalText(9, op), devicePublicKey: try row.optionalBytes(10, op),
            previousRefreshHash: try row.optionalBytes(11, op),
            rotatedAt: try row.optionalInteger(12, op).map { Date(unixMilliseconds: $0) },
            refreshGeneration: Int(try row.integer(13, op)), pendingDevicePublicKey: try row.optionalBytes(14, op),
            isPairUsed: try row.flag(15, op))
    }

    /// The columns `credential` reads, in order.
    static let credentialColumns = """
        credential_id, account_id, app_id, rp_id, public_key, algorithm, sign_count, backup_eligible, backed_up,
        user_handle, created_at, last_used_at, kind
        """

    static func credential(_ row: some StoreRow, _ op: String) throws(RainError) -> PasskeyCredentialRecord {
        PasskeyCredentialRecord(
            credentialID: try row.bytes(0, op), accountID: try row.text(1, op), appID: try row.text(2, op),
            rpID: try row.text(3, op), publicKey: try row.bytes(4, op), algorithm: Int(try row.integer(5, op)),
            signCount: UInt32(clamping: try row.integer(6, op)), isBackupEligible: try row.flag(7, op),
            isBackedUp: try row.flag(8, op), userHandle: try row.bytes(9, op),
            createdAt: Date(unixMilliseconds: try row.integer(10, op)),
            lastUsedAt: try row.optionalInteger(11, op).map { Date(unixMilliseconds: $0) }, kind: try row.text(12, op))
    }
}
