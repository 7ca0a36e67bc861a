internal import CSystem
import RainCore

/// Process-level protections of the daemon (DESIGN §5, §9).
public enum ProcessHardening {
    /// Marks the process non-dumpable (no core dumps, no ptrace by other same-uid processes).
    /// - Throws: RAIN_502 when prctl fails.
    public static func disableCoreDumps() throws(RainError) {
        guard rain_set_dumpable(0) == 0 else { throw RainError(.internalError, "prctl(PR_SET_DUMPABLE, 0) failed") }
    }

    /// Raises the open-file soft limit to the hard limit; returns the new limit.
    @discardableResult
    public static func raiseOpenFileLimit() -> Int { rain_raise_nofile_limit() }
}
