import Dispatch
import FoundationEssentials
import Glibc
import RainAccess
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainWire

// Reads of the session's account and wallet, and the exports: each with a live session, retried
// as reads, with one refresh when the authority refuses a rotated or expired token.
extension ProfileSession {
    /// The account behind the session. A read: transient authority failures are retried with the
    /// policy (sends never are). A token the authority no longer accepts because it was rotated or
    /// expired gets one refresh and one more try; a session revoked at the authority (a login on
    /// another device) ends here with `revokedElsewhere`.
    /// - Throws: RAIN_201 without a live session; RAIN_301 when the authority stayed unreachable.
    public func account() async throws(RainError) -> AccountResponse {
        let info = try await read("read the account") { (authority, appID, token, proof) async throws(RainError) in
            try await authority.getAccountInfo(
                AuthorityAccountInfoRequest(appID: appID, accessToken: token), caller: AuthorityCaller(proof: proof))
        }
        return AccountResponse(info)
    }

    /// A read with the session's access token: transient failures retried with the policy.
    /// With a remote authority the read, its retries and any refresh it needs end within the
    /// authority's read deadline (README "Bounded waits"): each call waits no longer than what is
    /// left, and no retry starts whose backoff would end past it.
    func read<T: Sendable>(
        _ what: String, _ call: @Sendable (any Authority, String, String, DeviceProof) async throws(RainError) -> T
    ) async throws(RainError) -> T {
        guard let bound = context.authority.deadlines?.read else {
            return try await withSession(what: what, transientRetries: policy.transientRetries, call)
        }
        let end = clock.now.adding(bound)
        let result = await AuthorityDeadlines.$operationDeadline.withValue(end) { () async -> Result<T, RainError> in
            do throws(RainError) {
                return .success(
                    try await withSession(what: what, transientRetries: policy.transientRetries, deadline: end, call))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// The wallet behind the session: its id, creation time and addresses. A read, retried and
    /// refreshed exactly like `account()`.
    /// - Throws: RAIN_201 without a live session; RAIN_404 when the account has no wallet; RAIN_301
    ///   when the authority stayed unreachable.
    public func wallet() async throws(RainError) -> WalletResponse {
        let info = try await read("read the wallet") { (authority, appID, token, proof) async throws(RainError) in
            try await authority.getWallet(
                AuthorityWalletRequest(appID: appID, accessToken: token), caller: AuthorityCaller(proof: proof))
        }
        return WalletResponse(info)
    }

    /// The wallet's 12-word recovery phrase. Never logged, stored or retried on a transient failure.
    /// - Throws: RAIN_202 unless the profile's config allows export (checked before anything else);
    ///   RAIN_201 without a live session; RAIN_404 without a wallet; RAIN_301 when the authority
    ///   could not be reached.
    public func exportRecoveryPhrase() async throws(RainError) -> ExportRecoveryPhraseResponse {
        let secrets = try await export()
        return ExportRecoveryPhraseResponse(words: secrets.mnemonic)
    }

    /// One chain's private key: Ethereum as `0x` + 64 lowercase hex, Solana as the base58 64-byte
    /// keypair. Same rules as `exportRecoveryPhrase()`.
    /// - Throws: RAIN_102 when no chain is named (after the export permission); otherwise as
    ///   `exportRecoveryPhrase()`.
    public func exportPrivateKey(chain: RainChain?) async throws(RainError) -> ExportPrivateKeyResponse {
        try requireExportAllowed()
        let chain = try Self.named(chain)
        let secrets = try await export()
        let key = chain == .ethereum ? secrets.ethereumPrivateKeyHex : secrets.solanaKeypairBase58
        return ExportPrivateKeyResponse(chain: chain, privateKey: key)
    }

    /// The chain a private key export names.
    /// - Throws: RAIN_102 (`field: "chain"`) when it names none.
    static func named(_ chain: RainChain?) throws(RainError) -> RainChain {
        guard let chain else { throw RainError.invalid("name a chain: ethereum or solana", field: "chain") }
        return chain
    }

    /// RAIN_202 unless the daemon's config sets `allowExport` for this profile. No client can set it.
    private func requireExportAllowed() throws(RainError) {
        guard runtime.settings.isExportAllowed else {
            throw RainError(
                .unauthorized,
                "export is not allowed for profile \(runtime.name); set \"allowExport\": true for it in the daemon's config "
                    + "file and confirm the change with `rainwallet settings confirm` (or have the machine's policy set it)",
                details: .init(reason: "export_not_allowed"))
        }
    }

    /// The wallet's secrets, after the permission check. Exports are treated like sends: a
    /// transient failure is reported, never retried automatically.
    private func export() async throws(RainError) -> WalletSecrets {
        try requireExportAllowed()
        let secrets = try await withSession(what: "export the wallet", transientRetries: 0) {
            (authority, appID, token, proof) async throws(RainError) in
            try await authority.exportWallet(
                AuthorityWalletRequest(appID: appID, accessToken: token), caller: AuthorityCaller(proof: proof))
        }
        logger.info("wallet.exported", ["profile": runtime.name])
        return secrets
    }

    /// Runs one authority call with the session's access token and the device's proof (its keys,
    /// in-process: a remote authority proves them on its connection): the shared path of reads,
    /// sends and exports. Transient failures are retried `transientRetries` times with the policy's
    /// backoff (`RetrySchedule`). A token the authority refuses as rotated or expired gets one
    /// refresh and one more try (the refusal means the call did nothing); a session revoked at the
    /// authority ends here (`revokedElsewhere` when another device logged in, else `refreshFailed`).
    /// - Throws: RAIN_201 without a live session; RAIN_301 when the authority stayed unreachable;
    ///   any other refusal as the authority raised it.
    func withSession<T: Sendable>(
        what: String, transientRetries: Int, deadline: Date? = nil,
        _ call: @Sendable (any Authority, String, String, DeviceProof) async throws(RainError) -> T
    ) async throws(RainError) -> T {
        await restore()
        // Tokens that could not be saved are never used: save them first, or refuse the call.
        try await requireSaved()
        var isRefreshed = false
        let retry = RetrySchedule(policy: policy, retries: transientRetries)
        let result = await retry.run(clock: clock, deadline: deadline) { _ -> RetryStep<T> in
            guard let current = session else { return .finished(.failure(noSessionError())) }
            if unsaved != nil { return .finished(.failure(Self.notPersistedError(nil))) }
            let result: Result<T, RainError>
            do throws(RainError) {
                result = .success(
                    try await call(context.authority, appID, current.accessToken, DeviceProof(holder: context.device)))
            } catch {
                result = .failure(error)
            }
            // Re-checked below against `session`: the call may have raced a refresh, a login or a logout.
            switch result {
            case .success(let value):
                return .finished(.success(value))
            case .failure(let error) where error.code == .sessionExpired:
                let reason = SessionEndReason(reasonOf: error)
                if reason?.isStaleAccessToken == true {
                    // Rotated meanwhile, or expired before the scheduler ran: refresh once, then retry.
                    if session?.accessToken != current.accessToken { return .again }
                    if !isRefreshed {
                        switch await refreshNow() {
                        case .success:
                            isRefreshed = true
                            return .again
                        case .failure(let error) where Self.isNotPersisted(error):
                            return .finished(.failure(error))
                        case .failure:
                            break
                        }
                    }
                }
                if session?.refreshToken == current.refreshToken {
                    await end(reason?.deviceExpiry ?? .refreshFailed, cause: error.details.reason)
                }
                return .finished(.failure(noSessionError()))
            case .failure(let error) where Self.isDefinitive(error) || error.code == .unavailable:
                return .finished(.failure(error))
            case .failure(let error):
                return .transient(error)
            }
        } exhausted: { error in
            guard error.code == .network else { return error }
            return RainError(
                .network, "the authority could not be reached to \(what); try again",
                underlying: SendableErrorDescription(error))
        }
        return try result.get()
    }
}
