import Foundation
import RainCore
import RainWebAuthn
import Testing

@Suite struct CBORTests {
    struct Vector: Sendable, CustomTestStringConvertible {
        var hex: String
        var value: CBORValue
        var testDescription: String { hex }
    }

    // RFC 8949 Appendix A, the items WebAuthn's subset can express.
    static let vectors: [Vector] = [
        Vector(hex: "00", value: .unsigned(0)),
        Vector(hex: "17", value: .unsigned(23)),
        Vector(hex: "1818", value: .unsigned(24)),
        Vector(hex: "1903e8", value: .unsigned(1000)),
        Vector(hex: "1a000f4240", value: .unsigned(1_000_000)),
        Vector(hex: "1b000000e8d4a51000", value: .unsigned(1_000_000_000_000)),
        Vector(hex: "1bffffffffffffffff", value: .unsigned(UInt64.max)),
        Vector(hex: "20", value: .integer(-1)),
        Vector(hex: "3863", value: .integer(-100)),
        Vector(hex: "3903e7", value: .integer(-1000)),
        Vector(hex: "3bffffffffffffffff", value: .negative(UInt64.max)),
        Vector(hex: "f4", value: .bool(false)),
        Vector(hex: "f5", value: .bool(true)),
        Vector(hex: "f6", value: .null),
        Vector(hex: "40", value: .bytes([])),
        Vector(hex: "4401020304", value: .bytes([1, 2, 3, 4])),
        Vector(hex: "60", value: .text("")),
        Vector(hex: "6449455446", value: .text("IETF")),
        Vector(hex: "62c3bc", value: .text("\u{fc}")),
        Vector(hex: "63e6b0b4", value: .text("\u{6c34}")),
        Vector(hex: "64f0908591", value: .text("\u{10151}")),
        Vector(hex: "80", value: .array([])),
        Vector(hex: "83010203", value: .array([.unsigned(1), .unsigned(2), .unsigned(3)])),
        Vector(
            hex: "8301820203820405",
            value: .array([.unsigned(1), .array([.unsigned(2), .unsigned(3)]), .array([.unsigned(4), .unsigned(5)])])),
        Vector(
            hex: "98190102030405060708090a0b0c0d0e0f101112131415161718181819",
            value: .array((1...25).map { .unsigned(UInt64($0)) })),
        Vector(hex: "a0", value: .map([])),
        Vector(hex: "a201020304", value: .map([.init(.unsigned(1), .unsigned(2)), .init(.unsigned(3), .unsigned(4))])),
        Vector(
            hex: "a26161016162820203",
            value: .map([.init(.text("a"), .unsigned(1)), .init(.text("b"), .array([.unsigned(2), .unsigned(3)]))])),
    ]

    @Test(arguments: vectors)
    func decodesAndEncodesRFC8949Vectors(vector: Vector) throws {
        let bytes = try hexBytes(vector.hex)
        var statistics = CBORDecoder.Statistics()
        #expect(try CBORDecoder.decode(bytes, limits: .default, statistics: &statistics) == vector.value)
        #expect(statistics.libcborLoads == 1)
        #expect(CBOREncoder.encode(vector.value) == bytes)
    }

    @Test func encoderSortsMapKeysCanonically() {
        let map = CBORValue.map([
            .init(.text("b"), .null), .init(.integer(-3), .null), .init(.text("aa"), .null), .init(.integer(-1), .null),
            .init(.integer(3), .null), .init(.integer(1), .null), .init(.text("a"), .null), .init(.unsigned(300), .null),
        ])
        let encoded = CBOREncoder.encode(map)
        let keys = (try? CBORDecoder.decode(encoded))?.mapEntries?.map(\.key)
        #expect(
            keys == [.integer(1), .integer(3), .unsigned(300), .integer(-1), .integer(-3), .text("a"), .text("b"), .text("aa")])
    }

    @Test func decodePrefixReportsTheItemLength() throws {
        let bytes: [UInt8] = [0xFF, 0x82, 0x01, 0x02, 0xA0, 0xA0]
        let (value, length) = try CBORDecoder.decodePrefix(bytes, at: 1)
        #expect(value == .array([.unsigned(1), .unsigned(2)]))
        #expect(length == 3)
    }

    @Test func subscriptsFindMapValues() throws {
        let value = try CBORDecoder.decode(try hexBytes("a3010203381e6161f5"))
        #expect(value[1] == .unsigned(2))
        #expect(value[3]?.integerValue == -31)
        #expect(value["a"] == .bool(true))
        #expect(value[-31] == nil)
        #expect(value[2] == nil)
        #expect(CBORValue.unsigned(5)[1] == nil)
        #expect(CBORValue.negative(UInt64.max).integerValue == nil)
        #expect(CBORValue.integer(Int64.min).integerValue == Int64.min)
    }

    struct Hostile: Sendable, CustomTestStringConvertible {
        var name: String
        var hex: String
        var reachesLibcbor = false
        var testDescription: String { name }
    }

    static let hostile: [Hostile] = [
        Hostile(name: "array header declaring 2^28 items", hex: "9a10000000"),
        Hostile(name: "array header declaring 2^32 items", hex: "9b0000000100000000"),
        Hostile(name: "array header declaring 2^64-1 items", hex: "9bffffffffffffffff"),
        Hostile(name: "map header declaring 2^28 entries", hex: "ba10000000"),
        Hostile(name: "map header declaring 2^64-1 entries", hex: "bbffffffffffffffff"),
        Hostile(name: "byte string declaring 4 GiB", hex: "5affffffff"),
        Hostile(name: "byte string declaring 2^64-1 bytes", hex: "5bffffffffffffffff00"),
        Hostile(name: "text string declaring 2^28 bytes", hex: "7a10000000616263"),
        Hostile(name: "byte string one byte short", hex: "44010203"),
        Hostile(name: "map declaring more entries than bytes allow", hex: "a30102"),
        Hostile(name: "indefinite array", hex: "9f0102ff"),
        Hostile(name: "indefinite map", hex: "bf0102ff"),
        Hostile(name: "indefinite byte string", hex: "5f4101ff"),
        Hostile(name: "indefinite text string", hex: "7f6161ff"),
        Hostile(name: "lone break", hex: "ff"),
        Hostile(name: "arrays nested 17 deep", hex: String(repeating: "81", count: 17) + "00"),
        Hostile(name: "maps nested 17 deep", hex: String(repeating: "a100", count: 17) + "00"),
        Hostile(name: "more than 4096 items", hex: "991388" + String(repeating: "00", count: 5000)),
        Hostile(name: "trailing byte", hex: "0100"),
        Hostile(name: "two items", hex: "8000"),
        Hostile(name: "duplicate integer key", hex: "a201010102"),
        Hostile(name: "duplicate text key", hex: "a2616100616101"),
        Hostile(name: "duplicate key in a nested map", hex: "a101a220202021"),
        Hostile(name: "non-minimal 1-byte integer", hex: "1805"),
        Hostile(name: "non-minimal 2-byte integer", hex: "190005"),
        Hostile(name: "non-minimal 4-byte integer", hex: "1a0000ffff"),
        Hostile(name: "non-minimal 8-byte integer", hex: "1b00000000ffffffff"),
        Hostile(name: "non-minimal negative integer", hex: "3800"),
        Hostile(name: "non-minimal string length", hex: "580100"),
        Hostile(name: "non-minimal array length", hex: "980100"),
        Hostile(name: "half float", hex: "f93c00"),
        Hostile(name: "double", hex: "fb3ff199999999999a"),
        Hostile(name: "undefined", hex: "f7"),
        Hostile(name: "simple value 16", hex: "f0"),
        Hostile(name: "simple value 255", hex: "f8ff"),
        Hostile(name: "tag", hex: "c11a514b67b0"),
        Hostile(name: "reserved additional information", hex: "1c"),
        Hostile(name: "empty input", hex: ""),
        Hostile(name: "text that is not UTF-8", hex: "62c328", reachesLibcbor: true),
        Hostile(name: "text with a lone surrogate", hex: "63eda080", reachesLibcbor: true),
    ]

    @Test(arguments: hostile)
    func hostileInputIsRefused(input: Hostile) throws {
        let bytes = try hexBytes(input.hex)
        var statistics = CBORDecoder.Statistics()
        expectFailure(.malformedCBOR) { () throws(RainError) in
            _ = try CBORDecoder.decode(bytes, limits: .default, statistics: &statistics)
        }
        // Everything but invalid UTF-8 is refused by the header walk, before libcbor allocates.
        #expect(statistics.libcborLoads == (input.reachesLibcbor ? 1 : 0))
    }

    @Test func nestingUpToTheLimitIsAccepted() throws {
        let bytes = try hexBytes(String(repeating: "81", count: 16) + "00")
        var value = try CBORDecoder.decode(bytes)
        for _ in 0..<16 { value = try #require(value.arrayElements?.first) }
        #expect(value == .unsigned(0))
    }

    @Test func limitsAreConfigurable() throws {
        let bytes = try hexBytes("83010203")
        expectFailure(.malformedCBOR) { () throws(RainError) in
            _ = try CBORDecoder.decode(bytes, limits: CBORLimits(maximumItems: 3))
        }
        expectFailure(.malformedCBOR) { () throws(RainError) in
            _ = try CBORDecoder.decode(bytes, limits: CBORLimits(maximumInputBytes: 3))
        }
        #expect(try CBORDecoder.decode(bytes, limits: CBORLimits(maximumItems: 4)).arrayElements?.count == 3)
    }

    /// Peak resident memory of this process, in KiB.
    static func maximumResidentKiB() -> Int {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        return usage.ru_maxrss
    }

    @Test func tinyHostileInputCostsAlmostNothing() throws {
        // libcbor 0.8 would allocate and fill ~2 GB for the first header and be killed for the second.
        let inputs: [[UInt8]] = [
            [0x9A, 0x10, 0x00, 0x00, 0x00], [0x9B, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF],
            [0xBA, 0x10, 0x00, 0x00, 0x00], [0x5A, 0xFF, 0xFF, 0xFF, 0xFF], [0x7B, 0, 0, 0, 1, 0, 0, 0, 0],
        ]
        let before = Self.maximumResidentKiB()
        var statistics = CBORDecoder.Statistics()
        for _ in 0..<1000 {
            for input in inputs {
                var refused = 0
                do { _ = try CBORDecoder.decode(input, limits: .default, statistics: &statistics) } catch { refused += 1 }
                do { _ = try AttestationObject(parsing: input) } catch { refused += 1 }
                #expect(refused == 2)
            }
        }
        let grown = Self.maximumResidentKiB() - before
        #expect(statistics.libcborLoads == 0)
        // 10,000 refusals. The first header alone would cost libcbor 2 GiB (2^28 item pointers); the
        // bound leaves room for tests running in parallel and for sanitizer builds, and is still 8
        // times smaller than that.
        #expect(grown < 256 * 1024, "peak RSS grew by \(grown) KiB")
    }

    @Test(arguments: [SoftwareFormat.none, .packed])
    func everyTruncationOfAnAttestationObjectIsRefused(format: SoftwareFormat) throws {
        var forge = RegistrationForge(key: try TestKey.make(.es256), packed: format == .packed)
        forge.flags.insert(.extensionData)
        forge.authenticatorDataSuffix = CBOREncoder.encode(.map([.init(.text("credProtect"), .integer(2))]))
        let object = try forge.build().response.attestationObject.bytes
        _ = try AttestationObject(parsing: object)
        for length in 0..<object.count {
            let prefix = Array(object.prefix(length))
            expectFailure(.malformedCBOR) { () throws(RainError) in _ = try CBORDecoder.decode(prefix) }
            expectFailure(.malformedAttestationObject) { () throws(RainError) in _ = try AttestationObject(parsing: prefix) }
        }
        for extra in [[0x00], [0xFF], [0xA0]] as [[UInt8]] {
            expectFailure(.malformedAttestationObject) { () throws(RainError) in
                _ = try AttestationObject(parsing: object + extra)
            }
        }
    }

    @Test func flippedBytesNeverCrashTheParsers() throws {
        let forge = RegistrationForge(key: try TestKey.make(.es256), packed: true)
        let object = try forge.build().response.attestationObject.bytes
        // A fixed linear congruential generator: the same 3,000 mutants on every run.
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next() -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int(truncatingIfNeeded: state >> 33)
        }
        var refused = 0
        for _ in 0..<3000 {
            var mutant = object
            for _ in 0..<(1 + next() % 3) {
                let index = next() % mutant.count
                mutant[index] = UInt8(truncatingIfNeeded: next())
            }
            do {
                let parsed = try AttestationObject(parsing: mutant)
                _ = try? COSEPublicKey(encoded: parsed.authenticatorData.attestedCredentialData?.publicKeyBytes ?? [])
            } catch {
                #expect(error.code == .invalidArgument)
                refused += 1
            }
        }
        #expect(refused > 0)
    }

    enum SoftwareFormat: String, Sendable, CustomTestStringConvertible {
        case none, packed
        var testDescription: String { rawValue }
    }

    @Test func attestationObjectRoundTrips() throws {
        let forge = RegistrationForge(key: try TestKey.make(.edDSA), packed: true)
        let bytes = try forge.build().response.attestationObject.bytes
        let object = try AttestationObject(parsing: bytes)
        #expect(object.format == "packed")
        #expect(object.statement["alg"]?.integerValue == -8)
        #expect(object.authenticatorDataBytes == forge.authenticatorData())
        #expect(object.encoded == bytes)
    }
}
