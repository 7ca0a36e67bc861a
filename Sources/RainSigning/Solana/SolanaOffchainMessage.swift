import RainCore

/// A Solana off-chain message: the app's text in the envelope that `solana sign-offchain-message`
/// signs, so a signature over it can never be a transaction's.
///
/// The layout is solana-sdk's `offchain_message` version 0 (`OffchainMessage::new(0, text)`,
/// then `serialize()`), the envelope `solana sign-offchain-message` signs in the CLIs built on
/// that crate, and the one this request's contract names:
///
///     "\xffsolana offchain"   signing domain, 16 bytes
///     0x00                    header version
///     format                  u8: 0 restricted ASCII, 1 limited UTF-8, 2 extended UTF-8
///     length                  u16 little endian
///     message                 the text's bytes
///
/// The limits are that crate's: 1212 bytes for formats 0 and 1 (the packet size less the 20
/// header bytes, what a Ledger takes), 65515 for format 2 (the u16 maximum less the same).
/// The `solana-offchain-message` crate from version 3 serializes the Agave proposal's preamble
/// instead (an application domain and a signer list after the header version, limits 1179 and
/// 65482): a signature made here verifies with the first layout, not with that one.
struct SolanaOffchainMessage: Sendable, Equatable {
    /// How the text is encoded, the most restrictive that fits as the SDK picks it.
    enum Format: UInt8, Sendable, Equatable {
        /// Bytes 0x20–0x7e only, at most ``SolanaOffchainMessage/maximumShortLength`` bytes.
        case restrictedASCII = 0
        /// UTF-8, at most ``SolanaOffchainMessage/maximumShortLength`` bytes.
        case limitedUTF8 = 1
        /// UTF-8, at most ``SolanaOffchainMessage/maximumLength`` bytes.
        case extendedUTF8 = 2
    }

    /// The signing domain: a first byte 0xff, which no legacy message or signature count starts
    /// with, then "solana offchain".
    static let signingDomain: [UInt8] = [0xff] + Array("solana offchain".utf8)
    /// The longest text a hardware wallet takes: the packet size (1232) less the 20 header bytes.
    static let maximumShortLength = 1212
    /// The longest text: the u16 maximum less the 20 header bytes.
    static let maximumLength = 65515

    /// The text.
    var text: String
    /// The format chosen.
    var format: Format
    /// The bytes signed: domain, version, format, length, text.
    var envelope: [UInt8]

    /// Wraps `bytes`.
    /// - Throws: RAIN_102 (field `message`) with reason `empty`, `message_is_transaction` (the
    ///   bytes are a legacy or v0 message, or a serialized transaction), `not_utf8` or
    ///   `too_long`.
    init(_ bytes: [UInt8]) throws(RainError) {
        guard !bytes.isEmpty else {
            throw RainError.invalid("the message is empty: send the text to sign", field: "message", reason: "empty")
        }
        guard !SolanaMessage.isTransactionLayout(bytes) else {
            throw RainError.invalid(
                "these bytes are a Solana transaction, not a message: send it as a transaction so it is shown as one",
                field: "message", reason: "message_is_transaction")
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw RainError.invalid(
                "the message is not UTF-8 text: an off-chain message is text", field: "message", reason: "not_utf8")
        }
        guard bytes.count <= Self.maximumLength else {
            throw RainError.invalid(
                "the message has \(bytes.count) bytes; an off-chain message has at most \(Self.maximumLength)",
                field: "message", reason: "too_long")
        }
        let format: Format
        if bytes.count > Self.maximumShortLength {
            format = .extendedUTF8
        } else if bytes.allSatisfy({ (0x20...0x7e).contains($0) }) {
            format = .restrictedASCII
        } else {
            format = .limitedUTF8
        }
        let length = UInt16(bytes.count)
        self.text = text
        self.format = format
        self.envelope =
            Self.signingDomain + [0, format.rawValue, UInt8(truncatingIfNeeded: length), UInt8(truncatingIfNeeded: length >> 8)]
            + bytes
    }
}
