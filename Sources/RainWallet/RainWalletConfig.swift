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

    /// Creates a configuration.
    public init(passkeyDomain: String? = nil, profile: String = ProfileName.defaultName, socketPath: String? = nil) {
        self.passkeyDomain = passkeyDomain
        self.profile = profile
        self.socketPath = socketPath
    }

    /// The socket this configuration resolves to.
    public var resolvedSocketPath: String {
        if let socketPath { return socketPath }
        if let env = ProcessInfo.processInfo.environment["RAINWALLET_SOCKET"], !env.isEmpty { return env }
        return RainPaths.defaultSocket()
    }
}
