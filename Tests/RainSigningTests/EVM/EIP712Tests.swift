import RainCore
import RainCrypto
import Testing

@testable import RainSigning

@Suite struct EIP712Tests {
    typealias T = EVMTestSupport

    /// EIP-712's own example (https://eips.ethereum.org/EIPS/eip-712, "Mail").
    static let mail = #"""
        {"types": {
          "EIP712Domain": [{"name": "name", "type": "string"}, {"name": "version", "type": "string"},
                           {"name": "chainId", "type": "uint256"}, {"name": "verifyingContract", "type": "address"}],
          "Person": [{"name": "name", "type": "string"}, {"name": "wallet", "type": "address"}],
          "Mail": [{"name": "from", "type": "Person"}, {"name": "to", "type": "Person"}, {"name": "contents", "type": "string"}]},
         "primaryType": "Mail",
         "domain": {"name": "Ether Mail", "version": "1", "chainId": 1,
                    "verifyingContract": "0xCcCCccccCCCCcCCCCCCcCcCccCcCCCcCcccccccC"},
         "message": {"from": {"name": "Cow", "wallet": "0xCD2a3d9F938E13CD947Ec05AbC7FE734Df8DD826"},
                     "to": {"name": "Bob", "wallet": "0xbBbBBBBbbBBBbbbBbbBbbbbBBbBbbbbBbBbbBBbB"},
                     "contents": "Hello, Bob!"}}
        """#

    @Test func theMailExampleHashesAsTheEIPSays() throws {
        let typedData = try EIP712TypedData(json: Array(Self.mail.utf8))
        #expect(typedData.encodeType("Mail") == "Mail(Person from,Person to,string contents)Person(string name,address wallet)")
        #expect(
            typedData.hashStruct(typedData.message) == T.bytes("c52c0ee5d84264471806290a3f2c4cecfc5490626bf912d01f240d7a274b371e")
        )
        #expect(typedData.domainSeparator == T.bytes("f2cee375fa42b42143804025fc449deafd50cc031ca257e0b194a650a912090f"))
        let prepared = try T.prepareTypedData(Self.mail, chainID: 1)
        #expect(
            prepared.input == .secp256k1Digest(T.bytes("be609aee343fb3c4b28e1df9e632fca64fcfaede20f02e86244efddf30957bd2")))
        #expect(prepared.signedBytes.prefix(2) == [0x19, 0x01])
        #expect(prepared.signedBytes.count == 66)
        let r = [UInt8](repeating: 5, count: 32)
        let s = [UInt8](repeating: 6, count: 32)
        #expect(try prepared.finish(RecoverableSignature(r: r, s: s, recoveryID: 1)).signature == r + s + [28])
    }

    @Test func theMailSummaryShowsTheDomainAndEveryFieldByPath() throws {
        let summary = try T.prepareTypedData(Self.mail).summary
        #expect(summary.title == "Sign typed data (EIP-712) on Ethereum (1)")
        #expect(T.value(summary, "Domain name") == "Ether Mail")
        #expect(T.value(summary, "Domain version") == "1")
        #expect(T.value(summary, "Chain") == "Ethereum (1)")
        #expect(T.value(summary, "Verifying contract") == "0xCcCCccccCCCCcCCCCCCcCcCccCcCCCcCcccccccC")
        #expect(T.value(summary, "Primary type") == "Mail")
        let fields = summary.lines.filter { $0.label.hasPrefix("mail.") }.map { "\($0.label)=\($0.value)" }
        #expect(
            fields == [
                "mail.from.name=Cow", "mail.from.wallet=0xCD2a3d9F938E13CD947Ec05AbC7FE734Df8DD826", "mail.to.name=Bob",
                "mail.to.wallet=0xbBbBBBBbbBBBbbbBbbBbbbbBBbBbbbbBbBbbBBbB", "mail.contents=Hello, Bob!",
            ])
        #expect(T.warnings(summary).isEmpty)
    }

    /// Nested arrays, bytes, bytesN, int and uint at their limits, uint256 JSON numbers above 2^53
    /// and 2^64, hex and decimal strings. The expected hashes were made with eth-account 0.14.0:
    /// `m = encode_typed_data(full_message=json.loads(text))`, digest `keccak(b"\x19" + m.version +
    /// m.header + m.body)` (Python's json keeps big integers exact).
    static let complex = #"""
        {
          "types": {
            "EIP712Domain": [
              {"name": "name", "type": "string"}, {"name": "version", "type": "string"},
              {"name": "chainId", "type": "uint256"}, {"name": "verifyingContract", "type": "address"},
              {"name": "salt", "type": "bytes32"}
            ],
            "Order": [
              {"name": "matrix", "type": "int16[2][]"},
              {"name": "blob", "type": "bytes"},
              {"name": "tag", "type": "bytes4"},
              {"name": "full", "type": "bytes32"},
              {"name": "minI256", "type": "int256"},
              {"name": "maxI256", "type": "int256"},
              {"name": "minI8", "type": "int8"},
              {"name": "maxI8", "type": "int8"},
              {"name": "maxU256", "type": "uint256"},
              {"name": "maxU8", "type": "uint8"},
              {"name": "above53", "type": "uint256"},
              {"name": "above64", "type": "uint256"},
              {"name": "hexU64", "type": "uint64"},
              {"name": "decimalI32", "type": "int32"},
              {"name": "flag", "type": "bool"},
              {"name": "items", "type": "Item[]"},
              {"name": "words", "type": "string[]"},
              {"name": "grid", "type": "uint8[][2]"}
            ],
            "Item": [{"name": "owner", "type": "address"}, {"name": "ids", "type": "uint32[]"}]
          },
          "primaryType": "Order",
          "domain": {
            "name": "Nested", "version": "2", "chainId": 8453,
            "verifyingContract": "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
            "salt": "0x0101010101010101010101010101010101010101010101010101010101010101"
          },
          "message": {
            "matrix": [[-32768, 32767], [0, -1]],
            "blob": "0x00ff10",
            "tag": "0xdeadbeef",
            "full": "0xffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
            "minI256": "-57896044618658097711785492504343953926634992332820282019728792003956564819968",
            "maxI256": 57896044618658097711785492504343953926634992332820282019728792003956564819967,
            "minI8": -128,
            "maxI8": "127",
            "maxU256": 115792089237316195423570985008687907853269984665640564039457584007913129639935,
            "maxU8": 255,
            "above53": 9007199254740993,
            "above64": 18446744073709551617,
            "hexU64": "0xFFFFFFFFFFFFFFFF",
            "decimalI32": "-2147483648",
            "flag": true,
            "items": [
              {"owner": "0xCD2a3d9F938E13CD947Ec05AbC7FE734Df8DD826", "ids": [1, 2, 4294967295]},
              {"owner": "0xbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "ids": []}
            ],
            "words": ["héllo", "", "\u2603 snow"],
            "grid": [[1, 2, 3], []]
          }
        }
        """#

    @Test func nestedArraysBytesAndIntegersAtTheirLimitsHashAsEthAccountDoes() throws {
        let typedData = try EIP712TypedData(json: Array(Self.complex.utf8))
        #expect(typedData.domainSeparator == T.bytes("f013b8b9b9e4d3ca763b18aedb338a4484b385ce5438944ecac8d823e58a2212"))
        #expect(
            typedData.hashStruct(typedData.message) == T.bytes("cccf12c8c38dbfef6f13d73e36210c9ffb2fe759e279bf1b462d6db0dc23c57a")
        )
        let prepared = try T.prepareTypedData(Self.complex, chainID: 8453)
        #expect(
            prepared.input == .secp256k1Digest(T.bytes("9c751329e05a80c63dac2fee9ea20846639bf656ac61521b1683fe8c3420d1b7")))
        let summary = prepared.summary
        #expect(T.value(summary, "order.above53") == "9007199254740993")
        #expect(T.value(summary, "order.above64") == "18446744073709551617")
        #expect(T.value(summary, "order.maxU256") == UInt256.max.description)
        #expect(
            T.value(summary, "order.minI256") == "-57896044618658097711785492504343953926634992332820282019728792003956564819968")
        #expect(T.value(summary, "order.hexU64") == "18446744073709551615")
        #expect(T.value(summary, "order.matrix[0][0]") == "-32768")
        #expect(T.value(summary, "order.matrix[1][1]") == "-1")
        #expect(T.value(summary, "order.tag") == "0xdeadbeef")
        #expect(T.value(summary, "order.blob") == "0x00ff10")
        #expect(T.value(summary, "order.items[1].owner") == "0xbBbBBBBbbBBBbbbBbbBbbbbBBbBbbbbBbBbbBBbB")
        #expect(T.value(summary, "order.items[1].ids") == "empty list")
        #expect(T.value(summary, "order.items[0].ids[2]") == "4294967295")
        #expect(T.value(summary, "order.words[2]") == "\u{2603} snow")
        #expect(T.value(summary, "order.grid[1]") == "empty list")
        #expect(T.value(summary, "order.flag") == "true")
        #expect(T.value(summary, "Salt") == "0x" + String(repeating: "01", count: 32))
    }

    /// Node and Peer reference each other and themselves. Expected values from eth-account 0.14.0's
    /// `encode_type`, `hash_struct("Node", types, message)` and `hash_domain(domain)` (its
    /// `encode_typed_data` cannot pick a primary type when every type is referenced).
    @Test func recursiveAndMutuallyRecursiveTypesEncodeOnceAndHashAsEthAccountDoes() throws {
        let json = #"""
            {"types": {"EIP712Domain": [{"name": "chainId", "type": "uint256"}],
              "Node": [{"name": "label", "type": "string"}, {"name": "children", "type": "Node[]"}, {"name": "peer", "type": "Peer[]"}],
              "Peer": [{"name": "back", "type": "Node[]"}, {"name": "id", "type": "uint8"}]},
             "primaryType": "Node", "domain": {"chainId": 10},
             "message": {"label": "root", "children": [{"label": "leaf", "children": [], "peer": []}], "peer": [{"back": [], "id": 7}]}}
            """#
        let typedData = try EIP712TypedData(json: Array(json.utf8))
        #expect(typedData.encodeType("Node") == "Node(string label,Node[] children,Peer[] peer)Peer(Node[] back,uint8 id)")
        #expect(typedData.encodeType("Peer") == "Peer(Node[] back,uint8 id)Node(string label,Node[] children,Peer[] peer)")
        #expect(typedData.domainSeparator == T.bytes("642051b15f3f6be6db8d1701be67d2943ebb5783c6d31fbdce5f1672f18499c2"))
        let prepared = try T.prepareTypedData(json)
        #expect(
            prepared.input == .secp256k1Digest(T.bytes("7844be70043a645de7d565aba19b17c287708a6d225bdd514862a1b6bd29d1c7")))
        #expect(T.value(prepared.summary, "node.children[0].label") == "leaf")
        #expect(T.value(prepared.summary, "node.peer[0].id") == "7")
    }

    @Test func arraySuffixesApplyRightToLeftAsInSolidity() {
        #expect(EIP712Type.parse("uint8[2][]", declared: []) == .array(.array(.uint(bits: 8), length: 2), length: nil))
        #expect(EIP712Type.parse("P[][3]", declared: ["P"]) == .array(.array(.structure("P"), length: nil), length: 3))
        #expect(EIP712Type.parse("bytes32", declared: []) == .fixedBytes(32))
        #expect(EIP712Type.parse("int256", declared: []) == .int(bits: 256))
        #expect(EIP712Type.parse("uint8" + String(repeating: "[]", count: 8), declared: []) != nil)
        #expect(EIP712Type.parse("uint8" + String(repeating: "[]", count: 9), declared: []) == nil)
        #expect(EIP712Type.parse("Q[]", declared: ["P"]) == nil)
    }

    @Test func eightLevelsOfStructsAndArraysAreAcceptedAndNineRefused() throws {
        func arrays(_ levels: Int) -> String {
            let type = "uint8" + String(repeating: "[]", count: levels)
            let value = String(repeating: "[", count: levels) + "1" + String(repeating: "]", count: levels)
            return
                #"{"types": {"EIP712Domain": [{"name": "chainId", "type": "uint256"}], "A": [{"name": "a", "type": "\#(type)"}]},"#
                + #""primaryType": "A", "domain": {"chainId": 1}, "message": {"a": \#(value)}}"#
        }
        // The message is level 1, so seven array levels inside it reach level 8.
        _ = try T.prepareTypedData(arrays(7))
        T.expectRefusal(.invalidArgument, field: "typedData.message.a[0][0][0][0][0][0][0]", reason: "too_deep") {
            _ = try T.prepareTypedData(arrays(8))
        }
        func structs(_ levels: Int) -> String {
            var types = #"{"EIP712Domain": [{"name": "chainId", "type": "uint256"}]"#
            for level in 1..<levels { types += #", "S\#(level)": [{"name": "x", "type": "S\#(level + 1)"}]"# }
            types += #", "S\#(levels)": [{"name": "v", "type": "uint8"}]}"#
            let value =
                String(repeating: #"{"x": "#, count: levels - 1) + #"{"v": 1}"# + String(repeating: "}", count: levels - 1)
            return #"{"types": \#(types), "primaryType": "S1", "domain": {"chainId": 1}, "message": \#(value)}"#
        }
        _ = try T.prepareTypedData(structs(8))
        T.expectRefusal(.invalidArgument, field: "typedData.message.x.x.x.x.x.x.x.x", reason: "too_deep") {
            _ = try T.prepareTypedData(structs(9))
        }
    }
}
