import Glibc
import RainCore

/// Pages for secrets that never leave RAM: private anonymous memory (`mmap`), locked so it is
/// never swapped (`mlock`), left out of core dumps (`MADV_DONTDUMP`) and given to a forked child
/// as zeros (`MADV_WIPEONFORK`). Releasing it zeroes the bytes (`explicit_bzero`, which the
/// optimizer keeps), then unlocks and unmaps the pages.
///
/// One owner holds it; the bytes are reached only inside ``withUnsafeMutableBytes(_:)``.
package final class LockedMemory {
    /// The reason of the error thrown when the locked-memory limit is too small.
    package static let lockLimitReason = "locked_memory_limit"

    /// The whole mapping, a whole number of pages.
    private let region: UnsafeMutableRawBufferPointer

    /// Maps and locks at least `byteCount` bytes, rounded up to whole pages, all zero.
    /// - Parameter byteCount: the bytes needed; at least 1.
    /// - Throws: RAIN_502 with reason `locked_memory_limit` when `mlock` is refused (`EPERM`,
    ///   `ENOMEM`: `RLIMIT_MEMLOCK` is too small), with a message that says how to raise the limit;
    ///   RAIN_502 naming `mmap`, `mlock` or `madvise` for any other failure; RAIN_102 (field
    ///   `byteCount`) when `byteCount` is not positive or absurdly large.
    package init(byteCount: Int) throws(RainError) {
        let page = Syscall.pageSize
        guard byteCount > 0, byteCount <= Int(Int32.max) else {
            throw RainError.invalid("locked memory must be 1 byte to 2 GiB", field: "byteCount")
        }
        let rounded = (byteCount + page - 1) / page * page
        let region = UnsafeMutableRawBufferPointer(start: try Syscall.mapAnonymous(byteCount: rounded), count: rounded)
        if let refused = Syscall.lockInMemory(region) {
            Syscall.unlockAndUnmap(region)
            throw Self.lockError(refused, byteCount: rounded)
        }
        do {
            try Syscall.advise(region, MADV_DONTDUMP, name: "MADV_DONTDUMP")
            try Syscall.advise(region, MADV_WIPEONFORK, name: "MADV_WIPEONFORK")
        } catch {
            Syscall.unlockAndUnmap(region)
            throw error
        }
        self.region = region
    }

    deinit {
        // Zeroed while still locked, so the secrets cannot reach swap between the two calls.
        if let base = region.baseAddress { explicit_bzero(base, region.count) }
        Syscall.unlockAndUnmap(region)
    }

    /// The error for a refused `mlock`: the limit is the usual cause, and the message says how to
    /// raise it.
    static func lockError(_ refused: ErrnoError, byteCount: Int) -> RainError {
        guard refused.code == EPERM || refused.code == ENOMEM else { return Syscall.error("mlock", refused) }
        let kibibytes = (byteCount + 1023) / 1024
        return RainError(
            .internalError,
            """
            signing needs a little locked memory (\(kibibytes) KiB at a time, so the keys never reach swap) and mlock \
            refused it (\(refused)): raise the locked-memory limit (RLIMIT_MEMLOCK), with `ulimit -l` in the shell \
            that starts rainwalletd or `LimitMEMLOCK=` in its systemd unit
            """,
            details: RainError.Details(reason: lockLimitReason), underlying: refused)
    }

    /// The mapping's size in bytes: the size asked for, rounded up to whole pages.
    package var byteCount: Int { region.count }

    /// The address where the mapping starts, for tests that look it up in `/proc/self/maps`.
    package var baseAddress: UInt { UInt(bitPattern: region.baseAddress) }

    /// Calls `body` with the locked bytes. The pointer must not escape the closure.
    /// - Parameter body: reads and writes the bytes.
    /// - Returns: what `body` returns.
    /// - Throws: what `body` throws.
    package func withUnsafeMutableBytes<R, E: Error>(
        _ body: (UnsafeMutableRawBufferPointer) throws(E) -> R
    ) throws(E) -> R {
        try body(region)
    }
}
