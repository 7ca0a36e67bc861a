import Glibc
import RainCore
import RainCrypto

/// The platform authenticator's PIN: 6 to 32 ASCII digits, held in memory that is zeroed when the
/// last copy is released. It is the TPM authorization value of every PIN-protected passkey key:
/// the TPM checks it, and counts wrong ones toward its dictionary-attack lockout.
public struct PlatformPIN: Sendable {
    /// The fewest digits a PIN has.
    public static let minimumDigits = 6
    /// The most digits a PIN has: a TPM authorization value is at most a SHA-256 digest long.
    public static let maximumDigits = 32

    /// The digits, as the TPM authorization value.
    let secret: SymmetricKey

    /// A PIN from the digits typed (ASCII `0`–`9`). `digits` is zeroed before this returns,
    /// whether it succeeds or not.
    /// - Throws: RAIN_102 `platform_pin_policy` when there are fewer than 6 or more than 32 digits, or
    ///   anything but digits (the message never repeats the PIN).
    public init(digits: inout [UInt8]) throws(RainError) {
        defer {
            digits.withUnsafeMutableBytes { bytes in
                if let base = bytes.baseAddress { explicit_bzero(base, bytes.count) }
            }
        }
        guard (Self.minimumDigits...Self.maximumDigits).contains(digits.count),
            digits.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) })
        else {
            throw RainError.platform(
                .invalidArgument, .pinPolicy,
                "a platform authenticator PIN has \(Self.minimumDigits) to \(Self.maximumDigits) digits (0-9) and nothing "
                    + "else: choose another")
        }
        secret = SymmetricKey(bytes: digits)
    }
}
