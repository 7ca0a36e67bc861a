import FoundationEssentials
import RainCore
import RainCrypto
import RainKeyStore

/// The platform authenticator as the daemon runs it (`Passkey/Run` with `PLATFORM`): each ceremony
/// asks the user on the trusted prompt, first to confirm it (the typed code: user presence), then
/// for the PIN (the keys' TPM authorization value: user verification).
///
/// The daemon always has a PIN: the first platform passkey asks the user to choose one (typed
/// twice), and every passkey it makes is bound to it. Without a PIN any program of the user that
/// can open the TPM could sign with a key blob (docs/security.md); the authenticator's core can make
/// such keys, the daemon never does.
public struct PlatformDaemonAuthenticator: DaemonAuthenticator {
    let provider: any KeyProvider
    let storageKey: SymmetricKey
    let directory: String
    let clock: any RainClock

    /// An authenticator over the daemon's key provider.
    /// - Parameters:
    ///   - provider: the daemon's key provider; anything but `tpm2` answers every ceremony with
    ///     RAIN_404 `platform_authenticator_unavailable`.
    ///   - storageKey: the provider's storage key, which seals the passkeys' file.
    ///   - directory: where that file lives (`<state>/platform`).
    ///   - clock: the passkeys' creation times.
    public init(provider: any KeyProvider, storageKey: SymmetricKey, directory: String, clock: any RainClock) {
        self.provider = provider
        self.storageKey = storageKey
        self.directory = directory
        self.clock = clock
    }

    public func register(optionsJSON: String, context: DaemonAuthenticatorContext) async throws(RainError) -> String {
        try await authenticator(context.prompt).createCredential(optionsJSON: optionsJSON, origin: context.origin)
    }

    public func authenticate(optionsJSON: String, context: DaemonAuthenticatorContext) async throws(RainError) -> String {
        try await authenticator(context.prompt).getAssertion(optionsJSON: optionsJSON, origin: context.origin)
    }

    /// Removes the passkey from this device's file when it is one of its own: a discoverable
    /// login offers the newest passkey of the relying party, which must not be one the account
    /// no longer holds.
    public func forget(credentialID: String) async {
        guard let id = Base64URL.decode(credentialID), let core = try? authenticator(Unattended()),
            let held = try? await core.credentials().first(where: { $0.id == id })
        else { return }
        _ = try? await core.removeCredential(id: id, rpID: held.rpID)
    }

    /// The prompt of work that asks nothing: removing a passkey needs neither presence nor PIN.
    struct Unattended: DaemonAuthenticatorPrompt {
        func askSecret(_ question: SecretQuestion) async throws(RainError) -> SecretBytes {
            throw RainError(.internalError, "nothing is asked while a passkey is forgotten")
        }
        func confirm(_ what: String) async throws(RainError) {
            throw RainError(.internalError, "nothing is asked while a passkey is forgotten")
        }
        func whileWaiting<T: Sendable>(
            _ status: String, _ body: @escaping @Sendable () async throws(RainError) -> T
        ) async throws(RainError) -> T { try await body() }
    }

    /// The core authenticator with this ceremony's prompt as its hooks.
    func authenticator(_ prompt: any DaemonAuthenticatorPrompt) throws(RainError) -> TPM2PlatformAuthenticator {
        try TPM2PlatformAuthenticator.make(
            provider: provider, storageKey: storageKey, directory: directory, hooks: Self.hooks(prompt), clock: clock)
    }

    /// Presence is the prompt's confirmation; a PIN is always chosen (twice, the same) or entered.
    static func hooks(_ prompt: any DaemonAuthenticatorPrompt) -> PlatformAuthenticatorHooks {
        PlatformAuthenticatorHooks(
            confirmPresence: { (request) throws(RainError) in
                try await prompt.confirm(presenceText(request))
            },
            askPIN: { (request) throws(RainError) -> PlatformPIN? in
                switch request {
                case .choose:
                    let first = try await prompt.askSecret(
                        SecretQuestion(
                            what: "a new PIN of 6 to 32 digits for this device's passkeys (it guards all of them; "
                                + "too many wrong ones lock the TPM for a while)", then: nil))
                    let second = try await prompt.askSecret(SecretQuestion(what: "the same new PIN again", then: nil))
                    guard same(first, second) else {
                        throw RainError.invalid(
                            "the two PINs typed differ: no passkey was made; try again", field: "pin",
                            reason: "platform_pin_mismatch")
                    }
                    return try pin(first)
                case .enter(_, let triesLeft):
                    // The tries left are said on every ask (the TPM counts wrong PINs of any
                    // program), not as the count after a wrong one that `attemptsRemaining` is.
                    let left = triesLeft.map { " (\($0) \($0 == 1 ? "try" : "tries") left before the TPM locks)" } ?? ""
                    let typed = try await prompt.askSecret(
                        SecretQuestion(what: "the PIN of this device's passkeys" + left, then: nil))
                    return try pin(typed)
                }
            })
    }

    static func presenceText(_ request: PlatformPresenceRequest) -> String {
        switch request.ceremony {
        case .registration: "create a passkey for \(request.rpID) in this device's TPM (for \(request.userName))"
        case .authentication: "log in to \(request.rpID) with this device's passkey"
        }
    }

    /// The typed secret as a PIN; the copy made for it is zeroed by `PlatformPIN`.
    static func pin(_ secret: SecretBytes) throws(RainError) -> PlatformPIN {
        var digits = bytes(secret)
        return try PlatformPIN(digits: &digits)
    }

    static func same(_ a: SecretBytes, _ b: SecretBytes) -> Bool {
        var x = bytes(a)
        var y = bytes(b)
        defer {
            SecretBytes.wipe(&x)
            SecretBytes.wipe(&y)
        }
        return constantTimeEquals(x, y)
    }

    static func bytes(_ secret: SecretBytes) -> [UInt8] {
        secret.withCString { pointer in
            pointer.withMemoryRebound(to: UInt8.self, capacity: secret.count + 1) {
                Array(UnsafeBufferPointer(start: $0, count: secret.count))
            }
        }
    }
}
