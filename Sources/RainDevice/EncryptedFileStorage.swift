import Dispatch
import Foundation
import RainCore
import RainSystem
import RainCrypto

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
    private let queue = DispatchQueue(label: "rainwallet.storage")
    private let logger: Logger

    /// Opens (creating if needed) the storage in `stateDirectory`.
    /// - Throws: RAIN_102 when the key file has a loose mode or wrong size.
    public init(stateDirectory: String, logger: Logger) throws(RainError) {
        directory = "\(stateDirectory)/sessions"
        try OwnedPath.makeOrCheckDirectory(directory, mode: 0o700, name: "sessions directory", field: "state-dir")
        key = try KeyFile.loadOrCreate(at: "\(stateDirectory)/storage.key")
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

    func header() -> [UInt8] { Self.magic + [Self.version] + Array(key.keyID.utf8) }

    func associatedData(_ profile: String) -> [UInt8] { header() + Array("profile:\(profile)".utf8) }

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
        header() + (try AESGCM.seal(plaintext, using: key, authenticating: associatedData(profile)).combined)
    }

    /// Decrypts the file format; nil with a reason when it does not open.
    package func open(_ bytes: [UInt8], profile: String) -> Result<StoredSession, RainError> {
        let h = header()
        guard bytes.count > h.count else { return .failure(RainError(.internalError, "file is truncated")) }
        guard Array(bytes[0..<4]) == Self.magic else { return .failure(RainError(.internalError, "not a session file")) }
        guard bytes[4] == Self.version else { return .failure(RainError(.internalError, "unknown version \(bytes[4])")) }
        guard Array(bytes[0..<h.count]) == h else {
            return .failure(RainError(.internalError, "sealed with another storage key"))
        }
        do {
            let box = try AESGCM.SealedBox(combined: Array(bytes[h.count...]))
            let plain = try AESGCM.open(box, using: key, authenticating: associatedData(profile))
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
