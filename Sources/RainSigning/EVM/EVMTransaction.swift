import RainCore
import RainCrypto

/// An unsigned EVM transaction decoded from the bytes the key signs: type 2 (EIP-1559), type 1
/// (EIP-2930) or legacy in its EIP-155 signing form.
///
/// Each field is checked against its type as the node would, so what the summary shows is what
/// the chain executes; the decoded RLP fields are kept so the signed form re-encodes them as they
/// came (strict decoding makes that the same bytes).
struct EVMTransaction: Sendable {
    /// The envelope.
    enum Format: Sendable, Equatable {
        /// `rlp([nonce, gasPrice, gasLimit, to, value, data, chainId, 0, 0])`, signed with EIP-155.
        case legacy
        /// `0x01 || rlp([chainId, nonce, gasPrice, gasLimit, to, value, data, accessList])`.
        case accessList
        /// `0x02 || rlp([chainId, nonce, maxPriorityFeePerGas, maxFeePerGas, gasLimit, to, value,
        /// data, accessList])`.
        case feeMarket

        /// What the summary calls it.
        var label: String {
            switch self {
            case .legacy: "legacy (EIP-155)"
            case .accessList: "type 1 (EIP-2930 access list)"
            case .feeMarket: "type 2 (EIP-1559)"
            }
        }
    }

    /// An access list entry: an address and the storage keys the transaction declares it touches.
    struct AccessListEntry: Sendable, Equatable {
        /// 20 bytes.
        var address: [UInt8]
        /// 32 bytes each.
        var storageKeys: [[UInt8]]
    }

    /// The largest transaction accepted, the limit geth's transaction pool applies
    /// (`txMaxSize`, 4 slots of 32 KiB): a larger one would not be relayed anyway.
    static let maximumSize = 128 * 1024

    var format: Format
    var chainID: UInt64
    var nonce: UInt64
    /// Type 2 only.
    var maxPriorityFeePerGas: UInt256?
    /// `maxFeePerGas` (type 2) or `gasPrice` (type 1, legacy): what each unit of gas costs at most.
    var feePerGas: UInt256
    var gasLimit: UInt64
    /// 20 bytes, or `nil` for a contract creation.
    var to: [UInt8]?
    var value: UInt256
    var data: [UInt8]
    var accessList: [AccessListEntry]
    /// The fields that are signed, as decoded: all of them for typed transactions, the first six
    /// for legacy (EIP-155's chainId, 0, 0 are replaced by v, r, s).
    private var signedFields: [RLP.Item]

    /// The request field holding the per-gas fee.
    var feeField: String { format == .feeMarket ? "transaction.maxFeePerGas" : "transaction.gasPrice" }

    /// gasLimit × feePerGas: the most the transaction can cost in fees, in the native unit's
    /// smallest denomination. Checked not to overflow when the transaction is decoded.
    var maximumFee: UInt256 { feePerGas.multipliedReportingOverflow(by: UInt256(gasLimit)).partialValue }

    /// Decodes and checks an unsigned transaction.
    /// - Parameter payload: the bytes the request carries.
    /// - Throws: RAIN_102 (`transaction`: `too_large`, `truncated`, `trailing_bytes`,
    ///   `non_canonical_rlp`, `malformed_rlp`, `too_deep`, `transaction_type_not_supported`,
    ///   `pre_eip155_transaction`, `wrong_field_count`, `not_a_transaction`; a field such as
    ///   `transaction.nonce`: `non_canonical_integer`, `expected_integer`, `expected_bytes`,
    ///   `invalid_address`, `malformed_access_list`, `signed_transaction`,
    ///   `priority_fee_above_max_fee`), RAIN_406 (a field: `out_of_range`) for an integer longer
    ///   than 32 bytes, a nonce or gas limit above 2^64 - 1, or a maximum fee above 2^256 - 1.
    ///   The chain id is not checked against the supported chains here.
    init(decoding payload: [UInt8]) throws(RainError) {
        guard payload.count <= Self.maximumSize else {
            throw RainError.invalid(
                "the transaction is \(payload.count) bytes; nodes relay at most \(Self.maximumSize), so send a smaller one",
                field: "transaction", reason: "too_large")
        }
        guard let first = payload.first else {
            throw RainError.invalid(
                "the transaction is empty; send the unsigned transaction's bytes", field: "transaction", reason: "truncated")
        }
        switch first {
        case 0x02: try self.init(typed: .feeMarket, body: Array(payload.dropFirst()))
        case 0x01: try self.init(typed: .accessList, body: Array(payload.dropFirst()))
        case 0xC0...0xFF: try self.init(legacy: payload)
        case 0x03:
            throw Self.unsupportedType(first, "blob transactions (EIP-4844) are not signed by this wallet")
        case 0x04:
            throw Self.unsupportedType(first, "set-code transactions (EIP-7702) can hand the account to a contract")
        case 0x00..<0x80:
            throw Self.unsupportedType(first, "this wallet signs types 2 and 1 and legacy EIP-155 transactions")
        default:
            throw RainError.invalid(
                "the transaction starts with an RLP string, not a type byte or a list; send an unsigned transaction",
                field: "transaction", reason: "not_a_transaction")
        }
    }

    private static func unsupportedType(_ type: UInt8, _ why: String) -> RainError {
        RainError.invalid(
            "transaction type \(type) is not supported: \(why); send a type 2, type 1 or legacy EIP-155 transaction",
            field: "transaction", reason: "transaction_type_not_supported")
    }

    private init(typed format: Format, body: [UInt8]) throws(RainError) {
        let fields = try Self.fields(of: RLP.decode(body, field: "transaction"))
        let expected = format == .feeMarket ? 9 : 8
        guard fields.count == expected else {
            // A signed typed transaction has three more fields: yParity, r and s.
            let signed = fields.count == expected + 3 ? " (this looks like a signed transaction)" : ""
            throw RainError.invalid(
                "a type \(format == .feeMarket ? 2 : 1) transaction has \(expected) fields, this one \(fields.count)\(signed); "
                    + "send the unsigned transaction", field: "transaction", reason: "wrong_field_count")
        }
        chainID = try Self.chainID(fields[0], field: "transaction.chainId")
        nonce = try Self.uint64(fields[1], field: "transaction.nonce")
        var next = 2
        if format == .feeMarket {
            let priority = try Self.integer(fields[2], field: "transaction.maxPriorityFeePerGas")
            let maximum = try Self.integer(fields[3], field: "transaction.maxFeePerGas")
            guard priority <= maximum else {
                throw RainError.invalid(
                    "maxPriorityFeePerGas (\(priority) wei) is above maxFeePerGas (\(maximum) wei), which nodes refuse; "
                        + "ask the app for a transaction whose priority fee is at most its max fee",
                    field: "transaction.maxPriorityFeePerGas", reason: "priority_fee_above_max_fee")
            }
            maxPriorityFeePerGas = priority
            feePerGas = maximum
            next = 4
        } else {
            maxPriorityFeePerGas = nil
            feePerGas = try Self.integer(fields[2], field: "transaction.gasPrice")
            next = 3
        }
        gasLimit = try Self.uint64(fields[next], field: "transaction.gasLimit")
        to = try Self.recipient(fields[next + 1])
        value = try Self.integer(fields[next + 2], field: "transaction.value")
        data = try Self.bytes(fields[next + 3], field: "transaction.data")
        accessList = try Self.accessList(fields[next + 4])
        self.format = format
        signedFields = fields
        try checkMaximumFee()
    }

    private init(legacy payload: [UInt8]) throws(RainError) {
        let fields = try Self.fields(of: RLP.decode(payload, field: "transaction"))
        guard fields.count != 6 else {
            throw RainError.invalid(
                "this legacy transaction has no chain id (before EIP-155), so it could be replayed on any chain; "
                    + "send it with its chain id (EIP-155) or as a type 2 transaction",
                field: "transaction", reason: "pre_eip155_transaction")
        }
        guard fields.count == 9 else {
            throw RainError.invalid(
                "a legacy transaction's EIP-155 signing form has 9 fields, this one \(fields.count); "
                    + "send rlp([nonce, gasPrice, gasLimit, to, value, data, chainId, 0, 0])",
                field: "transaction", reason: "wrong_field_count")
        }
        nonce = try Self.uint64(fields[0], field: "transaction.nonce")
        feePerGas = try Self.integer(fields[1], field: "transaction.gasPrice")
        maxPriorityFeePerGas = nil
        gasLimit = try Self.uint64(fields[2], field: "transaction.gasLimit")
        to = try Self.recipient(fields[3])
        value = try Self.integer(fields[4], field: "transaction.value")
        data = try Self.bytes(fields[5], field: "transaction.data")
        chainID = try Self.chainID(fields[6], field: "transaction.chainId")
        for (index, name) in [(7, "r"), (8, "s")] {
            if try Self.integer(fields[index], field: "transaction.\(name)").isZero { continue }
            throw RainError.invalid(
                "the legacy transaction's \(name) is not 0, so it is not the EIP-155 signing form (it may be signed); "
                    + "send the unsigned rlp([..., chainId, 0, 0])", field: "transaction.\(name)", reason: "signed_transaction")
        }
        accessList = []
        format = .legacy
        signedFields = Array(fields[0..<6])
        try checkMaximumFee()
    }

    private func checkMaximumFee() throws(RainError) {
        guard !feePerGas.multipliedReportingOverflow(by: UInt256(gasLimit)).overflow else {
            throw RainError(
                .invalidAmount,
                "gasLimit × \(feeField.dropFirst("transaction.".count)) exceeds 2^256 - 1 wei; no chain accepts such a fee, "
                    + "ask the app for a real fee", details: RainError.Details(reason: "out_of_range", field: feeField))
        }
    }

    /// The signed raw transaction, as nodes accept it (`eth_sendRawTransaction`).
    /// - Parameter signature: r and s (32 bytes each) and the recovery id (0 or 1), checked by
    ///   the caller.
    /// - Returns: type 2/1: `type || rlp([...fields, yParity, r, s])`; legacy:
    ///   `rlp([nonce, gasPrice, gasLimit, to, value, data, v, r, s])` with v = chainId × 2 + 35 +
    ///   recovery id (EIP-155).
    func signed(with signature: RecoverableSignature) -> [UInt8] {
        let r = RLP.integer(UInt256(bigEndian: signature.r) ?? .zero)
        let s = RLP.integer(UInt256(bigEndian: signature.s) ?? .zero)
        let recoveryID = UInt256(UInt64(signature.recoveryID))
        switch format {
        case .legacy:
            // chainId × 2 + 35 + recovery id cannot overflow 256 bits for a 64-bit chain id.
            let doubled = UInt256(chainID).multipliedReportingOverflow(by: UInt256(2)).partialValue
            let v = doubled.addingReportingOverflow(UInt256(35)).partialValue.addingReportingOverflow(recoveryID).partialValue
            return RLP.encode(.list(signedFields + [RLP.integer(v), r, s]))
        case .accessList, .feeMarket:
            let type: UInt8 = format == .feeMarket ? 0x02 : 0x01
            return [type] + RLP.encode(.list(signedFields + [RLP.integer(recoveryID), r, s]))
        }
    }

    // MARK: Fields

    private static func fields(of item: RLP.Item) throws(RainError) -> [RLP.Item] {
        guard case .list(let fields) = item else {
            throw RainError.invalid(
                "the transaction's body is an RLP string, not a list of fields; send an unsigned transaction",
                field: "transaction", reason: "not_a_transaction")
        }
        return fields
    }

    /// An RLP integer: big-endian, no leading zeros, at most 32 bytes (a uint256).
    static func integer(_ item: RLP.Item, field: String) throws(RainError) -> UInt256 {
        guard case .bytes(let bytes) = item else {
            throw RainError.invalid("\(field) is a list; send an integer", field: field, reason: "expected_integer")
        }
        guard bytes.first != 0 else {
            throw RainError.invalid(
                "\(field) has leading zero bytes, which RLP integers never carry (zero is the empty string); "
                    + "send the canonical encoding", field: field, reason: "non_canonical_integer")
        }
        guard let value = UInt256(bigEndian: bytes) else {
            throw RainError(
                .invalidAmount, "\(field) is \(bytes.count) bytes long, more than a 256-bit integer holds; send a uint256",
                details: RainError.Details(reason: "out_of_range", field: field))
        }
        return value
    }

    /// An integer the protocol bounds to 64 bits: the nonce (EIP-2681) and the gas limit.
    private static func uint64(_ item: RLP.Item, field: String) throws(RainError) -> UInt64 {
        guard let value = try integer(item, field: field).uint64 else {
            throw RainError(
                .invalidAmount, "\(field) is above 2^64 - 1, which no node accepts; send a 64-bit value",
                details: RainError.Details(reason: "out_of_range", field: field))
        }
        return value
    }

    /// A chain id above 64 bits is no chain the wallet supports.
    private static func chainID(_ item: RLP.Item, field: String) throws(RainError) -> UInt64 {
        let value = try integer(item, field: field)
        guard let id = value.uint64 else {
            throw RainError(
                .chainNotSupported, "chain id \(value) is not supported; the wallet signs for the chains of its table",
                details: RainError.Details(reason: "chain_not_supported", field: field))
        }
        return id
    }

    private static func bytes(_ item: RLP.Item, field: String) throws(RainError) -> [UInt8] {
        guard case .bytes(let bytes) = item else {
            throw RainError.invalid("\(field) is a list; send a byte string", field: field, reason: "expected_bytes")
        }
        return bytes
    }

    private static func recipient(_ item: RLP.Item) throws(RainError) -> [UInt8]? {
        guard case .bytes(let bytes) = item, bytes.isEmpty || bytes.count == 20 else {
            throw RainError.invalid(
                "transaction.to must be 20 bytes, or empty to create a contract; send a valid recipient",
                field: "transaction.to", reason: "invalid_address")
        }
        return bytes.isEmpty ? nil : bytes
    }

    private static func accessList(_ item: RLP.Item) throws(RainError) -> [AccessListEntry] {
        guard case .list(let entries) = item else {
            throw malformedAccessList("transaction.accessList", "is a byte string; send a list of [address, [storageKeys]]")
        }
        var result: [AccessListEntry] = []
        for (index, entry) in entries.enumerated() {
            let field = "transaction.accessList[\(index)]"
            guard case .list(let parts) = entry, parts.count == 2 else {
                throw malformedAccessList(field, "is not a pair [address, [storageKeys]]")
            }
            guard case .bytes(let address) = parts[0], address.count == 20 else {
                throw malformedAccessList(field + ".address", "is not 20 bytes")
            }
            guard case .list(let keys) = parts[1] else {
                throw malformedAccessList(field + ".storageKeys", "is not a list")
            }
            var storageKeys: [[UInt8]] = []
            for (keyIndex, key) in keys.enumerated() {
                guard case .bytes(let bytes) = key, bytes.count == 32 else {
                    throw malformedAccessList(field + ".storageKeys[\(keyIndex)]", "is not 32 bytes")
                }
                storageKeys.append(bytes)
            }
            result.append(AccessListEntry(address: address, storageKeys: storageKeys))
        }
        return result
    }

    private static func malformedAccessList(_ field: String, _ problem: String) -> RainError {
        RainError.invalid(
            "\(field) \(problem); send an access list of [20-byte address, [32-byte storage keys]] entries",
            field: field, reason: "malformed_access_list")
    }
}
