import RainCore
internal import RainWire

extension RainProvider {
    /// The daemon's key provider, its keys and what each protects, and a migration under way.
    /// - Throws: RAIN_202 when the caller is not the daemon's own user; RAIN_501 while the keys
    ///   do not open or move (reason `storage_loading`, `keyring_locked`, `storage_migrating`, …).
    nonisolated(nonsending) public func storageStatus() async throws -> StorageStatus {
        try await call(Method.storageGetStatus, StorageStatusRequest(), as: StorageStatusResponse.self).status
    }

    /// The embedded authority's master key sealed under `passphrase`: the bytes of a backup file
    /// that `rainwalletd storage restore` opens, and the key's id.
    /// - Throws: RAIN_202 (reason `no_master_key`) when the daemon uses a remote authority, or the
    ///   caller is not the daemon's own user; RAIN_102 for an empty or too short passphrase.
    nonisolated(nonsending) public func storageBackup(passphrase: [UInt8]) async throws -> (backup: [UInt8], keyID: String) {
        let response = try await call(
            Method.storageBackup, StorageBackupRequest(passphrase: passphrase), as: StorageBackupResponse.self)
        return (response.backup, response.keyID)
    }

    /// Moves the running daemon's keys to `provider` (`tpm2`, `secret-service`, `file`): one line
    /// per step, then the end of the sequence; the sequence throws the error that stopped it.
    /// Meanwhile every other call to the daemon is RAIN_501 `storage_migrating`.
    /// - Throws: RAIN_101 when no daemon answers.
    public func storageMigrate(to provider: String) throws -> AsyncThrowingStream<String, any Error> {
        let conn = try connection()
        let payload = try StorageMigrateRequest(to: provider).encode()
        let metadata = [MetadataEntry(key: profileMetadataKey, value: config.profile)]
        let (_, first) = try conn.openStream(method: Method.storageMigrate, payload: payload, metadata: metadata)
        return AsyncThrowingStream { continuation in
            let task = Task {
                var messages = first
                var isRetried = false
                while true {
                    var hasYielded = false
                    do {
                        for try await bytes in messages {
                            hasYielded = true
                            continuation.yield(try StorageMigrateProgress.decode(bytes).line)
                        }
                        continuation.finish()
                    } catch let error as RainError
                        where !isRetried && !hasYielded && error.details.reason == RainError.sentBeforeIdentityReason
                    {
                        // Sent before the daemon read who connected: sent again, as `call` does.
                        isRetried = true
                        do {
                            messages = try conn.openStream(method: Method.storageMigrate, payload: payload, metadata: metadata).1
                            continue
                        } catch {
                            continuation.finish(throwing: error)
                        }
                    } catch {
                        continuation.finish(throwing: error)
                    }
                    return
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}
