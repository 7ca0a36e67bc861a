import FoundationEssentials
internal import RainWire

/// Passkeys with the app's own authenticator: each call begins a ceremony in the daemon, runs the
/// `anchor` authenticator in this process, then finishes it (or cancels it when the authenticator
/// was dismissed). The `authenticator:` variants below run the whole ceremony in the daemon.
extension RainProvider {
    /// Creates a brand-new account and wallet with a new passkey, and logs in.
    ///
    /// - Parameter anchor: the authenticator that creates the passkey.
    /// - Returns: the new session.
    /// - Throws: RAIN_102 without `RainWalletConfig.passkeyDomain` (before any request), while a
    ///   session is live (log out first, `reason` `session_live`), or when the daemon refuses the
    ///   response (the failed check's `reason`); RAIN_401 when the authenticator was dismissed (the
    ///   session is untouched).
    @discardableResult
    nonisolated(nonsending) public func signUpWithPasskey(anchor: any PasskeyAuthenticator) async throws -> SessionSnapshot {
        try await passkeyCeremony(Method.passkeyBeginSignUp, anchor: anchor, isRegistration: true)
    }

    /// Logs in with an existing passkey of the domain: the same account and wallet it was created for.
    ///
    /// Over a live session opened with a code, the passkey login replaces it; over a live passkey
    /// session it is refused (RAIN_102 `passkey_session_live`).
    /// - Parameter anchor: the authenticator that holds the passkey.
    /// - Returns: the new session.
    /// - Throws: RAIN_102 without `RainWalletConfig.passkeyDomain` (before any request), over a live
    ///   passkey session, for an unknown passkey (`credential_unknown`) or a refused response;
    ///   RAIN_401 when the authenticator was dismissed (the session is untouched).
    @discardableResult
    nonisolated(nonsending) public func loginWithPasskey(anchor: any PasskeyAuthenticator) async throws -> SessionSnapshot {
        try await passkeyCeremony(Method.passkeyBeginLogin, anchor: anchor, isRegistration: false)
    }

    /// Adds a passkey to the logged-in account (same account, same wallet).
    ///
    /// - Parameter anchor: the authenticator that creates the passkey.
    /// - Throws: RAIN_102 without `RainWalletConfig.passkeyDomain` (before any request) or for a
    ///   refused response (`credential_already_registered` when it is already registered);
    ///   RAIN_201 without a live session; RAIN_401 when the authenticator was dismissed.
    nonisolated(nonsending) public func addPasskey(anchor: any PasskeyAuthenticator) async throws {
        _ = try await passkeyCeremony(Method.passkeyBeginAdd, anchor: anchor, isRegistration: true)
    }

    /// Checks the provider has a passkey domain and the daemon's profile was configured with it.
    /// - Throws: RAIN_102 `no_passkey_domain` without one (before any request); the profile's
    ///   refusal of it (`passkey_domain_mismatch`, …).
    nonisolated(nonsending) private func requirePasskeyDomain() async throws(RainError) {
        guard let domain = config.passkeyDomain, !domain.isEmpty else {
            throw RainError.invalid(
                "passkeys need a domain: create the provider with RainWalletConfig(passkeyDomain:)",
                field: "passkeyDomain", reason: "no_passkey_domain")
        }
        try await applyConfiguration(try connection())
        if let refusal = configurationRefusal(field: "passkeyDomain") { throw refusal }
    }

    /// Begin, authenticator, finish; a dismissed authenticator cancels the ceremony and rethrows.
    nonisolated(nonsending) private func passkeyCeremony(_ begin: String, anchor: any PasskeyAuthenticator, isRegistration: Bool)
        async throws(RainError) -> SessionSnapshot
    {
        try await requirePasskeyDomain()
        let ceremony = try await call(begin, BeginPasskeyRequest(), as: BeginPasskeyResponse.self)
        let responseJSON: String
        do {
            responseJSON =
                isRegistration
                ? try await anchor.createCredential(optionsJSON: ceremony.optionsJSON, origin: ceremony.origin)
                : try await anchor.getAssertion(optionsJSON: ceremony.optionsJSON, origin: ceremony.origin)
        } catch {
            // Whatever the authenticator reported, the ceremony must not stay open.
            _ = try? await call(
                Method.passkeyCancel, CancelPasskeyRequest(ceremonyID: ceremony.ceremonyID),
                as: CancelPasskeyResponse.self)
            throw Self.authenticatorError(error)
        }
        let finished = try await call(
            Method.passkeyFinish, FinishPasskeyRequest(ceremonyID: ceremony.ceremonyID, responseJSON: responseJSON),
            as: FinishPasskeyResponse.self)
        return finished.session
    }
}

extension RainProvider {
    /// What the app sees of an error its authenticator threw: a `RainError` as it is, a
    /// `CancellationError` as RAIN_401 (the ceremony was cancelled), anything else as RAIN_501.
    static func authenticatorError(_ error: any Error) -> RainError {
        if let error = error as? RainError { return error }
        if error is CancellationError { return RainError(.userCancelled, "the passkey ceremony was cancelled") }
        return RainError(.provider, "the passkey authenticator failed: \(error)")
    }

    /// Moves this app's profile to another passkey domain, for an app whose passkeys move to a new
    /// domain. The daemon asks the user to confirm it on its prompt (the call waits for the
    /// answer, up to a minute). The session stays; the account keeps the old domain's passkeys,
    /// which no longer log in on this profile (RAIN_102 `passkey_other_domain`): the user logs in
    /// with a code or adds a passkey for the new domain (`addPasskey(anchor:)`).
    ///
    /// Only the app that owns the profile may ask. Once the profile uses `domain`, a refusal of
    /// `RainWalletConfig.passkeyDomain` (the same domain) is forgotten, so the passkey calls work
    /// at once. The profile's domain again is answered without a prompt.
    ///
    /// ```swift
    /// let wallet = RainProvider(RainWalletConfig(passkeyDomain: "new.example"))
    /// do {
    ///     try await wallet.awaitSessionRestore()
    /// } catch let error as RainError where error.details.reason == "passkey_domain_mismatch" {
    ///     try await wallet.changePasskeyDomain(to: "new.example")
    /// }
    /// ```
    /// - Parameter domain: the new domain, as `RainWalletConfig.passkeyDomain` takes it.
    /// - Returns: the domain the profile had before (nil when it had none).
    /// - Throws: RAIN_102 for an invalid domain (before any request), for a domain the daemon's
    ///   config sets (`passkey_domain_from_config`: edit the config instead), or when another change
    ///   was made meanwhile (`passkey_domain_mismatch`); RAIN_202 `not_profile_owner` from an app
    ///   that may use the profile but does not own it, `no_prompt` when no prompt can be shown;
    ///   RAIN_401 when the user refused or let the prompt time out (nothing changes); RAIN_302 while
    ///   another prompt is open; RAIN_101 when the daemon is not running.
    @discardableResult
    nonisolated(nonsending) public func changePasskeyDomain(to domain: String) async throws -> String? {
        try RainWalletConfig(passkeyDomain: domain).validatePasskeyDomain()
        let response = try await call(
            Method.profileChangePasskeyDomain, ChangePasskeyDomainRequest(passkeyDomain: domain),
            as: ChangePasskeyDomainResponse.self)
        if config.passkeyDomain == response.passkeyDomain { forgetPasskeyDomainRefusal() }
        return response.previousDomain.isEmpty ? nil : response.previousDomain
    }

    /// The passkey domain of this provider's profile in the daemon (from its config, or set by an
    /// earlier client), or nil when it has none. Sets nothing.
    /// - Throws: RAIN_101 when the daemon is not running.
    nonisolated(nonsending) public func profilePasskeyDomain() async throws -> String? {
        let response = try await call(
            Method.profileConfigure, ConfigureProfileRequest(passkeyDomain: ""), as: ConfigureProfileResponse.self)
        return response.passkeyDomain.isEmpty ? nil : response.passkeyDomain
    }
}

/// An authenticator the daemon runs itself: the ceremony happens inside `rainwalletd`, so this
/// process never holds the assertion (it could not replay one).
public enum BuiltInAuthenticator: String, Sendable, Hashable, CaseIterable {
    /// A FIDO2 security key plugged into this machine (USB). Every plugged key blinks; the first
    /// touched is used. A key with a PIN is chosen by a touch, then its PIN is typed on the
    /// daemon's prompt (never in the app), then it is touched again.
    case securityKey = "security-key"
    /// The daemon's platform authenticator (keys in the TPM). Until the daemon has one, every call
    /// is RAIN_404 `platform_authenticator_unavailable`, naming what to configure.
    case platform

    var wire: PasskeyAuthenticatorKind { self == .platform ? .platform : .securityKey }
}

/// Passkeys whose authenticator runs in the daemon (`Passkey/Run`): one call each.
extension RainProvider {
    /// Creates a brand-new account and wallet with a new passkey made by an authenticator of the
    /// daemon, and logs in.
    ///
    /// ```swift
    /// let wallet = RainProvider(RainWalletConfig(passkeyDomain: "example.com"))
    /// let session = try await wallet.signUpWithPasskey(authenticator: .securityKey)
    /// ```
    /// - Parameters:
    ///   - authenticator: which of the daemon's authenticators makes the passkey.
    ///   - timeout: how long the authenticator may wait for the user (touch, PIN); 60 s when nil,
    ///     at most 10 minutes.
    /// - Returns: the new session.
    /// - Throws: as ``signUpWithPasskey(anchor:)``, and RAIN_401 when nobody touched a key in time
    ///   (`security_key_timeout`), the PIN prompt was dismissed (`prompt_dismissed`) or the call was
    ///   cancelled; RAIN_202 for a wrong PIN (`security_key_pin_invalid`, with
    ///   `attemptsRemaining`) or a blocked one; RAIN_404 without a key (`security_key_not_found`),
    ///   for a key removed meanwhile (`security_key_removed`) and for
    ///   `platform_authenticator_unavailable`. The session is untouched by every failure.
    @discardableResult
    nonisolated(nonsending) public func signUpWithPasskey(authenticator: BuiltInAuthenticator, timeout: Duration? = nil)
        async throws -> SessionSnapshot
    {
        try await runPasskey(.signUp, authenticator, timeout)
    }

    /// Logs in with a passkey held by an authenticator of the daemon.
    /// - Parameters:
    ///   - authenticator: which of the daemon's authenticators holds the passkey.
    ///   - timeout: as for ``signUpWithPasskey(authenticator:timeout:)``.
    /// - Returns: the new session.
    /// - Throws: as ``loginWithPasskey(anchor:)`` and ``signUpWithPasskey(authenticator:timeout:)``;
    ///   RAIN_404 `security_key_no_credentials` when the touched key has no passkey for the domain.
    @discardableResult
    nonisolated(nonsending) public func loginWithPasskey(authenticator: BuiltInAuthenticator, timeout: Duration? = nil)
        async throws -> SessionSnapshot
    {
        try await runPasskey(.login, authenticator, timeout)
    }

    /// Adds a passkey made by an authenticator of the daemon to the logged-in account, once the
    /// user confirmed it on the daemon's prompt.
    /// - Parameters:
    ///   - authenticator: which of the daemon's authenticators makes the passkey.
    ///   - timeout: as for ``signUpWithPasskey(authenticator:timeout:)``.
    /// - Throws: as ``addPasskey(anchor:)`` and ``signUpWithPasskey(authenticator:timeout:)``;
    ///   RAIN_302 `security_key_credential_excluded` when the key already holds a passkey of the account.
    nonisolated(nonsending) public func addPasskey(authenticator: BuiltInAuthenticator, timeout: Duration? = nil)
        async throws
    {
        _ = try await runPasskey(.add, authenticator, timeout)
    }

    nonisolated(nonsending) private func runPasskey(
        _ ceremony: PasskeyCeremonyType, _ authenticator: BuiltInAuthenticator, _ timeout: Duration?
    ) async throws(RainError) -> SessionSnapshot {
        try await requirePasskeyDomain()
        let milliseconds =
            timeout.map {
                UInt32(clamping: max(1, $0.components.seconds * 1000 + $0.components.attoseconds / 1_000_000_000_000_000))
            } ?? 0
        let finished = try await call(
            Method.passkeyRun,
            RunPasskeyRequest(ceremony: ceremony, authenticator: authenticator.wire, timeoutMilliseconds: milliseconds),
            as: FinishPasskeyResponse.self)
        return finished.session
    }
}
