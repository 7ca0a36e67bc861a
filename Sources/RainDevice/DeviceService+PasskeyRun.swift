import RainAccess
import RainAuthorityAPI
import RainCore
import RainWire

extension DeviceService {
    /// How long a daemon authenticator waits for the user when the call does not say.
    static let defaultAuthenticatorTimeout: Duration = .seconds(60)
    /// The longest wait a call may ask for.
    static let maximumAuthenticatorTimeoutMilliseconds: UInt32 = 600_000

    /// `Passkey/Run`: checks what is asked before anything begins (the kind, the authenticator,
    /// the domain; for an add, the session and then the user's confirmation, as `BeginAdd`'s),
    /// then runs the ceremony on the profile's session with the call's prompt. Audited as
    /// `Passkey/Finish` is.
    /// - Throws: RAIN_102 for an unknown ceremony or authenticator; RAIN_404
    ///   `platform_authenticator_unavailable` without a platform authenticator; RAIN_201 for an
    ///   add without a session; the prompt's, the authenticator's and the ceremony's errors.
    static func runPasskey(
        _ r: RunPasskeyRequest, _ call: DeviceCall, apps: AppAccess?, authenticators: DaemonAuthenticators,
        audit: (any AuditRecorder)?, auditLogger: Logger, logger: Logger
    ) async throws(RainError) -> FinishPasskeyResponse {
        let kind = try ceremonyKind(r.ceremony)
        let authenticator = try daemonAuthenticator(r.authenticator, in: authenticators)
        let timeout =
            r.timeoutMilliseconds == 0
            ? defaultAuthenticatorTimeout
            : .milliseconds(Int64(min(r.timeoutMilliseconds, maximumAuthenticatorTimeoutMilliseconds)))
        _ = try await call.session.requirePasskeyDomain()
        if kind == .add {
            guard await call.session.hasSession() else { throw await call.session.noSessionError() }
            if let apps {
                guard let identity = call.identity else { throw RainError(.unauthorized, "the caller is not identified") }
                try await apps.ask(action: confirmAddPasskey, caller: identity, profile: call.profile)
            }
        }
        let prompt = CallPrompt(
            apps: apps, identity: call.identity, profile: call.profile, action: passkeyAction(kind), logger: logger)
        let (event, detail) = passkeyEvent(kind)
        return try await audited(audit, auditLogger, call, event, detail: detail + "_" + authenticatorName(r.authenticator)) {
            () async throws(RainError) in
            try await call.session.runPasskey(kind, with: authenticator, timeout: timeout, prompt: prompt)
        }
    }

    /// The ceremony a `PasskeyCeremonyType` names.
    /// - Throws: RAIN_102 (field `ceremony`) for an unspecified or unknown one.
    static func ceremonyKind(_ type: PasskeyCeremonyType) throws(RainError) -> PasskeyCeremonyKind {
        switch type {
        case .signUp: return .signUp
        case .login: return .login
        case .add: return .add
        default:
            throw RainError.invalid("ceremony must be sign-up, login or add (it was \(type))", field: "ceremony")
        }
    }

    /// The daemon's authenticator of `kind`.
    /// - Throws: RAIN_102 (field `authenticator`) for an unspecified or unknown kind; RAIN_404
    ///   `platform_authenticator_unavailable` or `security_key_unavailable` when the daemon has none.
    static func daemonAuthenticator(
        _ kind: PasskeyAuthenticatorKind, in authenticators: DaemonAuthenticators
    ) throws(RainError) -> any DaemonAuthenticator {
        switch kind {
        case .securityKey:
            guard let securityKey = authenticators.securityKey else {
                throw RainError(
                    .unavailable, "this daemon was started without security key support; use the file authenticator",
                    details: RainError.Details(reason: "security_key_unavailable"))
            }
            return securityKey
        case .platform:
            guard let platform = authenticators.platform else {
                throw RainError(
                    .unavailable,
                    "no platform authenticator: it keeps its keys in the TPM, so set storage.provider: tpm2 in the "
                        + "daemon's config (or run `rainwallet storage migrate --to tpm2`) and restart rainwalletd; "
                        + "or use --authenticator security-key",
                    details: RainError.Details(reason: "platform_authenticator_unavailable", field: "authenticator"))
            }
            return platform
        default:
            throw RainError.invalid(
                "authenticator must be security-key or platform (it was \(kind)); an app's own authenticator uses "
                    + "Passkey/BeginSignUp, BeginLogin or BeginAdd and Finish", field: "authenticator")
        }
    }

    /// The authenticator's name in the audit log.
    static func authenticatorName(_ kind: PasskeyAuthenticatorKind) -> String {
        kind == .platform ? "platform" : "security_key"
    }

    /// The action the prompt names when it asks for a PIN.
    static func passkeyAction(_ kind: PasskeyCeremonyKind) -> String {
        switch kind {
        case .signUp: "sign up with a passkey (a new account and wallet)"
        case .login: "log in with your passkey"
        case .add: "add a passkey to the account (it can log in as you)"
        }
    }
}

/// The prompt of one `Passkey/Run` call, as its authenticator sees it: PINs are asked on the
/// trusted prompt with the call's app and profile shown; what the authenticator waits for is
/// logged (never a secret).
struct CallPrompt: DaemonAuthenticatorPrompt {
    let apps: AppAccess?
    let identity: CallerIdentity?
    let profile: String
    let action: String
    let logger: Logger

    func askSecret(_ question: SecretQuestion) async throws(RainError) -> SecretBytes {
        guard let apps, let identity else {
            throw RainError(
                .unauthorized,
                "\(question.what) can only be typed on the daemon's prompt, and this daemon shows none: set "
                    + "access.pinentry in its config",
                details: RainError.Details(reason: "no_prompt"))
        }
        return try await apps.askSecret(action: action, caller: identity, profile: profile, question: question)
    }

    func confirm(_ what: String) async throws(RainError) {
        guard let apps, let identity else {
            throw RainError(
                .unauthorized,
                "\(what) needs the user's confirmation on the daemon's prompt, and this daemon shows none: set "
                    + "access.pinentry in its config",
                details: RainError.Details(reason: "no_prompt"))
        }
        try await apps.ask(action: what, caller: identity, profile: profile)
    }

    func whileWaiting<T: Sendable>(
        _ status: String, _ body: @escaping @Sendable () async throws(RainError) -> T
    ) async throws(RainError) -> T {
        logger.info("passkey.authenticator_waits", ["profile": profile, "status": status])
        guard let apps, let identity else { return try await body() }
        return try await apps.showWhile(status: status, action: action, caller: identity, profile: profile, body)
    }
}
