import Dispatch
import FoundationEssentials
import RainCore
import RainCrypto
import RainSystem

/// The authority's master key and the keys derived from it (docs/security.md).
///
/// One master key (a 0600 key file, `authority.key` in the state directory by default) gives, by
/// HKDF-SHA256 with distinct labels, the code-hash key, the token-hash key, the token-rotation key
/// and the wallet-encryption key. Authority instances that share a database must share the master key;
/// losing it loses every wallet.
public struct AuthorityKeys: Sendable {
    /// The master key file's name inside the state directory.
    public static let masterKeyFileName = "authority.key"

    /// HKDF info label of the login-code hash key.
    public static let codeHashLabel = "rain.authority.code-hash.v1"
    /// HKDF info label of the session-token hash key.
    public static let tokenHashLabel = "rain.authority.token-hash.v1"
    /// HKDF info label of the key refresh rotations derive the next token pair with.
    public static let tokenRotationLabel = "rain.authority.token-rotation.v1"
    /// HKDF info label of the wallet-encryption key.
    public static let walletEncryptionLabel = "rain.authority.wallet-encryption.v1"
    /// The label of the store's master-key check (`storeKeyCheck`).
    public static let storeKeyCheckLabel = "rain/store-key-check/v1"
    /// HKDF salt: fixed, so the derived keys depend on the master key and the label only.
    static let salt = Array("rain.authority.master.v1".utf8)

    /// Keys login codes are hashed with (HMAC-SHA256).
    public let codeHashKey: SymmetricKey
    /// Keys session tokens are hashed with (HMAC-SHA256).
    public let tokenHashKey: SymmetricKey
    /// Derives the token pair a refresh rotates to from the refresh token it replaces (HMAC-SHA256).
    public let tokenRotationKey: SymmetricKey
    /// Encrypts wallet secrets.
    public let walletKey: SymmetricKey
    /// The master key's id (16 hex characters), stored beside every ciphertext so a new master
    /// key can be rolled in while old ones still decrypt.
    public let masterKeyID: String
    /// HMAC-SHA256 of `storeKeyCheckLabel` under the master key: what the store records to tell
    /// whether a starting instance holds the key its data is protected by. It reveals nothing
    /// of the key.
    public let storeKeyCheck: [UInt8]

    /// Derives the keys from a master key.
    /// - Throws: RAIN_502 when derivation fails.
    public init(masterKey: SymmetricKey) throws(RainError) {
        codeHashKey = try HKDFSHA256.deriveKey(from: masterKey, salt: Self.salt, info: Self.codeHashLabel)
        tokenHashKey = try HKDFSHA256.deriveKey(from: masterKey, salt: Self.salt, info: Self.tokenHashLabel)
        tokenRotationKey = try HKDFSHA256.deriveKey(from: masterKey, salt: Self.salt, info: Self.tokenRotationLabel)
        walletKey = try HKDFSHA256.deriveKey(from: masterKey, salt: Self.salt, info: Self.walletEncryptionLabel)
        masterKeyID = masterKey.keyID
        storeKeyCheck = HMACSHA256.authenticate(Array(Self.storeKeyCheckLabel.utf8), key: masterKey)
    }

    /// Loads the master key from `path`, creating it (32 random bytes, mode 0600) when missing, and
    /// derives the keys. Blocking: call off the concurrency pool (see `load(stateDirectory:)`).
    /// - Throws: RAIN_102 when the file's mode is looser than 0600, its owner is another user or its
    ///   size is wrong; RAIN_502 when it cannot be read or created.
    public static func loadOrCreate(keyFile path: String) throws(RainError) -> AuthorityKeys {
        try AuthorityKeys(masterKey: KeyFile.loadOrCreate(at: path))
    }

    /// Loads or creates `authority.key` in `stateDirectory` (created 0700 if missing) on a
    /// dedicated queue, and derives the keys.
    /// - Throws: RAIN_102 when the file's mode is looser than 0600, its owner is another user or its
    ///   size is wrong; RAIN_502 when it cannot be read or created.
    public static func load(stateDirectory: String) async throws(RainError) -> AuthorityKeys {
        let path = PathText.joined(stateDirectory, masterKeyFileName)
        return try await load(keyFile: path, createDirectory: stateDirectory)
    }

    /// Derives the keys from `masterKey` (held by a key provider: a TPM, the keyring or a file),
    /// creating `stateDirectory` (0700) when missing, on a dedicated queue.
    /// - Throws: RAIN_102 when the directory is not this user's own; RAIN_502 on I/O.
    public static func load(stateDirectory: String, masterKey: SymmetricKey) async throws(RainError) -> AuthorityKeys {
        try await DispatchQueue(label: "rain.authority.keys").runBlocking { () throws(RainError) -> AuthorityKeys in
            try OwnedPath.makeOrCheckDirectory(
                stateDirectory, mode: 0o700, name: "authority state directory", field: "state-dir")
            return try AuthorityKeys(masterKey: masterKey)
        }
    }

    /// Loads `authority.key` from `stateDirectory` (created 0700 if missing) on a dedicated queue
    /// and derives the keys; nil when there is no key file, which is then not created.
    /// - Throws: RAIN_102 when the file's mode is looser than 0600, its owner is another user or its
    ///   size is wrong; RAIN_502 when it cannot be read.
    public static func loadExisting(stateDirectory: String) async throws(RainError) -> AuthorityKeys? {
        let path = PathText.joined(stateDirectory, masterKeyFileName)
        return try await DispatchQueue(label: "rain.authority.keys").runBlocking { () throws(RainError) -> AuthorityKeys? in
            try OwnedPath.makeOrCheckDirectory(
                stateDirectory, mode: 0o700, name: "authority state directory", field: "state-dir")
            return try KeyFile.load(at: path).map { (key) throws(RainError) in try AuthorityKeys(masterKey: key) }
        }
    }

    /// Loads or creates the master key file at `path` on a dedicated queue and derives the keys.
    /// - Throws: RAIN_102 when the file's mode is looser than 0600, its owner is another user or its
    ///   size is wrong; RAIN_502 when it cannot be read or created.
    public static func load(keyFile path: String) async throws(RainError) -> AuthorityKeys {
        try await load(keyFile: path, createDirectory: nil)
    }

    private static func load(keyFile path: String, createDirectory: String?) async throws(RainError) -> AuthorityKeys {
        try await DispatchQueue(label: "rain.authority.keys").runBlocking { () throws(RainError) -> AuthorityKeys in
            if let createDirectory {
                // Never through a symbolic link, never a directory another user can write.
                try OwnedPath.makeOrCheckDirectory(
                    createDirectory, mode: 0o700, name: "authority state directory", field: "state-dir")
            }
            return try loadOrCreate(keyFile: path)
        }
    }

    /// The keyed hash a login code is stored as: HMAC-SHA256(code-hash key, challengeID ‖ 0x00 ‖ code).
    /// Binding the challenge id means one code's hash is useless for any other challenge.
    public func codeHash(challengeID: String, code: String) -> [UInt8] {
        HMACSHA256.authenticate(Array(challengeID.utf8) + [0] + Array(code.utf8), key: codeHashKey)
    }

    /// The keyed hash a session token is stored as: HMAC-SHA256(token-hash key, token).
    public func tokenHash(_ token: String) -> [UInt8] {
        HMACSHA256.authenticate(Array(token.utf8), key: tokenHashKey)
    }

    /// Domain-separation prefix of a rotated access token's derivation.
    static let rotateAccessLabel = Array("rain.rotate.access.v1".utf8) + [0]
    /// Domain-separation prefix of a rotated refresh token's derivation.
    static let rotateRefreshLabel = Array("rain.rotate.refresh.v1".utf8) + [0]

    /// The token pair a refresh rotates `refreshToken` to:
    /// `rwa_` + base64url(HMAC-SHA256(rotation key, "rain.rotate.access.v1" ‖ 0x00 ‖ refreshToken)) and
    /// `rwr_` + base64url(HMAC-SHA256(rotation key, "rain.rotate.refresh.v1" ‖ 0x00 ‖ refreshToken)).
    ///
    /// Deterministic, so a repeat of the same refresh within the grace window (a retry after a lost
    /// reply, or a concurrent duplicate) is answered with the very pair the first one got, without
    /// storing any token. Only the authority, holding the master key, can compute it.
    public func rotatedTokens(from refreshToken: String) -> (accessToken: String, refreshToken: String) {
        let old = Array(refreshToken.utf8)
        let access = HMACSHA256.authenticate(Self.rotateAccessLabel + old, key: tokenRotationKey)
        let refresh = HMACSHA256.authenticate(Self.rotateRefreshLabel + old, key: tokenRotationKey)
        return ("rwa_" + Base64URL.encode(Array(access.prefix(32))), "rwr_" + Base64URL.encode(Array(refresh.prefix(32))))
    }
}
