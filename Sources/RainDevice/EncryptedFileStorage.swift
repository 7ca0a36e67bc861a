import Dispatch
import FoundationEssentials
import Glibc
import RainCore
import RainSystem
import RainCrypto
import RainKeyStore

/// The default `SecureStorage`: one AES-256-GCM file per profile under `<state>/sessions/`, the
/// key in `<state>/storage.key` (0600). Writes are atomic (temp file, fsync, rename, fsync dir).
///
/// File layout: `RWS1` magic, version byte 1, the 16-character key id, then nonce ‖ ciphertext ‖ tag.
/// The header and the profile name are the associated data, so a file renamed to another profile
/// or re-labelled with another version does not open. An unreadable file is moved aside to
/// `<name>.session.corrupt-<unix ms>`, logged, and read as "no session".
public final class EncryptedFileStorage: SecureStorage {
    static let magic: [UInt8] = Array("RWS1".utf8)
    static let version: UInt8 = 1
    static let suffix = ".session"

    private let directory: String
    private let key: SymmetricKey
    private let previousKeys: [SymmetricKey]
    private let queue = DispatchQueue(label: "rainwallet.storage")
    private let logger: Logger

    /// Opens (creating if needed) the storage in `stateDirectory` with the `file` provider's key
    /// (`<state>/storage.key`, created when missing).
    /// - Throws: RAIN_102 when the key file has a loose mode or wrong size.
    public convenience init(stateDirectory: String, logger: Logger) throws(RainError) {
        let key = try FileKeyProvider(stateDirectory: stateDirectory).loadOrCreateSecret(.storage)
        try self.init(stateDirectory: stateDirectory, key: key, logger: logger)
    }

    /// Opens (creating if needed) the storage in `stateDirectory` with a key from the key provider.
    /// - Parameters:
    ///   - key: seals every file written.
    ///   - previousKeys: still open files sealed with them (a `storage migrate` under way re-encrypts
    ///     file by file; a kill in between leaves files under either key, each loadable).
    /// - Throws: RAIN_102 when a session file has a loose mode, another owner or is not a file.
    public init(stateDirectory: String, key: SymmetricKey, previousKeys: [SymmetricKey] = [], logger: Logger) throws(RainError) {
        directory = "\(stateDirectory)/sessions"
        try OwnedPath.makeOrCheckDirectory(directory, mode: 0o700, name: "sessions directory", field: "state-dir")
        self.key = key
        self.previousKeys = previousKeys
        self.logger = logger
        try Self.checkSessionFiles(in: directory)
    }

    /// Refuses session files that other users could read or replace: each `*.session` must be a
    /// regular file owned by this user with no group or other permission bits.
    /// - Throws: RAIN_102 (`details.reason` `storage_file_type`, `storage_file_owner` or
    ///   `storage_file_mode`) naming the file and the fix.
    static func checkSessionFiles(in directory: String) throws(RainError) {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        for name in names.sorted() where name.hasSuffix(suffix) {
            let path = "\(directory)/\(name)"
            var info = stat()
            guard lstat(path, &info) == 0 else { throw AtomicFile.ioError("stat", path) }
            try KeyFile.requireOwnerOnly(
                info, path: path, name: "session file", reasonPrefix: "storage_file", notRegularAdvice: "; move it away")
        }
    }

    func path(_ profile: String) -> String { "\(directory)/\(profile)\(Self.suffix)" }

    func header(_ key: SymmetricKey) -> [UInt8] { Self.magic + [Self.version] + Array(key.keyID.utf8) }

    func associatedData(_ profile: String, key: SymmetricKey) -> [UInt8] {
        header(key) + Array("profile:\(profile)".utf8)
    }

    /// The id of the key that sealed the files written now.
    public var keyID: String { key.keyID }

    /// Encrypts a session into the file format (exposed for tests).
    package func seal(_ session: StoredSession, profile: String) throws(RainError) -> [UInt8] {
        let plaintext: [UInt8]
        do {
            plaintext = Array(try JSONEncoder().encode(session))
        } catch {
            throw RainError(.internalError, "cannot encode the session")
        }
        return try seal(plaintext: plaintext, profile: profile)
    }

    /// Encrypts arbitrary plaintext into the file format, so fuzzing can reach the session decoder
    /// behind the authentication tag.
    package func seal(plaintext: [UInt8], profile: String) throws(RainError) -> [UInt8] {
        header(key) + (try AESGCM.seal(plaintext, using: key, authenticating: associatedData(profile, key: key)).combined)
    }

    /// Decrypts the file format; nil with a reason when it does not open.
    package func open(_ bytes: [UInt8], profile: String) -> Result<StoredSession, RainError> {
        let headerCount = header(key).count
        guard bytes.count > headerCount else { return .failure(RainError(.internalError, "file is truncated")) }
        guard Array(bytes[0..<4]) == Self.magic else { return .failure(RainError(.internalError, "not a session file")) }
        guard bytes[4] == Self.version else { return .failure(RainError(.internalError, "unknown version \(bytes[4])")) }
        // The header names the key: the current one, or one a migration under way still reads.
        guard let key = ([key] + previousKeys).first(where: { Array(bytes[0..<headerCount]) == header($0) }) else {
            return .failure(RainError(.internalError, "sealed with another storage key"))
        }
        do {
            let box = try AESGCM.SealedBox(combined: Array(bytes[headerCount...]))
            let plain = try AESGCM.open(box, using: key, authenticating: associatedData(profile, key: key))
            return .success(try JSONDecoder().decode(StoredSession.self, from: Data(plain)))
        } catch let e as RainError {
            return .failure(RainError(.internalError, "does not decrypt: \(e.message)"))
        } catch {
            return .failure(RainError(.internalError, "content is not a session"))
        }
    }

    public func load(profile: String) async -> StoredSession? {
        let result = try? await queue.runBlocking { () throws(RainError) -> StoredSession? in
            let p = self.path(profile)
            let bytes: [UInt8]?
            do throws(RainError) {
                bytes = try AtomicFile.read(p, limit: 1 << 20, options: [.noFollow])
            } catch {
                self.moveAside(p, profile: profile, reason: error.message)
                return nil
            }
            guard let bytes else { return nil }
            switch self.open(bytes, profile: profile) {
            case .success(let s): return s
            case .failure(let e):
                self.moveAside(p, profile: profile, reason: e.message)
                return nil
            }
        }
        return result ?? nil
    }

    private func moveAside(_ path: String, profile: String, reason: String) {
        let aside = "\(path).corrupt-\(Date().unixMilliseconds)"
        if rename(path, aside) == 0 {
            try? AtomicFile.syncDirectory(directory)
        }
        logger.warning("storage.corrupt", ["profile": profile, "reason": reason, "moved_to": aside])
    }

    public func save(_ session: StoredSession, profile: String) async throws(RainError) {
        let bytes = try seal(session, profile: profile)
        try await queue.runBlocking { () throws(RainError) in
            try AtomicFile.write(bytes, to: self.path(profile), mode: 0o600)
        }
    }

    public func delete(profile: String) async throws(RainError) {
        try await queue.runBlocking { () throws(RainError) in
            let p = self.path(profile)
            try Syscall.removeFile(p)
            try AtomicFile.syncDirectory(self.directory)
        }
    }

    /// Re-encrypts, with the current key, every session file sealed with a previous key (`storage
    /// migrate`). Each file is replaced atomically, so a kill leaves it under the old key or the new
    /// one. Files that open under no key are left for `load` to move aside. Blocking.
    /// - Returns: how many files were re-encrypted.
    /// - Throws: RAIN_502 on I/O errors.
    package func resealAll() throws(RainError) -> Int {
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter {
            $0.hasSuffix(Self.suffix)
        }
        var count = 0
        for name in names.sorted() {
            let profile = String(name.dropLast(Self.suffix.count))
            guard (try? ProfileName.validate(profile)) != nil,
                let bytes = try AtomicFile.read(path(profile), limit: 1 << 20, options: [.noFollow]),
                Array(bytes.prefix(header(key).count)) != header(key),
                case .success(let session) = open(bytes, profile: profile)
            else { continue }
            try AtomicFile.write(try seal(session, profile: profile), to: path(profile), mode: 0o600)
            count += 1
        }
        return count
    }

    public func storedProfiles() async -> [String] {
        let dir = directory
        let names =
            (try? await queue.runBlocking { () throws(RainError) -> [String] in
                ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).filter { $0.hasSuffix(Self.suffix) }
                    .map { String($0.dropLast(Self.suffix.count)) }
            }) ?? []
        return names.filter { (try? ProfileName.validate($0)) != nil }.sorted()
    }
}

/// Sessions in memory only (tests, and `--ephemeral` runs).
public actor InMemoryStorage: SecureStorage {
    private var sessions: [String: StoredSession] = [:]
    public init() {}
    public func load(profile: String) async -> StoredSession? { sessions[profile] }
    public func save(_ session: StoredSession, profile: String) async throws(RainError) { sessions[profile] = session }
    public func delete(profile: String) async throws(RainError) { sessions[profile] = nil }
    public func storedProfiles() async -> [String] { sessions.keys.sorted() }
}
