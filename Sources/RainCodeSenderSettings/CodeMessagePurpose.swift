/// Why a code is sent: it picks the message's templates. The config names the templates by
/// purpose, so the type lives with the settings; the authority spells it `CodeMessage.Purpose`.
public enum CodeMessagePurpose: String, Sendable, Equatable, CaseIterable {
    /// A login code.
    case login
    /// A code that proves a contact being added to an account.
    case contactVerification
}
