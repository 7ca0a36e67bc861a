import Dispatch
import FoundationEssentials
import Glibc
package import RainClientTransport
package import RainWire
import Synchronization

/// The entry point of the RainWallet client library, mirroring Rain's mobile SDK. Every rule lives
/// in `rainwalletd`; the provider validates input early and maps statuses to `RainError`.
///
/// Every method that throws, throws a `RainError` (declared as plain `throws`, as in the SDK), so
/// `catch let error as RainError where error == .invalidLoginCode` reads as in Rain's documentation.
///
/// ```swift
/// let wallet = RainProvider(RainWalletConfig(passkeyDomain: "example.com"))
/// try await wallet.sendLoginCode(to: .email("user@example.com"))
/// try await wallet.confirmLoginCode(code)
/// ```
public final class RainProvider: Sendable {
    /// The configuration this provider was created with.
    public let config: RainWalletConfig
    private let connectionState = Mutex<ClientConnection?>(nil)
    /// The task that watches for the end of sessions, for `onSessionExpired`.
    let expiryWatch = Mutex<Task<Void, Never>?>(nil)
    /// What the `onSessionExpired` watcher has seen (tests).
    let expiryWatchState = Mutex(ExpiryWatchStatus())
    /// Where `onSessionExpired`'s hook runs: one serial queue, so hooks never overlap.
    let expiryQueue = DispatchQueue(label: "rainwallet.client.session-expired")
    /// How the streams wait before reconnecting to a daemon that went away.
    let reconnectBackoff: ReconnectBackoff
    /// The connection this provider's configuration was applied on (again after a reconnect: a
    /// restarted daemon forgot the session policy), and what the daemon refused of it.
    private let configured = Mutex<(connection: ObjectIdentifier?, refusals: [RainError])>((nil, []))
    /// The one watch of the profile that the streams and the expiry hook follow, made on first use
    /// (it needs `self`).
    private let feedState = Mutex<SessionFeed?>(nil)
    /// Set by `close()`. An atomic, not a lock: every call reads it.
    private let closedFlag = Atomic<Bool>(false)

    /// Creates a provider. It connects to the daemon on first use.
    public init(_ config: RainWalletConfig = RainWalletConfig()) {
        self.config = config
        self.reconnectBackoff = .default
        self.metadata = EncodedMetadata([MetadataEntry(key: profileMetadataKey, value: config.profile)])
        self.profileRefusal = Self.refusal(ofProfile: config.profile)
    }

    /// Creates a provider whose streams reconnect with `reconnectBackoff` (tests use a short one).
    package init(_ config: RainWalletConfig, reconnectBackoff: ReconnectBackoff) {
        self.config = config
        self.reconnectBackoff = reconnectBackoff
        self.metadata = EncodedMetadata([MetadataEntry(key: profileMetadataKey, value: config.profile)])
        self.profileRefusal = Self.refusal(ofProfile: config.profile)
    }

    deinit {
        expiryWatch.withLock { $0?.cancel() }
        feedState.withLock { $0 }?.close()
        connectionState.withLock { $0?.close() }
    }

    /// Makes the provider inert, as the mobile SDK's `close()` does: the watch of the profile
    /// stops, `authState`, `sessionState` and `serviceState` end, the `onSessionExpired` hook never
    /// fires again, and every later call throws RAIN_102 `provider_closed`. Call it when you discard
    /// a provider that something may still hold (a stream, a task); a provider that nothing holds
    /// does the same as it goes away. Idempotent. The daemon's session is untouched (that is
    /// `logout()`).
    public func close() {
        closedFlag.store(true, ordering: .releasing)
        let feed = feedState.withLock { $0 }
        expiryWatch.withLock {
            $0?.cancel()
            $0 = nil
        }
        feed?.close()
        connectionState.withLock {
            $0?.close()
            $0 = nil
        }
    }

    /// Whether `close()` was called.
    public var isClosed: Bool { closedFlag.load(ordering: .acquiring) }

    /// The provider's feed of the profile's state; nil after `close()`.
    func sessionFeed() -> SessionFeed? {
        feedState.withLock { kept -> SessionFeed? in
            // Checked under the lock that `close()` takes after setting the flag: a feed made here
            // is one `close()` sees and closes.
            guard !isClosed else { return nil }
            if let kept { return kept }
            let feed = SessionFeed(watcher: profileWatcher())
            kept = feed
            return feed
        }
    }

    // MARK: connection

    /// The shared connection, opened (or reopened after the daemon restarted) on demand. Every
    /// connect checks the daemon's uid and its socket directory (`RainWalletConfig.daemonUID`).
    /// - Throws: RAIN_101 when no daemon answers, or when the one that answers is not of the
    ///   expected uid; RAIN_102 `provider_closed` after `close()`.
    package func connection() throws(RainError) -> ClientConnection {
        try connectionState.withLock { c throws(RainError) -> ClientConnection in
            // Checked under this lock: `close()` marks the provider closed before it takes the lock
            // to close the connection, so no connection opened here outlives it.
            if isClosed { throw Self.closedRefusal }
            if let c, !c.isClosed { return c }
            let new = try ClientConnection(
                path: config.resolvedSocketPath, daemonUID: try config.daemonUIDToUse(),
                batchScheduledReader: config.readerScheduling == .batch)
            c = new
            return new
        }
    }

    /// An executor that runs tasks on this provider's connection thread. Code that makes many small
    /// calls in a row runs fastest inside `withTaskExecutorPreference(try provider.taskExecutor) { … }`:
    /// a call there writes its request and reads its answer on that thread without suspending (an
    /// answer later than 10 ms is awaited the usual way), with no thread hand-off. Don't block
    /// inside it: it is the thread that reads replies. That thread has the batch scheduling policy
    /// unless `RainWalletConfig.readerScheduling` says `.normal`, and so has the code run there.
    /// - Throws: RAIN_101 when no daemon answers.
    public var taskExecutor: any TaskExecutor {
        get throws { try connection() }
    }

    /// The metadata of every call: made and encoded once, not per call.
    let metadata: EncodedMetadata
    /// Why the configured profile name is invalid (nil when it is valid): `config` never changes,
    /// so it is checked once, not on every call.
    let profileRefusal: RainError?

    private static func refusal(ofProfile profile: String) -> RainError? {
        do throws(RainError) {
            try ProfileName.validate(profile)
            return nil
        } catch {
            return error
        }
    }

    /// Throws RAIN_102 when the configured profile name is invalid (`ProfileName.validate`), or
    /// `provider_closed` after `close()`.
    func validateProfile() throws(RainError) {
        if let profileRefusal { throw profileRefusal }
        if isClosed { throw Self.closedRefusal }
    }

    /// What every call throws after `close()`.
    static let closedRefusal = RainError.invalid("this RainProvider was closed; create a new one", reason: "provider_closed")

    /// One unary call with this provider's profile. It runs on the caller's executor (the public
    /// methods' own, the generic executor's or a preferred one): a hop per async function of the
    /// call path cost a task switch each (see `ClientConnection.call`).
    nonisolated(nonsending) package func call<Req: WireMessage, Resp: WireMessage>(
        _ method: String, _ request: Req, as _: Resp.Type, timeoutMilliseconds: UInt32 = 0
    ) async throws(RainError) -> Resp {
        try Resp.decode(try await callBytes(method, request, timeoutMilliseconds: timeoutMilliseconds))
    }

    /// `call`, returning the answer's payload undecoded. A caller on the connection's own thread
    /// (`taskExecutor`) is answered there without suspending (`ClientConnection.callInline`).
    nonisolated(nonsending) package func callBytes<Req: WireMessage>(
        _ method: String, _ request: Req, timeoutMilliseconds: UInt32 = 0
    ) async throws(RainError) -> [UInt8] {
        try validateProfile()
        let conn = try connection()
        // Checked here, not only inside: an async call that returns at once still costs a frame.
        if hasConfigurationToApply { try await applyConfiguration(conn) }
        let payload = try request.encode()
        do {
            return try await send(method, payload, on: conn, timeoutMilliseconds: timeoutMilliseconds)
        } catch  where error.details.reason == RainError.sentBeforeIdentityReason {
            // The daemon could not tell which program wrote a request that arrived before it read
            // the caller's identity; now that it has, the same request is judged on its own.
            return try await send(method, payload, on: conn, timeoutMilliseconds: timeoutMilliseconds)
        }
    }

    /// Sends one request on `conn` and awaits its answer.
    nonisolated(nonsending) private func send(
        _ method: String, _ payload: [UInt8], on conn: ClientConnection, timeoutMilliseconds: UInt32
    ) async throws(RainError) -> [UInt8] {
        switch try conn.callInline(method: method, payload: payload, metadata: metadata, timeoutMilliseconds: timeoutMilliseconds)
        {
        case .answered(let bytes)?: return bytes
        case .waiting(let id, let box)?: return try await conn.awaitAnswer(id: id, box: box)
        case nil:
            return try await conn.call(
                method: method, payload: payload, metadata: metadata, timeoutMilliseconds: timeoutMilliseconds)
        }
    }

    /// The last answers of the reads an app repeats most, and what they decoded to: the same
    /// bytes come back call after call, and decoding them again on every call is wasted work.
    private let lastSnapshot = LastAnswer<SessionSnapshot>()
    private let lastInfo = LastAnswer<DaemonInfo>()
    private let lastAccount = LastAnswer<Account>()
    private let lastWallet = LastAnswer<Wallet>()

    /// The `SessionSnapshot` in `bytes`: the last one when the bytes are the same.
    /// - Throws: RAIN_102 when they do not decode.
    func snapshot(_ bytes: [UInt8]) throws(RainError) -> SessionSnapshot {
        try lastSnapshot.value(of: bytes) { (bytes) throws(RainError) in try SessionSnapshot.decode(bytes) }
    }

    /// Whether the configuration sets anything on the profile (`applyConfiguration`).
    var hasConfigurationToApply: Bool { config.passkeyDomain != nil || config.sessionPolicy != nil }

    /// Applies `RainWalletConfig.sessionPolicy` and `passkeyDomain` to the profile before the
    /// first call on each connection: the policy first, then the domain (checked locally by
    /// `validatePasskeyDomain()` first), as two requests so that neither refusal blocks the other.
    /// What the daemon refuses of the configuration itself (RAIN_102 on `passkeyDomain` or a
    /// `sessionPolicy.` key, RAIN_202 `not_profile_owner`) does not fail unrelated calls (a code
    /// login keeps working): `awaitSessionRestore()` and the passkey calls report it. Any other
    /// failure (the daemon is down, the app is not approved) fails the call, and the next call tries
    /// again.
    nonisolated(nonsending) package func applyConfiguration(_ conn: ClientConnection) async throws(RainError) {
        guard hasConfigurationToApply else { return }
        let id = ObjectIdentifier(conn)
        guard configured.withLock({ $0.connection }) != id else { return }
        var refusals: [RainError] = []
        if let policy = config.sessionPolicy {
            do throws(RainError) {
                try await configure(conn, ConfigureProfileRequest(passkeyDomain: "", sessionPolicy: SessionPolicy(policy)))
            } catch {
                guard Self.isConfigurationRefusal(error) else { throw error }
                refusals.append(error)
            }
        }
        if let domain = config.passkeyDomain {
            do throws(RainError) {
                try config.validatePasskeyDomain()
                try await configure(conn, ConfigureProfileRequest(passkeyDomain: domain))
            } catch {
                guard Self.isConfigurationRefusal(error) else { throw error }
                refusals.append(error)
            }
        }
        configured.withLock { $0 = (id, refusals) }
    }

    nonisolated(nonsending) private func configure(_ conn: ClientConnection, _ request: ConfigureProfileRequest)
        async throws(RainError)
    {
        let bytes = try await conn.call(method: Method.profileConfigure, payload: try request.encode(), metadata: metadata)
        _ = try ConfigureProfileResponse.decode(bytes)
    }

    /// Whether `error` refuses the configuration itself (rather than the call or the connection).
    static func isConfigurationRefusal(_ error: RainError) -> Bool {
        if error.code == .unauthorized { return error.details.reason == "not_profile_owner" }
        guard error.code == .invalidArgument, let field = error.details.field else { return false }
        return field == "passkeyDomain" || field.hasPrefix("sessionPolicy")
    }

    /// Forgets the refusal of `RainWalletConfig.passkeyDomain` on the current connection: the
    /// profile was moved to that domain since.
    func forgetPasskeyDomainRefusal() {
        configured.withLock { state in state.refusals.removeAll { $0.details.field == "passkeyDomain" } }
    }

    /// The first thing the daemon refused of this provider's configuration on the current
    /// connection (nil when all of it applied), or only the refusal of a field starting with `field`.
    func configurationRefusal(field: String? = nil) -> RainError? {
        configured.withLock { state in
            state.refusals.first { field == nil || $0.details.field?.hasPrefix(field ?? "") == true }
        }
    }

    // MARK: login with a one-time code

    /// Sends a 6-digit login code to `contact`. Calling again replaces the pending code (Resend).
    ///
    /// - Returns: the contact as the daemon normalized it and when the code expires (the mobile
    ///   SDK returns nothing: ignore it and the call reads the same).
    /// - Throws: RAIN_102 for an invalid email or phone number (E.164; `(0)` refused), before any
    ///   request; RAIN_302 when rate limited; RAIN_501 when delivery failed; RAIN_101 when the
    ///   daemon is not running.
    @discardableResult
    nonisolated(nonsending) public func sendLoginCode(to contact: RainWalletContact) async throws -> CodeSent {
        let normalized = try contact.normalized()
        let sent = try await call(
            Method.authSendLoginCode, SendLoginCodeRequest(contact: normalized), as: SendLoginCodeResponse.self)
        return CodeSent(contact: sent.contact, expiresAt: sent.expiresAt, resendAfter: sent.resendAfter)
    }

    /// Confirms the code the user typed. Success logs the user in; a first login also creates the
    /// account and its wallet.
    ///
    /// - Throws: RAIN_203 for a wrong code (the challenge stays, so the user can retry; details
    ///   carry `attemptsRemaining`), an expired or locked code (details `reason`); RAIN_102 for
    ///   input that is not 6 digits, or when no code is pending.
    nonisolated(nonsending) public func confirmLoginCode(_ code: String) async throws {
        _ = try await confirmLoginCodeReturningSession(code)
    }

    /// `confirmLoginCode` that also returns the new session and whether the account was created.
    nonisolated(nonsending) public func confirmLoginCodeReturningSession(_ code: String) async throws -> (
        session: SessionSnapshot, accountCreated: Bool
    ) {
        let trimmed = code.trimmingWhitespaceAndNewlines()
        guard trimmed.utf8.count == 6, trimmed.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            throw RainError.invalid("a login code is 6 digits", field: "code", reason: "malformed_code")
        }
        let r = try await call(
            Method.authConfirmLoginCode, ConfirmLoginCodeRequest(code: trimmed), as: ConfirmLoginCodeResponse.self)
        return (r.session, r.isAccountCreated)
    }

    // MARK: sessions

    /// Ends the session: the daemon wipes it from storage and revokes it at the authority (best
    /// effort). Does not fire `onSessionExpired`.
    /// - Returns: whether there was a session, and whether the authority confirmed the revocation
    ///   (false when it was unreachable; the local session is wiped either way).
    @discardableResult
    nonisolated(nonsending) public func logout() async throws -> LogoutResult {
        let r = try await call(Method.authLogout, LogoutRequest(), as: LogoutResponse.self)
        return LogoutResult(hadSession: r.hadSession, revokedAtAuthority: r.isRevokedAtAuthority)
    }

    /// Waits (up to the profile's restore timeout, 5 s by default) for the stored session to load.
    /// On timeout it returns normally with `authState` still `loading`. This is where the
    /// provider's configuration is checked: once the restore is over it throws what the daemon
    /// refused of `RainWalletConfig` (the session is restored all the same, and a code login still
    /// works).
    /// - Throws: RAIN_102 naming `passkeyDomain` (bad syntax, a public suffix, another domain than
    ///   the profile's) or `sessionPolicy.<key>` (out of range); RAIN_202 `not_profile_owner` when
    ///   this app may use the profile but does not own it, so may not set its session policy;
    ///   RAIN_101 when the daemon is not running.
    nonisolated(nonsending) public func awaitSessionRestore() async throws {
        _ = try await call(Method.sessionAwaitRestore, AwaitRestoreRequest(), as: SessionSnapshot.self)
        if let refusal = configurationRefusal() { throw refusal }
    }

    /// True when a session exists with more than the policy's threshold (30 s) left.
    nonisolated(nonsending) public func hasActiveSession() async throws -> Bool {
        try await currentSession().hasActiveSession
    }

    /// Refreshes the session now (for example when the app returns to the foreground). Shares a
    /// refresh already in flight in the daemon.
    /// - Returns: the session after the refresh.
    /// - Throws: RAIN_201 when there is no session or it ended (details `reason`); RAIN_301 when the
    ///   authority stayed unreachable through the retries (the session stays usable until it expires).
    @discardableResult
    nonisolated(nonsending) public func refreshSession() async throws -> SessionSnapshot {
        try snapshot(try await callBytes(Method.sessionRefresh, RefreshSessionRequest()))
    }

    /// The account behind the session: id, wallet id, creation time and contacts. Retried by the
    /// daemon on transient authority failures.
    /// - Throws: RAIN_201 without a live session (also when it was just found revoked by a login on
    ///   another device); RAIN_301 when the authority could not be reached.
    nonisolated(nonsending) public func account() async throws -> Account {
        try lastAccount.value(of: try await callBytes(Method.accountGet, GetAccountRequest())) { (bytes) throws(RainError) in
            Account(try AccountResponse.decode(bytes))
        }
    }

    /// The wallet of the session's account: its id, creation time, Ethereum address (EIP-55) and
    /// Solana address (base58). A first login creates it. Retried by the daemon on transient
    /// authority failures.
    /// - Throws: RAIN_201 without a live session; RAIN_404 when the account has no wallet;
    ///   RAIN_301 when the authority could not be reached; RAIN_101 when the daemon is not running.
    nonisolated(nonsending) public func getWallet() async throws -> Wallet {
        try lastWallet.value(of: try await callBytes(Method.walletGet, GetWalletRequest())) { (bytes) throws(RainError) in
            Wallet(try WalletResponse.decode(bytes))
        }
    }

    /// The wallet's 12-word BIP-39 recovery phrase, for a backup. Show it to the user and keep it
    /// nowhere: the daemon neither logs nor stores it. Never retried automatically.
    /// - Throws: RAIN_202 unless the daemon's config allows export for this profile
    ///   (`"allowExport": true`; no client can enable it); RAIN_201 without a live session;
    ///   RAIN_404 when the account has no wallet; RAIN_301 when the authority could not be reached.
    nonisolated(nonsending) public func exportRecoveryPhrase() async throws -> [String] {
        try await call(Method.walletExportRecoveryPhrase, ExportRecoveryPhraseRequest(), as: ExportRecoveryPhraseResponse.self)
            .words
    }

    /// One chain's private key: Ethereum as `0x` + 64 lowercase hex digits; Solana as the 64-byte
    /// keypair (seed, then public key) in base58, as Solana tools import it. Same rules as
    /// `exportRecoveryPhrase()`.
    /// - Throws: RAIN_202 unless the daemon's config allows export for this profile; RAIN_201
    ///   without a live session; RAIN_404 when the account has no wallet; RAIN_301 when the
    ///   authority could not be reached.
    nonisolated(nonsending) public func exportPrivateKey(chain: RainChain) async throws -> String {
        try await call(Method.walletExportPrivateKey, ExportPrivateKeyRequest(chain: chain), as: ExportPrivateKeyResponse.self)
            .privateKey
    }

    /// The daemon's current view of this profile's session.
    nonisolated(nonsending) public func currentSession() async throws -> SessionSnapshot {
        try snapshot(try await callBytes(Method.sessionGetState, GetSessionStateRequest()))
    }

    /// What the daemon is and supports.
    nonisolated(nonsending) public func daemonInfo() async throws -> DaemonInfo {
        try lastInfo.value(of: try await callBytes(Method.daemonGetInfo, GetInfoRequest())) { (bytes) throws(RainError) in
            DaemonInfo(try GetInfoResponse.decode(bytes))
        }
    }

    /// The development outbox (deliveries of the embedded authority), oldest first.
    /// - Throws: RAIN_202 when the daemon's authority has no development outbox.
    nonisolated(nonsending) public func devOutbox() async throws -> [DevOutboxEntry] {
        try await call(Method.devListOutbox, ListOutboxRequest(), as: ListOutboxResponse.self).entries.map(DevOutboxEntry.init)
    }

    // MARK: observation

    /// The raw event stream of this profile on the current connection: the current state first,
    /// then every change. Unlike `authState`, `sessionState` and `onSessionExpired`, it does not
    /// reconnect: the sequence ends when the daemon goes away (or the task is cancelled), which is
    /// what `rainwallet watch` reports.
    /// - Throws: RAIN_101 when no daemon answers; RAIN_102 for an invalid profile name.
    public func events() throws -> AsyncThrowingStream<SessionEvent, any Error> {
        try ProfileName.validate(config.profile)
        let messages = try openWatch()
        return AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    for try await bytes in messages {
                        continuation.yield(SessionEvent(try WatchEvent.decode(bytes)))
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// Opens one `Session/Watch` stream on the shared connection.
    /// - Throws: RAIN_101 when no daemon answers.
    func openWatch() throws(RainError) -> AsyncThrowingStream<[UInt8], any Error> {
        let conn = try connection()
        return try conn.openStream(method: Method.sessionWatch, payload: try WatchRequest().encode(), metadata: metadata.entries)
            .messages
    }
}
