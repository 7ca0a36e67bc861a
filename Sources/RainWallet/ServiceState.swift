import RainCore

/// Whether a provider reaches its daemon, `rainwalletd` (`RainProvider.serviceState`). The mobile
/// SDK has no such state (its wallet runs inside the app); here the wallet runs in another
/// process, and an app tells "the wallet service is not running" from "the session is still being
/// restored" (both show `authState` `loading`) by this value.
///
/// Compares by case and error code: two `notRunning` values are equal whatever their messages say.
public enum ServiceState: Sendable, Equatable {
    /// The daemon answers and serves this profile's state.
    case running
    /// No daemon answers at the socket (not started, stopped, or not coming back from a restart),
    /// or the one that answers runs as another uid than `RainWalletConfig.daemonUID`. The error is
    /// the RAIN_101 a call would throw now (`details.reason` `daemon_not_running` when nothing
    /// answers); its message names how to start the daemon where this program was installed. The
    /// provider keeps trying, with backoff.
    case notRunning(RainError)
    /// The daemon answers but will not serve this app the profile's state: RAIN_202 when the app is
    /// not approved for the profile (`app_not_approved`). The provider keeps trying: an approval
    /// given meanwhile is seen at the next attempt.
    case refused(RainError)
}
