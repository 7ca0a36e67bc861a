import FoundationEssentials
import Glibc
import RainCore
import RainCrypto
import RainSystem
import RainWebAuthn

/// The platform authenticator's discoverable credentials, in one sealed file:
/// `<directory>/platform-passkeys.sealed`, mode 0600, replaced atomically (temporary file, fsync,
/// rename, fsync of the directory).
///
/// Layout: `RPAK` (4 bytes), version (1), then AES-256-GCM's `nonce ‖ ciphertext ‖ tag` of the
/// JSON contents, with those 5 bytes as additional data. The key is HKDF-SHA256 of the daemon's
/// storage key (`rain/platform-passkeys/v1`), itself sealed by the TPM: a copied state directory
/// opens nowhere else, and an entry cannot be edited or moved to another relying party without
/// the key. The file is the only index from a credential ID to its key blob, so a credential ID is
/// worth nothing without it.
struct PlatformCredentialStore: Sendable {
    /// One credential.
    struct Credential: Codable, Sendable {
        /// The credential ID: 32 random bytes.
        var id: Base64URLBytes
        var rpId: String
        var userHandle: Base64URLBytes
        var userName: String
        var userDisplayName: String
        /// Seconds since 1970.
        var createdAt: Double
        /// The TPM key's blob (`TPM2PasskeyKey.blob`).
        var keyBlob: Base64URLBytes
        /// Whether the key's authorization value is the PIN.
        var isPINProtected: Bool
    }

    /// The file's contents.
    struct Contents: Codable, Sendable {
        var version: Int
        /// The blob of a key whose authorization value is the PIN, made when the PIN was chosen:
        /// a new passkey's PIN is checked with it before a key is made with that PIN.
        var pinCheckKey: Base64URLBytes?
        var credentials: [Credential]

        static let empty = Contents(version: 1, pinCheckKey: nil, credentials: [])
    }

    static let magic: [UInt8] = Array("RPAK".utf8)
    static let version: UInt8 = 1
    static let fileName = "platform-passkeys.sealed"
    /// Far above what a person's passkeys take (about 700 bytes each); bounds the read of a wrong file.
    static let maximumByteCount = 4 << 20

    let directory: String
    let key: SymmetricKey

    /// A store in `directory`, sealed with a key derived from `storageKey`.
    init(directory: String, storageKey: SymmetricKey) throws(RainError) {
        self.directory = OwnedPath.trimmingTrailingSlashes(directory)
        key = try HKDFSHA256.deriveKey(from: storageKey, salt: [], info: "rain/platform-passkeys/v1")
    }

    var path: String { "\(directory)/\(Self.fileName)" }

    /// The contents; empty when there is no file.
    /// - Throws: RAIN_102 `platform_store_damaged` for a file that does not open with this key;
    ///   RAIN_102 for a symbolic link or a file of another user; RAIN_502 on I/O.
    func load() throws(RainError) -> Contents {
        guard
            let bytes = try OwnedPath.readTrustedFile(
                path, owners: [geteuid()], name: "platform passkey file", field: "path", limit: Self.maximumByteCount)
        else { return .empty }
        let header = Self.magic + [Self.version]
        guard bytes.count > header.count, Array(bytes.prefix(header.count)) == header else {
            throw damaged("it is not a platform passkey file of this version")
        }
        let plaintext: [UInt8]
        do throws(RainError) {
            let box = try AESGCM.SealedBox(combined: Array(bytes[header.count...]))
            plaintext = try AESGCM.open(box, using: key, authenticating: header)
        } catch {
            throw damaged("it does not open with this state directory's storage key (it was copied from another, or changed)")
        }
        do {
            let contents = try JSONDecoder().decode(Contents.self, from: Data(plaintext))
            guard contents.version == 1 else { throw damaged("it has version \(contents.version)") }
            return contents
        } catch let error as RainError {
            throw error
        } catch {
            throw damaged("its contents do not decode")
        }
    }

    /// Replaces the file with `contents`, durable when this returns.
    /// - Throws: RAIN_102 when the directory is not the user's own; RAIN_502 on I/O.
    func save(_ contents: Contents) throws(RainError) {
        let plaintext: [UInt8]
        do {
            plaintext = Array(try JSONEncoder().encode(contents))
        } catch {
            throw RainError(
                .internalError, "cannot encode the platform passkey file", underlying: SendableErrorDescription(error))
        }
        let header = Self.magic + [Self.version]
        let box = try AESGCM.seal(plaintext, using: key, authenticating: header)
        _ = try OwnedPath.makeOrCheckDirectory(directory, mode: 0o700, name: "platform passkey directory", field: "path")
        try AtomicFile.write(header + box.combined, to: path, mode: 0o600)
    }

    private func damaged(_ why: String) -> RainError {
        RainError.platform(
            .invalidArgument, .storeDamaged,
            "the platform passkey file \(path) cannot be read: \(why). Its passkeys cannot sign any more: remove the "
                + "file, then register a new passkey with each site (log in there with a code first)")
    }
}
