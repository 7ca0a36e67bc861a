import FoundationEssentials
import RainCore

/// A point of the audit chain: how many entries it holds up to its head, and the head's hash.
public struct AuditHead: Sendable, Hashable, CustomStringConvertible {
    /// The head entry's `seq`: the entries up to it (0: an empty chain).
    public var entries: UInt64
    /// The lowercase hex SHA-256 of the head entry's line (without its newline).
    public var hash: String

    /// A head.
    public init(entries: UInt64, hash: String) {
        self.entries = entries
        self.hash = hash
    }

    public var description: String { "\(entries) entries, last \(hash.prefix(12))" }
}

/// What checking the log against a head kept elsewhere (its anchor) found.
public enum AuditAnchorCheck: Sendable, Equatable {
    /// The log holds the anchored entry, with the anchored hash.
    case matches
    /// The log has no anchored entry: it ends before it (entries cut off its end), or skips it.
    case missing(lastEntry: UInt64)
    /// The anchored entry's line is not the one anchored: the log was rewritten up to it.
    case differs(file: String, line: Int)
    /// The anchored entry is older than every line kept (rotated files removed, or rewritten).
    case notKept(oldestEntry: UInt64)

    /// Whether the log holds the anchor.
    public var isMatch: Bool { self == .matches }

    /// What was found, for people, about `anchor`.
    public func message(anchor: AuditHead) -> String {
        switch self {
        case .matches:
            return "the log holds entry \(anchor.entries) as it was anchored"
        case .missing(let last) where last < anchor.entries:
            return "the log ends at entry \(last), but \(anchor.entries) entries were anchored: entries were cut off its end"
        case .missing:
            return "entry \(anchor.entries) was anchored, but the log has no such entry: entries were removed"
        case .differs(let file, let line):
            return "entry \(anchor.entries) (\(file) line \(line)) is not the entry that was anchored: the log was rewritten"
        case .notKept(let oldest):
            return
                "entry \(anchor.entries) was anchored, but the oldest entry kept is \(oldest): older files were removed or rewritten"
        }
    }
}

extension AuditLog {
    /// Calls `observer` with the log's head now and after each entry written, on the log's queue
    /// (nil stops the calls). It must not block and must not call the log synchronously: it runs
    /// while the log holds its state.
    public func observeHeads(_ observer: (@Sendable (AuditHead) -> Void)?) {
        queue.async {
            self.headObserver.withLock { $0 = observer }
            guard let observer else { return }
            let head = self.state.withLock { $0.head }
            if head.seq > 0 { observer(AuditHead(entries: head.seq, hash: head.hash)) }
        }
    }

    /// Checks that the files kept hold `anchor`: the entry numbered `anchor.entries`, its line
    /// hashing to `anchor.hash`. An anchor of 0 entries always matches.
    /// - Throws: RAIN_102 and RAIN_502 as reading the files does (a file that is not this uid's, …).
    public func check(anchor: AuditHead) async throws(RainError) -> AuditAnchorCheck {
        guard anchor.entries > 0 else { return .matches }
        return try await queue.runBlocking { () throws(RainError) in Self.check(try self.files(), anchor: anchor) }
    }

    /// `check(anchor:)` over `files` (oldest first).
    static func check(_ files: [(name: String, bytes: [UInt8])], anchor: AuditHead) -> AuditAnchorCheck {
        var oldest: UInt64?
        var last: UInt64 = 0
        for file in files {
            for (number, line) in completeLines(file.bytes).enumerated() {
                guard let entry = decode(line) else { continue }
                oldest = oldest ?? entry.seq
                last = entry.seq
                guard entry.seq == anchor.entries else { continue }
                return hash(line) == anchor.hash ? .matches : .differs(file: file.name, line: number + 1)
            }
        }
        if let oldest, oldest > anchor.entries { return .notKept(oldestEntry: oldest) }
        return .missing(lastEntry: last)
    }
}
