import RainCore
import RainCrypto

/// The embedded authority's master key, encrypted under a passphrase (`storage backup`).
///
/// Format, version 1: `RWKB` ‖ version byte 1 ‖ PBKDF2 iteration count (4 bytes, big-endian) ‖
/// 16-byte salt ‖ the master key's id (16 hex characters) ‖ AES-256-GCM nonce ‖ ciphertext ‖ tag.
/// The key is PBKDF2-HMAC-SHA256(passphrase, salt, iterations); everything before the nonce is the
/// associated data, so no header byte can be changed without the file failing to open.
public enum MasterKeyBackup {
    static let magic: [UInt8] = Array("RWKB".utf8)
    static let version: UInt8 = 1
    /// PBKDF2 iterations of a new backup (OWASP's 2023 figure for PBKDF2-HMAC-SHA256).
    public static let iterations = 600_000
    /// The fewest iterations a backup may name: a file crafted with fewer would make guessing cheap.
    static let minimumIterations = 100_000
    /// The most iterations a backup may name, so a crafted file cannot stall the daemon.
    static let maximumIterations = 10_000_000
    /// The shortest passphrase accepted.
    public static let minimumPassphraseLength = 8
    static let headerByteCount = 4 + 1 + 4 + 16 + 16

    /// Encrypts `masterKey` under `passphrase`.
    /// - Parameter iterations: PBKDF2 iterations (tests lower it; never below 100,000).
    /// - Throws: RAIN_102 (field `passphrase`) for a passphrase shorter than 8 characters.
    public static func seal(
        _ masterKey: SymmetricKey, passphrase: [UInt8], iterations: Int = iterations
    ) throws(RainError) -> [UInt8] {
        guard passphrase.count >= minimumPassphraseLength else {
            throw RainError.invalid(
                "the passphrase must have at least \(minimumPassphraseLength) characters", field: "passphrase")
        }
        guard iterations >= minimumIterations, iterations <= maximumIterations else {
            throw RainError.invalid("PBKDF2 iterations out of range", field: "iterations")
        }
        let salt = try SecureRandom.bytes(count: 16)
        let count = UInt32(iterations)
        let header =
            magic + [version] + [UInt8(count >> 24), UInt8(count >> 16 & 0xff), UInt8(count >> 8 & 0xff), UInt8(count & 0xff)]
            + salt + Array(masterKey.keyID.utf8)
        let key = try PBKDF2HMACSHA256.deriveKey(password: passphrase, salt: salt, iterations: iterations)
        let plain = masterKey.withUnsafeBytes { Array($0) }
        return header + (try AESGCM.seal(plain, using: key, authenticating: header).combined)
    }

    /// Decrypts a backup.
    /// - Throws: RAIN_102 (field `backup`) for a file that is not a backup of a known version, or
    ///   (reason `wrong_passphrase`) when the passphrase does not open it.
    public static func open(_ bytes: [UInt8], passphrase: [UInt8]) throws(RainError) -> SymmetricKey {
        guard bytes.count > headerByteCount, Array(bytes[0..<4]) == magic else {
            throw RainError.invalid("not a rainwallet master-key backup", field: "backup")
        }
        guard bytes[4] == version else {
            throw RainError.invalid("backup version \(bytes[4]) is not known to this rainwalletd", field: "backup")
        }
        let count = bytes[5..<9].reduce(0) { $0 << 8 | Int($1) }
        guard count >= minimumIterations, count <= maximumIterations else {
            throw RainError.invalid(
                "the backup names \(count) PBKDF2 iterations: not a backup this daemon wrote", field: "backup")
        }
        let header = Array(bytes[0..<headerByteCount])
        let salt = Array(bytes[9..<25])
        let key = try PBKDF2HMACSHA256.deriveKey(password: passphrase, salt: salt, iterations: count)
        do {
            let box = try AESGCM.SealedBox(combined: Array(bytes[headerByteCount...]))
            let plain = try AESGCM.open(box, using: key, authenticating: header)
            let master = SymmetricKey(bytes: plain)
            guard master.byteCount == 32 else { throw RainError.invalid("wrong key size", field: "backup") }
            return master
        } catch {
            throw RainError.invalid(
                "the passphrase does not open this backup (or the file was changed)", field: "backup",
                reason: "wrong_passphrase")
        }
    }

    /// The master key id a backup names (readable without the passphrase), or nil for a file that is
    /// not a backup.
    public static func keyID(of bytes: [UInt8]) -> String? {
        guard bytes.count > headerByteCount, Array(bytes[0..<4]) == magic else { return nil }
        return String(decoding: bytes[25..<headerByteCount], as: UTF8.self)
    }
}
