import FoundationEssentials
import Glibc
import RainCore
import RainCrypto
import RainSystem

/// A small JSON record in the state directory that a program of the same user must not be able to
/// rewrite unnoticed: the app approvals and the last confirmed security settings.
///
/// The file is `{"body": "<JSON text>", "mac": "<hex>"}`, the MAC an HMAC-SHA256 of the body under
/// a key derived (HKDF, one `purpose` per record) from the storage key, which the key provider
/// holds. With the `tpm2` and `secret-service` providers another program of the user cannot get
/// that key, so it cannot forge a record; with `file` it can (docs/security.md's threat model says so).
/// Written atomically (temp file, fsync, rename), mode 0600.
public struct SealedRecord: Sendable {
    /// The file.
    public let path: String
    private let key: SymmetricKey
    /// Keys derived from the storage keys of before a migration that re-sealed the sessions: a
    /// record sealed under one of them is read, and written again under `key` at once.
    private let previousKeys: [SymmetricKey]
    /// What the record is, in messages (`app approvals`).
    public let name: String

    /// The largest record read.
    public static let maximumByteCount = 1 << 20

    /// A record at `path`, sealed with a key derived from `storageKey` for `purpose`.
    /// - Parameter previousStorageKeys: the storage keys of before an unfinished migration; a
    ///   record sealed under one of them is re-sealed under `storageKey` when read.
    /// - Throws: RAIN_502 when the key cannot be derived.
    public init(
        path: String, storageKey: SymmetricKey, previousStorageKeys: [SymmetricKey] = [], purpose: String, name: String
    ) throws(RainError) {
        self.path = path
        self.name = name
        let info = "rainwallet/sealed-record/\(purpose)/v1"
        key = try HKDFSHA256.deriveKey(from: storageKey, salt: [], info: info)
        previousKeys = try previousStorageKeys.map { (old) throws(RainError) in
            try HKDFSHA256.deriveKey(from: old, salt: [], info: info)
        }
    }

    private struct Envelope: Codable {
        var body: String
        var mac: String
    }

    /// The body, checked; nil when there is no file.
    /// - Throws: RAIN_102 (reason `record_tampered`) when the MAC does not match (edited by hand or
    ///   by another program) or the file is not a record, naming the file and what to do.
    public func read() throws(RainError) -> [UInt8]? {
        guard
            let bytes = try OwnedPath.readTrustedFile(
                path, owners: [getuid()], name: name, field: path, limit: Self.maximumByteCount)
        else { return nil }
        let envelope: Envelope
        do {
            envelope = try JSONDecoder().decode(Envelope.self, from: Data(bytes))
        } catch {
            throw tampered("is not a sealed record")
        }
        let body = Array(envelope.body.utf8)
        guard let mac = Hex.decode(envelope.mac) else { throw tampered("was changed outside rainwalletd (its seal is not hex)") }
        if constantTimeEquals(mac, HMACSHA256.authenticate(body, key: key)) { return body }
        guard previousKeys.contains(where: { constantTimeEquals(mac, HMACSHA256.authenticate(body, key: $0)) }) else {
            throw tampered("was changed outside rainwalletd (its seal does not match)")
        }
        // Sealed before the storage key changed (a migration): sealed again under the new key now,
        // so it still reads once the old key is gone.
        try write(body)
        return body
    }

    /// Writes `body`, sealed.
    /// - Throws: RAIN_502 when the file cannot be written (nothing is half-written).
    public func write(_ body: [UInt8]) throws(RainError) {
        let envelope = Envelope(
            body: String(decoding: body, as: UTF8.self), mac: Hex.encode(HMACSHA256.authenticate(body, key: key)))
        try AtomicFile.write(try encoded(envelope) + [0x0a], to: path, mode: 0o600)
    }

    /// The body, checked and decoded from JSON; nil when there is no file.
    /// - Parameter startOver: what the user does when it cannot be read ("remove the file to start over").
    /// - Throws: RAIN_102 `record_tampered` when the file was changed outside rainwalletd or its
    ///   body is not a `Value`.
    public func readJSON<Value: Decodable>(_ type: Value.Type, startOver: String) throws(RainError) -> Value? {
        guard let body = try read() else { return nil }
        do {
            return try JSONDecoder().decode(Value.self, from: Data(body))
        } catch {
            throw RainError.invalid(
                "the \(name) in \(path) cannot be read: \(startOver)", field: path, reason: "record_tampered")
        }
    }

    /// Writes `value` as JSON (sorted keys), sealed.
    /// - Throws: RAIN_502 when the file cannot be written (nothing is half-written).
    public func writeJSON<Value: Encodable>(_ value: Value) throws(RainError) {
        try write(try encoded(value))
    }

    private func encoded<Value: Encodable>(_ value: Value) throws(RainError) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        do {
            return Array(try encoder.encode(value))
        } catch {
            throw RainError(.internalError, "could not encode the \(name)")
        }
    }

    private func tampered(_ what: String) -> RainError {
        RainError.invalid(
            """
            the \(name) file \(path) \(what): rainwalletd does not use it. If you did not change it, another \
            program did; remove it to start over (every approval is asked again)
            """, field: path, reason: "record_tampered")
    }
}

/// The sealed records of a state directory, together.
public enum SealedRecords {
    /// The records' files, relative to the state directory: sealed under the storage key, so a
    /// new storage key opens none of them.
    public static let fileNames = [
        AppApprovalStore.fileName, ConfirmedSettingsStore.fileName, PromptPlaceStore.fileName,
        ConfirmationKeyStore.fileName,
    ]

    /// Seals every record of `stateDirectory` under `storageKey` (a migration to a new storage
    /// key calls it while the old key still exists): a record sealed under one of
    /// `previousStorageKeys` is written again, one already sealed under `storageKey` is left.
    /// - Returns: how many records there are.
    /// - Throws: RAIN_102 `record_tampered` for a record sealed under none of the keys; RAIN_502 on I/O.
    public static func reseal(
        stateDirectory: String, storageKey: SymmetricKey, previousStorageKeys: [SymmetricKey]
    ) throws(RainError) -> Int {
        let records = [
            try AppApprovalStore(
                stateDirectory: stateDirectory, storageKey: storageKey, previousStorageKeys: previousStorageKeys
            ).record,
            try ConfirmedSettingsStore(
                stateDirectory: stateDirectory, storageKey: storageKey, previousStorageKeys: previousStorageKeys
            ).record,
            try PromptPlaceStore(
                stateDirectory: stateDirectory, storageKey: storageKey, previousStorageKeys: previousStorageKeys
            ).record,
            try ConfirmationKeyStore(
                stateDirectory: stateDirectory, storageKey: storageKey, previousStorageKeys: previousStorageKeys
            ).record,
        ]
        var count = 0
        for record in records where try record.read() != nil { count += 1 }
        return count
    }
}
