import RainCore
import RainCrypto
import Testing

@testable import RainSigning

/// Shared values for the EVM tests.
enum EVMTestSupport {
    /// The address of the private key 0x4646…46 (eth-account 0.14.0 `Account.from_key`).
    static let walletAddress = "0x9d8A62f656a8d1615C1294fd71e9CFb3E4855A4F"

    static let wallet = SigningWallet(
        ethereumAddress: bytes(walletAddress), solanaPublicKey: [UInt8](repeating: 0, count: 32))

    /// Hex text (with or without 0x) as bytes; fails the test on bad hex.
    static func bytes(_ hex: String, sourceLocation: SourceLocation = #_sourceLocation) -> [UInt8] {
        let digits = hex.hasPrefix("0x") ? String(hex.dropFirst(2)) : hex
        guard let bytes = Hex.decode(digits) else {
            Issue.record("bad hex in a test: \(hex)", sourceLocation: sourceLocation)
            return []
        }
        return bytes
    }

    static func prepare(
        _ kind: SigningRequest.Kind, _ payload: [UInt8], chainID: UInt64 = 0, from: String = ""
    ) throws(RainError) -> PreparedSigning {
        try EVMSigning.prepare(
            SigningRequest(kind: kind, chain: .ethereum, chainID: chainID, payload: payload, from: from), wallet: wallet)
    }

    static func prepareTypedData(_ json: String, chainID: UInt64 = 0) throws(RainError) -> PreparedSigning {
        try prepare(.typedData, Array(json.utf8), chainID: chainID)
    }

    /// Runs `body` and checks it is refused with exactly this code, field and reason.
    static func expectRefusal(
        _ code: RainError.Code, field: String, reason: String, sourceLocation: SourceLocation = #_sourceLocation,
        _ body: () throws -> Void
    ) {
        do {
            try body()
            Issue.record("accepted; expected \(code) \(field) \(reason)", sourceLocation: sourceLocation)
        } catch let error as RainError {
            #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
            #expect(error.details.field == field, "\(error)", sourceLocation: sourceLocation)
            #expect(error.details.reason == reason, "\(error)", sourceLocation: sourceLocation)
        } catch {
            Issue.record("threw \(error), not a RainError", sourceLocation: sourceLocation)
        }
    }

    /// The value of the first line with this label.
    static func value(_ summary: SigningSummary, _ label: String) -> String? {
        summary.lines.first { $0.label == label }?.value
    }

    static func warnings(_ summary: SigningSummary) -> [String] {
        summary.lines.filter(\.isWarning).map(\.value)
    }
}
