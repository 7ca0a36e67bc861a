import RainCore
import RainCrypto

/// A Solana message (the part of a transaction that is signed), legacy or version 0, decoded
/// from its wire bytes as `solders.message.Message.__bytes__()` and `to_bytes_versioned`
/// write them.
///
/// Legacy: header (3 bytes), compact-u16 count + 32-byte account keys, 32-byte recent blockhash,
/// compact-u16 count + instructions (program id index u8, compact-u16 count + account index u8s,
/// compact-u16 length + data). Version 0: the byte 0x80, the same, then compact-u16 count +
/// address table lookups (32-byte table key, compact-u16 count + writable indexes, compact-u16
/// count + read-only indexes).
struct SolanaMessage: Sendable, Equatable {
    /// The message format.
    enum Version: Sendable, Equatable {
        /// No version prefix, no address table lookups.
        case legacy
        /// Version 0: address table lookups follow the instructions.
        case v0
    }

    /// How many keys sign and which are read-only.
    struct Header: Sendable, Equatable {
        /// The first keys that must sign; the first of them pays the fee.
        var numRequiredSignatures: Int
        /// The last of the signing keys that are read-only.
        var numReadonlySignedAccounts: Int
        /// The last of the other static keys that are read-only.
        var numReadonlyUnsignedAccounts: Int
    }

    /// One call, with indexes into the message's accounts.
    struct Instruction: Sendable, Equatable {
        /// The program's index in the static account keys.
        var programIDIndex: Int
        /// The accounts' indexes: static keys, then accounts loaded from lookup tables.
        var accounts: [Int]
        /// The program's input.
        var data: [UInt8]
    }

    /// Accounts a version 0 message loads from an on-chain address lookup table.
    struct AddressTableLookup: Sendable, Equatable {
        /// The table's address.
        var tableKey: [UInt8]
        /// Indexes in the table of accounts loaded writable.
        var writableIndexes: [UInt8]
        /// Indexes in the table of accounts loaded read-only.
        var readonlyIndexes: [UInt8]
    }

    /// Where an account index points.
    enum Account: Sendable, Equatable {
        /// A key written in the message.
        case key([UInt8])
        /// An entry of a lookup table, which only the chain can resolve.
        case lookedUp(table: [UInt8], index: UInt8)
    }

    /// The field prefix of every refusal.
    static let field = "transaction"

    /// The format.
    var version: Version
    /// The header.
    var header: Header
    /// The static account keys, 32 bytes each; the first is the fee payer.
    var accountKeys: [[UInt8]]
    /// The recent blockhash (or durable nonce), 32 bytes.
    var recentBlockhash: [UInt8]
    /// The calls, in order.
    var instructions: [Instruction]
    /// Version 0's lookups; empty for legacy messages.
    var addressTableLookups: [AddressTableLookup]

    /// Reads the layout only, from the reader's position: no rule beyond the fields' sizes.
    /// - Throws: RAIN_102 naming the field, with reason `truncated`, `non_canonical_compact_u16`,
    ///   `compact_u16_overflow` or `message_version_not_supported`.
    static func parse(_ reader: inout SolanaByteReader) throws(RainError) -> SolanaMessage {
        let first = try reader.byte("\(field).header")
        var version = Version.legacy
        var numRequiredSignatures = first
        // A legacy message's first byte is its signer count, below 128; the high bit marks a
        // versioned message, the low bits its version.
        if first & 0x80 != 0 {
            guard first & 0x7f == 0 else {
                throw RainError.invalid(
                    "the message is version \(first & 0x7f); the wallet signs legacy and version 0 messages",
                    field: "\(field).version", reason: "message_version_not_supported")
            }
            version = .v0
            numRequiredSignatures = try reader.byte("\(field).header")
        }
        let header = Header(
            numRequiredSignatures: Int(numRequiredSignatures),
            numReadonlySignedAccounts: Int(try reader.byte("\(field).header")),
            numReadonlyUnsignedAccounts: Int(try reader.byte("\(field).header")))

        let keyCount = try reader.count(ofItemsOfAtLeast: 32, "\(field).accountKeys")
        var accountKeys: [[UInt8]] = []
        accountKeys.reserveCapacity(keyCount)
        for _ in 0..<keyCount { accountKeys.append(try reader.bytes(32, "\(field).accountKeys")) }
        let recentBlockhash = try reader.bytes(32, "\(field).recentBlockhash")

        // An instruction is at least 3 bytes: program index, empty account list, empty data.
        let instructionCount = try reader.count(ofItemsOfAtLeast: 3, "\(field).instructions")
        var instructions: [Instruction] = []
        instructions.reserveCapacity(instructionCount)
        for index in 0..<instructionCount {
            let name = "\(field).instructions[\(index)]"
            let programIDIndex = Int(try reader.byte("\(name).programIdIndex"))
            let accountCount = try reader.count(ofItemsOfAtLeast: 1, "\(name).accounts")
            let accounts = try reader.bytes(accountCount, "\(name).accounts").map(Int.init)
            let dataCount = try reader.count(ofItemsOfAtLeast: 1, "\(name).data")
            let data = try reader.bytes(dataCount, "\(name).data")
            instructions.append(Instruction(programIDIndex: programIDIndex, accounts: accounts, data: data))
        }

        var lookups: [AddressTableLookup] = []
        if version == .v0 {
            // A lookup is at least 34 bytes: the table key and two empty index lists.
            let lookupCount = try reader.count(ofItemsOfAtLeast: 34, "\(field).addressTableLookups")
            lookups.reserveCapacity(lookupCount)
            for index in 0..<lookupCount {
                let name = "\(field).addressTableLookups[\(index)]"
                let tableKey = try reader.bytes(32, "\(name).accountKey")
                let writableCount = try reader.count(ofItemsOfAtLeast: 1, "\(name).writableIndexes")
                let writable = try reader.bytes(writableCount, "\(name).writableIndexes")
                let readonlyCount = try reader.count(ofItemsOfAtLeast: 1, "\(name).readonlyIndexes")
                let readonly = try reader.bytes(readonlyCount, "\(name).readonlyIndexes")
                lookups.append(AddressTableLookup(tableKey: tableKey, writableIndexes: writable, readonlyIndexes: readonly))
            }
        }
        return SolanaMessage(
            version: version, header: header, accountKeys: accountKeys, recentBlockhash: recentBlockhash,
            instructions: instructions, addressTableLookups: lookups)
    }

    /// True when `bytes` are exactly a message's layout, or a serialized transaction's (a
    /// compact-u16 signature count, 64 bytes each, then a message), whatever its values: an
    /// off-chain message must never be something a validator would read as a transaction.
    static func isTransactionLayout(_ bytes: [UInt8]) -> Bool {
        if parsesExactly(SolanaByteReader(bytes)) { return true }
        var reader = SolanaByteReader(bytes)
        guard let signatureCount = try? reader.count(ofItemsOfAtLeast: 64, "signatures") else { return false }
        return parsesExactly(SolanaByteReader(bytes, offset: reader.offset + 64 * signatureCount))
    }

    private static func parsesExactly(_ start: SolanaByteReader) -> Bool {
        var reader = start
        guard (try? parse(&reader)) != nil else { return false }
        return reader.remaining == 0
    }

    /// The accounts loaded from lookup tables, in the order their indexes follow the static keys:
    /// every table's writable entries first, then every table's read-only entries, as the
    /// runtime's `LoadedAddresses` orders them.
    var lookedUpAccounts: [Account] {
        addressTableLookups.flatMap { lookup in lookup.writableIndexes.map { Account.lookedUp(table: lookup.tableKey, index: $0) }
        }
            + addressTableLookups.flatMap { lookup in
                lookup.readonlyIndexes.map { Account.lookedUp(table: lookup.tableKey, index: $0) }
            }
    }

    /// The static keys followed by the looked-up accounts.
    var accountCount: Int {
        accountKeys.count + addressTableLookups.reduce(0) { $0 + $1.writableIndexes.count + $1.readonlyIndexes.count }
    }

    /// The account at `index` (static keys first, then ``lookedUpAccounts``), or nil past the end.
    func account(at index: Int) -> Account? {
        if index < accountKeys.count { return .key(accountKeys[index]) }
        let loaded = lookedUpAccounts
        let position = index - accountKeys.count
        return position < loaded.count ? loaded[position] : nil
    }

    /// True when the account at `index` is loaded writable, by the header's rule for static keys
    /// and the lookup list it came from for the others.
    func isWritable(_ index: Int) -> Bool {
        let signers = header.numRequiredSignatures
        if index < signers { return index < signers - header.numReadonlySignedAccounts }
        if index < accountKeys.count { return index < accountKeys.count - header.numReadonlyUnsignedAccounts }
        let writableLoaded = addressTableLookups.reduce(0) { $0 + $1.writableIndexes.count }
        return index < accountKeys.count + writableLoaded
    }

    /// The rules solana-program's `Message::sanitize` and `v0::Message::sanitize` apply, plus
    /// the runtime's refusal of an account loaded twice: a message that breaks one never runs, so
    /// the wallet refuses to show or sign it.
    /// - Throws: RAIN_102 naming the field, with reason `no_required_signature`,
    ///   `header_inconsistent`, `duplicate_account`, `empty_lookup`, `too_many_accounts`,
    ///   `index_out_of_range` or `program_is_fee_payer`.
    func validate() throws(RainError) {
        let field = Self.field
        guard header.numRequiredSignatures >= 1 else {
            throw RainError.invalid(
                "the message names no signer: at least the fee payer must sign", field: "\(field).header",
                reason: "no_required_signature")
        }
        guard header.numReadonlySignedAccounts < header.numRequiredSignatures else {
            throw RainError.invalid(
                "the header makes every signer read-only: the fee payer must be writable", field: "\(field).header",
                reason: "header_inconsistent")
        }
        guard header.numRequiredSignatures + header.numReadonlyUnsignedAccounts <= accountKeys.count else {
            throw RainError.invalid(
                """
                the header counts \(header.numRequiredSignatures) signers and \(header.numReadonlyUnsignedAccounts) \
                read-only unsigned accounts but the message has \(accountKeys.count) keys
                """, field: "\(field).header", reason: "header_inconsistent")
        }
        var seenKeys = Set<[UInt8]>()
        for key in accountKeys where !seenKeys.insert(key).inserted {
            throw RainError.invalid(
                "the account \(Base58.encode(key)) is listed twice: each key appears once", field: "\(field).accountKeys",
                reason: "duplicate_account")
        }

        var seenEntries = Set<[UInt8]>()
        for (index, lookup) in addressTableLookups.enumerated() {
            let name = "\(field).addressTableLookups[\(index)]"
            guard !lookup.writableIndexes.isEmpty || !lookup.readonlyIndexes.isEmpty else {
                throw RainError.invalid(
                    "the lookup of table \(Base58.encode(lookup.tableKey)) loads no account", field: name,
                    reason: "empty_lookup")
            }
            for (list, entries) in [("writableIndexes", lookup.writableIndexes), ("readonlyIndexes", lookup.readonlyIndexes)] {
                for entry in entries where !seenEntries.insert(lookup.tableKey + [entry]).inserted {
                    throw RainError.invalid(
                        "entry \(entry) of table \(Base58.encode(lookup.tableKey)) is loaded twice", field: "\(name).\(list)",
                        reason: "duplicate_account")
                }
            }
        }
        // Account indexes are one byte each.
        guard accountCount <= 256 else {
            throw RainError.invalid(
                "the message loads \(accountCount) accounts; an index reaches 256 at most",
                field: "\(field).addressTableLookups", reason: "too_many_accounts")
        }

        for (index, instruction) in instructions.enumerated() {
            let name = "\(field).instructions[\(index)]"
            // Programs must be static keys so what runs can be read without the chain's tables.
            guard instruction.programIDIndex < accountKeys.count else {
                throw RainError.invalid(
                    "instruction \(index) names program \(instruction.programIDIndex) but the message has \(accountKeys.count) static keys",
                    field: "\(name).programIdIndex", reason: "index_out_of_range")
            }
            guard instruction.programIDIndex != 0 else {
                throw RainError.invalid(
                    "instruction \(index) calls the fee payer as a program", field: "\(name).programIdIndex",
                    reason: "program_is_fee_payer")
            }
            for account in instruction.accounts where account >= accountCount {
                throw RainError.invalid(
                    "instruction \(index) names account \(account) but the message has \(accountCount) accounts",
                    field: "\(name).accounts", reason: "index_out_of_range")
            }
        }
    }
}

extension SolanaMessage {
    /// Decodes and checks a message: layout, no trailing bytes, then the rules the chain's
    /// sanitizer applies (``validate()``).
    /// - Throws: RAIN_102 naming the field (`transaction.accountKeys`,
    ///   `transaction.instructions[2].accounts`, ...) and a reason.
    init(decoding bytes: [UInt8]) throws(RainError) {
        var reader = SolanaByteReader(bytes)
        self = try Self.parse(&reader)
        guard reader.remaining == 0 else {
            throw RainError.invalid(
                "the message has \(reader.remaining) bytes after its last field: send the message alone",
                field: Self.field, reason: "trailing_bytes")
        }
        try validate()
    }
}
