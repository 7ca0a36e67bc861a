import RainCore
import RainCrypto
import Testing

@testable import RainSigning

/// One malformed message and the refusal it must get.
struct SolanaMalformedMessage: Sendable, CustomTestStringConvertible {
    var name: String
    var payload: [UInt8]
    var field: String
    var reason: String
    var testDescription: String { name }
}

@Suite struct SolanaTransactionRefusalTests {
    typealias V = SolanaVectors
    typealias M = SolanaTestMessage

    static let walletKey = (try? Ed25519PrivateKey(rawRepresentation: V.walletSeed).publicKey.rawRepresentation) ?? []

    /// The wallet pays and calls the System Program (key 2) with accounts 0 and 1.
    static func legacy() -> M {
        M(
            header: [1, 0, 1], keys: [walletKey, M.key(2), M.systemProgram],
            instructions: [.init(program: 2, accounts: [0, 1], data: [2, 0, 0, 0] + M.u64(5))])
    }

    /// The wallet pays; an unknown program (key 1) reads the two entries of table 9 (indexes 2, 3).
    static func v0() -> M {
        M(
            isV0: true, header: [1, 0, 1], keys: [walletKey, M.key(8)],
            instructions: [.init(program: 1, accounts: [0, 2, 3], data: [])],
            lookups: [.init(table: M.key(9), writable: [0], readonly: [1])])
    }

    static func with(_ base: M, _ change: (inout M) -> Void) -> [UInt8] {
        var message = base
        change(&message)
        return message.bytes
    }

    static let malformed: [SolanaMalformedMessage] = [
        SolanaMalformedMessage(
            name: "an account index past the keys",
            payload: with(legacy()) { $0.instructions[0].accounts = [0, 3] },
            field: "transaction.instructions[0].accounts", reason: "index_out_of_range"),
        SolanaMalformedMessage(
            name: "an account index past the keys and the looked-up accounts",
            payload: with(v0()) { $0.instructions[0].accounts = [0, 4] },
            field: "transaction.instructions[0].accounts", reason: "index_out_of_range"),
        SolanaMalformedMessage(
            name: "a program index past the keys",
            payload: with(legacy()) { $0.instructions[0].program = 3 },
            field: "transaction.instructions[0].programIdIndex", reason: "index_out_of_range"),
        SolanaMalformedMessage(
            name: "a program loaded from a lookup table",
            payload: with(v0()) { $0.instructions[0].program = 2 },
            field: "transaction.instructions[0].programIdIndex", reason: "index_out_of_range"),
        SolanaMalformedMessage(
            name: "the fee payer called as a program",
            payload: with(legacy()) { $0.instructions[0].program = 0 },
            field: "transaction.instructions[0].programIdIndex", reason: "program_is_fee_payer"),
        SolanaMalformedMessage(
            name: "a key listed twice",
            payload: with(legacy()) { $0.keys[1] = walletKey },
            field: "transaction.accountKeys", reason: "duplicate_account"),
        SolanaMalformedMessage(
            name: "no signer", payload: with(legacy()) { $0.header = [0, 0, 1] },
            field: "transaction.header", reason: "no_required_signature"),
        SolanaMalformedMessage(
            name: "every signer read-only", payload: with(legacy()) { $0.header = [1, 1, 1] },
            field: "transaction.header", reason: "header_inconsistent"),
        SolanaMalformedMessage(
            name: "more signers and read-only keys than keys", payload: with(legacy()) { $0.header = [2, 0, 2] },
            field: "transaction.header", reason: "header_inconsistent"),
        SolanaMalformedMessage(
            name: "a lookup that loads nothing",
            payload: with(v0()) {
                $0.lookups[0] = .init(table: M.key(9), writable: [], readonly: [])
                $0.instructions[0].accounts = [0]
            },
            field: "transaction.addressTableLookups[0]", reason: "empty_lookup"),
        SolanaMalformedMessage(
            name: "a table entry loaded twice", payload: with(v0()) { $0.lookups[0].readonly = [0] },
            field: "transaction.addressTableLookups[0].readonlyIndexes", reason: "duplicate_account"),
        SolanaMalformedMessage(
            name: "more than 256 accounts",
            payload: with(v0()) { $0.lookups[0] = .init(table: M.key(9), writable: Array(0...254), readonly: [255]) },
            field: "transaction.addressTableLookups", reason: "too_many_accounts"),
        SolanaMalformedMessage(
            name: "version 1", payload: [0x81] + legacy().bytes,
            field: "transaction.version", reason: "message_version_not_supported"),
        SolanaMalformedMessage(
            name: "version 127", payload: [0xff] + legacy().bytes,
            field: "transaction.version", reason: "message_version_not_supported"),
        SolanaMalformedMessage(
            name: "a byte after the message", payload: legacy().bytes + [0],
            field: "transaction", reason: "trailing_bytes"),
        SolanaMalformedMessage(
            name: "a key count with a needless zero byte",
            payload: [1, 0, 1, 0x83, 0x00] + Array(legacy().bytes.dropFirst(4)),
            field: "transaction.accountKeys", reason: "non_canonical_compact_u16"),
        SolanaMalformedMessage(
            name: "a data length above 0xffff",
            payload: Array(legacy().bytes.dropLast(13)) + [0xff, 0xff, 0x04] + [2, 0, 0, 0] + M.u64(5),
            field: "transaction.instructions[0].data", reason: "compact_u16_overflow"),
        SolanaMalformedMessage(
            name: "a data length whose third byte continues",
            payload: Array(legacy().bytes.dropLast(13)) + [0x80, 0x80, 0x80, 0x01] + [2, 0, 0, 0] + M.u64(5),
            field: "transaction.instructions[0].data", reason: "compact_u16_overflow"),
        SolanaMalformedMessage(
            name: "a message above the packet size",
            payload: with(legacy()) { $0.instructions[0].data = [UInt8](repeating: 0x61, count: 1300) },
            field: "transaction", reason: "too_large"),
    ]

    @Test(arguments: malformed)
    func aMalformedMessageIsRefusedNamingItsField(_ message: SolanaMalformedMessage) throws {
        V.expectRefusal(V.transaction(message.payload), wallet: try V.wallet(), field: message.field, reason: message.reason)
    }

    @Test func theTwoMalformedShapesOfTheTableAreWellFormedWithoutTheirFlaw() throws {
        // So each refusal above comes from its flaw, not from the message it was made from.
        let wallet = try V.wallet()
        _ = try SolanaSigning.prepare(V.transaction(Self.legacy().bytes), wallet: wallet)
        _ = try SolanaSigning.prepare(V.transaction(Self.v0().bytes), wallet: wallet)
        // 2 static keys and 254 looked-up accounts: 256, the most one-byte indexes reach.
        let manyAccounts = Self.with(Self.v0()) {
            $0.lookups[0] = .init(table: M.key(9), writable: Array(0...252), readonly: [255])
        }
        _ = try SolanaSigning.prepare(V.transaction(manyAccounts), wallet: wallet)
    }

    @Test func aTransactionLargerThanThePacketWithItsSignaturesIsRefusedAndOneThatFitsIsNot() throws {
        let wallet = try V.wallet()
        // The message less its call's data and the data's length, which takes 2 bytes from 128 on.
        let base = Self.legacy().bytes.count - 13 + 2
        // One signature (64 bytes) and its count (1 byte) leave 1167 bytes for the message.
        let fits = Self.with(Self.legacy()) { $0.instructions[0].data = [UInt8](repeating: 0, count: 1167 - base) }
        #expect(fits.count == 1167)
        _ = try SolanaSigning.prepare(V.transaction(fits), wallet: wallet)
        let tooLarge = Self.with(Self.legacy()) { $0.instructions[0].data = [UInt8](repeating: 0, count: 1168 - base) }
        V.expectRefusal(V.transaction(tooLarge), wallet: wallet, field: "transaction", reason: "too_large")
    }

    @Test(arguments: [
        ("legacy", V.legacyMessage), ("co-signed", V.cosignedMessage), ("v0", V.v0Message), ("lookups", V.lookupsMessage),
    ])
    func everyPrefixOfAMessageIsRefusedAsTruncatedNamingAField(_ name: String, _ message: [UInt8]) throws {
        let wallet = try V.wallet()
        _ = try SolanaSigning.prepare(V.transaction(message), wallet: wallet)
        for length in 0..<message.count {
            do {
                _ = try SolanaSigning.prepare(V.transaction(Array(message.prefix(length))), wallet: wallet)
                Issue.record("\(name): \(length) bytes of \(message.count) were accepted")
            } catch {
                #expect(error.code == .invalidArgument, "\(name) at \(length)")
                #expect(error.details.reason == "truncated", "\(name) at \(length): \(error.message)")
                #expect(error.details.field?.hasPrefix("transaction.") == true, "\(name) at \(length)")
            }
        }
    }

    @Test func aWalletThatIsInTheMessageButNotASignerIsRefused() throws {
        // Bob is the transfer's recipient: a key of the message, not a signer.
        let bob = try Ed25519PrivateKey(rawRepresentation: [UInt8](repeating: 3, count: 32)).publicKey.rawRepresentation
        #expect(Base58.encode(bob) == V.bobAddress)
        V.expectRefusal(
            V.transaction(V.legacyMessage), wallet: SigningWallet(ethereumAddress: [], solanaPublicKey: bob), field: "from",
            reason: "not_a_signer")
        let stranger = try Ed25519PrivateKey(rawRepresentation: [UInt8](repeating: 99, count: 32)).publicKey.rawRepresentation
        V.expectRefusal(
            V.transaction(V.legacyMessage), wallet: SigningWallet(ethereumAddress: [], solanaPublicKey: stranger),
            field: "from", reason: "not_a_signer")
    }

    @Test func aFromThatIsNotTheWalletIsRefused() throws {
        let wallet = try V.wallet()
        V.expectRefusal(
            V.transaction(V.legacyMessage, from: V.bobAddress), wallet: wallet, field: "from", reason: "from_mismatch")
        V.expectRefusal(
            V.transaction(V.legacyMessage, from: V.walletAddress.lowercased()), wallet: wallet, field: "from",
            reason: "from_mismatch")
        _ = try SolanaSigning.prepare(V.transaction(V.legacyMessage, from: V.walletAddress), wallet: wallet)
    }

    @Test func requestsThatAreNotSolanaOrNotForThisKeyAreRefused() throws {
        let wallet = try V.wallet()
        V.expectRefusal(
            SigningRequest(kind: .transaction, chain: .ethereum, payload: V.legacyMessage), wallet: wallet, field: "chain",
            reason: "not_solana")
        V.expectRefusal(
            SigningRequest(kind: .typedData, chain: .solana, payload: Array("{}".utf8)), wallet: wallet, field: "kind",
            reason: "kind_not_supported")
        V.expectRefusal(
            V.transaction(V.legacyMessage), wallet: SigningWallet(ethereumAddress: [], solanaPublicKey: [1, 2, 3]),
            field: "wallet.solanaPublicKey", reason: "invalid_length")
    }
}
