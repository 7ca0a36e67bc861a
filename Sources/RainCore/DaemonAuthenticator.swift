import Glibc

/// An authenticator the daemon runs itself (security keys through libfido2, the TPM's platform
/// authenticator), so that the app asking for a ceremony never sees the assertion it produces.
///
/// It speaks the same W3C JSON forms as ``PasskeyAuthenticator``; what it needs of the user (a PIN,
/// a touch) it asks or shows through the `prompt` the daemon hands it, which is the trusted prompt
/// of the call that runs the ceremony.
public protocol DaemonAuthenticator: Sendable {
    /// Creates a credential (`navigator.credentials.create()`).
    /// - Parameters:
    ///   - optionsJSON: a W3C `PublicKeyCredentialCreationOptionsJSON` from the authority.
    ///   - context: the origin, the time limit and the prompt.
    /// - Returns: a W3C `RegistrationResponseJSON`.
    /// - Throws: RAIN_401 when the user dismissed the prompt, nothing was touched in time or the
    ///   call was cancelled; RAIN_404 when the authenticator is missing; the authenticator's
    ///   own reasons otherwise.
    func register(optionsJSON: String, context: DaemonAuthenticatorContext) async throws(RainError) -> String

    /// Produces an assertion (`navigator.credentials.get()`).
    /// - Parameters:
    ///   - optionsJSON: a W3C `PublicKeyCredentialRequestOptionsJSON` from the authority.
    ///   - context: the origin, the time limit and the prompt.
    /// - Returns: a W3C `AuthenticationResponseJSON`.
    /// - Throws: as ``register(optionsJSON:context:)``.
    func authenticate(optionsJSON: String, context: DaemonAuthenticatorContext) async throws(RainError) -> String

    /// Forgets a credential the account no longer holds (removed with `Passkey/Remove`), so a
    /// discoverable login does not offer it. Best effort: an authenticator that keeps nothing
    /// (a security key keeps its own) does nothing.
    /// - Parameter credentialID: the credential id, base64url without padding.
    func forget(credentialID: String) async
}

extension DaemonAuthenticator {
    /// Nothing kept here: nothing to forget.
    public func forget(credentialID: String) async {}
}

/// What a ``DaemonAuthenticator`` is given besides the options.
public struct DaemonAuthenticatorContext: Sendable {
    /// The origin written into the client data (`https://<passkey domain>`).
    public var origin: String
    /// How long the whole ceremony may wait for the user (touch and PIN).
    public var timeout: Duration
    /// Where the user is asked and told things.
    public var prompt: any DaemonAuthenticatorPrompt

    /// A context.
    public init(origin: String, timeout: Duration, prompt: any DaemonAuthenticatorPrompt) {
        self.origin = origin
        self.timeout = timeout
        self.prompt = prompt
    }
}

/// The trusted prompt, as a ``DaemonAuthenticator`` sees it: it shows the request that runs the
/// ceremony (the app, the profile, the action) with whatever it asks.
public protocol DaemonAuthenticatorPrompt: Sendable {
    /// Asks the user for a secret (a security key's PIN) on the trusted prompt.
    /// - Parameter question: what is asked, and the tries left after a wrong one.
    /// - Returns: what the user typed, in memory zeroed when it is released.
    /// - Throws: RAIN_401 when the prompt was dismissed, timed out or withdrawn; RAIN_202
    ///   `no_prompt` when no prompt can be shown.
    func askSecret(_ question: SecretQuestion) async throws(RainError) -> SecretBytes

    /// Asks the user to confirm, on the trusted prompt, that they are there and mean this
    /// ceremony (they type the code the prompt shows): a platform authenticator's user presence.
    /// - Parameter what: what the authenticator is about to do, as the prompt says it.
    /// - Throws: as ``askSecret(_:)``.
    func confirm(_ what: String) async throws(RainError)

    /// Runs `body` while the prompt tells the user what it waits for ("touch your security key
    /// when it blinks"), with the request, and a Cancel that stops it (`body`'s task is
    /// cancelled). The status closes as soon as `body` ends. Never a secret.
    /// - Throws: `body`'s errors; RAIN_401 `prompt_dismissed` when the user chose Cancel.
    func whileWaiting<T: Sendable>(
        _ status: String, _ body: @escaping @Sendable () async throws(RainError) -> T
    ) async throws(RainError) -> T
}

/// A secret the prompt asks for.
public struct SecretQuestion: Sendable, Equatable {
    /// What to type, as the prompt says it: "the PIN of your security key (Yubico YubiKey 5)".
    public var what: String
    /// Tries left before the secret is blocked, after a wrong one; nil on the first ask.
    public var attemptsRemaining: Int?
    /// What the user does once it is typed ("touch the key when it blinks"); nil for nothing.
    public var then: String?

    /// A question.
    public init(what: String, attemptsRemaining: Int? = nil, then: String? = "touch the key when it blinks") {
        self.what = what
        self.attemptsRemaining = attemptsRemaining
        self.then = then
    }
}

/// Bytes of a secret (a PIN) in memory of their own, zeroed when released, NUL-terminated so C can
/// read them without a copy. Never printed: its description is `<redacted>`.
// @unchecked Sendable: the buffer is written only in `init` and `deinit`; readers get it through
// `withCString`, which hands out a pointer only for the closure's duration.
public final class SecretBytes: @unchecked Sendable, CustomStringConvertible {
    private let buffer: UnsafeMutableBufferPointer<UInt8>
    /// The secret's length in bytes, without the NUL.
    public let count: Int

    /// Copies `bytes` and zeroes them in place.
    /// - Parameter bytes: the secret; a NUL inside it ends the C string early, so it is refused by
    ///   returning nil.
    public init?(taking bytes: inout [UInt8]) {
        defer { Self.wipe(&bytes) }
        guard !bytes.contains(0) else { return nil }
        buffer = .allocate(capacity: bytes.count + 1)
        buffer.initialize(repeating: 0)
        for index in bytes.indices { buffer[index] = bytes[index] }
        count = bytes.count
    }

    deinit {
        if let base = buffer.baseAddress { explicit_bzero(base, buffer.count) }
        buffer.deallocate()
    }

    /// The secret as a C string, for the closure's duration only.
    public func withCString<R>(_ body: (UnsafePointer<CChar>) throws -> R) rethrows -> R {
        // The buffer always has its NUL; the base address exists for any allocation.
        try buffer.withMemoryRebound(to: CChar.self) { chars in
            // Never nil: the buffer holds at least its NUL.
            guard let base = chars.baseAddress else { return try "".withCString(body) }
            return try body(UnsafePointer(base))
        }
    }

    public var description: String { "<redacted>" }

    /// Zeroes `bytes` in place (an array the prompt filled).
    public static func wipe(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { raw in
            if let base = raw.baseAddress { explicit_bzero(base, raw.count) }
        }
    }
}
