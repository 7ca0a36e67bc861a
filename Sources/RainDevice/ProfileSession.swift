import Foundation
import RainAuthority
import RainCore
import RainWire

/// Shared dependencies of every profile.
public struct DeviceContext: Sendable {
    public var authority: any Authority
    public var storage: any SecureStorage
    public var clock: any RainClock
    public var deviceID: String
    public var logger: Logger

    public init(authority: any Authority, storage: any SecureStorage, clock: any RainClock, deviceID: String, logger: Logger) {
        self.authority = authority
        self.storage = storage
        self.clock = clock
        self.deviceID = deviceID
        self.logger = logger
    }
}

/// The session manager of one profile: the single owner of its session, its pending login
/// challenge and its storage. Every mutation goes through this actor; the loop reads the
/// published `ProfileRuntime` snapshot.
public actor ProfileSession {
    enum Phase {
        case loading
        case ready
    }

    public nonisolated let runtime: ProfileRuntime
    private let context: DeviceContext
    private var phase = Phase.loading
    private var session: StoredSession?
    private var pending: SendCodeResult?
    private var restoreTask: Task<Void, Never>?
    private let logger: Logger

    init(runtime: ProfileRuntime, context: DeviceContext) {
        self.runtime = runtime
        self.context = context
        self.logger = context.logger.child("profile")
    }

    /// Loads the stored session once; later calls wait for the first.
    public func restore() async {
        if let restoreTask {
            await restoreTask.value
            return
        }
        let task = Task { await self.loadStored() }
        restoreTask = task
        await task.value
    }

    private func loadStored() async {
        let stored = await context.storage.load(profile: runtime.name)
        session = stored
        phase = .ready
        runtime.publish(session: stored)
        logger.info("session.restored", ["profile": runtime.name, "present": stored == nil ? "false" : "true"])
    }

    private var appID: String { runtime.settings.appID }

    /// Sends a login code; replaces this profile's pending challenge.
    public func sendLoginCode(_ contact: RainWalletContact?) async throws(RainError) -> SendLoginCodeResponse {
        guard let contact else {
            throw RainError.invalid("the request names no contact: set an email or a phone number", field: "contact")
        }
        let normalized = try contact.normalized()
        await restore()
        let result = try await context.authority.sendLoginCode(
            SendCodeRequest(appID: appID, deviceID: context.deviceID, contact: normalized))
        pending = result
        return SendLoginCodeResponse(contact: result.contact, expiresAt: result.expiresAt)
    }

    /// Confirms the pending code; on success stores the session before answering.
    public func confirmLoginCode(_ code: String) async throws(RainError) -> ConfirmLoginCodeResponse {
        let trimmed = code.trimmingCharacters(in: .whitespaces)
        guard trimmed.utf8.count == 6, trimmed.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            throw RainError.invalid("a login code is 6 digits", field: "code", reason: "malformed_code")
        }
        await restore()
        guard let challenge = pending else {
            throw RainError.invalid(
                "no login code is pending on this profile; send one first", field: "code", reason: "no_pending_code")
        }
        let result = try await context.authority.confirmLoginCode(
            ConfirmCodeRequest(appID: appID, deviceID: context.deviceID, challengeID: challenge.challengeID, code: trimmed))
        if pending?.challengeID == challenge.challengeID { pending = nil }
        let now = context.clock.now
        let stored = StoredSession(
            accountID: result.accountID, walletID: result.walletID, accessToken: result.tokens.accessToken,
            refreshToken: result.tokens.refreshToken, expiresAt: now.adding(result.tokens.accessLifetime),
            lifetimeSeconds: result.tokens.accessLifetime.timeInterval, contact: challenge.contact)
        try await context.storage.save(stored, profile: runtime.name)
        session = stored
        runtime.publish(session: stored)
        logger.info(
            "login", ["profile": runtime.name, "account": result.accountID, "created": result.accountCreated ? "true" : "false"])
        return ConfirmLoginCodeResponse(session: runtime.snapshot(), accountCreated: result.accountCreated)
    }

    /// Ends the session: wipes it locally first, then revokes it at the authority (best effort).
    public func logout() async throws(RainError) -> LogoutResponse {
        await restore()
        pending = nil
        guard let ending = session else { return LogoutResponse(hadSession: false, revokedAtAuthority: false) }
        try await context.storage.delete(profile: runtime.name)
        session = nil
        runtime.publish(session: nil)
        var revoked = true
        do {
            try await context.authority.revokeSession(appID: appID, refreshToken: ending.refreshToken)
        } catch {
            revoked = false
            logger.warning("logout.revoke_failed", ["profile": runtime.name, "error": error.code.description])
        }
        logger.info("logout", ["profile": runtime.name, "revoked": revoked ? "true" : "false"])
        return LogoutResponse(hadSession: true, revokedAtAuthority: revoked)
    }
}
