import FoundationEssentials
import Glibc
import RainCommandLine
import RainCore
import RainWallet

/// `rainwallet sign message|typed-data|tx`: the wallet signs what the user confirms on the
/// daemon's prompt; the key never leaves the authority.
enum SignCommand: CLICommand {
    static let declaration = Command(
        name: "sign", abstract: "sign a message, typed data or a transaction with the wallet (confirmed on the prompt)")
    static var subcommands: [any CLICommand.Type] { [SignMessageCommand.self, SignTypedDataCommand.self, SignTxCommand.self] }

    static let input = Command.Argument(
        "FILE", help: "the file to read; - or nothing: standard input", isOptional: true, kind: .file)
    static let chain = Command.Option(
        "--chain", value: "CHAIN", help: "ethereum (any EVM chain) or solana",
        kind: .choice(RainChain.allCases.map(\.rawValue), isCaseSensitive: false), default: .value("ethereum"))
    static let chainID = Command.Option(
        "--chain-id", value: "ID",
        help: "the EVM chain id: 1, 10, 137, 8453, 42161, 11155111 or 84532 (a transaction needs it)",
        kind: .integer(1...Int(Int32.max)))
    static let cluster = Command.Option(
        "--cluster", value: "NAME", help: "Solana: the cluster to show as claimed (mainnet-beta, devnet, …)")
    static let from = Command.Option(
        "--from", value: "ADDRESS", help: "the address you expect to sign with; another wallet's is refused (exit 3)")
    static let idempotencyKey = Command.Option(
        "--idempotency-key", value: "HEX",
        help: "16 to 64 random bytes in hex, the same for every try of one signature: a repeat answers the same signature")

    static let prompt = """
        The daemon shows what is signed, decoded from the bytes themselves, on its prompt (in pages
        for a long request), and signs only once you typed its code there. Nothing is broadcast.
        """

    static let exitStatuses: [Command.ExitStatus] = [
        .init(3, "malformed input; the message names the field (RAIN_102)"),
        .init(4, "no live session (RAIN_201)"),
        .init(9, "refused on the prompt (RAIN_401)"),
        .init(11, "the answer was lost: the outcome is unknown; repeat with the same --idempotency-key (RAIN_501)"),
        .init(12, "the chain is not supported (RAIN_104)"),
        .init(13, "an amount outside its type's range (RAIN_406)"),
    ]

    static let result = Command.JSONOutput(
        .object,
        [
            .init("address", "the address that signed"),
            .init("signature", "0x-hex: EVM r || s || v (65 bytes), Solana Ed25519 (64 bytes)"),
            .init("signedBytesSha256", "0x-hex SHA-256 of the bytes signed, as the prompt showed it"),
        ])

    /// The bytes of `FILE` or standard input.
    /// - Throws: a usage error when the file cannot be read.
    static func read(_ parsed: ParsedCommand) throws -> Data {
        let path = parsed.argument("FILE") ?? "-"
        if path == "-" { return readStandardInput() }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw UsageError("cannot read \(path): no such file, or not readable", word: path)
        }
        return data
    }

    /// Hex text (with or without 0x, surrounding white space ignored) as bytes.
    /// - Throws: RAIN_102 naming `field` when it is not hex.
    static func hexBytes(_ text: String, field: String) throws -> Data {
        var digits = text.trimmingWhitespaceAndNewlines()
        if digits.hasPrefix("0x") || digits.hasPrefix("0X") { digits.removeFirst(2) }
        guard let bytes = Hex.decode(digits) else {
            throw RainError.invalid("\(field) is not hex: give an even number of hex digits, 0x optional", field: field)
        }
        return Data(bytes)
    }

    static func hex(_ data: Data) -> String { "0x" + Hex.encode(Array(data)) }

    static func key(_ parsed: ParsedCommand) throws -> Data? {
        try parsed.value("--idempotency-key").map { try hexBytes($0, field: "idempotencyKey") }
    }

    static func chain(_ parsed: ParsedCommand, message: Bool) throws -> SigningChain {
        let name = (parsed.value("--chain") ?? "ethereum").lowercased()
        if name == "solana" { return .solana(cluster: parsed.value("--cluster")) }
        if let id = parsed.integer("--chain-id") { return .evm(chainID: UInt64(id)) }
        if message { return .anyEVM }
        throw UsageError("an EVM transaction needs --chain-id (1 Ethereum, 8453 Base, …)", word: "--chain-id")
    }

    static func print(_ signature: WalletSignature, _ output: Output) {
        output.result(
            json: [
                "address": signature.address, "signature": hex(signature.signature),
                "signedBytesSha256": hex(signature.signedBytesSHA256),
            ],
            text: "Signed by \(signature.address)\nSignature: \(hex(signature.signature))")
    }

    /// Everything on standard input, up to its end (what `FileHandle.standardInput` read).
    private static func readStandardInput() -> Data {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(0, $0.baseAddress, $0.count) }
            if count > 0 {
                data.append(contentsOf: buffer[..<count])
            } else if count < 0 && errno == EINTR {
                continue
            } else {
                return data
            }
        }
    }
}

enum SignMessageCommand: CLICommand {
    static let declaration = Command(
        name: "message", abstract: "sign a message: EVM personal_sign, or a Solana off-chain message",
        discussion: """
            Signs the bytes of FILE (or standard input) as they are: EVM personal_sign (EIP-191), or
            with --chain solana a Solana off-chain message (text only; bytes that are a transaction are
            refused). --hex reads hex text instead. The signature is printed in hex.

            \(SignCommand.prompt)
            """,
        arguments: [SignCommand.input],
        options: [
            SignCommand.chain, SignCommand.chainID, SignCommand.cluster,
            .flag("--hex", help: "the input is hex text (0x optional), not the message itself"), SignCommand.from,
            SignCommand.idempotencyKey,
        ],
        json: SignCommand.result, exitStatuses: SignCommand.exitStatuses)

    static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
        var message = try SignCommand.read(parsed)
        if parsed.flag("--hex") { message = try SignCommand.hexBytes(String(decoding: message, as: UTF8.self), field: "message") }
        let signature = try await context.provider.signMessage(
            message, on: try SignCommand.chain(parsed, message: true), from: parsed.value("--from"),
            idempotencyKey: try SignCommand.key(parsed))
        SignCommand.print(signature, context.output)
    }
}

enum SignTypedDataCommand: CLICommand {
    static let declaration = Command(
        name: "typed-data", abstract: "sign EIP-712 typed data (eth_signTypedData_v4 JSON)",
        discussion: """
            Signs the EIP-712 typed data of FILE (or standard input), JSON as eth_signTypedData_v4
            takes it. The chain is the domain's chainId (it must be supported); numbers keep their
            exact text. At most 64 KiB, nested at most 8 deep.

            \(SignCommand.prompt)
            """,
        arguments: [SignCommand.input], options: [SignCommand.from, SignCommand.idempotencyKey],
        json: SignCommand.result, exitStatuses: SignCommand.exitStatuses)

    static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
        let json = String(decoding: try SignCommand.read(parsed), as: UTF8.self)
        let signature = try await context.provider.signTypedData(
            json, from: parsed.value("--from"), idempotencyKey: try SignCommand.key(parsed))
        SignCommand.print(signature, context.output)
    }
}

enum SignTxCommand: CLICommand {
    static let declaration = Command(
        name: "tx", abstract: "sign a transaction (EVM or Solana); it is not sent",
        discussion: """
            EVM (--chain-id required): FILE holds the unsigned transaction in hex, type 2 (EIP-1559),
            type 1 (EIP-2930) or legacy with EIP-155; prints the signed raw transaction and its hash
            in hex. Solana (--chain solana): FILE holds the transaction's message (legacy or v0,
            without signatures) in base64; prints the signed transaction in base64. Send it yourself:
            nothing is broadcast.

            \(SignCommand.prompt)
            """,
        arguments: [SignCommand.input],
        options: [
            SignCommand.chain, SignCommand.chainID, SignCommand.cluster, SignCommand.from, SignCommand.idempotencyKey,
        ],
        json: .init(
            .object,
            [
                .init("address", "the address that signed"),
                .init("signature", "0x-hex signature"),
                .init("signedTransaction", "EVM: 0x-hex raw transaction; Solana: base64 serialized transaction"),
                .init("transactionHash", "0x-hex: EVM Keccak-256 of the raw transaction; Solana the first signature"),
                .init("signedBytesSha256", "0x-hex SHA-256 of the bytes signed, as the prompt showed it"),
            ]),
        exitStatuses: SignCommand.exitStatuses)

    static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
        let text = String(decoding: try SignCommand.read(parsed), as: UTF8.self)
        let chain = try SignCommand.chain(parsed, message: false)
        let unsigned: Data
        if case .solana = chain {
            guard let bytes = Data(base64Encoded: text.trimmingWhitespaceAndNewlines()) else {
                throw RainError.invalid("the Solana message is not base64", field: "transaction")
            }
            unsigned = bytes
        } else {
            unsigned = try SignCommand.hexBytes(text, field: "transaction")
        }
        let signed = try await context.provider.signTransaction(
            unsigned, on: chain, from: parsed.value("--from"), idempotencyKey: try SignCommand.key(parsed))
        let isSolana = { if case .solana = chain { return true } else { return false } }()
        let raw = isSolana ? signed.rawTransaction.base64EncodedString() : SignCommand.hex(signed.rawTransaction)
        context.output.result(
            json: [
                "address": signed.address, "signature": SignCommand.hex(signed.signature), "signedTransaction": raw,
                "transactionHash": SignCommand.hex(signed.transactionHash),
                "signedBytesSha256": SignCommand.hex(signed.signedBytesSHA256),
            ],
            text: """
                Signed by \(signed.address)
                Signed transaction: \(raw)
                Transaction hash: \(SignCommand.hex(signed.transactionHash))
                Not sent: broadcast it yourself.
                """)
    }
}
