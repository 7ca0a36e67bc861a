import RainWire

/// The account an app's user is logged in to: its id, its contacts and its wallet's addresses.
/// Returned by `RainProvider.account()` and `RainProvider.confirmContactVerification(_:)`; named
/// here so that apps and the CLI use the library's names, never the wire module's.
public typealias AccountResponse = RainWire.AccountResponse
