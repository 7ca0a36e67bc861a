import RainCore
import Testing

@testable import RainSigning

@Suite struct EIP712RefusalTests {
    typealias T = EVMTestSupport

    static let domainTypes = #"[{"name": "name", "type": "string"}, {"name": "chainId", "type": "uint256"}]"#

    /// Typed data with one struct `V` of the given members and message; the domain names `chainId`.
    static func typed(_ fields: String, _ message: String, chainId: String = "1", extra: String = "") -> String {
        #"{"types": {"EIP712Domain": \#(domainTypes), "V": [\#(fields)]}, "primaryType": "V", "#
            + #""domain": {"name": "T", "chainId": \#(chainId)}, "message": \#(message)\#(extra)}"#
    }

    static func single(_ type: String, _ value: String) -> String {
        typed(#"{"name": "v", "type": "\#(type)"}"#, #"{"v": \#(value)}"#)
    }

    @Test func aDuplicateKeyIsRefusedWithItsPath() {
        T.expectRefusal(.invalidArgument, field: "typedData.message.contents", reason: "duplicate_key") {
            _ = try T.prepareTypedData(
                EIP712Tests.mail.replacingFirst(#""contents": "Hello, Bob!""#, with: #""contents": "a", "contents": "b""#))
        }
        T.expectRefusal(.invalidArgument, field: "typedData.types", reason: "duplicate_key") {
            _ = try T.prepareTypedData(#"{"types": {}, "types": {}}"#)
        }
    }

    @Test func aMemberTheStructDoesNotDeclareIsRefused() {
        T.expectRefusal(.invalidArgument, field: "typedData.message.from.email", reason: "undeclared_field") {
            _ = try T.prepareTypedData(
                EIP712Tests.mail.replacingFirst(#""name": "Cow""#, with: #""name": "Cow", "email": "c@x""#))
        }
        T.expectRefusal(.invalidArgument, field: "typedData.domain.salt", reason: "undeclared_field") {
            _ = try T.prepareTypedData(
                EIP712Tests.mail.replacingFirst(#""chainId": 1,"#, with: #""chainId": 1, "salt": "0x00","#))
        }
    }

    @Test func aDeclaredMemberThatIsMissingIsRefused() {
        T.expectRefusal(.invalidArgument, field: "typedData.message.from.name", reason: "missing_field") {
            _ = try T.prepareTypedData(EIP712Tests.mail.replacingFirst(#""name": "Cow", "#, with: ""))
        }
        T.expectRefusal(.invalidArgument, field: "typedData.message.w", reason: "missing_field") {
            _ = try T.prepareTypedData(
                Self.typed(#"{"name": "v", "type": "uint8"}, {"name": "w", "type": "string"}"#, #"{"v": 1}"#))
        }
        T.expectRefusal(.invalidArgument, field: "typedData.message", reason: "missing_field") {
            _ = try T.prepareTypedData(
                #"{"types": {"EIP712Domain": [{"name": "chainId", "type": "uint256"}], "V": []}, "primaryType": "V", "domain": {"chainId": 1}}"#
            )
        }
    }

    @Test func anUndeclaredTypeIsRefused() {
        T.expectRefusal(.invalidArgument, field: "typedData.types.Mail[0].type", reason: "undeclared_type") {
            _ = try T.prepareTypedData(
                EIP712Tests.mail.replacingFirst(
                    #"{"name": "from", "type": "Person"}"#, with: #"{"name": "from", "type": "Persn"}"#))
        }
        T.expectRefusal(.invalidArgument, field: "typedData.types.V[0].type", reason: "undeclared_type") {
            _ = try T.prepareTypedData(Self.single("Other[2]", "[]"))
        }
        T.expectRefusal(.invalidArgument, field: "typedData.types.V[0].type", reason: "undeclared_type") {
            _ = try T.prepareTypedData(Self.single("uint", "1"))
        }
        T.expectRefusal(.invalidArgument, field: "typedData.primaryType", reason: "undeclared_type") {
            _ = try T.prepareTypedData(
                EIP712Tests.mail.replacingFirst(#""primaryType": "Mail""#, with: #""primaryType": "Letter""#))
        }
        for bad in [
            "uint7", "uint264", "bytes33", "bytes0", "int+8", "uint8[0]", "uint8[02]", "uint8[", "uint8]",
            "uint8" + String(repeating: "[]", count: 9), "uint8" + String(repeating: "[]", count: 20_000),
        ] {
            T.expectRefusal(.invalidArgument, field: "typedData.types.V[0].type", reason: "invalid_type") {
                _ = try T.prepareTypedData(Self.single(bad, "1"))
            }
        }
    }

    @Test func integersOutsideTheirTypeAreOutOfRange() {
        let twoTo256 = "115792089237316195423570985008687907853269984665640564039457584007913129639936"
        let cases: [(String, String)] = [
            ("uint256", twoTo256), ("uint256", "\"\(twoTo256)\""),
            ("uint256", "\"0x1" + String(repeating: "0", count: 64) + "\""),
            ("uint8", "-1"), ("uint8", "\"-1\""), ("uint8", "256"),
            ("uint160", "\"0x" + String(repeating: "f", count: 41) + "\""),
            ("int8", "128"), ("int8", "-129"), ("int8", "\"0x80\""), ("int256", twoTo256),
        ]
        for (type, value) in cases {
            T.expectRefusal(.invalidAmount, field: "typedData.message.v", reason: "out_of_range") {
                _ = try T.prepareTypedData(Self.single(type, value))
            }
        }
    }

    @Test func integersAtTheirLimitsAreAccepted() throws {
        for (type, value) in [
            ("uint8", "255"), ("int8", "-128"), ("int8", "127"), ("int8", "\"-0\""), ("uint8", "\"0xff\""), ("uint8", "\"0XFF\""),
            ("uint160", "\"0x" + String(repeating: "f", count: 40) + "\""),
        ] {
            _ = try T.prepareTypedData(Self.single(type, value))
        }
    }

    @Test func valuesOfTheWrongFormAreRefused() {
        let cases: [(String, String, String)] = [
            ("uint8", "1.5", "not_an_integer"), ("uint8", "1e2", "not_an_integer"), ("uint8", "\"0x\"", "not_an_integer"),
            ("uint8", "\" 1\"", "not_an_integer"), ("uint8", "\"+1\"", "not_an_integer"), ("uint8", "true", "wrong_type"),
            ("int8", "\"-0x1\"", "not_an_integer"),
            ("bool", "\"true\"", "wrong_type"), ("bool", "1", "wrong_type"), ("string", "1", "wrong_type"),
            ("bytes4", "\"0xdeadbe\"", "wrong_length"), ("bytes4", "\"0xdeadbeef00\"", "wrong_length"),
            ("bytes", "\"hello\"", "invalid_bytes"), ("bytes", "\"0x123\"", "invalid_bytes"),
            ("address", "\"0xcd2a3d9f938e13cd947ec05abc7fe734df8dd82\"", "invalid_address"),
            ("address", "\"0xCD2a3d9F938E13CD947Ec05AbC7FE734Df8DD827\"", "invalid_address"),
            ("address", "\"cd2a3d9f938e13cd947ec05abc7fe734df8dd826\"", "invalid_address"),
            ("uint8[2]", "[1]", "wrong_length"), ("uint8[]", "{}", "wrong_type"), ("uint8", "null", "wrong_type"),
        ]
        for (type, value, reason) in cases {
            T.expectRefusal(.invalidArgument, field: "typedData.message.v", reason: reason) {
                _ = try T.prepareTypedData(Self.single(type, value))
            }
        }
    }

    @Test func theTopLevelAndTheDomainMustBeExactlyWhatEIP712Defines() {
        T.expectRefusal(.invalidArgument, field: "typedData.extra", reason: "unknown_field") {
            _ = try T.prepareTypedData(
                Self.single("uint8", "1").replacingFirst(#""primaryType""#, with: #""extra": 1, "primaryType""#))
        }
        T.expectRefusal(.invalidArgument, field: "typedData.types.EIP712Domain", reason: "missing_field") {
            _ = try T.prepareTypedData(#"{"types": {"V": []}, "primaryType": "V", "domain": {}, "message": {}}"#)
        }
        T.expectRefusal(.invalidArgument, field: "typedData.domain.chainId", reason: "missing_field") {
            _ = try T.prepareTypedData(
                #"{"types": {"EIP712Domain": [{"name": "name", "type": "string"}], "V": []}, "primaryType": "V", "domain": {"name": "x"}, "message": {}}"#
            )
        }
        T.expectRefusal(.invalidArgument, field: "typedData.types.EIP712Domain[1]", reason: "invalid_domain_field") {
            _ = try T.prepareTypedData(
                #"{"types": {"EIP712Domain": [{"name": "chainId", "type": "uint256"}, {"name": "owner", "type": "address"}], "V": []}, "primaryType": "V", "domain": {}, "message": {}}"#
            )
        }
        T.expectRefusal(.invalidArgument, field: "typedData.types.EIP712Domain[0]", reason: "invalid_domain_field") {
            _ = try T.prepareTypedData(
                #"{"types": {"EIP712Domain": [{"name": "chainId", "type": "uint64"}], "V": []}, "primaryType": "V", "domain": {}, "message": {}}"#
            )
        }
        T.expectRefusal(.invalidArgument, field: "typedData.primaryType", reason: "unsupported_primary_type") {
            _ = try T.prepareTypedData(
                #"{"types": {"EIP712Domain": [{"name": "chainId", "type": "uint256"}]}, "primaryType": "EIP712Domain", "domain": {"chainId": 1}, "message": {"chainId": 1}}"#
            )
        }
        T.expectRefusal(.invalidArgument, field: "typedData.types.V[1].name", reason: "duplicate_field") {
            _ = try T.prepareTypedData(Self.typed(#"{"name": "v", "type": "uint8"}, {"name": "v", "type": "bool"}"#, "{}"))
        }
        T.expectRefusal(.invalidArgument, field: "typedData.types.V[0].name", reason: "invalid_name") {
            _ = try T.prepareTypedData(Self.typed(#"{"name": "a,b", "type": "uint8"}"#, "{}"))
        }
        T.expectRefusal(.invalidArgument, field: "typedData.types.V[0].kind", reason: "unknown_field") {
            _ = try T.prepareTypedData(Self.typed(#"{"name": "v", "type": "uint8", "kind": 1}"#, "{}"))
        }
        T.expectRefusal(.invalidArgument, field: "typedData.types.uint8", reason: "invalid_name") {
            _ = try T.prepareTypedData(#"{"types": {"uint8": []}}"#)
        }
        T.expectRefusal(.invalidArgument, field: "typedData", reason: "wrong_type") {
            _ = try T.prepareTypedData("[]")
        }
    }

    @Test func theDomainsChainMustBeSupportedAndTheOneTheRequestNames() throws {
        T.expectRefusal(.chainNotSupported, field: "typedData.domain.chainId", reason: "chain_not_supported") {
            _ = try T.prepareTypedData(Self.single("uint8", "1").replacingFirst(#""chainId": 1"#, with: #""chainId": 56"#))
        }
        T.expectRefusal(.chainNotSupported, field: "typedData.domain.chainId", reason: "chain_not_supported") {
            _ = try T.prepareTypedData(
                Self.single("uint8", "1").replacingFirst(#""chainId": 1"#, with: #""chainId": "0x10000000000000000""#))
        }
        T.expectRefusal(.invalidArgument, field: "chainId", reason: "chain_id_mismatch") {
            _ = try T.prepareTypedData(Self.single("uint8", "1"), chainID: 8453)
        }
        _ = try T.prepareTypedData(
            Self.single("uint8", "1").replacingFirst(#""chainId": 1"#, with: #""chainId": "0x2105""#), chainID: 8453)
    }

    @Test func typedDataFromAnotherAccountIsRefused() {
        T.expectRefusal(.invalidArgument, field: "from", reason: "from_mismatch") {
            _ = try T.prepare(.typedData, Array(EIP712Tests.mail.utf8), from: "0xCD2a3d9F938E13CD947Ec05AbC7FE734Df8DD826")
        }
    }

    @Test func typedDataIsAtMost64KiB() throws {
        let base = Self.single("string", #""x""#)
        let padding = 64 * 1024 - base.utf8.count
        _ = try T.prepareTypedData(base + String(repeating: " ", count: padding))
        T.expectRefusal(.invalidArgument, field: "typedData", reason: "too_large") {
            _ = try T.prepareTypedData(base + String(repeating: " ", count: padding + 1))
        }
    }

    @Test func textThatIsNotStrictJSONIsRefused() {
        let valid = Array(Self.single("string", #""x""#).utf8)
        T.expectRefusal(.invalidArgument, field: "typedData", reason: "trailing_bytes") {
            _ = try T.prepare(.typedData, valid + Array(" x".utf8))
        }
        T.expectRefusal(.invalidArgument, field: "typedData", reason: "invalid_utf8") {
            _ = try T.prepare(.typedData, valid.map { $0 == UInt8(ascii: "x") ? 0xFF : $0 })
        }
        T.expectRefusal(.invalidArgument, field: "typedData.message.v", reason: "invalid_json") {
            _ = try T.prepareTypedData(Self.single("string", #""a\qb""#))
        }
    }
}

extension String {
    /// The text with the first `target` replaced; the test fails to find what it expects otherwise.
    func replacingFirst(_ target: String, with replacement: String) -> String {
        guard let range = firstRange(of: target) else {
            Issue.record("\(target) is not in the text")
            return self
        }
        var result = self
        result.replaceSubrange(range, with: replacement)
        return result
    }
}
