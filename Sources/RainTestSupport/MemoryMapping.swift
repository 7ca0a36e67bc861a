import Foundation

/// One mapping of this process as `/proc/self/smaps` shows it, for tests of locked memory: its
/// range, the kilobytes of it that are locked and its `VmFlags` (`lo` locked, `dd` left out of
/// core dumps, `wf` wiped on fork).
public struct MemoryMapping: Sendable {
    /// The mapping's addresses.
    public var range: Range<UInt>
    /// Its `Locked:` line, in kB.
    public var lockedKilobytes: Int
    /// Its `VmFlags:` line.
    public var flags: Set<String>

    /// The mapping that contains `address`, or nil when none does.
    public static func containing(_ address: UInt) -> MemoryMapping? {
        guard let text = ProcFiles.text("/proc/self/smaps") else { return nil }
        var found: MemoryMapping?
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard let first = fields.first else { continue }
            if let range = addressRange(first) {
                // The next mapping's header: the one found (if any) is complete.
                if found != nil { break }
                if range.contains(address) { found = MemoryMapping(range: range, lockedKilobytes: 0, flags: []) }
            } else if found != nil, first == "Locked:", fields.count >= 2 {
                found?.lockedKilobytes = Int(fields[1]) ?? 0
            } else if found != nil, first == "VmFlags:" {
                found?.flags = Set(fields.dropFirst().map(String.init))
            }
        }
        return found
    }

    /// Whether `/proc/self/maps` lists a mapping that contains `address`.
    public static func isMapped(_ address: UInt) -> Bool {
        guard let text = ProcFiles.text("/proc/self/maps") else { return false }
        return text.split(separator: "\n").contains { line in
            addressRange(line.prefix { $0 != " " })?.contains(address) ?? false
        }
    }

    /// Whether a locked region is gone once released: `makeAndRelease` maps one, releases it and
    /// returns where it started.
    ///
    /// Other tests of the process map memory at the same time, and the kernel hands a freed range
    /// to the next `mmap`, so a range found mapped again may be someone else's; only a locked,
    /// undumpable mapping there can be the released region, and then the check is made again on a
    /// fresh region, up to `attempts` times. A region that is never unmapped fails every attempt.
    public static func isUnmappedAfterRelease(
        attempts: Int = 5, _ makeAndRelease: () throws -> UInt
    ) rethrows -> Bool {
        for _ in 0..<attempts {
            let address = try makeAndRelease()
            guard let mapping = containing(address) else { return true }
            if mapping.lockedKilobytes == 0 || !mapping.flags.contains("dd") { return true }
        }
        return false
    }

    /// `start-end` in hex, as the first field of a maps line; nil for anything else.
    private static func addressRange(_ field: Substring) -> Range<UInt>? {
        let bounds = field.split(separator: "-")
        guard bounds.count == 2, let start = UInt(bounds[0], radix: 16), let end = UInt(bounds[1], radix: 16), start < end
        else { return nil }
        return start..<end
    }
}
