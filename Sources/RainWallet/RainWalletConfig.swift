import Foundation
@_exported import RainCore

/// How a `RainProvider` reaches its daemon and which profile (app) it acts for.
public struct RainWalletConfig: Sendable, Equatable {
    /// The passkey relying-party domain (passkeys are bound to it). Applied once per provider.
    public var passkeyDomain: String?
    /// The profile (app) whose session this provider uses: `[a-z0-9][a-z0-9-]{0,63}`.
    public var profile: String
    /// The daemon socket; nil means `$RAINWALLET_SOCKET` or the default path.
    public var socketPath: String?
    /// The uid the daemon must run as; nil means `$RAINWALLET_DAEMON_UID`, else this process's own.
    ///
    /// On every connect the provider checks who serves the socket (`SO_PEERCRED`) and who owns
    /// its directory; a daemon of any other uid is refused with RAIN_101, so another user cannot
    /// pose as the daemon. Name a uid here only to use another user's daemon on purpose (one whose
    /// config lists your uid in `allowedUIDs`).
    public var daemonUID: UInt32?

    /// Creates a configuration.
    public init(
        passkeyDomain: String? = nil, profile: String = ProfileName.defaultName, socketPath: String? = nil,
        daemonUID: UInt32? = nil
    ) {
        self.passkeyDomain = passkeyDomain
        self.profile = profile
        self.socketPath = socketPath
        self.daemonUID = daemonUID
    }

    /// The socket this configuration resolves to.
    public var resolvedSocketPath: String {
        if let socketPath { return socketPath }
        if let env = ProcessInfo.processInfo.environment["RAINWALLET_SOCKET"], !env.isEmpty { return env }
        return RainPaths.defaultSocket()
    }

    /// The uid the daemon must run as: `daemonUID`, else `$RAINWALLET_DAEMON_UID`, else the
    /// effective uid of this process.
    /// - Throws: `RainError` RAIN_102 when `RAINWALLET_DAEMON_UID` is not a number.
    public func resolvedDaemonUID() throws -> UInt32 { try daemonUIDToUse() }

    /// `resolvedDaemonUID()` with its error typed, for the provider.
    package func daemonUIDToUse() throws(RainError) -> UInt32 {
        if let daemonUID { return daemonUID }
        if let env = ProcessInfo.processInfo.environment[RainPaths.daemonUIDVariable], !env.isEmpty {
            return try RainPaths.parseUID(env, source: RainPaths.daemonUIDVariable)
        }
        return geteuid()
    }
}
