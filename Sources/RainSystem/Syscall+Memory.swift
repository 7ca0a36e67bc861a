import Glibc
import RainCore

/// The memory calls behind `LockedMemory`: only it maps, locks and unmaps pages, so these stay
/// internal to RainSystem.
extension Syscall {
    /// The size of a page (`sysconf(_SC_PAGESIZE)`); 4096 when the call gives nothing usable.
    static var pageSize: Int {
        let size = sysconf(Int32(_SC_PAGESIZE))
        return size > 0 ? size : 4096
    }

    /// Maps `byteCount` bytes (a multiple of the page size) of private anonymous memory, readable
    /// and writable, filled with zeros (`mmap`).
    /// - Returns: the start of the mapping.
    /// - Throws: RAIN_502 naming `mmap` (`ENOMEM` when the address space or overcommit is exhausted).
    static func mapAnonymous(byteCount: Int) throws(RainError) -> UnsafeMutableRawPointer {
        // MAP_FAILED is `(void *) -1`, a macro Swift does not import.
        let failed = UnsafeMutableRawPointer(bitPattern: -1)
        while true {
            let address = Glibc.mmap(nil, byteCount, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
            if let address, address != failed { return address }
            let e = ErrnoError(code: errno)
            if e.code == EINTR { continue }
            throw error("mmap", e)
        }
    }

    /// Keeps the pages of `region` in RAM (`mlock`): they are never written to swap.
    /// - Returns: the errno `mlock` failed with, for the caller to explain (`EPERM` or `ENOMEM`
    ///   when `RLIMIT_MEMLOCK` is too small); nil on success.
    static func lockInMemory(_ region: UnsafeMutableRawBufferPointer) -> ErrnoError? {
        switch retrying({ Glibc.mlock(region.baseAddress, region.count) }) {
        case .success: return nil
        case .failure(let e): return e
        }
    }

    /// Gives the kernel advice about `region` (`madvise`): `MADV_DONTDUMP`, `MADV_WIPEONFORK`, ….
    /// - Parameters:
    ///   - advice: the `MADV_…` value.
    ///   - name: the advice's name, for the message.
    /// - Throws: RAIN_502 naming `madvise(<name>)` (`EINVAL` on a kernel that lacks the advice).
    static func advise(_ region: UnsafeMutableRawBufferPointer, _ advice: Int32, name: String) throws(RainError) {
        try call("madvise(\(name))") { Glibc.madvise(region.baseAddress, region.count, advice) }
    }

    /// Unlocks and unmaps `region` (`munlock`, `munmap`), for a `deinit`, which cannot throw.
    /// Both fail only for a range that is not a mapping of this process, which `LockedMemory`
    /// never passes, so their results are not looked at; `munmap` unlocks by itself as well.
    static func unlockAndUnmap(_ region: UnsafeMutableRawBufferPointer) {
        _ = retrying { Glibc.munlock(region.baseAddress, region.count) }
        _ = retrying { Glibc.munmap(region.baseAddress, region.count) }
    }
}
