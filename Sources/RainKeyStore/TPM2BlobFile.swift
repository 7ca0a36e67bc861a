import Glibc
import RainCore
import RainCrypto
import RainSystem

/// The file a TPM object lives in between uses: `<state>/tpm2/<name>`, mode 0600.
///
/// Layout: `RTPM` (4 bytes), version (1), kind (1), SHA-256 of those 6 bytes and the body (32),
/// then the body: the object's `TPM2B_PUBLIC` and `TPM2B_PRIVATE`, marshalled. The private part
/// is encrypted by the TPM and useless elsewhere, so the file is not secret; the checksum tells a
/// damaged file (RAIN_102 `tpm_blob_malformed`) from an intact one this TPM refuses (RAIN_501
/// `tpm_key_lost`), which the TPM alone reports the same way.
enum TPM2BlobFile {
    /// What the object is.
    enum Kind: UInt8 {
        /// A sealed secret (a `KeySlot`).
        case sealedSecret = 1
        /// The device signing key.
        case signingKey = 2

        var name: String {
            switch self {
            case .sealedSecret: "a sealed secret"
            case .signingKey: "a device signing key"
            }
        }
    }

    static let magic: [UInt8] = Array("RTPM".utf8)
    static let version: UInt8 = 1
    static let headerByteCount = 4 + 1 + 1 + 32
    /// Far above any object's size (about 300 bytes); bounds the read of a wrong file.
    static let maximumByteCount = 16 * 1024

    /// The file's bytes for `body`.
    static func encode(_ body: [UInt8], kind: Kind) -> [UInt8] {
        let prefix = magic + [version, kind.rawValue]
        return prefix + SHA256.hash(prefix + body) + body
    }

    /// The body of `bytes`, checked.
    /// - Throws: RAIN_102 `tpm_blob_malformed` naming `path` for a wrong magic, version, kind or
    ///   checksum.
    static func decode(_ bytes: [UInt8], kind: Kind, path: String) throws(RainError) -> [UInt8] {
        guard bytes.count > headerByteCount, Array(bytes.prefix(4)) == magic else {
            throw malformed(path, "it is not a rainwallet TPM blob file")
        }
        guard bytes[4] == version else {
            throw malformed(path, "it has format version \(bytes[4]), and this rainwallet reads version \(version)")
        }
        guard bytes[5] == kind.rawValue else {
            let found = Kind(rawValue: bytes[5])?.name ?? "an unknown kind of object"
            throw malformed(path, "it holds \(found), not \(kind.name)")
        }
        let body = Array(bytes[headerByteCount...])
        guard SHA256.hash(Array(bytes.prefix(6)) + body) == Array(bytes[6..<headerByteCount]) else {
            throw malformed(path, "its checksum does not match (the file was truncated or changed)")
        }
        return body
    }

    /// Reads and checks the file; nil when it does not exist.
    /// - Throws: RAIN_102 for a damaged file, a symbolic link, a file another user owns or may
    ///   write; RAIN_502 on I/O.
    static func read(_ path: String, kind: Kind) throws(RainError) -> [UInt8]? {
        guard
            let bytes = try OwnedPath.readTrustedFile(
                path, owners: [geteuid()], name: "TPM blob file", field: "path", limit: maximumByteCount)
        else { return nil }
        return try decode(bytes, kind: kind, path: path)
    }

    /// Replaces the file with `body` (0600, fsync, rename, fsync of the directory).
    static func write(_ body: [UInt8], kind: Kind, to path: String) throws(RainError) {
        try AtomicFile.write(encode(body, kind: kind), to: path, mode: 0o600)
    }

    /// RAIN_102 `tpm_blob_malformed` naming the file and what to do.
    static func malformed(_ path: String, _ why: String) -> RainError {
        RainError.invalid(
            "TPM blob file \(path) is damaged: \(why); restore it from a backup, or remove it and log in again",
            field: "path", reason: "tpm_blob_malformed")
    }
}
