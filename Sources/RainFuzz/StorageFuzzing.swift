import Foundation
import RainAuthority
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainDevice
import RainSoftAuthenticator
import RainSystem
import RainWebAuthn

/// FuzzStorage: what the daemon (and the CLI's software authenticator) read back from disk. The
/// first input byte picks the reader (modulo 7), the rest is the file's content.
enum StorageFuzzing {
    enum Reader: UInt8, CaseIterable {
        /// `<state>/sessions/<profile>.session`, as stored: header, nonce, ciphertext, tag.
        case sessionFile
        /// The plaintext behind the tag, sealed with the fixed fuzzing key first, so the session
        /// decoder itself is reached.
        case sessionPlaintext
        /// `<state>/profiles/<profile>.json`.
        case profileState
        /// `<state>/outbox.jsonl`.
        case outbox
        /// The software authenticator's key file.
        case softAuthenticatorFile
        /// `<state>/device-id`.
        case deviceID
        /// `<state>/storage.key` (and `device.key`, read the same way).
        case keyFile
    }

    static let profile = "default"

    static func run(_ input: [UInt8], scratch: FuzzScratch) -> FuzzOutcome {
        guard let selector = input.first else { return .accepted }
        let bytes = Array(input.dropFirst())
        do throws(RainError) {
            switch Reader(rawValue: selector % UInt8(Reader.allCases.count)) ?? .sessionFile {
            case .sessionFile:
                return session(bytes, scratch: scratch)
            case .sessionPlaintext:
                return session(try scratch.storage.seal(plaintext: bytes, profile: profile), scratch: scratch)
            case .profileState:
                guard ProfileStateStore.record(decoding: bytes) != nil else {
                    return .rejected(RainError(.internalError, "not a profile state file"))
                }
            case .outbox:
                let path = try scratch.write(bytes, to: "outbox.jsonl")
                _ = try OutboxCodeSender.read(path: path, logger: scratch.logger)
            case .softAuthenticatorFile:
                _ = try SoftAuthenticatorFile.load(from: try scratch.write(bytes, to: "authenticator.json"))
            case .deviceID:
                try scratch.write(bytes, to: "identity/device-id")
                _ = try DeviceIdentity.loadOrCreateID(stateDirectory: "\(scratch.directory)/identity")
            case .keyFile:
                _ = try KeyFile.loadOrCreate(at: try scratch.write(bytes, to: "identity/storage.key"))
            }
            return .accepted
        } catch {
            return .rejected(error)
        }
    }

    /// Opens a session file; an opened session must seal and open again to the same session.
    static func session(_ file: [UInt8], scratch: FuzzScratch) -> FuzzOutcome {
        let session: StoredSession
        switch scratch.storage.open(file, profile: profile) {
        case .failure(let error): return .rejected(error)
        case .success(let s): session = s
        }
        do {
            guard
                case .success(let again) = scratch.storage.open(
                    try scratch.storage.seal(session, profile: profile), profile: profile),
                again == session
            else { return .broken("EncryptedFileStorage: open(seal(s)) != s") }
        } catch {
            return .broken("EncryptedFileStorage: an opened session does not seal (\(error.code))")
        }
        return .accepted
    }

    static func seeds(scratch: FuzzScratch) throws(RainError) -> [(name: String, bytes: [UInt8])] {
        var seeds: [(name: String, bytes: [UInt8])] = []
        func add(_ name: String, _ reader: Reader, _ bytes: [UInt8]) {
            seeds.append((name: name, bytes: [reader.rawValue] + bytes))
        }
        let expiry = Date(unixMilliseconds: 1_780_000_000_123)
        let code = StoredSession(
            accountID: "acc_1", walletID: "wal_1", accessToken: "at_abc", refreshToken: "rt_def", expiresAt: expiry,
            lifetimeSeconds: 900, contact: .email("user@example.com"))
        let passkey = StoredSession(
            accountID: "acc_2", walletID: "wal_2", accessToken: "at_ghi", refreshToken: "rt_jkl", expiresAt: expiry,
            lifetimeSeconds: 900, contact: nil, method: StoredSession.passkeyMethod)
        add("session-file-code", .sessionFile, try scratch.storage.seal(code, profile: profile))
        add("session-file-passkey", .sessionFile, try scratch.storage.seal(passkey, profile: profile))
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys  // the same bytes at every regeneration
        for (name, session) in [("code", code), ("passkey", passkey)] {
            do {
                add("session-plaintext-\(name)", .sessionPlaintext, Array(try encoder.encode(session)))
            } catch {
                throw RainError(.internalError, "cannot encode a seed session")
            }
        }
        add("profile-state", .profileState, Array(#"{"passkeyDomain":"example.com"}"#.utf8))
        var outbox: [UInt8] = []
        for (i, contact) in [("email", "user@example.com"), ("phone", "+15551234567")].enumerated() {
            outbox += try OutboxCodeSender.encode(
                OutboxDelivery(
                    appID: "default", kind: contact.0, contact: contact.1, code: "12345\(i)",
                    sentAt: expiry.addingTimeInterval(Double(i)))
            )
        }
        add("outbox", .outbox, outbox)
        let authenticatorPath = "\(scratch.directory)/seed-authenticator.json"
        let authenticator = SoftAuthenticator(path: authenticatorPath)
        for algorithm in [COSEAlgorithm.es256, .edDSA] {
            _ = try authenticator.register(
                options: .init(
                    rp: .init(id: "example.com", name: "Example"), user: .init(id: [1, 2, 3], name: "user", displayName: "User"),
                    challenge: [UInt8](repeating: 7, count: 32), pubKeyCredParams: [.init(alg: algorithm)]),
                origin: "https://example.com")
        }
        guard let file = try AtomicFile.read(authenticatorPath) else {
            throw RainError(.internalError, "the software authenticator wrote no file")
        }
        add("soft-authenticator-file", .softAuthenticatorFile, file)
        add("device-id", .deviceID, Array("dev_0123456789abcdef\n".utf8))
        add("key-file", .keyFile, FuzzScratch.storageKey)
        return seeds
    }
}
