@_spi(TestHooks) import RainDaemon

/// The hooks of the tests' daemon, `rainwalletd-test`: another policy file from any uid, and the
/// test methods. `rainwalletd` may not import this module (ARCHITECTURE.md's layering table, which
/// `scripts/lint` checks), so the daemon users run never has them.
public let testHooks = DaemonHooks.testing
