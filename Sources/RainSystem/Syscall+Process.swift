internal import CSystem
import Glibc
import RainCore

extension Syscall {
    /// Marks the process dumpable or not (`prctl(PR_SET_DUMPABLE)`): a process that is not has no
    /// core dumps and cannot be traced by other processes of the same uid.
    /// - Throws: RAIN_502 naming `prctl(PR_SET_DUMPABLE, …)`.
    public static func setDumpable(_ isDumpable: Bool) throws(RainError) {
        let value: Int32 = isDumpable ? 1 : 0
        try call("prctl(PR_SET_DUMPABLE, \(value))") { rain_set_dumpable(value) }
    }

    /// Raises the soft limit of open files (`RLIMIT_NOFILE`) to the hard limit.
    /// - Returns: the new soft limit.
    /// - Throws: RAIN_502 naming `setrlimit RLIMIT_NOFILE`.
    public static func raiseOpenFileLimit() throws(RainError) -> Int {
        try call("setrlimit RLIMIT_NOFILE") { rain_raise_nofile_limit() }
    }

    /// Names the calling thread, as `top -H`, `ps -L` and `/proc/thread-self/comm` show it
    /// (`prctl(PR_SET_NAME)`): Linux keeps 15 bytes, so a longer name is cut to its first 15.
    /// Foundation's `Thread.name` does not reach the kernel on Linux: its thread kept the name of
    /// the thread that made it. A failure is not reported: the name is for people only.
    public static func setCurrentThreadName(_ name: String) {
        _ = rain_set_thread_name(name)
    }

    /// Gives the calling thread the batch scheduling policy (`SCHED_BATCH`), or back the normal
    /// one: a batch thread that wakes up does not preempt the task running on its CPU; it runs
    /// when that task blocks or at the next scheduler tick. Needs no privilege.
    /// - Throws: RAIN_502 naming `sched_setscheduler` (a seccomp filter may refuse it).
    public static func setCurrentThreadBatchScheduling(_ isBatch: Bool) throws(RainError) {
        try call("sched_setscheduler(\(isBatch ? "SCHED_BATCH" : "SCHED_OTHER"))") {
            rain_set_thread_batch_scheduling(isBatch ? 1 : 0)
        }
    }

    /// Gives the free memory of every malloc arena back to the kernel (`malloc_trim(0)`).
    /// - Returns: true when some memory was given back (false is not a failure: there was none).
    @discardableResult
    public static func releaseFreeMemory() -> Bool { rain_release_free_memory() == 1 }

    /// Lets malloc keep at most `count` arenas (`mallopt(M_ARENA_MAX)`); threads that start to
    /// allocate after that share them.
    /// - Returns: false when malloc refused the setting.
    @discardableResult
    public static func limitMallocArenas(_ count: Int32) -> Bool { rain_limit_malloc_arenas(count) == 1 }
}

extension Syscall {
    /// Sends `signal` to the process `pid` (`kill(2)`).
    /// - Returns: false when the process is already gone (`ESRCH`).
    /// - Throws: RAIN_502 naming `kill` for any other failure (`EPERM`).
    @discardableResult
    public static func sendSignal(_ signal: Int32, to pid: Int32) throws(RainError) -> Bool {
        switch retrying({ Glibc.kill(pid, signal) }) {
        case .success: return true
        case .failure(let e) where e.code == ESRCH: return false
        case .failure(let e): throw error("kill", e)
        }
    }
}
