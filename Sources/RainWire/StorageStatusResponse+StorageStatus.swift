import RainCore

// `StorageStatus` is what the daemon reports and the client library returns; the wire message
// spells its absent parts as empty strings. The two meet here, and only here.
extension StorageStatusResponse {
    /// The message for `status`.
    public init(status: StorageStatus) {
        self.init(
            provider: status.provider, location: status.location,
            keys: status.keys.map {
                StorageKeyInfo(slot: $0.slot, keyID: $0.keyID, algorithm: $0.algorithm, protects: $0.protects)
            },
            unavailable: status.unavailable ?? "", migrationTo: status.migration?.to ?? "",
            migrationStep: status.migration?.step ?? "")
    }

    /// The status the message carries: an empty `unavailable` or `migrationTo` is none.
    public var status: StorageStatus {
        StorageStatus(
            provider: provider, location: location,
            keys: keys.map { StorageStatus.Key(slot: $0.slot, keyID: $0.keyID, algorithm: $0.algorithm, protects: $0.protects) },
            unavailable: unavailable.isEmpty ? nil : unavailable,
            migration: migrationTo.isEmpty ? nil : StorageStatus.Migration(to: migrationTo, step: migrationStep))
    }
}
