import FoundationEssentials
import Glibc
import RainCore
import RainSystem

/// Process-level protections and settings of the daemon (docs/security.md,
/// ARCHITECTURE.md).
public enum ProcessHardening {
    /// The malloc arenas the daemon keeps (`limitMallocArenas`).
    public static let mallocArenas: Int32 = 2

    /// Caps malloc's arenas at `mallocArenas`, unless `MALLOC_ARENA_MAX` is set (the user's
    /// choice wins). glibc gives each thread that allocates an arena of its own, up to eight per
    /// CPU: the daemon's loop, SQLite, timer and Swift pool threads made about ten, each holding
    /// freed memory of its own. Two of them lower the daemon's peak VmRSS under the 1,000-client
    /// load (docs/performance.md); its calls are made on one loop thread, which does not contend.
    /// Called first thing in `main`, before threads start to allocate.
    public static func limitMallocArenas() {
        guard ProcessInfo.processInfo.environment["MALLOC_ARENA_MAX"] == nil else { return }
        Syscall.limitMallocArenas(mallocArenas)
    }

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
