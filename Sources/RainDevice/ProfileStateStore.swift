import Dispatch
import FoundationEssentials
import Glibc
import RainCore
import RainSystem

/// What a profile learns at run time and must keep: today its passkey domain when the config
/// left it unset (`<state>/profiles/<name>.json`, 0600, atomic writes).
public struct ProfileStateStore: Sendable {
    /// Where the files live; nil keeps nothing (tests).
    public let directory: String?
    private static let queue = DispatchQueue(label: "rainwallet.profile-state")

    public init(directory: String?) { self.directory = directory }

    /// The content of one profile's file.
    package struct Record: Codable, Equatable {
        /// The passkey domain the profile was configured with at run time.
        package var passkeyDomain: String?
    }

    /// The stored passkey domain of `profile`, if any. An unreadable file reads as none (logged).
    func passkeyDomain(profile: String, logger: Logger) async -> String? {
        guard let directory else { return nil }
        let path = "\(directory)/\(profile).json"
        return await
            (try? Self.queue.runBlocking { () throws(RainError) -> String? in
                guard let bytes = try AtomicFile.read(path, limit: 64 * 1024, options: [.noFollow]) else { return nil }
                guard let record = Self.record(decoding: bytes) else {
                    logger.warning("profile_state.unreadable", ["profile": profile, "path": path])
                    return nil
                }
                return record.passkeyDomain
            }) ?? nil
    }

    /// Decodes the content of a profile state file; nil when it is not one.
    package static func record(decoding bytes: [UInt8]) -> Record? {
        try? JSONDecoder().decode(Record.self, from: Data(bytes))
    }

    /// Persists the passkey domain of `profile`.
    func save(passkeyDomain: String, profile: String) async throws(RainError) {
        guard let directory else { return }
        let bytes: [UInt8]
        do {
            bytes = Array(try JSONEncoder().encode(Record(passkeyDomain: passkeyDomain)))
        } catch {
            throw RainError(.internalError, "cannot encode the profile state")
        }
        try await Self.queue.runBlocking { () throws(RainError) in
            try OwnedPath.makeOrCheckDirectory(directory, mode: 0o700, name: "profile state directory", field: "state-dir")
            try AtomicFile.write(bytes, to: "\(directory)/\(profile).json", mode: 0o600)
        }
    }
}
