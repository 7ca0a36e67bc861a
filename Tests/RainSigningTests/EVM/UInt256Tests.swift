import Testing

@testable import RainSigning

@Suite struct UInt256Tests {
    static let maxDecimal = "115792089237316195423570985008687907853269984665640564039457584007913129639935"

    @Test func decimalTextRoundTripsEveryDigit() throws {
        #expect(UInt256.max.description == Self.maxDecimal)
        #expect(try #require(UInt256(decimal: Self.maxDecimal)) == .max)
        #expect(UInt256(decimal: "115792089237316195423570985008687907853269984665640564039457584007913129639936") == nil)
        #expect(UInt256(decimal: "18446744073709551617")?.description == "18446744073709551617")
        #expect(
            UInt256(decimal: "0000000000000000000000000000000000000000000000000000000000000000000000000000000042") == UInt256(42))
        #expect(UInt256(0).description == "0")
        #expect(UInt256(10_000_000_000_000_000_000).description == "10000000000000000000")
        #expect(UInt256(decimal: "") == nil)
        #expect(UInt256(decimal: "+1") == nil)
        #expect(UInt256(decimal: "1 ") == nil)
    }

    @Test func hexAndBigEndianBytesAgree() throws {
        let value = try #require(UInt256(hex: "0de0b6b3a7640000"))
        #expect(value.description == "1000000000000000000")
        #expect(value.minimalBigEndianBytes == [0x0D, 0xE0, 0xB6, 0xB3, 0xA7, 0x64, 0x00, 0x00])
        #expect(UInt256(bigEndian: value.bigEndianBytes) == value)
        #expect(UInt256(hex: String(repeating: "f", count: 64)) == .max)
        #expect(UInt256(hex: "1" + String(repeating: "0", count: 64)) == nil)
        #expect(UInt256(hex: "00" + String(repeating: "F", count: 64)) == .max)
        #expect(UInt256(bigEndian: [UInt8](repeating: 1, count: 33)) == nil)
        #expect(UInt256(0).minimalBigEndianBytes == [])
        #expect(UInt256(hex: "xyz") == nil)
    }

    @Test func arithmeticReportsOverflowInsteadOfWrapping() throws {
        #expect(UInt256.max.addingReportingOverflow(UInt256(1)) == (UInt256(0), true))
        #expect(UInt256.max.subtractingReportingOverflow(UInt256.max) == (UInt256(0), false))
        #expect(UInt256(0).subtractingReportingOverflow(UInt256(1)).overflow)
        let twoTo128 = UInt256.powerOfTwo(128)
        #expect(twoTo128.multipliedReportingOverflow(by: twoTo128).overflow)
        #expect(!twoTo128.multipliedReportingOverflow(by: UInt256.powerOfTwo(127)).overflow)
        #expect(twoTo128.multipliedReportingOverflow(by: UInt256.powerOfTwo(127)).partialValue == .powerOfTwo(255))
        let big = try #require(UInt256(decimal: "340282366920938463463374607431768211455"))  // 2^128 - 1
        #expect(
            big.multipliedReportingOverflow(by: big).partialValue.description
                == "115792089237316195423570985008687907852589419931798687112530834793049593217025")
        #expect(
            UInt256(21_000).multipliedReportingOverflow(by: UInt256(20_000_000_000)).partialValue.description
                == "420000000000000")
    }

    @Test func rangesAndTwosComplementMatchTheEVM() {
        #expect(UInt256.maxValue(bits: 8) == UInt256(255))
        #expect(UInt256.maxValue(bits: 160).bitLength == 160)
        #expect(UInt256.maxValue(bits: 256) == .max)
        #expect(UInt256(1).twosComplement == .max)
        #expect(UInt256(0).twosComplement == UInt256(0))
        #expect(UInt256(128).twosComplement.bigEndianBytes.suffix(1) == [0x80])
        #expect(UInt256(1) < UInt256.powerOfTwo(64))
        #expect(!(UInt256.max < UInt256.max))
        #expect(UInt256.powerOfTwo(64).uint64 == nil)
        #expect(UInt256(7).uint64 == 7)
    }
}
