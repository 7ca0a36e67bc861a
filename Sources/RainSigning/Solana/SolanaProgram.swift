import RainCrypto

/// The programs the prompt names, by their fixed program ids.
enum SolanaProgram: Sendable, Equatable, CaseIterable {
    /// The System Program: SOL transfers, account creation.
    case system
    /// The SPL Token program.
    case splToken
    /// The Token-2022 program (SPL Token with extensions; the same instructions for transfers
    /// and approvals).
    case token2022
    /// The Associated Token Account program.
    case associatedTokenAccount
    /// The Compute Budget program: compute unit limit and price (the priority fee).
    case computeBudget
    /// The Memo program, versions 1 and 2.
    case memo
    /// The Address Lookup Table program.
    case addressLookupTable

    /// The program ids in base58, as the programs' own crates declare them.
    static let ids: [String: SolanaProgram] = [
        "11111111111111111111111111111111": .system,
        "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA": .splToken,
        "TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb": .token2022,
        "ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL": .associatedTokenAccount,
        "ComputeBudget111111111111111111111111111111": .computeBudget,
        "MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr": .memo,
        "Memo1UhkJRfHyvLMcVucJwxXeuD728EqVDDwQDxFMNo": .memo,
        "AddressLookupTab1e1111111111111111111111111": .addressLookupTable,
    ]

    /// The program whose id is `key`, if the prompt knows it.
    init?(key: [UInt8]) {
        guard let program = Self.ids[Base58.encode(key)] else { return nil }
        self = program
    }

    /// The name the prompt shows.
    var name: String {
        switch self {
        case .system: "System Program"
        case .splToken: "SPL Token"
        case .token2022: "Token-2022"
        case .associatedTokenAccount: "Associated Token Account"
        case .computeBudget: "Compute Budget"
        case .memo: "Memo"
        case .addressLookupTable: "Address Lookup Table"
        }
    }
}
