import RainCore
import RainSystem

/// An arena of secret slots in one ``LockedMemory``: a bump allocator that hands out fixed-size,
/// 16-byte-aligned slots, for the derivation of a wallet's signing keys, whose every intermediate
/// value lives in locked memory. Releasing the arena zeroes and unmaps it.
///
/// A slot is a range of the arena, not a pointer: its bytes are reached inside
/// ``withUnsafeMutableBytes(_:)``, through ``Slot/bytes(in:)``.
final class LockedSecrets {
    /// A slot: where it sits in the arena and how long it is.
    struct Slot {
        /// The slot's bytes, as offsets into the arena.
        let range: Range<Int>

        /// The number of bytes.
        var count: Int { range.count }

        /// The slot's bytes in `arena`, the buffer ``LockedSecrets/withUnsafeMutableBytes(_:)``
        /// hands out.
        func bytes(in arena: UnsafeMutableRawBufferPointer) -> UnsafeMutableRawBufferPointer {
            UnsafeMutableRawBufferPointer(rebasing: arena[range])
        }
    }

    /// Slots start on multiples of this.
    static let alignment = 16

    private let memory: LockedMemory
    /// The first byte no slot has taken.
    private var used = 0

    /// An arena of at least `byteCount` bytes (whole pages).
    /// - Throws: the errors of ``LockedMemory/init(byteCount:)``: RAIN_502 with reason
    ///   `locked_memory_limit` when the locked-memory limit is too small.
    init(byteCount: Int) throws(RainError) {
        memory = try LockedMemory(byteCount: byteCount)
    }

    /// Takes the next `byteCount` bytes, all zeros (room given back by ``release(from:)`` is zeroed).
    /// - Throws: RAIN_502 when the arena is full, which is a mistake in the caller's sizes.
    func allocate(_ byteCount: Int) throws(RainError) -> Slot {
        let start = used
        guard byteCount > 0, byteCount <= memory.byteCount - start else {
            throw RainError(.internalError, "the locked arena has no room for \(byteCount) more bytes")
        }
        used = min(memory.byteCount, (start + byteCount + Self.alignment - 1) / Self.alignment * Self.alignment)
        return Slot(range: start..<(start + byteCount))
    }

    /// Where the next slot would start: give it to ``release(from:)`` to drop every slot taken
    /// after this point.
    var mark: Int { used }

    /// Zeroes every byte from `mark` on and makes that room free again: the slots taken after
    /// `mark` must no longer be used.
    func release(from mark: Int) {
        guard mark < used else { return }
        memory.withUnsafeMutableBytes { arena in
            SecureMemory.cleanse(UnsafeMutableRawBufferPointer(rebasing: arena[mark..<used]))
        }
        used = mark
    }

    /// Calls `body` with the whole arena, for ``Slot/bytes(in:)``. The pointer must not escape the
    /// closure.
    func withUnsafeMutableBytes<R>(_ body: (UnsafeMutableRawBufferPointer) throws(RainError) -> R) throws(RainError) -> R {
        try memory.withUnsafeMutableBytes(body)
    }

    /// Calls `body` with one slot's bytes. The pointer must not escape the closure.
    func withBytes<R>(
        of slot: Slot, _ body: (UnsafeMutableRawBufferPointer) throws(RainError) -> R
    ) throws(RainError) -> R {
        try memory.withUnsafeMutableBytes { (arena) throws(RainError) in try body(slot.bytes(in: arena)) }
    }

    /// The address where the arena starts, for tests that check it is unmapped once released.
    var baseAddress: UInt { memory.baseAddress }
}
