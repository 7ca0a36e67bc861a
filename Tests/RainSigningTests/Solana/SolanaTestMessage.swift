import RainCrypto

/// A Solana message written field by field, for the cases no library would build: bad indexes,
/// bad headers, unknown programs. The well-formed layouts it writes are the ones the solders
/// vectors check.
struct SolanaTestMessage {
    struct Instruction {
        var program: UInt8
        var accounts: [UInt8]
        var data: [UInt8]
    }

    struct Lookup {
        var table: [UInt8]
        var writable: [UInt8]
        var readonly: [UInt8]
    }

    var isV0 = false
    var header: [UInt8] = [1, 0, 1]
    var keys: [[UInt8]]
    var blockhash = [UInt8](repeating: 7, count: 32)
    var instructions: [Instruction] = []
    var lookups: [Lookup] = []

    var bytes: [UInt8] {
        var out: [UInt8] = isV0 ? [0x80] : []
        out += header
        out += Self.compact(keys.count) + keys.flatMap { $0 }
        out += blockhash
        out += Self.compact(instructions.count)
        for instruction in instructions {
            out.append(instruction.program)
            out += Self.compact(instruction.accounts.count) + instruction.accounts
            out += Self.compact(instruction.data.count) + instruction.data
        }
        if isV0 {
            out += Self.compact(lookups.count)
            for lookup in lookups {
                out += lookup.table
                out += Self.compact(lookup.writable.count) + lookup.writable
                out += Self.compact(lookup.readonly.count) + lookup.readonly
            }
        }
        return out
    }

    /// A 32-byte key filled with `byte`.
    static func key(_ byte: UInt8) -> [UInt8] { [UInt8](repeating: byte, count: 32) }

    /// A program id from its base58 address.
    static func program(_ address: String) -> [UInt8] { Base58.decode(address) ?? [] }

    static let tokenProgram = program("TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA")
    static let systemProgram = key(0)

    /// The compact-u16 of `value`, written out here rather than taken from the code under test.
    static func compact(_ value: Int) -> [UInt8] {
        if value < 0x80 { return [UInt8(value)] }
        if value < 0x4000 { return [UInt8(value & 0x7f) | 0x80, UInt8(value >> 7)] }
        return [UInt8(value & 0x7f) | 0x80, UInt8((value >> 7) & 0x7f) | 0x80, UInt8(value >> 14)]
    }

    /// 8 little-endian bytes.
    static func u64(_ value: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) } }
}
