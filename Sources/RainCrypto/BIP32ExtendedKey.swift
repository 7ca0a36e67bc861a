import RainCore

/// A BIP-32 extended private key on secp256k1: a private key, its chain code, and where it sits
/// in the tree. Ethereum accounts are derived with it (`m/44'/60'/0'/0/0`).
///
/// The private key and chain code are kept in zeroing memory (``SymmetricKey``), so the keys met
/// along a derivation path are zeroed when released; ``privateKey`` and ``chainCode`` return
/// copies that the caller owns. Prints as `<redacted>` apart from depth and child number.
public struct BIP32ExtendedKey: Sendable {
    /// The version bytes of a mainnet `xprv`.
    static let privateVersion: UInt32 = 0x0488_ADE4
    /// The version bytes of a mainnet `xpub`.
    static let publicVersion: UInt32 = 0x0488_B21E
    /// The HMAC key of the master key derivation.
    static let masterHMACKey: [UInt8] = Array("Bitcoin seed".utf8)

    private let secretKey: SymmetricKey
    private let secretChainCode: SymmetricKey

    /// The number of derivations from the master key (0 for the master key).
    public let depth: UInt8
    /// The first 4 bytes of HASH160 of the parent's compressed public key (zeros for the master).
    public let parentFingerprint: [UInt8]
    /// The index this key was derived with (hardened ones are 2^31 or more; 0 for the master).
    public let childNumber: UInt32

    private init(
        secretKey: SymmetricKey, secretChainCode: SymmetricKey, depth: UInt8, parentFingerprint: [UInt8],
        childNumber: UInt32
    ) {
        self.secretKey = secretKey
        self.secretChainCode = secretChainCode
        self.depth = depth
        self.parentFingerprint = parentFingerprint
        self.childNumber = childNumber
    }

    /// The 32-byte private key (big-endian scalar). Secret: a copy the caller must protect.
    public var privateKey: [UInt8] { secretKey.withUnsafeBytes { Array($0) } }

    /// The 32-byte chain code. Secret with the public key, since both give every non-hardened
    /// child: a copy the caller must protect.
    public var chainCode: [UInt8] { secretChainCode.withUnsafeBytes { Array($0) } }

    /// The master key of a seed: HMAC-SHA512 with the key `"Bitcoin seed"`; the left half is
    /// the private key, the right half the chain code.
    /// - Parameter seed: 16 to 64 bytes, usually the 64-byte BIP-39 seed.
    /// - Returns: the master key (depth 0).
    /// - Throws: RAIN_102 (field `seed`) when the seed is shorter than 16 or longer than 64
    ///   bytes; RAIN_502 with reason `invalid_derived_key` when the left half is 0 or ≥ n
    ///   (probability below 2^-127: use another seed); RAIN_502 when OpenSSL fails.
    public static func master(seed: [UInt8]) throws(RainError) -> BIP32ExtendedKey {
        try seed.withTypedUnsafeBytes { (bytes) throws(RainError) in try master(seed: bytes) }
    }

    /// ``master(seed:)`` from seed bytes that may live in zeroing memory.
    static func master(seed: UnsafeRawBufferPointer) throws(RainError) -> BIP32ExtendedKey {
        guard (16...64).contains(seed.count) else {
            throw RainError.invalid("a BIP-32 seed is 16 to 64 bytes", field: "seed")
        }
        return try withSecretScratch(byteCount: HMACSHA512.byteCount) { (digest) throws(RainError) in
            try masterHMACKey.withTypedUnsafeBytes { (key) throws(RainError) in
                try HMACSHA512.authenticate(seed, key: key, into: digest)
            }
            let left = UnsafeRawBufferPointer(rebasing: digest[0..<32])
            let right = UnsafeRawBufferPointer(rebasing: digest[32..<64])
            guard try Secp256k1.isValidPrivateKey(left) else { throw Secp256k1.invalidDerivedKey }
            return BIP32ExtendedKey(
                secretKey: try SymmetricKey.copying(left), secretChainCode: try SymmetricKey.copying(right), depth: 0,
                parentFingerprint: [0, 0, 0, 0], childNumber: 0)
        }
    }

    /// The key at `path` below this key.
    /// - Parameter path: `m` followed by `/index` components, hardened with `'`, `h` or `H`, for
    ///   example `m/44'/60'/0'/0/0`. The indices are applied from this key, which is normally
    ///   the master key.
    /// - Returns: the derived key (this key for `m`).
    /// - Throws: RAIN_102 (field `path`) for a malformed path or one that goes deeper than 255;
    ///   errors of ``child(_:)``.
    public func derive(path: String) throws(RainError) -> BIP32ExtendedKey {
        let parsed = try DerivationPath(parsing: path)
        var key = self
        for (position, index) in parsed.indices.enumerated() {
            // Only the returned key keeps its parent fingerprint; the keys met on the way are
            // dropped, so their hardened steps skip it (one EC_POINT_mul each, a tenth of a login).
            key = try key.child(index, needsFingerprint: position == parsed.indices.count - 1)
        }
        return key
    }

    /// The child key at `index` (BIP-32 CKDpriv).
    ///
    /// I = HMAC-SHA512(chain code, data), where data is `00 ‖ k ‖ index` for a hardened index and
    /// `compressed public key ‖ index` otherwise; the child key is (IL + k) mod n and its chain
    /// code IR.
    /// - Parameter index: below 2^31 for a normal child, 2^31 or more for a hardened one.
    /// - Returns: the child key.
    /// - Throws: RAIN_102 (field `index`) when this key is already at depth 255; RAIN_502 with
    ///   reason `invalid_derived_key` when IL ≥ n or the child key is 0 (probability below
    ///   2^-127: BIP-32 says to use the next index); RAIN_502 when OpenSSL fails.
    public func child(_ index: UInt32) throws(RainError) -> BIP32ExtendedKey {
        try child(index, needsFingerprint: true)
    }

    /// ``child(_:)``; without `needsFingerprint`, a hardened child gets a zero parent fingerprint
    /// and costs no public key (for the keys on the way of ``derive(path:)``, never returned).
    private func child(_ index: UInt32, needsFingerprint: Bool) throws(RainError) -> BIP32ExtendedKey {
        guard depth < UInt8.max else {
            throw RainError.invalid("a BIP-32 key cannot be deeper than 255", field: "index")
        }
        // The parent's public key: the data of a normal child, and the fingerprint.
        var parentPublicKey: [UInt8] = []
        var fingerprint: [UInt8] = [0, 0, 0, 0]
        if needsFingerprint || index < DerivationPath.hardenedOffset {
            parentPublicKey = try compressedPublicKey
            fingerprint = Array(try Hash160.hash(parentPublicKey).prefix(4))
        }
        let dataByteCount = Secp256k1.compressedPublicKeyByteCount + 4
        return try withSecretScratch(byteCount: dataByteCount + HMACSHA512.byteCount) {
            (scratch) throws(RainError) in
            let data = UnsafeMutableRawBufferPointer(rebasing: scratch[0..<dataByteCount])
            let digest = UnsafeMutableRawBufferPointer(rebasing: scratch[dataByteCount...])
            if index >= DerivationPath.hardenedOffset {
                data[0] = 0
                secretKey.withUnsafeBytes { key in
                    UnsafeMutableRawBufferPointer(rebasing: data[1..<33]).copyMemory(from: key)
                }
            } else {
                parentPublicKey.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: data[0..<33]).copyMemory(from: $0) }
            }
            for byte in 0..<4 { data[33 + byte] = UInt8(truncatingIfNeeded: index >> UInt32(24 - 8 * byte)) }

            try secretChainCode.withSecretBytes { (chainCode) throws(RainError) in
                try HMACSHA512.authenticate(UnsafeRawBufferPointer(data), key: chainCode, into: digest)
            }
            let left = UnsafeRawBufferPointer(rebasing: digest[0..<32])
            let right = UnsafeRawBufferPointer(rebasing: digest[32..<64])
            let childKey = try SymmetricKey(byteCount: Secp256k1.scalarByteCount) { (output) throws(RainError) in
                try secretKey.withSecretBytes { (parentKey) throws(RainError) in
                    try Secp256k1.addTweak(left, to: parentKey, into: output)
                }
            }
            return BIP32ExtendedKey(
                secretKey: childKey, secretChainCode: try SymmetricKey.copying(right), depth: depth + 1,
                parentFingerprint: fingerprint, childNumber: index)
        }
    }

    /// The 33-byte compressed public key (`02` or `03`, then x), computed with OpenSSL's
    /// `EC_POINT_mul` on secp256k1.
    /// - Throws: RAIN_502 when OpenSSL fails.
    public var compressedPublicKey: [UInt8] {
        get throws(RainError) {
            try secretKey.withSecretBytes { (key) throws(RainError) in
                try Secp256k1.publicKey(privateKey: key, compressed: true)
            }
        }
    }

    /// The 65-byte uncompressed public key (`04`, then x and y), as Ethereum addresses need.
    /// - Throws: RAIN_502 when OpenSSL fails.
    public var uncompressedPublicKey: [UInt8] {
        get throws(RainError) {
            try secretKey.withSecretBytes { (key) throws(RainError) in
                try Secp256k1.publicKey(privateKey: key, compressed: false)
            }
        }
    }

    /// The key as a mainnet `xprv…` string (BIP-32 serialization, Base58Check). Secret.
    public func serializedPrivate() -> String {
        var payload = serializationHeader(version: Self.privateVersion)
        payload.append(0)
        secretKey.withUnsafeBytes { payload.append(contentsOf: $0) }
        defer { SecureMemory.cleanse(&payload) }
        return Base58.encodeChecked(payload)
    }

    /// The matching mainnet `xpub…` string (BIP-32 serialization, Base58Check).
    /// - Throws: RAIN_502 when OpenSSL fails.
    public func serializedPublic() throws(RainError) -> String {
        var payload = serializationHeader(version: Self.publicVersion)
        payload.append(contentsOf: try compressedPublicKey)
        defer { SecureMemory.cleanse(&payload) }
        return Base58.encodeChecked(payload)
    }

    /// version ‖ depth ‖ parent fingerprint ‖ child number ‖ chain code: the first 45 of the 78
    /// serialized bytes.
    private func serializationHeader(version: UInt32) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(78)
        for shift in stride(from: 24, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: version >> UInt32(shift))) }
        bytes.append(depth)
        bytes.append(contentsOf: parentFingerprint)
        for shift in stride(from: 24, through: 0, by: -8) {
            bytes.append(UInt8(truncatingIfNeeded: childNumber >> UInt32(shift)))
        }
        secretChainCode.withUnsafeBytes { bytes.append(contentsOf: $0) }
        return bytes
    }
}

extension BIP32ExtendedKey: CustomStringConvertible, CustomDebugStringConvertible {
    /// `BIP32ExtendedKey(<redacted>, depth 5, child 2)`: never the key or chain code.
    public var description: String {
        "BIP32ExtendedKey(<redacted>, depth \(depth), child \(childNumber))"
    }

    /// Same as ``description``.
    public var debugDescription: String { description }
}
