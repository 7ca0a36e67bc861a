import Foundation
import RainCore
@testable import RainSystem
import RainTestSupport
import Testing

@Suite struct LockedMemoryTests {
    @Test("the region is locked, left out of core dumps and wiped on fork, as smaps shows")
    func regionIsLockedUndumpableAndWipedOnFork() throws {
        let memory = try LockedMemory(byteCount: 3 * Syscall.pageSize)
        let mapping = try #require(MemoryMapping.containing(memory.baseAddress))
        #expect(mapping.lockedKilobytes > 0)
        #expect(mapping.flags.contains("dd"))  // MADV_DONTDUMP
        #expect(mapping.flags.contains("wf"))  // MADV_WIPEONFORK
        #expect(mapping.flags.contains("lo"))  // mlock
        #expect(mapping.range.contains(memory.baseAddress + UInt(memory.byteCount) - 1))
    }

    @Test("the size is rounded up to whole pages, and the bytes start as zeros and can be written")
    func sizeIsRoundedToPagesAndStartsZeroed() throws {
        let page = Syscall.pageSize
        let memory = try LockedMemory(byteCount: 2 * page + 1)
        #expect(memory.byteCount == 3 * page)
        #expect(memory.baseAddress % UInt(page) == 0)
        let allZero = memory.withUnsafeMutableBytes { bytes in bytes.allSatisfy { $0 == 0 } }
        #expect(allZero)
        memory.withUnsafeMutableBytes { bytes in
            bytes[0] = 0xA5
            bytes[bytes.count - 1] = 0x5A
        }
        #expect(memory.withUnsafeMutableBytes { bytes in (bytes[0], bytes[bytes.count - 1]) } == (0xA5, 0x5A))
    }

    @Test("releasing the region unmaps it")
    func releaseUnmaps() throws {
        let isGone = try MemoryMapping.isUnmappedAfterRelease {
            let memory = try LockedMemory(byteCount: 2 * Syscall.pageSize)
            memory.withUnsafeMutableBytes { bytes in _ = bytes.initializeMemory(as: UInt8.self, repeating: 0x42) }
            #expect(MemoryMapping.isMapped(memory.baseAddress))
            return memory.baseAddress
        }
        #expect(isGone)
    }

    @Test("a zero or negative size is refused", arguments: [0, -1])
    func refusesEmptySize(byteCount: Int) {
        #expect(throws: RainError.invalidArgument) { try LockedMemory(byteCount: byteCount) }
    }

    @Test("a refused mlock is RAIN_502 with the locked-memory-limit reason", arguments: [EPERM, ENOMEM])
    func refusedLockNamesTheLimit(errno: Int32) {
        let error = LockedMemory.lockError(ErrnoError(code: errno), byteCount: 4096)
        #expect(error.code == .internalError)
        #expect(error.details.reason == LockedMemory.lockLimitReason)
        #expect(error.errno == errno)
    }

    @Test(
        "mlock beyond RLIMIT_MEMLOCK is refused with the locked-memory-limit reason",
        .enabled(if: LockedMemoryTests.lockLimitApplies, "needs a finite RLIMIT_MEMLOCK and no CAP_IPC_LOCK"))
    func lockBeyondTheLimitIsRefused() throws {
        let limit = try #require(Self.lockLimit)
        do {
            _ = try LockedMemory(byteCount: limit + Syscall.pageSize)
            Issue.record("mlock beyond RLIMIT_MEMLOCK succeeded")
        } catch {
            #expect(error.code == .internalError)
            #expect(error.details.reason == LockedMemory.lockLimitReason)
        }
    }

    /// The soft `RLIMIT_MEMLOCK` in bytes from `/proc/self/limits`; nil when unlimited.
    static var lockLimit: Int? {
        guard let text = ProcFiles.text("/proc/self/limits"),
            let line = text.split(separator: "\n").first(where: { $0.hasPrefix("Max locked memory") })
        else { return nil }
        let fields = line.dropFirst("Max locked memory".count).split(separator: " ")
        return fields.first.flatMap { Int($0) }
    }

    /// Whether `mlock` is held to `RLIMIT_MEMLOCK` here: a finite limit, and no `CAP_IPC_LOCK`
    /// (bit 14 of `CapEff`), which lifts it (root in a container usually has it).
    static var lockLimitApplies: Bool {
        guard lockLimit != nil, let text = ProcFiles.text("/proc/self/status"),
            let line = text.split(separator: "\n").first(where: { $0.hasPrefix("CapEff:") }),
            let hex = line.split(separator: "\t").last.flatMap({ UInt64($0.trimmingCharacters(in: .whitespaces), radix: 16) })
        else { return false }
        return hex & (1 << 14) == 0
    }
}
