import RainCore
import Testing

@testable import RainSigning

@Suite struct RLPTests {
    typealias Item = RLP.Item

    static let lorem = Array("Lorem ipsum dolor sit amet, consectetur adipisicing elit".utf8)

    /// The examples of the RLP specification (ethereum.org, "Recursive-length prefix").
    static let specExamples: [(Item, [UInt8])] = [
        (.bytes(Array("dog".utf8)), [0x83, 0x64, 0x6F, 0x67]),
        (.list([.bytes(Array("cat".utf8)), .bytes(Array("dog".utf8))]), [0xC8, 0x83, 0x63, 0x61, 0x74, 0x83, 0x64, 0x6F, 0x67]),
        (.bytes([]), [0x80]),
        (.list([]), [0xC0]),
        (RLP.integer(UInt256(0)), [0x80]),
        (.bytes([0x00]), [0x00]),
        (RLP.integer(UInt256(15)), [0x0F]),
        (RLP.integer(UInt256(1024)), [0x82, 0x04, 0x00]),
        (
            .list([.list([]), .list([.list([])]), .list([.list([]), .list([.list([])])])]),
            [0xC7, 0xC0, 0xC1, 0xC0, 0xC3, 0xC0, 0xC1, 0xC0]
        ),
        (.bytes(lorem), [0xB8, 0x38] + lorem),
    ]

    @Test func theSpecificationsExamplesEncodeAndDecodeExactly() throws {
        for (item, encoding) in Self.specExamples {
            #expect(RLP.encode(item) == encoding, "\(item)")
            #expect(try RLP.decode(encoding, field: "t") == item, "\(encoding)")
        }
    }

    @Test func longStringsAndListsRoundTripThroughTheLongForms() throws {
        let items: [Item] = [
            .bytes([UInt8](repeating: 0xAB, count: 55)),
            .bytes([UInt8](repeating: 0xAB, count: 56)),
            .bytes([UInt8](repeating: 0x01, count: 300)),
            .bytes([UInt8](repeating: 0x02, count: 70_000)),
            .list((0..<30).map { RLP.integer(UInt256(UInt64($0))) }),
            .list([.bytes([UInt8](repeating: 7, count: 60)), .list([.bytes([0x80]), .bytes([0x7F])])]),
        ]
        for item in items {
            let encoding = RLP.encode(item)
            #expect(try RLP.decode(encoding, field: "t") == item)
        }
        #expect(RLP.encode(items[0]).prefix(1) == [0xB7])
        #expect(RLP.encode(items[1]).prefix(2) == [0xB8, 56])
        #expect(RLP.encode(items[3]).prefix(4) == [0xBA, 0x01, 0x11, 0x70])
    }

    static let nonCanonical: [(String, [UInt8])] = [
        ("a single byte below 0x80 written as a string", [0x81, 0x05]),
        ("a single zero byte written as a string", [0x81, 0x00]),
        ("the long string form for 5 bytes", [0xB8, 0x05, 1, 2, 3, 4, 5]),
        ("the long string form for 55 bytes", [0xB8, 55] + [UInt8](repeating: 0xAA, count: 55)),
        ("a string length with a leading zero", [0xB9, 0x00, 0x38] + [UInt8](repeating: 0xAA, count: 56)),
        ("the long list form for a 3-byte list", [0xF8, 0x03, 0x80, 0x80, 0x80]),
        ("a list length with a leading zero", [0xF9, 0x00, 0x38] + [UInt8](repeating: 0x80, count: 56)),
        ("a non-canonical item inside a list", [0xC2, 0x81, 0x05]),
    ]

    @Test(arguments: nonCanonical)
    func everyNonCanonicalFormIsRefused(_ name: String, _ encoding: [UInt8]) {
        EVMTestSupport.expectRefusal(.invalidArgument, field: "t", reason: "non_canonical_rlp") {
            _ = try RLP.decode(encoding, field: "t")
        }
    }

    @Test func everyPrefixOfAnEncodingIsRefusedAsTruncated() {
        let encodings =
            Self.specExamples.map(\.1) + [
                RLP.encode(.bytes([UInt8](repeating: 9, count: 300))),
                RLP.encode(.list([.bytes([UInt8](repeating: 7, count: 60)), .list([.bytes([0x80]), .list([])])])),
            ]
        for encoding in encodings {
            for length in 0..<encoding.count {
                EVMTestSupport.expectRefusal(.invalidArgument, field: "t", reason: "truncated") {
                    _ = try RLP.decode(Array(encoding.prefix(length)), field: "t")
                }
            }
        }
    }

    @Test func bytesAfterTheItemAreRefused() {
        EVMTestSupport.expectRefusal(.invalidArgument, field: "t", reason: "trailing_bytes") {
            _ = try RLP.decode([0x80, 0x80], field: "t")
        }
        EVMTestSupport.expectRefusal(.invalidArgument, field: "t", reason: "trailing_bytes") {
            _ = try RLP.decode([0xC0, 0x00], field: "t")
        }
    }

    @Test func anItemRunningPastItsListIsRefused() {
        // The list holds 2 bytes, its string claims 2 more than the first: it overruns the list, not the input.
        EVMTestSupport.expectRefusal(.invalidArgument, field: "t", reason: "malformed_rlp") {
            _ = try RLP.decode([0xC2, 0x82, 0x61, 0x62], field: "t")
        }
    }

    @Test func listsNestAtMostSixteenDeep() throws {
        func nested(_ depth: Int) -> Item { depth == 0 ? .bytes([1]) : .list([nested(depth - 1)]) }
        #expect(try RLP.decode(RLP.encode(nested(16)), field: "t") == nested(16))
        EVMTestSupport.expectRefusal(.invalidArgument, field: "t", reason: "too_deep") {
            _ = try RLP.decode(RLP.encode(nested(17)), field: "t")
        }
    }
}
