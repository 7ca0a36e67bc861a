import RainCore
import RainPasskeyDomain
import RainWire

/// A move of the profile's passkey domain (`Profile/ChangePasskeyDomain`). The route asks the
/// user between `passkeyDomainChange(to:)`, which refuses what would be refused anyway, and
/// `changePasskeyDomain(_:)`, which records it. The session is left as it is: it belongs to the
/// account, which keeps its passkeys of every domain.
extension ProfileSession {
    /// A passkey domain change as checked before the prompt.
    struct PasskeyDomainChange: Sendable, Equatable {
        /// The profile's domain when it was checked; nil when it had none.
        var from: String?
        /// The new domain, validated.
        var to: String

        /// Whether the user must confirm it: a domain the profile has moves to another one.
        /// Setting a first domain is what `configure` does for any client, without a prompt.
        var isMove: Bool { from != nil && from != to }
    }

    /// Checks a change of the passkey domain to `requested` without making it.
    /// - Throws: RAIN_102 `invalid_passkey_domain` for a value that is not a registrable domain;
    ///   RAIN_102 `passkey_domain_from_config` when the daemon's config sets the domain (the config
    ///   is what a user edits to move it; nobody asks the daemon).
    func passkeyDomainChange(to requested: String) async throws(RainError) -> PasskeyDomainChange {
        await restore()
        let domain = try PasskeyDomain.validate(requested)
        if let configured = runtime.settings.passkeyDomain, configured != domain {
            throw RainError.invalid(
                "profile \(runtime.name) uses passkey domain \(configured), set by the daemon's config: change "
                    + "profiles.\(runtime.name).passkeyDomain there and restart rainwalletd",
                field: "passkeyDomain", reason: "passkey_domain_from_config")
        }
        return PasskeyDomainChange(from: passkeyDomain, to: domain)
    }

    /// Records a change checked by `passkeyDomainChange(to:)` (and confirmed by the user when it
    /// is a move). A passkey ceremony begun for the old domain is dropped: finished after the
    /// move, it would log in or add a passkey for a domain the profile no longer uses.
    /// - Returns: the domain now and the one before.
    /// - Throws: RAIN_102 `passkey_domain_mismatch` when the domain changed since it was checked
    ///   (another change was confirmed meanwhile: nothing is done, ask again); RAIN_502 when the
    ///   profile's state cannot be written (nothing changed).
    func changePasskeyDomain(_ change: PasskeyDomainChange) async throws(RainError) -> ChangePasskeyDomainResponse {
        await restore()
        guard passkeyDomain == change.from else {
            throw RainError.invalid(
                "profile \(runtime.name) moved to passkey domain \(passkeyDomain ?? "none") while this change waited: "
                    + "ask again", field: "passkeyDomain", reason: "passkey_domain_mismatch")
        }
        guard passkeyDomain != change.to else {
            return ChangePasskeyDomainResponse(passkeyDomain: change.to, previousDomain: change.to)
        }
        try await context.profileState.save(passkeyDomain: change.to, profile: runtime.name)
        passkeyDomain = change.to
        challenges.passkey = nil
        logger.info(
            "profile.passkey_domain_changed", ["profile": runtime.name, "from": change.from ?? "none", "to": change.to])
        return ChangePasskeyDomainResponse(passkeyDomain: change.to, previousDomain: change.from ?? "")
    }
}
