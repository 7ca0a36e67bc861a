/// A 256-bit unsigned integer: the EVM's word, for transaction values, fees and typed-data
/// numbers, which must keep every digit (a `Double` loses them above 2^53).
///
/// Arithmetic reports overflow instead of wrapping or trapping, so a request whose figures do not
/// fit is refused rather than shown wrong.
package struct UInt256: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The four 64-bit words, least significant first.
    private var words: (UInt64, UInt64, UInt64, UInt64)

    /// Zero.
    package static let zero = UInt256(0)
    /// 2^256 - 1.
    package static let max = UInt256(words: (.max, .max, .max, .max))

    /// The value of a 64-bit integer.
    package init(_ value: UInt64) { words = (value, 0, 0, 0) }

    private init(words: (UInt64, UInt64, UInt64, UInt64)) { self.words = words }

    /// The value of big-endian bytes (an RLP integer, an ABI word).
    /// - Parameter bytes: at most 32 bytes; leading zeros are allowed.
    /// - Returns: `nil` when there are more than 32 bytes.
    package init?(bigEndian bytes: some Collection<UInt8>) {
        guard bytes.count <= 32 else { return nil }
        var value = [UInt64](repeating: 0, count: 4)
        for (position, byte) in bytes.reversed().enumerated() {
            value[position / 8] |= UInt64(byte) << (8 * UInt64(position % 8))
        }
        words = (value[0], value[1], value[2], value[3])
    }

    /// The value of decimal digits.
    /// - Parameter decimal: one or more ASCII digits, nothing else (no sign, no spaces); leading
    ///   zeros are allowed.
    /// - Returns: `nil` on any other character, on empty text, or when the value exceeds 2^256 - 1.
    package init?(decimal: some StringProtocol) {
        guard !decimal.isEmpty else { return nil }
        var value = UInt256.zero
        for character in decimal.utf8 {
            guard character >= UInt8(ascii: "0"), character <= UInt8(ascii: "9") else { return nil }
            let (times10, overflowA) = value.multipliedReportingOverflow(by: UInt256(10))
            let (sum, overflowB) = times10.addingReportingOverflow(UInt256(UInt64(character - UInt8(ascii: "0"))))
            guard !overflowA, !overflowB else { return nil }
            value = sum
        }
        self = value
    }

    /// The value of hexadecimal digits.
    /// - Parameter hex: one or more hex digits of either case, without `0x`; leading zeros are
    ///   allowed.
    /// - Returns: `nil` on any other character, on empty text, or when the value exceeds 2^256 - 1.
    package init?(hex: some StringProtocol) {
        guard !hex.isEmpty else { return nil }
        var digits: [UInt8] = []
        for character in hex.utf8 {
            switch character {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digits.append(character - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digits.append(character - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digits.append(character - UInt8(ascii: "A") + 10)
            default: return nil
            }
        }
        // Leading zeros carry no value, so only the significant digits count toward the 64.
        let significant = digits.drop { $0 == 0 }
        guard significant.count <= 64 else { return nil }
        var bytes: [UInt8] = []
        var index = significant.startIndex
        if significant.count % 2 == 1 {
            bytes.append(significant[index])
            index += 1
        }
        while index < significant.endIndex {
            bytes.append(significant[index] << 4 | significant[index + 1])
            index += 2
        }
        self.init(bigEndian: bytes)
    }

    /// 2^exponent.
    /// - Parameter exponent: 0 through 255.
    package static func powerOfTwo(_ exponent: Int) -> UInt256 {
        precondition(exponent >= 0 && exponent < 256, "2^\(exponent) does not fit 256 bits")
        var value = [UInt64](repeating: 0, count: 4)
        value[exponent / 64] = 1 << UInt64(exponent % 64)
        return UInt256(words: (value[0], value[1], value[2], value[3]))
    }

    /// The largest value of `bits` bits: 2^bits - 1.
    /// - Parameter bits: 1 through 256.
    package static func maxValue(bits: Int) -> UInt256 {
        bits >= 256 ? .max : powerOfTwo(bits).subtractingReportingOverflow(UInt256(1)).partialValue
    }

    private var array: [UInt64] { [words.0, words.1, words.2, words.3] }

    private init(array: [UInt64]) { words = (array[0], array[1], array[2], array[3]) }

    /// True for zero.
    package var isZero: Bool { words == (0, 0, 0, 0) }

    /// The value as a `UInt64`, or `nil` when it does not fit.
    package var uint64: UInt64? { words.1 == 0 && words.2 == 0 && words.3 == 0 ? words.0 : nil }

    /// How many bits the value needs: 0 for zero, 256 for 2^255 and above.
    package var bitLength: Int {
        let value = array
        for index in stride(from: 3, through: 0, by: -1) where value[index] != 0 {
            return index * 64 + (64 - value[index].leadingZeroBitCount)
        }
        return 0
    }

    /// The 32 big-endian bytes (an ABI word).
    package var bigEndianBytes: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(32)
        for word in array.reversed() {
            for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: word >> UInt64(shift))) }
        }
        return bytes
    }

    /// The big-endian bytes without leading zeros, empty for zero: RLP's integer form.
    package var minimalBigEndianBytes: [UInt8] { Array(bigEndianBytes.drop { $0 == 0 }) }

    /// The value in decimal, every digit kept.
    package var description: String {
        guard !isZero else { return "0" }
        var digits: [UInt8] = []
        var value = array
        while value.contains(where: { $0 != 0 }) {
            // Divides by 10^19, the largest power of ten in a word, to peel off 19 digits at a time.
            var remainder: UInt64 = 0
            for index in stride(from: 3, through: 0, by: -1) {
                let (quotient, rest) = UInt64(10_000_000_000_000_000_000).dividingFullWidth((remainder, value[index]))
                value[index] = quotient
                remainder = rest
            }
            var chunk = remainder
            for _ in 0..<19 {
                digits.append(UInt8(ascii: "0") + UInt8(chunk % 10))
                chunk /= 10
            }
        }
        while digits.count > 1, digits.last == UInt8(ascii: "0") { digits.removeLast() }
        return String(decoding: digits.reversed(), as: UTF8.self)
    }

    /// The sum and whether it overflowed 256 bits (the sum then wraps).
    package func addingReportingOverflow(_ other: UInt256) -> (partialValue: UInt256, overflow: Bool) {
        let left = array
        let right = other.array
        var result = [UInt64](repeating: 0, count: 4)
        var carry = false
        for index in 0..<4 {
            let (partial, overflowA) = left[index].addingReportingOverflow(right[index])
            let (sum, overflowB) = partial.addingReportingOverflow(carry ? 1 : 0)
            result[index] = sum
            carry = overflowA || overflowB
        }
        return (UInt256(array: result), carry)
    }

    /// The difference and whether it went below zero (it then wraps).
    package func subtractingReportingOverflow(_ other: UInt256) -> (partialValue: UInt256, overflow: Bool) {
        let left = array
        let right = other.array
        var result = [UInt64](repeating: 0, count: 4)
        var borrow = false
        for index in 0..<4 {
            let (partial, overflowA) = left[index].subtractingReportingOverflow(right[index])
            let (difference, overflowB) = partial.subtractingReportingOverflow(borrow ? 1 : 0)
            result[index] = difference
            borrow = overflowA || overflowB
        }
        return (UInt256(array: result), borrow)
    }

    /// The product and whether it overflowed 256 bits (the low 256 bits are then returned).
    package func multipliedReportingOverflow(by other: UInt256) -> (partialValue: UInt256, overflow: Bool) {
        let left = array
        let right = other.array
        // Schoolbook multiplication into eight words; any non-zero word above the fourth overflows.
        var result = [UInt64](repeating: 0, count: 8)
        for i in 0..<4 where left[i] != 0 {
            var carry: UInt64 = 0
            for j in 0..<4 {
                let (high, low) = left[i].multipliedFullWidth(by: right[j])
                let (sumA, overflowA) = result[i + j].addingReportingOverflow(low)
                let (sumB, overflowB) = sumA.addingReportingOverflow(carry)
                result[i + j] = sumB
                // The word's old value, the low half and the carry sum to less than 2^128, so the high
                // half plus the two carry bits still fits a word.
                carry = high &+ (overflowA ? 1 : 0) &+ (overflowB ? 1 : 0)
            }
            result[i + 4] = carry
        }
        let overflow = result[4...].contains { $0 != 0 }
        return (UInt256(array: Array(result[0..<4])), overflow)
    }

    /// The two's complement negation modulo 2^256: how a negative EIP-712 `intN` is encoded.
    package var twosComplement: UInt256 {
        let inverted = UInt256(array: array.map { ~$0 })
        return inverted.addingReportingOverflow(UInt256(1)).partialValue
    }

    /// Compares by value.
    package static func == (lhs: UInt256, rhs: UInt256) -> Bool { lhs.words == rhs.words }

    /// Compares by value.
    package static func < (lhs: UInt256, rhs: UInt256) -> Bool {
        let left = lhs.array
        let right = rhs.array
        for index in stride(from: 3, through: 0, by: -1) where left[index] != right[index] {
            return left[index] < right[index]
        }
        return false
    }

    /// Hashes the words.
    package func hash(into hasher: inout Hasher) {
        hasher.combine(words.0)
        hasher.combine(words.1)
        hasher.combine(words.2)
        hasher.combine(words.3)
    }
}
