import FoundationEssentials
import RainCore
package import RainWire

/// An approved app of a profile, as `Apps/List` shows it.
package typealias RainAppEntry = RainWire.AppEntry
/// The guarded security settings: the confirmed digest and the changes waiting.
package typealias RainSettingsStatus = RainWire.GetSettingsResponse
/// Where the next prompt appears, and a terminal multiplexer that can read it there.
package typealias RainPromptPlace = RainWire.GetPromptResponse

/// Per-app access, for `rainwallet apps`, `settings` and `prompt`. Every change is
/// confirmed by the user on the daemon's prompt, never by the caller.
extension RainProvider {
    /// Every approved app (all profiles) and the pre-approved apps.
    nonisolated(nonsending) package func listApps() async throws(RainError) -> [RainAppEntry] {
        try await call(Method.appsList, ListAppsRequest(), as: ListAppsResponse.self).apps
    }

    /// Approves the program at `path` (its content now; `script` for an interpreter) for this
    /// provider's profile, once the user confirms on the prompt.
    /// - Throws: RAIN_401 when the prompt is dismissed; RAIN_202 `no_prompt` when none can be shown.
    nonisolated(nonsending) package func approveApp(path: String, script: String?) async throws(RainError) -> RainAppEntry? {
        try await call(Method.appsApprove, ApproveAppRequest(path: path, script: script ?? ""), as: ApproveAppResponse.self).app
    }

    /// Revokes `path`'s approval of this provider's profile, once the user confirms.
    nonisolated(nonsending) package func revokeApp(path: String) async throws(RainError) {
        _ = try await call(Method.appsRevoke, RevokeAppRequest(path: path), as: RevokeAppResponse.self)
    }

    /// The guarded settings: what waits for confirmation, what the policy fixes.
    nonisolated(nonsending) package func settingsStatus() async throws(RainError) -> RainSettingsStatus {
        try await call(Method.settingsGet, GetSettingsRequest(), as: GetSettingsResponse.self)
    }

    /// Confirms the waiting settings (the ones whose digest `settingsStatus` returned) on the prompt.
    /// - Returns: the digest now confirmed.
    nonisolated(nonsending) package func confirmSettings(requestedDigest: String) async throws(RainError) -> String {
        try await call(
            Method.settingsConfirm, ConfirmSettingsRequest(requestedDigest: requestedDigest), as: ConfirmSettingsResponse.self
        ).confirmedDigest
    }

    /// Shows the daemon's prompts on `terminal` from now on (confirmed on the current place or the
    /// display, else by the place `secret`).
    nonisolated(nonsending) package func registerPrompt(terminal: String, secret: String? = nil) async throws(RainError)
        -> String
    {
        try await call(
            Method.promptRegister, RegisterPromptRequest(terminal: terminal, secret: secret ?? ""),
            as: RegisterPromptResponse.self
        ).terminal
    }

    /// Registers the security key touched next as a confirmation key, once confirmed on the
    /// prompt: from then on every confirmation also asks a touch of a registered key.
    /// - Returns: the key's product name and how many keys are registered now.
    nonisolated(nonsending) package func addConfirmationKey() async throws(RainError) -> (name: String, keyCount: Int) {
        let response = try await call(Method.promptAddKey, AddPromptKeyRequest(), as: AddPromptKeyResponse.self)
        return (response.name, Int(response.keyCount))
    }

    /// Removes every confirmation key, once confirmed on the prompt (the code, then a touch of a
    /// registered key).
    /// - Returns: how many keys were removed.
    nonisolated(nonsending) package func removeConfirmationKeys() async throws(RainError) -> Int {
        Int(try await call(Method.promptRemoveKeys, RemovePromptKeysRequest(), as: RemovePromptKeysResponse.self).removed)
    }

    /// Where the next prompt appears (the registered terminal, else the display), and a terminal
    /// multiplexer holding that terminal's other end, which can read the screen.
    /// - Throws: RAIN_102 `per_app_access_off` from a daemon without per-app access, or the
    ///   unknown-method error from one older than `Prompt/Get`.
    nonisolated(nonsending) package func promptPlace() async throws(RainError) -> RainPromptPlace {
        try await call(Method.promptGet, GetPromptRequest(), as: GetPromptResponse.self)
    }
}
