import Glibc
import RainAccess
import RainAuthorityAPI
import RainConfig
import RainCore
import RainKeyStore
import RainSystem
import RainTransport
import RainWire

extension DeviceService {
    /// The device's RPCs, one declaration per method of `Method` (proto/PROTOCOL.md): cheap reads
    /// on the loop thread, Account/Get and Wallet/Get kept per session while the authority's stamp
    /// holds (a miss goes to the session actor), Watch as a stream, everything else on the
    /// profile's session actor. ListOutbox is served always (the authority refuses it unless its
    /// dev outbox is on); SlowEcho only with the test methods. Sensitive calls are the ones that
    /// export a secret or start adding a credential.
    static func routes(
        config: DaemonConfig, context: DeviceContext, access: DeviceAccess? = nil, capabilities: [String],
        isTestMethodsEnabled: Bool, storage: (provider: String, control: any StorageControl)?, logger: Logger
    ) -> RouteTable<DeviceCall> {
        let info = GetInfoResponse(
            daemonVersion: daemonVersion, protocolVersion: protocolVersion, capabilities: capabilities,
            maxFrameBytes: UInt32(Frame.defaultMaximumLength), storageProvider: storage?.provider ?? "",
            ptraceScope: PtraceScope.read().wireValue)
        let storageControl = storage?.control
        let freshness = context.authority.readFreshness
        let infoAnswers = InfoAnswers(info: info, health: context.health, anchoring: context.auditAnchoring)
        let authority = context.authority
        let clock = context.clock
        let (audit, auditLogger) = (context.audit, context.logger.child("audit"))
        let (anchoring, ownUID) = (context.auditAnchoring, getuid())
        return RouteTable(
            deadlineClock: clock, outcomeLog: .everyCall(logger),
            unknownMethod: UnknownMethodAnswer(infoMethod: Method.daemonGetInfo, serviceName: "daemon"),
            callMetrics: context.metrics?.calls
        ) {
            // The cheap reads an app makes most are placed `.ready`: answered from bytes kept
            // encoded, by the server's quick lane when the request allows it.
            Route(
                Method.daemonGetInfo, GetInfoRequest.self, GetInfoResponse.self, policy: .read(isOpenToAnyApp: true),
                .ready(
                    { call in infoAnswers.encoded(isOwner: call.peer.uid == ownUID) },
                    fallback: .loop { (_, call) throws(RainError) in infoAnswers.response(isOwner: call.peer.uid == ownUID) }))
            Route(
                Method.sessionGetState, GetSessionStateRequest.self, SessionSnapshot.self, policy: .read(claimsProfile: false),
                .ready(
                    { call in call.runtime.encodedSnapshot() },
                    fallback: .loop { (_, call) throws(RainError) in call.runtime.snapshot() }))
            Route(
                Method.sessionWatch, WatchRequest.self, WatchEvent.self, policy: .read(),
                .stream { (_, call, server) throws(RainError) in
                    let responder = server.responder
                    call.entry.runtime.addWatcher(connection: server.connection, requestID: server.requestID) {
                        responder.send(streamPayload: $0)
                    }
                })
            Route(
                Method.sessionAwaitRestore, AwaitRestoreRequest.self, SessionSnapshot.self,
                policy: .read(claimsProfile: false),
                .actor { (r, call) throws(RainError) in
                    let e = call.entry
                    let policyTimeout = e.runtime.sessionPolicy.restoreTimeout
                    let timeout = r.timeoutMilliseconds == 0 ? policyTimeout : .milliseconds(Int64(r.timeoutMilliseconds))
                    return await Self.awaitRestore(e, timeout: timeout)
                })
            Route(
                Method.sessionRefresh, RefreshSessionRequest.self, SessionSnapshot.self, policy: .send(needsSession: true),
                .actor { (_, call) throws(RainError) in try await call.session.refreshSession() })
            Route(
                Method.authSendLoginCode, SendLoginCodeRequest.self, SendLoginCodeResponse.self, policy: .send(),
                .actor { (r, call) throws(RainError) in try await call.session.sendLoginCode(r.contact) })
            Route(
                Method.authConfirmLoginCode, ConfirmLoginCodeRequest.self, ConfirmLoginCodeResponse.self, policy: .send(),
                .actor { (r, call) throws(RainError) in
                    try await Self.audited(audit, auditLogger, call, .login, detail: "code") {
                        () async throws(RainError) in try await call.session.confirmLoginCode(r.code)
                    }
                })
            Route(
                Method.authLogout, LogoutRequest.self, LogoutResponse.self, policy: .send(),
                .actor { (_, call) throws(RainError) in
                    try await Self.audited(
                        audit, auditLogger, call, .logout,
                        describe: { $0.hadSession ? ($0.isRevokedAtAuthority ? nil : "not_revoked_at_authority") : "no_session" }
                    ) { () async throws(RainError) in try await call.session.logout() }
                })
            Route(
                Method.profileConfigure, ConfigureProfileRequest.self, ConfigureProfileResponse.self, policy: .send(),
                .actor { (r, call) throws(RainError) in
                    if r.sessionPolicy != nil {
                        try Self.requireProfileOwner(access?.apps, profile: call.profile, caller: call.identity)
                    }
                    return try await call.session.configure(passkeyDomain: r.passkeyDomain, sessionPolicy: r.sessionPolicy)
                })
            Route(
                Method.profileChangePasskeyDomain, ChangePasskeyDomainRequest.self, ChangePasskeyDomainResponse.self,
                policy: .send(isCancelledWithCaller: true),
                .actor { (r, call) throws(RainError) in
                    try await Self.changePasskeyDomain(r, call, apps: access?.apps, audit: audit, auditLogger: auditLogger)
                })
            Route(
                Method.passkeyBeginSignUp, BeginPasskeyRequest.self, BeginPasskeyResponse.self, policy: .send(),
                .actor { (_, call) throws(RainError) in try await call.session.beginPasskeySignUp() })
            Route(
                Method.passkeyBeginLogin, BeginPasskeyRequest.self, BeginPasskeyResponse.self, policy: .send(),
                .actor { (_, call) throws(RainError) in try await call.session.beginPasskeyLogin() })
            Route(
                Method.passkeyBeginAdd, BeginPasskeyRequest.self, BeginPasskeyResponse.self,
                policy: .send(needsSession: true, isSensitive: true, userConfirms: Self.confirmAddPasskey),
                validate: { (_, call) throws(RainError) in _ = try await call.session.requirePasskeyDomain() },
                .actor { (_, call) throws(RainError) in try await call.session.beginPasskeyAdd() })
            Route(
                Method.passkeyFinish, FinishPasskeyRequest.self, FinishPasskeyResponse.self, policy: .send(),
                .actor { (r, call) throws(RainError) in
                    let (event, detail) = Self.passkeyEvent(await call.session.pendingPasskeyKind(r.ceremonyID))
                    return try await Self.audited(audit, auditLogger, call, event, detail: detail) { () async throws(RainError) in
                        try await call.session.finishPasskey(ceremonyID: r.ceremonyID, responseJSON: r.responseJSON)
                    }
                })
            Route(
                Method.passkeyCancel, CancelPasskeyRequest.self, CancelPasskeyResponse.self, policy: .send(),
                .actor { (r, call) throws(RainError) in try await call.session.cancelPasskey(ceremonyID: r.ceremonyID) })
            Route(
                Method.passkeyRemove, PasskeyRemoveRequest.self, AccountResponse.self,
                policy: .send(needsSession: true, isSensitive: true, userConfirms: Self.confirmRemovePasskey),
                describe: { (r, call) throws(RainError) in try await call.session.describePasskeyRemoval(r.credentialID) },
                .actor { (r, call) throws(RainError) in
                    try await Self.audited(
                        audit, auditLogger, call, .passkeyRemoved, detail: call.confirmation?.auditDetail ?? "passkey"
                    ) { () async throws(RainError) in
                        let account = try await call.session.removePasskey(r.credentialID, confirmed: call.confirmation)
                        await context.authenticators.platform?.forget(credentialID: r.credentialID)
                        return account
                    }
                })
            Route(
                Method.passkeyRun, RunPasskeyRequest.self, FinishPasskeyResponse.self,
                policy: .send(isCancelledWithCaller: true),
                .actor { (r, call) throws(RainError) in
                    try await Self.runPasskey(
                        r, call, apps: access?.apps, authenticators: context.authenticators, audit: audit,
                        auditLogger: auditLogger, logger: logger)
                })
            Route(
                Method.contactSendVerificationCode, SendLoginCodeRequest.self, SendLoginCodeResponse.self,
                policy: .send(needsSession: true, isSensitive: true, userConfirms: Self.confirmAddContact),
                validate: { (r, _) throws(RainError) in _ = try ProfileSession.normalized(r.contact) },
                .actor { (r, call) throws(RainError) in try await call.session.sendContactVerificationCode(r.contact) })
            Route(
                Method.contactConfirmVerification, ConfirmContactVerificationRequest.self, AccountResponse.self,
                policy: .send(needsSession: true),
                .actor { (r, call) throws(RainError) in
                    try await Self.audited(audit, auditLogger, call, .contactAdded) { () async throws(RainError) in
                        try await call.session.confirmContactVerification(r.code)
                    }
                })
            Route(
                Method.accountGet, GetAccountRequest.self, AccountResponse.self, policy: .read(needsSession: true),
                Self.keptRead(
                    .account, freshness,
                    fallback: { (_, call) throws(RainError) in try await call.session.account() }))
            Route(
                Method.walletGet, GetWalletRequest.self, WalletResponse.self, policy: .read(needsSession: true),
                Self.keptRead(
                    .wallet, freshness,
                    fallback: { (_, call) throws(RainError) in try await call.session.wallet() }))
            // Secrets: the answer goes to the caller only; nothing here logs a payload.
            Route(
                Method.walletExportRecoveryPhrase, ExportRecoveryPhraseRequest.self, ExportRecoveryPhraseResponse.self,
                policy: .send(needsSession: true, isSensitive: true, userConfirms: Self.confirmExportPhrase),
                .actor { (_, call) throws(RainError) in
                    try await Self.audited(
                        audit, auditLogger, call, .export, detail: "recovery_phrase", isEntryRequired: true
                    ) { () async throws(RainError) in try await call.session.exportRecoveryPhrase() }
                })
            Route(
                Method.walletExportPrivateKey, ExportPrivateKeyRequest.self, ExportPrivateKeyResponse.self,
                policy: .send(needsSession: true, isSensitive: true, userConfirms: Self.confirmExportKey),
                validate: { (r, _) throws(RainError) in _ = try ProfileSession.named(r.chain) },
                .actor { (r, call) throws(RainError) in
                    try await Self.audited(
                        audit, auditLogger, call, .export, detail: "private_key:\(r.chain?.rawValue ?? "none")",
                        isEntryRequired: true
                    ) { () async throws(RainError) in try await call.session.exportPrivateKey(chain: r.chain) }
                })
            Self.signingRoutes(audit: audit, auditLogger: auditLogger)
            Route(
                Method.devListOutbox, ListOutboxRequest.self, ListOutboxResponse.self, policy: .read(claimsProfile: false),
                .actor { (_, call) throws(RainError) in
                    // Only this profile's app, newest `outboxListLimit` entries: a reply stays far below the frame limit.
                    let appID = config.settings(for: call.profile).appID
                    let outbox = try await authority.listOutbox(ListOutboxRequest(), caller: .anonymous)
                    let deliveries = outbox.deliveries.filter { $0.appID == appID }.suffix(Self.outboxListLimit)
                    return ListOutboxResponse(
                        entries: deliveries.map {
                            OutboxEntry(
                                contact: $0.kind == "phone" ? .phone($0.contact) : .email($0.contact), code: $0.code,
                                sentAt: $0.sentAt, appID: $0.appID)
                        })
                })
            Self.accessRoutes(access, audit: audit, auditLogger: auditLogger)
            // The daemon's keys (`rainwallet storage …`), the daemon's own uid only. The passphrase
            // and the sealed backup are payloads: never logged.
            Route(
                Method.storageGetStatus, StorageStatusRequest.self, StorageStatusResponse.self,
                policy: .read(isOpenToAnyApp: true, isDaemonOwnerOnly: true),
                .actor { (_, _) throws(RainError) in
                    StorageStatusResponse(status: try await Self.storageControl(storageControl).status())
                })
            Route(
                Method.storageBackup, StorageBackupRequest.self, StorageBackupResponse.self,
                policy: .send(isSensitive: true, userConfirms: Self.confirmBackup, isOpenToAnyApp: true, isDaemonOwnerOnly: true),
                // A device with a remote authority has no master key: say so before asking the
                // user to confirm a backup that cannot be written.
                validate: { (_, _) throws(RainError) in try Self.storageControl(storageControl).checkBackupPossible() },
                .actor { (r, _) throws(RainError) in
                    try await Self.storageControl(storageControl).backup(passphrase: r.passphrase)
                })
            Route(
                Method.storageMigrate, StorageMigrateRequest.self, StorageMigrateProgress.self,
                policy: .send(userConfirms: Self.confirmMigrate, isOpenToAnyApp: true, isDaemonOwnerOnly: true),
                validate: { (r, _) throws(RainError) in _ = try Self.migrationTarget(r.to) },
                .stream { (r, _, server) throws(RainError) in
                    let control = try Self.storageControl(storageControl)
                    let target = try Self.migrationTarget(r.to)
                    let responder = server.responder
                    Task {
                        do throws(RainError) {
                            try await control.migrate(to: target) { line in
                                if let bytes = try? StorageMigrateProgress(line: line).encode() {
                                    responder.send(streamPayload: bytes)
                                }
                            }
                            responder.respond(.ok([]))
                        } catch {
                            responder.fail(error)
                        }
                    }
                })
            // The audit log: for the daemon's own uid, whatever the profile.
            Route(
                Method.auditRead, ReadAuditLogRequest.self, ReadAuditLogResponse.self,
                policy: .read(isOpenToAnyApp: true, isDaemonOwnerOnly: true),
                .actor { (r, call) throws(RainError) in
                    try await Self.readAuditLog(r, call, audit: audit, anchoring: anchoring)
                })
            if isTestMethodsEnabled {
                Route(
                    Method.testSlowEcho, SlowEchoRequest.self, SlowEchoResponse.self, policy: .read(),
                    .actor { (r, _) throws(RainError) in
                        await clock.sleep(for: .milliseconds(Int64(min(r.delayMilliseconds, 60_000))))
                        return SlowEchoResponse(data: r.data)
                    })
            }
        }
    }

    /// What the user confirms on the prompt (what moves money or adds a credential).
    static let confirmExportPhrase = "export the wallet's recovery phrase (whoever sees it controls the wallet)"
    static let confirmExportKey = "export a private key of the wallet (whoever sees it controls those funds)"
    static let confirmAddPasskey = "add a passkey to the account (it can log in as you)"
    static let confirmRemovePasskey = "remove a passkey from the account (it will no longer log in)"
    static let confirmAddContact = "add a backup contact to the account (codes sent to it log in as you)"
    static let confirmBackup = "write a passphrase backup of the embedded authority's master key (it opens every wallet)"
    static let confirmMigrate = "move the daemon's keys to another key provider"

    /// The methods that reach the daemon's keys.

    /// The key provider a migration names.
    /// - Throws: RAIN_102 (field `to`) for a name that is not a provider.
    static func migrationTarget(_ name: String) throws(RainError) -> KeyProviderKind {
        guard let target = KeyProviderKind(rawValue: name) else {
            throw RainError.invalid("\(name) is not a key provider: tpm2, secret-service or file", field: "to")
        }
        return target
    }

    /// What answers the storage methods.
    /// - Throws: RAIN_501 when this service has none.
    static func storageControl(_ control: (any StorageControl)?) throws(RainError) -> any StorageControl {
        guard let control else {
            throw RainError(.provider, "this daemon does not manage its keys through the socket; use `rainwalletd storage`")
        }
        return control
    }

    /// Account/Get or Wallet/Get: with an authority that tells whether an answer still stands
    /// (`ReadFreshness`), placed `.ready` on the answer the profile keeps (`ProfileRuntime.kept`),
    /// read through `fallback` on the session actor when there is none, and kept then; without
    /// one, `fallback` alone (every read asks the authority).
    static func keptRead<Request, Response>(
        _ kind: ProfileRuntime.KeptRead, _ freshness: (any ReadFreshness)?,
        fallback: @escaping @Sendable (Request, DeviceCall) async throws(RainError) -> Response
    ) -> RouteHandler<DeviceCall, Request, Response> {
        guard let freshness else { return .actor(fallback) }
        return .ready(
            { call in freshness.stamp().flatMap { call.runtime.kept(kind, stamp: $0) } },
            fallback: .actor { (request, call) throws(RainError) in
                // The ticket and the stamp are taken before the authority is asked, so an answer
                // read across a change is kept under the older stamp and never served as current.
                let (runtime, ticket, stamp) = (call.runtime, call.runtime.readTicket(), freshness.stamp())
                let response = try await fallback(request, call)
                Self.keep(kind, response, runtime, ticket, stamp)
                return response
            })
    }

    /// Keeps an answer read from the authority, stamped before it was asked.
    private static func keep<Response: WireMessage>(
        _ kind: ProfileRuntime.KeptRead, _ response: Response, _ runtime: ProfileRuntime,
        _ ticket: ProfileRuntime.ReadTicket, _ stamp: UInt64?
    ) {
        guard let stamp, let bytes = try? response.encode() else { return }
        runtime.keep(kind, bytes, stamp: stamp, ticket: ticket)
    }

    /// Only the app that owns the profile (its first approved app, else the first app the policy
    /// names for it) may set its session policy or move its passkey domain; an app approved
    /// through `*` owns nothing. Without per-app access (`access == nil`) every caller may.
    /// - Parameters:
    ///   - field: what is set (`sessionPolicy`, `passkeyDomain`), the refusal's field.
    ///   - what: the action, as the refusal says it ("set its session policy").
    ///   - instead: what the refused app can do instead.
    /// - Throws: RAIN_202 `not_profile_owner`.
    static func requireProfileOwner(
        _ apps: AppAccess?, profile: String, caller identity: CallerIdentity?, field: String = "sessionPolicy",
        what: String = "set its session policy", instead: String? = nil
    ) throws(RainError) {
        guard let apps else { return }
        let (approvals, preApproved) = apps.list()
        let owner = approvals.owner(of: profile) ?? preApproved[profile]?.first
        if let owner, let identity, owner.matches(identity) { return }
        let who = identity.map { "\($0.appPath) (pid \($0.pid))" } ?? "this app"
        let ownerText = owner.map { "its owner \($0.appPath)" } ?? "its owner (it has none yet)"
        let hint =
            instead
            ?? "drop sessionPolicy from this app's RainWalletConfig, or set it in the daemon's config "
            + "(profiles.\(profile).sessionPolicy)"
        throw RainError(
            .unauthorized, "\(who) may use profile \(profile) but not \(what): only \(ownerText) may; \(hint)",
            details: RainError.Details(reason: "not_profile_owner", field: field))
    }

    /// `Profile/ChangePasskeyDomain`: checks the change, then, for a move from one domain to
    /// another, requires the profile's owner and the user's confirmation on the prompt before it
    /// is recorded. A move is audited (`passkey_domain_changed`, `old → new`) whatever its
    /// outcome; the same domain again, or a first domain, is answered without a prompt, as
    /// `Profile/Configure` would.
    /// - Throws: the checks' RAIN_102; RAIN_202 `not_profile_owner` for another app; RAIN_202
    ///   `no_prompt` and the prompt's RAIN_401/RAIN_302 (nothing changes).
    static func changePasskeyDomain(
        _ r: ChangePasskeyDomainRequest, _ call: DeviceCall, apps: AppAccess?, audit: (any AuditRecorder)?,
        auditLogger: Logger
    ) async throws(RainError) -> ChangePasskeyDomainResponse {
        let change = try await call.session.passkeyDomainChange(to: r.passkeyDomain)
        guard change.isMove, let old = change.from else { return try await call.session.changePasskeyDomain(change) }
        return try await Self.audited(audit, auditLogger, call, .passkeyDomainChanged, detail: "\(old) → \(change.to)") {
            () async throws(RainError) in
            try Self.requireProfileOwner(
                apps, profile: call.profile, caller: call.identity, field: "passkeyDomain",
                what: "move its passkey domain",
                instead: "the app that owns the profile asks for the new domain (`rainwallet domain set` run as that app)")
            if let apps {
                // An approved caller was identified before the route ran; without an identity
                // the owner check above has refused already.
                guard let identity = call.identity else { throw RainError(.unauthorized, "the caller is not identified") }
                try await apps.ask(
                    action: Self.confirmPasskeyDomainMove(profile: call.profile, from: old, to: change.to),
                    caller: identity, profile: call.profile)
            }
            return try await call.session.changePasskeyDomain(change)
        }
    }

    /// What the user confirms to move a profile's passkey domain: both domains and what it does.
    static func confirmPasskeyDomainMove(profile: String, from old: String, to new: String) -> String {
        "move profile \(profile) from passkey domain \(old) to \(new) (passkeys made for \(old) stay on the account "
            + "but no longer log in here; the session stays)"
    }
}
