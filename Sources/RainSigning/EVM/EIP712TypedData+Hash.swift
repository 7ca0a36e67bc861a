import RainCrypto

/// EIP-712's hashing: `encodeType`, `typeHash`, `encodeData`, `hashStruct` and the domain
/// separator (https://eips.ethereum.org/EIPS/eip-712).
extension EIP712TypedData {
    /// `0x19 0x01 || domainSeparator || hashStruct(message)`: the bytes whose Keccak-256 is signed.
    var signedBytes: [UInt8] {
        var typeHashes: [String: [UInt8]] = [:]
        return [0x19, 0x01] + hashStruct(domain, typeHashes: &typeHashes) + hashStruct(message, typeHashes: &typeHashes)
    }

    /// `hashStruct(domain)`.
    var domainSeparator: [UInt8] { hashStruct(domain) }

    /// `encodeType`: the struct's signature, then those of every struct it references at any
    /// depth, sorted by name. References are followed once each, so recursive and mutually
    /// recursive types end.
    func encodeType(_ name: String) -> String {
        var found: Set<String> = [name]
        var pending = [name]
        while let next = pending.popLast() {
            for field in types[next] ?? [] {
                if let referenced = field.type.structName, found.insert(referenced).inserted { pending.append(referenced) }
            }
        }
        found.remove(name)
        return ([name] + found.sorted()).map { type in
            "\(type)(" + (types[type] ?? []).map { "\($0.typeText) \($0.name)" }.joined(separator: ",") + ")"
        }.joined()
    }

    /// `keccak256(encodeType(name))`.
    func typeHash(_ name: String) -> [UInt8] { Keccak256.hash(Array(encodeType(name).utf8)) }

    /// `keccak256(typeHash || encodeData(value))` for a struct value.
    func hashStruct(_ value: EIP712Value) -> [UInt8] {
        var typeHashes: [String: [UInt8]] = [:]
        return hashStruct(value, typeHashes: &typeHashes)
    }

    /// `hashStruct`, with each type's hash computed once: `encodeType` can be long, and a message
    /// can hold many values of one struct.
    private func hashStruct(_ value: EIP712Value, typeHashes: inout [String: [UInt8]]) -> [UInt8] {
        Keccak256.hash(encodeData(value, typeHashes: &typeHashes))
    }

    /// `typeHash || enc(member₁) || … || enc(memberₙ)` for a struct value, in declaration order.
    private func encodeData(_ value: EIP712Value, typeHashes: inout [String: [UInt8]]) -> [UInt8] {
        guard case .structure(let type, let members) = value else { return encodeValue(value, typeHashes: &typeHashes) }
        let hash = typeHashes[type] ?? typeHash(type)
        typeHashes[type] = hash
        var encoded = hash
        for member in members { encoded += encodeValue(member.value, typeHashes: &typeHashes) }
        return encoded
    }

    /// One member's 32 bytes: atomic values padded to a word, `bytes` and `string` hashed,
    /// structs as `hashStruct`, arrays as the Keccak-256 of their elements' encodings.
    private func encodeValue(_ value: EIP712Value, typeHashes: inout [String: [UInt8]]) -> [UInt8] {
        switch value {
        case .uint(let number): return number.bigEndianBytes
        case .int(let isNegative, let magnitude): return (isNegative ? magnitude.twosComplement : magnitude).bigEndianBytes
        case .address(let bytes): return [UInt8](repeating: 0, count: 12) + bytes
        case .bool(let flag): return UInt256(flag ? 1 : 0).bigEndianBytes
        case .fixedBytes(let bytes): return bytes + [UInt8](repeating: 0, count: 32 - bytes.count)
        case .bytes(let bytes): return Keccak256.hash(bytes)
        case .string(let text): return Keccak256.hash(Array(text.utf8))
        case .array(let elements):
            var encoded: [UInt8] = []
            for element in elements { encoded += encodeValue(element, typeHashes: &typeHashes) }
            return Keccak256.hash(encoded)
        case .structure: return hashStruct(value, typeHashes: &typeHashes)
        }
    }
}
