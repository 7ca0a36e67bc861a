import RainCore
import RainSystem

/// Process-level protections of the daemon (README "Reliability and security", ARCHITECTURE.md).
public enum ProcessHardening {
    /// Marks the process non-dumpable (no core dumps, no ptrace by other same-uid processes).
    /// - Throws: RAIN_502 when prctl fails.
    public static func disableCoreDumps() throws(RainError) {
        try Syscall.setDumpable(false)
    }

    /// Raises the open-file soft limit to the hard limit; returns the new limit, or -1 when the
    /// limit could not be read or raised (the daemon then runs with the limit it has, and logs it).
    @discardableResult
    public static func raiseOpenFileLimit() -> Int {
        do {
            return try Syscall.raiseOpenFileLimit()
        } catch {
            return -1
        }
    }
}
