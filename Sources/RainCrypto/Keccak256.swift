/// Keccak-256 as Ethereum uses it, written here because OpenSSL 3.0 offers only SHA3-256.
///
/// Ethereum adopted Keccak before NIST finished SHA-3. The two share the Keccak-f[1600]
/// permutation, the 1088-bit rate (136 bytes) and the 256-bit output, and differ only in the
/// padding: Keccak-256 appends the bits `1 0…0 1` (first padding byte `0x01`), while FIPS 202's
/// SHA3-256 first appends the domain bits `01` (first padding byte `0x06`). So
/// `Keccak256.hash([]) = c5d24601…5d85a470`, not SHA3-256's `a7ffc6f8…8434a`.
///
/// The input is never secret where RainWallet uses it (public keys and addresses), so this plain
/// implementation does not try to be constant-time or to zero its state.
public enum Keccak256 {
    /// The digest length in bytes.
    static let byteCount = 32
    /// The sponge's rate in bytes: (1600 - 2 × 256) / 8.
    static let rate = 136
    /// The first padding byte of the original Keccak (SHA-3 would use `0x06`).
    static let paddingByte: UInt8 = 0x01

    /// The Keccak-256 digest of `data` (Ethereum's `keccak256`).
    /// - Parameter data: the message, of any length.
    /// - Returns: 32 bytes.
    public static func hash(_ data: [UInt8]) -> [UInt8] {
        var state = [UInt64](repeating: 0, count: 25)
        state.withUnsafeMutableBufferPointer { lanes in
            data.withUnsafeBufferPointer { input in
                var offset = 0
                while input.count - offset >= rate {
                    absorb(UnsafeBufferPointer(rebasing: input[offset..<(offset + rate)]), into: lanes)
                    offset += rate
                }
                // The last block: the remaining bytes, then 0x01, zeros, and 0x80 in the last byte
                // (both in one byte, 0x81, when only one byte of room is left).
                var block = [UInt8](repeating: 0, count: rate)
                let remaining = input.count - offset
                for index in 0..<remaining { block[index] = input[offset + index] }
                block[remaining] ^= paddingByte
                block[rate - 1] ^= 0x80
                block.withUnsafeBufferPointer { absorb($0, into: lanes) }
            }
        }
        var digest: [UInt8] = []
        digest.reserveCapacity(byteCount)
        for lane in state.prefix(byteCount / 8) {
            for shift in stride(from: 0, to: 64, by: 8) { digest.append(UInt8(truncatingIfNeeded: lane >> UInt64(shift))) }
        }
        return digest
    }

    /// XORs one 136-byte block into the first 17 lanes (little-endian) and permutes.
    private static func absorb(_ block: UnsafeBufferPointer<UInt8>, into lanes: UnsafeMutableBufferPointer<UInt64>) {
        for lane in 0..<(rate / 8) {
            var value: UInt64 = 0
            for byte in 0..<8 { value |= UInt64(block[lane * 8 + byte]) << UInt64(8 * byte) }
            lanes[lane] ^= value
        }
        permute(lanes)
    }

    /// The ι step's constants, one per round.
    private static let roundConstants: [UInt64] = [
        0x0000_0000_0000_0001, 0x0000_0000_0000_8082, 0x8000_0000_0000_808A, 0x8000_0000_8000_8000,
        0x0000_0000_0000_808B, 0x0000_0000_8000_0001, 0x8000_0000_8000_8081, 0x8000_0000_0000_8009,
        0x0000_0000_0000_008A, 0x0000_0000_0000_0088, 0x0000_0000_8000_8009, 0x0000_0000_8000_000A,
        0x0000_0000_8000_808B, 0x8000_0000_0000_008B, 0x8000_0000_0000_8089, 0x8000_0000_0000_8003,
        0x8000_0000_0000_8002, 0x8000_0000_0000_0080, 0x0000_0000_0000_800A, 0x8000_0000_8000_000A,
        0x8000_0000_8000_8081, 0x8000_0000_0000_8080, 0x0000_0000_8000_0001, 0x8000_0000_8000_8008,
    ]

    /// The ρ step's rotations, in the order the π step visits the lanes.
    private static let rotations: [UInt64] = [
        1, 3, 6, 10, 15, 21, 28, 36, 45, 55, 2, 14, 27, 41, 56, 8, 25, 43, 62, 18, 39, 61, 20, 44,
    ]

    /// The π step's lane order, starting from lane 1.
    private static let piLanes: [Int] = [
        10, 7, 11, 17, 18, 3, 5, 16, 8, 21, 24, 4, 15, 23, 19, 13, 12, 2, 20, 14, 22, 9, 6, 1,
    ]

    private static func rotateLeft(_ value: UInt64, _ count: UInt64) -> UInt64 {
        (value << count) | (value >> (64 - count))
    }

    /// Keccak-f[1600]: 24 rounds of θ, ρ, π, χ and ι over the 5 × 5 lanes (lane x + 5y).
    private static func permute(_ lanes: UnsafeMutableBufferPointer<UInt64>) {
        for round in 0..<24 {
            // θ: XOR each lane with the parities of the two neighbouring columns.
            let c0 = lanes[0] ^ lanes[5] ^ lanes[10] ^ lanes[15] ^ lanes[20]
            let c1 = lanes[1] ^ lanes[6] ^ lanes[11] ^ lanes[16] ^ lanes[21]
            let c2 = lanes[2] ^ lanes[7] ^ lanes[12] ^ lanes[17] ^ lanes[22]
            let c3 = lanes[3] ^ lanes[8] ^ lanes[13] ^ lanes[18] ^ lanes[23]
            let c4 = lanes[4] ^ lanes[9] ^ lanes[14] ^ lanes[19] ^ lanes[24]
            let d0 = c4 ^ rotateLeft(c1, 1)
            let d1 = c0 ^ rotateLeft(c2, 1)
            let d2 = c1 ^ rotateLeft(c3, 1)
            let d3 = c2 ^ rotateLeft(c4, 1)
            let d4 = c3 ^ rotateLeft(c0, 1)
            for y in stride(from: 0, to: 25, by: 5) {
                lanes[y] ^= d0
                lanes[y + 1] ^= d1
                lanes[y + 2] ^= d2
                lanes[y + 3] ^= d3
                lanes[y + 4] ^= d4
            }
            // ρ and π: rotate each lane and move it to its new position.
            var carried = lanes[1]
            for step in 0..<24 {
                let target = piLanes[step]
                let next = lanes[target]
                lanes[target] = rotateLeft(carried, rotations[step])
                carried = next
            }
            // χ: the only non-linear step, row by row.
            for y in stride(from: 0, to: 25, by: 5) {
                let row = (lanes[y], lanes[y + 1], lanes[y + 2], lanes[y + 3], lanes[y + 4])
                lanes[y] = row.0 ^ (~row.1 & row.2)
                lanes[y + 1] = row.1 ^ (~row.2 & row.3)
                lanes[y + 2] = row.2 ^ (~row.3 & row.4)
                lanes[y + 3] = row.3 ^ (~row.4 & row.0)
                lanes[y + 4] = row.4 ^ (~row.0 & row.1)
            }
            // ι: break the symmetry between rounds.
            lanes[0] ^= roundConstants[round]
        }
    }
}
