import Foundation
import Glibc
import RainCore
import RainCrypto
import RainSystem

/// The terminal registered for prompts (`rainwallet prompt here`), kept across restarts of the
/// daemon in `prompt-place.json`, sealed under the storage key like the approvals.
///
/// A registration is trusted without confirmation only while there is no place to confirm it on.
/// Kept in memory only, every restart of the daemon made such a place: any program of the user
/// that restarted it could then register a terminal it holds and answer the prompts itself. Kept
/// here, a restart finds the same terminal again, and registering another one is confirmed there,
/// for as long as that terminal is open. The record names one allocation of the terminal (its
/// device number and the change time the kernel gave its node): once the terminal is closed, a new
/// terminal that gets its number is not taken for it.
public struct PromptPlaceStore: Sendable {
    /// A registered terminal as recorded.
    public struct Place: Codable, Sendable, Equatable {
        /// Its path, `/dev/pts/4`.
        public var path: String
        /// Its `TERM`.
        public var term: String
        /// Its encoded device number (`st_rdev`).
        public var device: UInt64
        /// Its node's change time: the seconds.
        public var changedSeconds: Int64
        /// Its node's change time: the nanoseconds.
        public var changedNanoseconds: Int64

        /// The terminal now at `path`, if it is a character device of this uid.
        /// - Parameter term: its `TERM`.
        public static func current(path: String, term: String) -> Place? {
            guard let node = Syscall.characterDeviceNode(path: path), node.uid == geteuid() else { return nil }
            return Place(
                path: path, term: term, device: node.device, changedSeconds: node.changedSeconds,
                changedNanoseconds: node.changedNanoseconds)
        }

        /// Whether the terminal registered is still there: the same device node, of this uid, that
        /// the kernel has not made anew since.
        public var isOpen: Bool { Self.current(path: path, term: term) == self }

        /// The registered terminal it names.
        public var terminal: RegisteredTerminal { RegisteredTerminal(path: path, term: term) }
    }

    let record: SealedRecord

    /// The store of the state directory, sealed under a key derived from `storageKey` (a record
    /// sealed under one of `previousStorageKeys`, before a migration, is sealed again when read).
    /// - Throws: RAIN_502 when the key cannot be derived.
    public init(stateDirectory: String, storageKey: SymmetricKey, previousStorageKeys: [SymmetricKey] = []) throws(RainError) {
        record = try SealedRecord(
            path: "\(stateDirectory)/prompt-place.json", storageKey: storageKey, previousStorageKeys: previousStorageKeys,
            purpose: "prompt-place", name: "prompt place")
    }

    /// The file.
    public var path: String { record.path }

    /// The recorded place; nil when none was registered.
    /// - Throws: RAIN_102 `record_tampered` when the file was changed outside rainwalletd.
    public func load() throws(RainError) -> Place? {
        guard let body = try record.read() else { return nil }
        do {
            return try JSONDecoder().decode(Place.self, from: Data(body))
        } catch {
            throw RainError.invalid(
                "the prompt place in \(path) cannot be read: remove the file and run `rainwallet prompt here` again",
                field: path, reason: "record_tampered")
        }
    }

    /// Records `place`.
    /// - Throws: RAIN_502 when the file cannot be written (nothing is half-written).
    public func save(_ place: Place) throws(RainError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data: Data
        do {
            data = try encoder.encode(place)
        } catch {
            throw RainError(.internalError, "could not encode the prompt place")
        }
        try record.write(Array(data))
    }
}
