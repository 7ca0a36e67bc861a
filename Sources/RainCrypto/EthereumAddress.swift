import RainCore

/// Ethereum account addresses: the last 20 bytes of Keccak-256 of the public key, written with
/// EIP-55's mixed-case checksum.
public enum EthereumAddress {
    /// The address of a secp256k1 public key, EIP-55 checksummed.
    /// - Parameter uncompressed: the 65-byte uncompressed public key (`04 ‖ x ‖ y`), or its 64
    ///   bytes without the `04` prefix.
    /// - Returns: `0x` and 40 hex digits, for example `0x9858EfFD232B4033E47d90003D41EC34EcaEda94`.
    /// - Throws: RAIN_102 (field `publicKey`) for any other length or prefix.
    public static func fromPublicKey(uncompressed: [UInt8]) throws(RainError) -> String {
        let coordinates: [UInt8]
        switch uncompressed.count {
        case 65 where uncompressed[0] == 0x04: coordinates = Array(uncompressed.dropFirst())
        case 64: coordinates = uncompressed
        default:
            throw RainError.invalid(
                "an Ethereum address needs the 65-byte uncompressed public key (04 ‖ x ‖ y)", field: "publicKey")
        }
        let hash = Keccak256.hash(coordinates)
        return checksumAddress(lowercaseHex: Hex.encode(Array(hash.suffix(20))))
    }

    /// The EIP-55 form of an address.
    ///
    /// All-lowercase and all-uppercase addresses carry no checksum and are accepted; a mixed-case
    /// address must already carry the right checksum, so a mistyped one is refused.
    /// - Parameter hexAddress: 40 hex digits, with or without `0x`.
    /// - Returns: `0x` and the 40 digits in EIP-55 case, or `nil` when `hexAddress` is not 40 hex
    ///   digits or its mixed case is not the EIP-55 checksum.
    public static func checksummed(_ hexAddress: String) -> String? {
        var digits = Substring(hexAddress)
        if digits.hasPrefix("0x") || digits.hasPrefix("0X") { digits = digits.dropFirst(2) }
        guard digits.utf8.count == 40, Hex.decode(String(digits)) != nil else { return nil }
        let result = checksumAddress(lowercaseHex: digits.lowercased())
        let hasLower = digits.utf8.contains { $0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "f") }
        let hasUpper = digits.utf8.contains { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "F") }
        if hasLower && hasUpper && "0x" + digits != result { return nil }
        return result
    }

    /// EIP-55: a letter is uppercase when the matching nibble of Keccak-256 of the lowercase hex
    /// text (as ASCII) is 8 or more.
    private static func checksumAddress(lowercaseHex: String) -> String {
        let characters = Array(lowercaseHex.utf8)
        let hash = Keccak256.hash(characters)
        var output: [UInt8] = Array("0x".utf8)
        for (position, character) in characters.enumerated() {
            let nibble = position % 2 == 0 ? hash[position / 2] >> 4 : hash[position / 2] & 0x0F
            let isLetter = character >= UInt8(ascii: "a") && character <= UInt8(ascii: "f")
            output.append(isLetter && nibble >= 8 ? character - 0x20 : character)
        }
        return String(decoding: output, as: UTF8.self)
    }
}
