import RainAuthorityAPI
import RainCore
import RainWire

extension ProfileSession {
    /// Asks the authority whether the session is still live: after a pushed revocation
    /// for this profile's app, and once each time the revocation stream is (re)established. One
    /// call with the session's token (Account/Get at the authority): a session the authority
    /// revoked ends here as any refused call ends it (`revokedElsewhere` when another device logged
    /// in), watchers get their `sessionExpired` event; a live session is left as it is, and a
    /// transient failure changes nothing (the next reconnect asks again).
    /// - Returns: whether a session was live before the check and is gone after it.
    @discardableResult
    public func checkLiveness() async -> Bool {
        await restore()
        guard session != nil, loginsInFlight == 0 else { return false }
        do {
            _ = try await withSession(what: "check the session", transientRetries: 0) {
                (authority, appID, token, proof) async throws(RainError) in
                try await authority.getAccountInfo(
                    AuthorityAccountInfoRequest(appID: appID, accessToken: token), caller: AuthorityCaller(proof: proof))
            }
            return false
        } catch {
            let isEnded = session == nil
            logger.info(
                "session.checked",
                ["profile": runtime.name, "ended": String(isEnded), "code": error.code.description])
            return isEnded
        }
    }
}
