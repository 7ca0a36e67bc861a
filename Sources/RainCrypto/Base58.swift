/// Base58 with Bitcoin's alphabet, written here because OpenSSL has none.
///
/// The alphabet is the 58 characters of `0-9A-Za-z` without `0`, `O`, `I` and `l`. A byte string
/// is read as one big-endian number and written in base 58, and each leading zero byte becomes a
/// leading `1` (so `[0, 0, 1]` is `"112"`). Solana addresses and keypairs and BIP-32 extended
/// keys (with a checksum, see ``encodeChecked(_:)``) use it.
///
/// The conversion is quadratic in the length, which is fine for keys and addresses (at most a
/// few hundred bytes). Its working buffer is zeroed, since a Solana keypair passes through it.
public enum Base58 {
    private static let alphabet: [UInt8] = Array("123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz".utf8)

    /// Maps an ASCII byte to its base-58 value, or 0xFF when it is not in the alphabet.
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, character) in alphabet.enumerated() { table[Int(character)] = UInt8(index) }
        return table
    }()

    /// Encodes `bytes`.
    /// - Parameter bytes: the data; may be empty.
    /// - Returns: the text: one `1` per leading zero byte, then the base-58 digits of the rest
    ///   (an empty array gives an empty string).
    public static func encode(_ bytes: [UInt8]) -> String {
        let zeros = bytes.prefix { $0 == 0 }.count
        // log(256) / log(58) < 1.38 digits per byte.
        var digits = [UInt8](repeating: 0, count: (bytes.count - zeros) * 138 / 100 + 1)
        defer { SecureMemory.cleanse(&digits) }
        var length = 0
        for byte in bytes[zeros...] {
            // digits (least significant first) = digits × 256 + byte.
            var carry = Int(byte)
            var index = 0
            while index < length || carry != 0 {
                carry += Int(digits[index]) << 8
                digits[index] = UInt8(carry % 58)
                carry /= 58
                index += 1
            }
            length = index
        }
        var output = [UInt8](repeating: alphabet[0], count: zeros)
        output.reserveCapacity(zeros + length)
        for index in stride(from: length - 1, through: 0, by: -1) { output.append(alphabet[Int(digits[index])]) }
        defer { SecureMemory.cleanse(&output) }
        return String(decoding: output, as: UTF8.self)
    }

    /// Decodes base-58 text.
    ///
    /// Strict: any character outside the alphabet (including whitespace) is refused. Each byte
    /// string has exactly one encoding, so `encode(decode(s)!) == s` for every accepted `s`.
    /// - Parameter text: the text; may be empty.
    /// - Returns: the bytes, or `nil` when `text` holds a character outside the alphabet.
    public static func decode(_ text: String) -> [UInt8]? {
        let characters = Array(text.utf8)
        let zeros = characters.prefix { $0 == alphabet[0] }.count
        // log(58) / log(256) < 0.733 bytes per digit.
        var bytes = [UInt8](repeating: 0, count: (characters.count - zeros) * 733 / 1000 + 1)
        defer { SecureMemory.cleanse(&bytes) }
        var length = 0
        for character in characters[zeros...] {
            let value = values[Int(character)]
            guard value != 0xFF else { return nil }
            // bytes (least significant first) = bytes × 58 + value.
            var carry = Int(value)
            var index = 0
            while index < length || carry != 0 {
                carry += Int(bytes[index]) * 58
                bytes[index] = UInt8(truncatingIfNeeded: carry)
                carry >>= 8
                index += 1
            }
            length = index
        }
        var output = [UInt8](repeating: 0, count: zeros)
        output.reserveCapacity(zeros + length)
        for index in stride(from: length - 1, through: 0, by: -1) { output.append(bytes[index]) }
        return output
    }

    /// Base58Check (BIP-32 serialization, Bitcoin addresses): `payload` followed by the first 4
    /// bytes of SHA-256(SHA-256(payload)), in base 58.
    static func encodeChecked(_ payload: [UInt8]) -> String {
        var checked = payload + checksum(payload)
        defer { SecureMemory.cleanse(&checked) }
        return encode(checked)
    }

    /// The payload of Base58Check text, or `nil` when the text is not base 58, is shorter than
    /// the checksum, or its checksum does not match.
    static func decodeChecked(_ text: String) -> [UInt8]? {
        guard let bytes = decode(text), bytes.count >= 4 else { return nil }
        let payload = Array(bytes.dropLast(4))
        guard constantTimeEquals(Array(bytes.suffix(4)), checksum(payload)) else { return nil }
        return payload
    }

    private static func checksum(_ payload: [UInt8]) -> [UInt8] {
        Array(SHA256.hash(SHA256.hash(payload)).prefix(4))
    }
}
