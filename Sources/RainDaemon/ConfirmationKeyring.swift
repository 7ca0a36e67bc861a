import RainAccess
import RainCore
import RainCrypto
import RainSecurityKey
import Synchronization

extension ConfirmationKeyRecord {
    /// The keys, as the verifier takes them (an entry that does not decode is left out: the seal
    /// vouches that the daemon wrote it, so none is expected).
    var confirmationKeys: [ConfirmationKey] {
        keys.compactMap { key in
            guard let id = Hex.decode(key.credentialID), let publicKey = Hex.decode(key.publicKey) else { return nil }
            return ConfirmationKey(credentialID: id, publicKey: publicKey, name: key.name)
        }
    }
}

/// The touch that follows a typed code once a confirmation key is registered.
final class ConfirmationKeyring: Sendable {
    typealias Store = ConfirmationKeyStore

    private let store: Store?
    private let authenticator: SecurityKeyAuthenticator
    private let record: Mutex<ConfirmationKeyRecord>
    /// How long a touch is waited for: the prompt's own time limit.
    let timeout: Duration
    private let logger: Logger

    /// - Throws: RAIN_102 `record_tampered` when the file was changed outside rainwalletd.
    init(store: Store?, authenticator: SecurityKeyAuthenticator, timeout: Duration, logger: Logger) throws(RainError) {
        self.store = store
        self.authenticator = authenticator
        self.timeout = timeout
        self.logger = logger
        record = Mutex(try store?.load() ?? ConfirmationKeyRecord())
    }

    /// What the prompt says above the code once a key is registered.
    static let promptNote = "after the code, touch your confirmation key when it blinks"

    /// Set from a prompt's start to the end of its touch.
    private let isBusy = Mutex(false)

    /// Reserves the keys for one confirmation, from its prompt to its touch.
    /// - Throws: RAIN_302 `prompt_busy` while another confirmation holds them.
    func takeSlot() throws(RainError) {
        let wasBusy = isBusy.withLock { busy in
            defer { busy = true }
            return busy
        }
        guard !wasBusy else {
            throw RainError(
                .refused, "another confirmation is waiting for its code or a touch of the confirmation key; try again after it",
                details: .init(reason: PromptReason.busy))
        }
    }

    /// Ends what ``takeSlot()`` reserved.
    func releaseSlot() { isBusy.withLock { $0 = false } }

    /// Whether a confirmation must be followed by a touch.
    var isRequired: Bool { record.withLock { !$0.keys.isEmpty } }

    /// Makes a confirmation credential on the key touched next and records it.
    /// - Parameter prompt: where a key's PIN is asked (a key with a PIN needs it to make a
    ///   credential).
    /// - Returns: the key's name and how many are registered now.
    func add(prompt: any DaemonAuthenticatorPrompt) async throws(RainError) -> (name: String, keyCount: Int) {
        let key = try await authenticator.registerConfirmationKey(
            context: DaemonAuthenticatorContext(
                origin: "https://\(TouchConfirmation.relyingPartyID)", timeout: timeout, prompt: prompt))
        let entry = ConfirmationKeyRecord.Key(
            credentialID: Hex.encode(key.credentialID), publicKey: Hex.encode(key.publicKey), name: key.name)
        var next = record.withLock { $0 }
        next.keys.removeAll { $0.credentialID == entry.credentialID }
        next.keys.append(entry)
        try store?.save(next)
        record.withLock { $0 = next }
        return (key.name, next.keys.count)
    }

    /// The keys' names, oldest first.
    var names: [String] { record.withLock { $0.keys.map { $0.name.isEmpty ? "security key" : $0.name } } }

    /// Forgets every key.
    /// - Returns: how many there were.
    func removeAll() throws(RainError) -> Int {
        let count = record.withLock { $0.keys.count }
        try store?.save(ConfirmationKeyRecord())
        record.withLock { $0 = ConfirmationKeyRecord() }
        return count
    }

    /// Waits for a touch of a registered key over what the user just confirmed.
    /// - Parameters:
    ///   - confirmation: the prompt's text and code.
    ///   - request: what was asked (the action, the app, the profile).
    /// - Throws: RAIN_401 `confirmation_key_timeout` / `confirmation_key_refused`, RAIN_404
    ///   `confirmation_key_missing`.
    func confirm(text: String, code: String, request: [UInt8]) async throws(RainError) {
        let keys = record.withLock { $0.confirmationKeys }
        // A fresh nonce as well: two prompts never share a challenge, even with the same code.
        let challenge = TouchConfirmation.challenge(
            promptText: text, code: code, request: try SecureRandom.bytes(count: 16) + request)
        try await authenticator.confirmTouch(keys: keys, challenge: challenge, context: context())
    }

    private func context() -> DaemonAuthenticatorContext {
        DaemonAuthenticatorContext(
            origin: "https://\(TouchConfirmation.relyingPartyID)", timeout: timeout, prompt: StatusLog(logger: logger))
    }

    /// The prompt as the touch sees it: nothing to ask (the confirmation itself was typed just
    /// before); what it waits for goes to the log.
    private struct StatusLog: DaemonAuthenticatorPrompt {
        let logger: Logger

        func askSecret(_ question: SecretQuestion) async throws(RainError) -> SecretBytes {
            throw RainError(
                .unauthorized, "\(question.what) cannot be asked while a confirmation key is added",
                details: .init(reason: "no_prompt"))
        }
        func confirm(_ what: String) async throws(RainError) {}
        func whileWaiting<T: Sendable>(
            _ status: String, _ body: @escaping @Sendable () async throws(RainError) -> T
        ) async throws(RainError) -> T {
            logger.info("prompt.touch", ["status": status])
            return try await body()
        }
    }
}
