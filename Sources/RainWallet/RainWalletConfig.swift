import FoundationEssentials
import Glibc
@_exported import RainCore

/// How a `RainProvider` reaches its daemon and which profile (app) it acts for.
public struct RainWalletConfig: Sendable, Equatable {
    /// The passkey relying-party domain (passkeys are bound to it), a lowercase host name such as
    /// `example.com`. Applied once per provider: `validate()` checks its syntax here; whether it is
    /// a registrable domain (not a public suffix) the daemon decides, and `awaitSessionRestore()`
    /// reports its refusal (code login keeps working).
    public var passkeyDomain: String?
    /// The session policy to apply to the profile (refresh buffer, auto refresh, retries, …); nil
    /// keeps the daemon's. Only the app that owns the profile may set it, the daemon's config file
    /// wins for every key it sets, and a value out of range is RAIN_102 naming
    /// `sessionPolicy.<key>`, reported by `awaitSessionRestore()`.
    public var sessionPolicy: RainWalletSessionPolicy?
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
    /// How the provider's connection thread (the one that reads the daemon's replies, and runs
    /// the tasks that prefer `RainProvider.taskExecutor`) is scheduled. Default `.batch`.
    public var readerScheduling: ReaderScheduling

    /// How the thread that reads the daemon's replies is scheduled (`RainWalletConfig.readerScheduling`).
    public enum ReaderScheduling: Sendable, Equatable {
        /// The batch policy (`SCHED_BATCH`, no privilege needed). A reply wakes the thread without
        /// preempting the task running on that CPU: while the daemon sends the replies of several
        /// calls, it is not interrupted after each one, so more calls per second
        /// go through at 8 connections (`scripts/bench`, docs/performance.md). The cost:
        /// when every CPU is busy, a reply waits until the running task blocks or a scheduler tick
        /// preempts it (ticks come every 1 to 10 ms, by the kernel's configuration); on a CPU with
        /// idle time it runs at once.
        case batch
        /// The thread keeps the policy it inherits from the thread that opened the connection
        /// (the normal one, unless the app changed it): a reply may preempt the running task.
        case normal
    }

    /// Creates a configuration.
    public init(
        passkeyDomain: String? = nil, sessionPolicy: RainWalletSessionPolicy? = nil,
        profile: String = ProfileName.defaultName, socketPath: String? = nil, daemonUID: UInt32? = nil,
        readerScheduling: ReaderScheduling = .batch
    ) {
        self.passkeyDomain = passkeyDomain
        self.sessionPolicy = sessionPolicy
        self.profile = profile
        self.socketPath = socketPath
        self.daemonUID = daemonUID
        self.readerScheduling = readerScheduling
    }

    /// Checks what can be checked without the daemon: the profile name, and the passkey domain's
    /// syntax (a lowercase host name of at least two labels: letters, digits and inner hyphens,
    /// punycode for IDNs; no scheme, port or path). Whether the domain may hold passkeys (it is
    /// not a public suffix) only the daemon knows: `awaitSessionRestore()` reports that.
    ///
    /// ```swift
    /// let config = RainWalletConfig(passkeyDomain: "example.com")
    /// try config.validate()
    /// ```
    /// - Throws: `RainError` RAIN_102 naming the field (`passkeyDomain`, `profile`).
    public func validate() throws {
        try ProfileName.validate(profile)
        try validatePasskeyDomain()
    }

    /// The syntax checks of `validate()` on `passkeyDomain` (none without one).
    package func validatePasskeyDomain() throws(RainError) {
        guard let raw = passkeyDomain else { return }
        func fail(_ why: String) -> RainError {
            RainError.invalid(
                "invalid passkey domain \"\(raw)\": \(why)", field: "passkeyDomain", reason: "invalid_passkey_domain")
        }
        if raw.isEmpty { throw fail("it is empty") }
        if raw.contains("://") { throw fail("give the domain only, without a scheme like https://") }
        if raw.contains("/") { throw fail("give the domain only, without a path") }
        if raw.contains(":") { throw fail("give the domain only, without a port") }
        if raw.utf8.contains(where: { (0x41...0x5A).contains($0) }) {
            throw fail("write it in lower case: \(raw.lowercased())")
        }
        if raw.utf8.count > 253 { throw fail("it is longer than 253 characters") }
        let labels = raw.split(separator: ".", omittingEmptySubsequences: false)
        if labels.contains(where: \.isEmpty) { throw fail("it has an empty label") }
        if raw == "localhost" || raw.hasSuffix(".localhost") { throw fail("localhost cannot hold passkeys") }
        if labels.count < 2 { throw fail("it needs at least two labels, like example.com") }
        if labels.allSatisfy({ $0.utf8.allSatisfy { (0x30...0x39).contains($0) } }) {
            throw fail("an IP address cannot hold passkeys")
        }
        for label in labels {
            let bytes = label.utf8
            let isLDH = bytes.allSatisfy { (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2D }
            guard bytes.count <= 63, isLDH, bytes.first != 0x2D, bytes.last != 0x2D else {
                throw fail(
                    "label \"\(label)\" is not a valid DNS label (letters, digits and inner hyphens; punycode for IDNs)")
            }
        }
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
