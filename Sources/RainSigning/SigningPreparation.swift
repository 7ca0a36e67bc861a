import RainCore

/// Decodes and checks a request for its chain family, once on the device (what the prompt shows)
/// and once at the authority (what the key signs): both run this same code on the same bytes.
public enum SigningPreparation {
    /// The longest payload a request may carry.
    public static let maximumPayloadBytes = 64 * 1024

    /// The request decoded, checked against the wallet, and ready to sign.
    /// - Throws: RAIN_102 for malformed input (`field` names it), typed data for Solana, a payload
    ///   over `maximumPayloadBytes`; RAIN_104 for a chain not supported; RAIN_406 for an amount
    ///   outside its type's range.
    public static func prepare(_ request: SigningRequest, wallet: SigningWallet) throws(RainError) -> PreparedSigning {
        guard request.payload.count <= maximumPayloadBytes else {
            throw RainError.invalid(
                "the request carries \(request.payload.count) bytes; at most \(maximumPayloadBytes) are signed at once",
                field: "payload", reason: "too_large")
        }
        switch request.chain {
        case .ethereum:
            return try EVMSigning.prepare(request, wallet: wallet)
        case .solana:
            guard request.kind != .typedData else {
                throw RainError.invalid(
                    "typed data (EIP-712) is signed on EVM chains only: name chain ethereum and its chain id",
                    field: "chain", reason: "typed_data_not_evm")
            }
            return try SolanaSigning.prepare(request, wallet: wallet)
        }
    }

    /// The lines a prompt shows for `summary`: "Label: value", warnings marked so they stand out.
    public static func promptLines(_ summary: SigningSummary) -> [String] {
        summary.lines.map { line in
            (line.isWarning ? "WARNING: " : "") + (line.label.isEmpty ? line.value : "\(line.label): \(line.value)")
        }
    }
}
