import Foundation
import RainCore

/// What tests read of `/proc`: the kernel's own view, independent of the code under test.
public enum ProcFiles {
    /// The whole text of `/proc/...` file `path`, or nil when it cannot be read. Read to the end:
    /// `/proc` files report a size of 0, so a size-based read returns nothing.
    public static func text(_ path: String) -> String? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        guard let data = try? handle.readToEnd() else { return nil }
        return String(decoding: data, as: UTF8.self)
    }

    /// The calling thread's name (`/proc/thread-self/comm`, without its newline).
    /// - Throws: RAIN_502 when the file cannot be read.
    public static func nameOfCurrentThread() throws(RainError) -> String {
        guard let comm = text("/proc/thread-self/comm") else {
            throw RainError(.internalError, "cannot read /proc/thread-self/comm")
        }
        return comm.hasSuffix("\n") ? String(comm.dropLast()) : comm
    }

    /// The calling thread's scheduling policy (`/proc/thread-self/stat`, field 41: 0 SCHED_OTHER,
    /// 3 SCHED_BATCH).
    /// - Throws: RAIN_502 when the file cannot be read or is shorter than expected.
    public static func schedulingPolicyOfCurrentThread() throws(RainError) -> Int {
        guard let stat = text("/proc/thread-self/stat") else {
            throw RainError(.internalError, "cannot read /proc/thread-self/stat")
        }
        // Field 2 (the name) is in parentheses and may hold spaces: count from the last ")".
        guard let close = stat.lastIndex(of: ")") else { throw RainError(.internalError, "no ')' in \(stat)") }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 38, let policy = Int(fields[38]) else {
            throw RainError(.internalError, "short stat: \(stat)")
        }
        return policy
    }
}
