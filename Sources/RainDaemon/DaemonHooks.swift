import Glibc
import RainConfig
import RainCore

/// What a daemon binary lets its command line do beyond what users run. `rainwalletd` runs with
/// `production`: only root may name another policy file than the machine's, and the test methods
/// are not served. The integration tests and the scripts' daemons run `rainwalletd-test`, whose
/// hooks (`RainDaemonTestHooks`, a module `rainwalletd` may not import) allow both.
public struct DaemonHooks: Sendable {
    /// `--policy FILE` from any uid: a test's own policy.
    public let allowsPolicyFromAnyUser: Bool
    /// `--enable-test-methods`: `/rain.wallet.v1.Test/*` and the test-only waits.
    public let allowsTestMethods: Bool

    /// What users run.
    public static let production = DaemonHooks(allowsPolicyFromAnyUser: false, allowsTestMethods: false)

    /// What the tests run; reached through `RainDaemonTestHooks` only.
    @_spi(TestHooks) public static let testing = DaemonHooks(allowsPolicyFromAnyUser: true, allowsTestMethods: true)

    private init(allowsPolicyFromAnyUser: Bool, allowsTestMethods: Bool) {
        self.allowsPolicyFromAnyUser = allowsPolicyFromAnyUser
        self.allowsTestMethods = allowsTestMethods
    }

    /// Refuses what these hooks do not allow, for a process running as `uid`.
    /// - Parameter isPolicyGiven: `--policy` was on the command line (or in the environment).
    /// - Throws: RAIN_102 naming the option and what to do instead.
    func check(
        isPolicyGiven: Bool, isTestMethodsEnabled: Bool, isTestClockGiven: Bool = false, isInstantConfirmGiven: Bool = false,
        isTestSecurityKeysGiven: Bool = false, uid: uid_t
    ) throws(RainError) {
        if isPolicyGiven && !allowsPolicyFromAnyUser && uid != 0 {
            // The policy is root's word on the machine: a program of the user that could start the
            // daemon with a policy of its own would drop it (a missing file is no policy at all).
            throw RainError.invalid(
                """
                --policy may be given only when rainwalletd runs as root (it runs as uid \(uid)): the machine's \
                policy is root's, at \(SecurityPolicy.defaultPath); leave --policy out
                """, field: "--policy")
        }
        if isTestMethodsEnabled && !allowsTestMethods {
            throw RainError.invalid(
                "--enable-test-methods is for the tests' daemon (rainwalletd-test), not rainwalletd: leave it out",
                field: "--enable-test-methods")
        }
        if isInstantConfirmGiven && !allowsTestMethods {
            // Confirming without asking would sign without the user: only the benchmarks' daemon may.
            throw RainError.invalid(
                "--test-confirm-instantly is for the benchmarks' daemon (rainwalletd-test), not rainwalletd: leave it out",
                field: "--test-confirm-instantly")
        }
        if isTestSecurityKeysGiven && !allowsTestMethods {
            // Keys served on sockets by any program of the user would answer for the user: their
            // "touch" and their PIN would be that program's.
            throw RainError.invalid(
                "\(TestSecurityKeysEnvironment.variable) is for the tests' daemon (rainwalletd-test), not rainwalletd: unset it",
                field: TestSecurityKeysEnvironment.variable)
        }
        if isTestClockGiven && !allowsTestMethods {
            // A clock moved from a file would let any program of the user that starts the daemon
            // skip every wait the daemon keeps: lockouts, guess budgets, the prompt place's wait.
            throw RainError.invalid(
                "\(TestClockEnvironment.variable) is for the tests' daemon (rainwalletd-test), not rainwalletd: unset it",
                field: TestClockEnvironment.variable)
        }
    }
}
