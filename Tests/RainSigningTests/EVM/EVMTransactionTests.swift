import RainCore
import RainCrypto
import Testing

@testable import RainSigning

@Suite struct EVMTransactionTests {
    typealias T = EVMTestSupport

    static func int(_ value: UInt64) -> RLP.Item { RLP.integer(UInt256(value)) }
    static let to = RLP.Item.bytes(T.bytes("3535353535353535353535353535353535353535"))
    static let gwei20: UInt64 = 20_000_000_000

    /// A legacy EIP-155 signing form with these fields replaced.
    static func legacy(_ replace: [Int: RLP.Item] = [:], chainID: UInt64 = 1) -> [UInt8] {
        var fields: [RLP.Item] = [
            int(9), int(gwei20), int(21_000), to, RLP.integer(UInt256(decimal: "1000000000000000000") ?? .zero),
            .bytes([]), int(chainID), int(0), int(0),
        ]
        for (index, item) in replace { fields[index] = item }
        return RLP.encode(.list(fields))
    }

    /// A type 2 transaction with these fields replaced.
    static func type2(_ replace: [Int: RLP.Item] = [:], chainID: UInt64 = 8453) -> [UInt8] {
        var fields: [RLP.Item] = [
            int(chainID), int(7), int(1_500_000_000), int(30_000_000_000), int(65_000), to, int(0), .bytes([]), .list([]),
        ]
        for (index, item) in replace { fields[index] = item }
        return [0x02] + RLP.encode(.list(fields))
    }

    // MARK: Vectors

    /// EIP-155's example: https://eips.ethereum.org/EIPS/eip-155 ("Example").
    @Test func theEIP155ExampleSignsAndFinishesAsTheEIPSays() throws {
        let signingData = T.bytes(
            "ec098504a817c800825208943535353535353535353535353535353535353535880de0b6b3a764000080018080")
        #expect(Self.legacy() == signingData)
        let prepared = try T.prepare(.transaction, signingData, chainID: 1)
        #expect(prepared.signedBytes == signingData)
        #expect(
            prepared.input == .secp256k1Digest(T.bytes("daf5a779ae972f972197303d7b574746c7ef83eadac0f2791ad23db92e4c8e53")))
        let r = T.bytes("28ef61340bd939bc2195fe537567866003e1a15d3c71ff63e1590620aa636276")
        let s = T.bytes("67cbe9d8997f761aecb703304b3800ccf555c9f3dc64214b297fb1966a3b6d83")
        let result = try prepared.finish(RecoverableSignature(r: r, s: s, recoveryID: 0))
        let raw = T.bytes(
            "f86c098504a817c800825208943535353535353535353535353535353535353535880de0b6b3a76400008025a028ef61340bd939bc"
                + "2195fe537567866003e1a15d3c71ff63e1590620aa636276a067cbe9d8997f761aecb703304b3800ccf555c9f3dc64214b29"
                + "7fb1966a3b6d83")
        #expect(result.signedTransaction == raw)
        #expect(result.transactionHash == Keccak256.hash(raw))
        #expect(result.signature == r + s + [27])
        let summary = prepared.summary
        #expect(summary.title == "Sign a transaction on Ethereum (1)")
        #expect(T.value(summary, "Type") == "legacy (EIP-155)")
        #expect(T.value(summary, "To") == "0x3535353535353535353535353535353535353535")
        #expect(T.value(summary, "Value") == "1 ETH")
        #expect(T.value(summary, "Gas price") == "20 gwei")
        #expect(T.value(summary, "Max network fee") == "0.00042 ETH (gas limit 21000 × 20 gwei)")
        #expect(T.value(summary, "Nonce") == "9")
        #expect(T.value(summary, "Data") == "none")
        #expect(T.value(summary, "From") == T.walletAddress)
        #expect(T.warnings(summary).isEmpty)
    }

    @Test func legacyRecoveryIDOneGivesVOf38OnChainOne() throws {
        let prepared = try T.prepare(.transaction, Self.legacy())
        let result = try prepared.finish(
            RecoverableSignature(r: [UInt8](repeating: 1, count: 32), s: [UInt8](repeating: 2, count: 32), recoveryID: 1))
        guard case .list(let fields) = try RLP.decode(result.signedTransaction, field: "t") else {
            Issue.record("not a list")
            return
        }
        #expect(fields.count == 9)
        #expect(fields[6] == Self.int(38))
        #expect(result.signature.last == 28)
    }

    /// The unsigned bytes, signature and signed raw transaction come from eth-account 0.14.0:
    /// `Account.sign_transaction(tx, 0x4646…46)` (the unsigned form is the signed one without v, r, s),
    /// for a USDC transfer on Base with a one-entry access list.
    @Test func aType2TransactionFinishesToTheBytesEthAccountSigns() throws {
        let unsigned = T.bytes(
            "02f8cb822105078459682f008506fc23ac0082fde894833589fcd6edb6e08f4c7c32d4f71b54bda0291380b844a9059cbb0000000000"
                + "00000000000000cd2a3d9f938e13cd947ec05abc7fe734df8dd82600000000000000000000000000000000000000000000000000"
                + "0000000016e360f85bf85994833589fcd6edb6e08f4c7c32d4f71b54bda02913f842a00000000000000000000000000000000000"
                + "000000000000000000000000000001a00000000000000000000000000000000000000000000000000000000000000002")
        let prepared = try T.prepare(.transaction, unsigned, chainID: 8453, from: T.walletAddress.lowercased())
        #expect(
            prepared.input == .secp256k1Digest(T.bytes("6206fcb4312e768e87f069c7754902a743af238d419083d6607a751156393a2b")))
        let result = try prepared.finish(
            RecoverableSignature(
                r: T.bytes("5bbc4c5b1e75eb4ea02cf7551eea05ef87b8177ce0c009b497e09076c64d0041"),
                s: T.bytes("606dbb05392bf42f12dd9d0cd6915eb10dbce70147fb0cd56bd351a536851df4"), recoveryID: 0))
        #expect(
            result.signedTransaction
                == T.bytes(
                    "02f9010e822105078459682f008506fc23ac0082fde894833589fcd6edb6e08f4c7c32d4f71b54bda0291380b844a9059cbb"
                        + "000000000000000000000000cd2a3d9f938e13cd947ec05abc7fe734df8dd82600000000000000000000000000000000"
                        + "0000000000000000000000000016e360f85bf85994833589fcd6edb6e08f4c7c32d4f71b54bda02913f842a000000000"
                        + "00000000000000000000000000000000000000000000000000000001a000000000000000000000000000000000000000"
                        + "0000000000000000000000000280a05bbc4c5b1e75eb4ea02cf7551eea05ef87b8177ce0c009b497e09076c64d0041a0"
                        + "606dbb05392bf42f12dd9d0cd6915eb10dbce70147fb0cd56bd351a536851df4"))
        #expect(result.transactionHash == T.bytes("1ae178e4eb42d2e1f98a8ae401f0cd55ecd673bf6d5102f2d01f4cf793a1b999"))
    }

    /// From eth-account 0.14.0 as above: a type 1 transfer of 1 ETH on chain 1 with an access list.
    @Test func aType1TransactionFinishesToTheBytesEthAccountSigns() throws {
        let unsigned = T.bytes(
            "01f84201808504a817c800825208943535353535353535353535353535353535353535880de0b6b3a764000080d7d69435353535353535"
                + "35353535353535353535353535c0")
        let prepared = try T.prepare(.transaction, unsigned)
        #expect(
            prepared.input == .secp256k1Digest(T.bytes("5a5ae457c711ef64686023aa77ff356d0c732a1df6e3342474f4874266023a64")))
        let result = try prepared.finish(
            RecoverableSignature(
                r: T.bytes("d731a805b1cd05865ec82374d0cd30d11cc1fed4d1009cb764ded4ef92b245a1"),
                s: T.bytes("148a2ee29e76e6ebbbde286624489bcaa4cd2c7580015d5dea49a4daff09add0"), recoveryID: 0))
        #expect(result.transactionHash == T.bytes("9b6701651758f2cfdeb890999d0b9014cc992b62877c28d9f3c7121cb5e4f025"))
        #expect(T.value(prepared.summary, "Type") == "type 1 (EIP-2930 access list)")
        #expect(T.value(prepared.summary, "Access list") == "1 address, 0 storage keys")
    }

    // MARK: Round trips

    /// r with two leading zero bytes must lose them (RLP integers are minimal); recovery id 1 is yParity 1.
    static let roundTripSignature = RecoverableSignature(
        r: [0, 0] + [UInt8](repeating: 0x11, count: 30), s: [UInt8](repeating: 0x22, count: 32), recoveryID: 1)

    @Test func aType2TransactionRoundTripsThroughFinishWithEveryField() throws {
        let data = T.bytes("deadbeef00")
        let accessList = RLP.Item.list([
            .list([.bytes([UInt8](repeating: 0xAA, count: 20)), .list([.bytes([UInt8](repeating: 0x01, count: 32))])])
        ])
        let unsigned = Self.type2([5: .bytes([]), 6: Self.int(12_345), 7: .bytes(data), 8: accessList])
        let prepared = try T.prepare(.transaction, unsigned)
        let result = try prepared.finish(Self.roundTripSignature)
        #expect(result.signedTransaction.first == 0x02)
        guard case .list(let fields) = try RLP.decode(Array(result.signedTransaction.dropFirst()), field: "t") else {
            Issue.record("the signed body is not a list")
            return
        }
        #expect(
            fields == [
                Self.int(8453), Self.int(7), Self.int(1_500_000_000), Self.int(30_000_000_000), Self.int(65_000), .bytes([]),
                Self.int(12_345), .bytes(data), accessList, Self.int(1), .bytes([UInt8](repeating: 0x11, count: 30)),
                .bytes([UInt8](repeating: 0x22, count: 32)),
            ])
        #expect(result.transactionHash == Keccak256.hash(result.signedTransaction))
        #expect(result.signature == Self.roundTripSignature.r + Self.roundTripSignature.s + [28])
        // The signed form minus yParity, r and s is the unsigned request again.
        #expect([0x02] + RLP.encode(.list(Array(fields.prefix(9)))) == unsigned)
    }

    @Test func aType1TransactionRoundTripsThroughFinishWithEveryField() throws {
        let fieldsIn: [RLP.Item] = [
            Self.int(137), Self.int(0), Self.int(Self.gwei20), Self.int(100_000), Self.to, .bytes([]), .bytes([1, 2, 3]),
            .list([.list([.bytes([UInt8](repeating: 0xBB, count: 20)), .list([])])]),
        ]
        let unsigned = [0x01] + RLP.encode(.list(fieldsIn))
        let prepared = try T.prepare(.transaction, unsigned, chainID: 137)
        let result = try prepared.finish(Self.roundTripSignature)
        #expect(result.signedTransaction.first == 0x01)
        guard case .list(let fields) = try RLP.decode(Array(result.signedTransaction.dropFirst()), field: "t") else {
            Issue.record("the signed body is not a list")
            return
        }
        #expect(
            fields == fieldsIn + [
                Self.int(1), .bytes([UInt8](repeating: 0x11, count: 30)), .bytes([UInt8](repeating: 0x22, count: 32)),
            ])
        #expect(T.value(prepared.summary, "Value") == "0 POL")
    }

    @Test func finishRefusesASignatureThatIsNotThirtyTwoBytePairsWithRecoveryZeroOrOne() throws {
        let prepared = try T.prepare(.transaction, Self.type2())
        for signature in [
            RecoverableSignature(r: [1], s: [UInt8](repeating: 2, count: 32), recoveryID: 0),
            RecoverableSignature(r: [UInt8](repeating: 1, count: 32), s: [UInt8](repeating: 2, count: 32), recoveryID: 2),
        ] {
            T.expectRefusal(.invalidArgument, field: "signature", reason: "malformed_signature") {
                _ = try prepared.finish(signature)
            }
        }
    }

    // MARK: Refusals

    @Test func aLegacyTransactionWithoutAChainIDIsRefused() {
        let preEIP155 = RLP.encode(
            .list([Self.int(9), Self.int(Self.gwei20), Self.int(21_000), Self.to, Self.int(1), .bytes([])]))
        T.expectRefusal(.invalidArgument, field: "transaction", reason: "pre_eip155_transaction") {
            _ = try T.prepare(.transaction, preEIP155)
        }
    }

    @Test(arguments: [0x03, 0x04, 0x00, 0x05, 0x7F] as [UInt8])
    func blobSetCodeAndUnknownTypesAreRefused(_ type: UInt8) {
        var payload = Self.type2()
        payload[0] = type
        T.expectRefusal(.invalidArgument, field: "transaction", reason: "transaction_type_not_supported") {
            _ = try T.prepare(.transaction, payload)
        }
    }

    @Test func aTruncatedTransactionIsRefusedAtEveryLength() {
        for payload in [Self.type2(), Self.legacy()] {
            for length in 0..<payload.count {
                T.expectRefusal(.invalidArgument, field: "transaction", reason: "truncated") {
                    _ = try T.prepare(.transaction, Array(payload.prefix(length)))
                }
            }
        }
    }

    @Test func bytesAfterTheTransactionAreRefused() {
        T.expectRefusal(.invalidArgument, field: "transaction", reason: "trailing_bytes") {
            _ = try T.prepare(.transaction, Self.type2() + [0x00])
        }
        T.expectRefusal(.invalidArgument, field: "transaction", reason: "trailing_bytes") {
            _ = try T.prepare(.transaction, Self.legacy() + [0x80])
        }
    }

    @Test func anIntegerWithALeadingZeroByteIsRefused() {
        T.expectRefusal(.invalidArgument, field: "transaction.nonce", reason: "non_canonical_integer") {
            _ = try T.prepare(.transaction, Self.type2([1: .bytes([0x00, 0x07])]))
        }
        T.expectRefusal(.invalidArgument, field: "transaction.value", reason: "non_canonical_integer") {
            _ = try T.prepare(.transaction, Self.legacy([4: .bytes([0x00])]))
        }
    }

    @Test func anIntegerLongerThan32BytesIsOutOfRange() {
        T.expectRefusal(.invalidAmount, field: "transaction.value", reason: "out_of_range") {
            _ = try T.prepare(.transaction, Self.type2([6: .bytes([0x01] + [UInt8](repeating: 0, count: 32))]))
        }
        T.expectRefusal(.invalidAmount, field: "transaction.gasLimit", reason: "out_of_range") {
            _ = try T.prepare(.transaction, Self.type2([4: .bytes([0x01] + [UInt8](repeating: 0, count: 8))]))
        }
        T.expectRefusal(.invalidAmount, field: "transaction.maxFeePerGas", reason: "out_of_range") {
            _ = try T.prepare(.transaction, Self.type2([3: RLP.integer(.max), 2: Self.int(1)]))
        }
    }

    @Test func aRecipientThatIsNeitherEmptyNor20BytesIsRefused() {
        for bad: RLP.Item in [.bytes([UInt8](repeating: 1, count: 19)), .bytes([UInt8](repeating: 1, count: 21)), .list([])] {
            T.expectRefusal(.invalidArgument, field: "transaction.to", reason: "invalid_address") {
                _ = try T.prepare(.transaction, Self.type2([5: bad]))
            }
        }
    }

    @Test func malformedAccessListsAreRefusedWithThePartThatIsWrong() {
        let address = RLP.Item.bytes([UInt8](repeating: 0xAA, count: 20))
        let cases: [(RLP.Item, String)] = [
            (.bytes([]), "transaction.accessList"),
            (.list([.list([address])]), "transaction.accessList[0]"),
            (.list([.list([.bytes([1]), .list([])])]), "transaction.accessList[0].address"),
            (.list([.list([address, .bytes([])])]), "transaction.accessList[0].storageKeys"),
            (
                .list([.list([address, .list([])]), .list([address, .list([.bytes([1])])])]),
                "transaction.accessList[1].storageKeys[0]"
            ),
        ]
        for (accessList, field) in cases {
            T.expectRefusal(.invalidArgument, field: field, reason: "malformed_access_list") {
                _ = try T.prepare(.transaction, Self.type2([8: accessList]))
            }
        }
    }

    @Test func anUnsupportedChainIsRefusedWith104() {
        T.expectRefusal(.chainNotSupported, field: "transaction.chainId", reason: "chain_not_supported") {
            _ = try T.prepare(.transaction, Self.type2(chainID: 56))
        }
        T.expectRefusal(.chainNotSupported, field: "transaction.chainId", reason: "chain_not_supported") {
            _ = try T.prepare(.transaction, Self.legacy(chainID: 0))
        }
        T.expectRefusal(.chainNotSupported, field: "transaction.chainId", reason: "chain_not_supported") {
            _ = try T.prepare(.transaction, Self.type2([0: .bytes([UInt8](repeating: 1, count: 9))]))
        }
    }

    @Test func aChainIDOtherThanTheRequestsIsRefused() throws {
        T.expectRefusal(.invalidArgument, field: "chainId", reason: "chain_id_mismatch") {
            _ = try T.prepare(.transaction, Self.type2(chainID: 8453), chainID: 1)
        }
        T.expectRefusal(.invalidArgument, field: "chainId", reason: "chain_id_mismatch") {
            _ = try T.prepare(.transaction, Self.legacy(chainID: 1), chainID: 10)
        }
        _ = try T.prepare(.transaction, Self.type2(chainID: 8453), chainID: 8453)
    }

    @Test func aFromOtherThanTheWalletIsRefusedAndItsCaseDoesNotMatter() throws {
        T.expectRefusal(.invalidArgument, field: "from", reason: "from_mismatch") {
            _ = try T.prepare(.transaction, Self.type2(), from: "0xCD2a3d9F938E13CD947Ec05AbC7FE734Df8DD826")
        }
        T.expectRefusal(.invalidArgument, field: "from", reason: "invalid_address") {
            _ = try T.prepare(.transaction, Self.type2(), from: "0x1234")
        }
        _ = try T.prepare(.transaction, Self.type2(), from: "0x" + T.walletAddress.dropFirst(2).uppercased())
        _ = try T.prepare(.transaction, Self.type2(), from: String(T.walletAddress.lowercased().dropFirst(2)))
    }

    @Test func otherMalformedTransactionsAreRefused() {
        T.expectRefusal(.invalidArgument, field: "transaction", reason: "wrong_field_count") {
            _ = try T.prepare(.transaction, [0x02] + RLP.encode(.list([Self.int(1)])))
        }
        T.expectRefusal(.invalidArgument, field: "transaction", reason: "not_a_transaction") {
            _ = try T.prepare(.transaction, [0x83, 1, 2, 3])
        }
        T.expectRefusal(.invalidArgument, field: "transaction.r", reason: "signed_transaction") {
            _ = try T.prepare(.transaction, Self.legacy([7: Self.int(5)]))
        }
        T.expectRefusal(.invalidArgument, field: "transaction.maxPriorityFeePerGas", reason: "priority_fee_above_max_fee") {
            _ = try T.prepare(.transaction, Self.type2([2: Self.int(2), 3: Self.int(1)]))
        }
        T.expectRefusal(.invalidArgument, field: "transaction.data", reason: "expected_bytes") {
            _ = try T.prepare(.transaction, Self.type2([7: .list([])]))
        }
        T.expectRefusal(.invalidArgument, field: "transaction", reason: "too_large") {
            _ = try T.prepare(.transaction, Self.type2([7: .bytes([UInt8](repeating: 0, count: 128 * 1024))]))
        }
        T.expectRefusal(.invalidArgument, field: "chain", reason: "wrong_chain_family") {
            _ = try EVMSigning.prepare(
                SigningRequest(kind: .transaction, chain: .solana, payload: Self.type2()), wallet: T.wallet)
        }
    }
}
