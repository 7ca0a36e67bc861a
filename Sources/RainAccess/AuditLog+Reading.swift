import FoundationEssentials
import Glibc
import RainCore
import RainSystem

/// What `verify` found.
public struct AuditVerification: Sendable, Equatable {
    /// Why a line breaks the chain.
    public enum Problem: String, Sendable, Equatable {
        /// The line's content is not what the next line chained (or it is not an entry at all).
        case edited
        /// Entries are missing before this line.
        case deleted
        /// This line is out of order.
        case reordered
        /// The last line is incomplete: a write was interrupted (a crash), not tampering.
        case torn
        /// The newest entries the daemon wrote are gone from the end of the file.
        case truncated
    }

    /// The entries checked (complete lines).
    public var entryCount: Int
    /// The first problem found; nil when the chain is intact.
    public var problem: Problem?
    /// The file of the broken line (`audit.jsonl.1`).
    public var file: String?
    /// Its line number in that file, from 1.
    public var line: Int?
    /// What was found, for people.
    public var message: String

    /// A verification result.
    public init(entryCount: Int, problem: Problem? = nil, file: String? = nil, line: Int? = nil, message: String) {
        self.entryCount = entryCount
        self.problem = problem
        self.file = file
        self.line = line
        self.message = message
    }

    /// True when nothing was tampered with (a torn last line is not tampering).
    public var isIntact: Bool { problem == nil || problem == .torn }
}

extension AuditLog {
    /// The lines recorded at or after `since` (every line when nil), oldest first, as written; the
    /// newest ones when they hold more than `maximumBytes`. Lines that are not entries (edited) are
    /// kept: they are evidence.
    public func read(since: Date?, maximumBytes: Int) async throws(RainError) -> AuditReadout {
        try await queue.runBlocking { () throws(RainError) in
            // Refusals still being gathered are written first (with their count so far): a reader
            // sees every refusal up to now.
            self.state.withLock { s in self.flushPending(&s) }
            let files = try self.files()
            var lines: [String] = []
            for file in files {
                for line in Self.completeLines(file.bytes) {
                    if let since, let date = Self.decode(line)?.date, date < since { continue }
                    lines.append(String(decoding: line, as: UTF8.self))
                }
            }
            var total = 0
            var kept = 0
            for line in lines.reversed() {
                total += line.utf8.count + 1
                if total > maximumBytes { break }
                kept += 1
            }
            return AuditReadout(lines: Array(lines.suffix(kept)), isTruncated: kept < lines.count)
        }
    }

    /// Checks every file kept, oldest first, and that the newest file ends with the last line this
    /// log wrote (so entries cut off the end since the daemon started are found too).
    public func verify() async throws(RainError) -> AuditVerification {
        try await queue.runBlocking { () throws(RainError) in
            let head = self.state.withLock { $0.head }
            return Self.verify(try self.files(), head: head.seq == 0 ? nil : head)
        }
    }

    /// The files kept, oldest first: name and content. Each is checked like `audit.jsonl` (no
    /// symbolic link, this uid's, private).
    func files() throws(RainError) -> [(name: String, bytes: [UInt8])] {
        var files: [(name: String, bytes: [UInt8])] = []
        for file in Self.rotatedPaths(path: path, directory: directory) + [path] {
            guard
                let bytes = try OwnedPath.readTrustedFile(
                    file, owners: [geteuid()], name: "audit log", field: "audit", limit: Self.readLimit)
            else { continue }
            files.append((PathText.lastComponent(file), bytes))
        }
        return files
    }

    /// The complete lines of a file (a torn last line left out).
    static func completeLines(_ bytes: [UInt8]) -> [ArraySlice<UInt8>] {
        Array(bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).dropLast())
    }

    /// Checks the chain through `files` (oldest first). `head`, when known, is the last line the
    /// writer wrote.
    ///
    /// For each line after the first: its `seq` must follow the previous line's and its `prev` must
    /// be the previous line's hash. A `seq` that jumps ahead is a deletion, unless the missing
    /// entries appear later (a reorder); one that goes back is a reorder; a matching `seq` with a
    /// wrong `prev` means the previous line was edited. The first line of all is checked only
    /// against the genesis hash when it is entry 1 (older files may have been rotated out).
    static func verify(_ files: [(name: String, bytes: [UInt8])], head: Head?) -> AuditVerification {
        struct Line {
            var file: String
            var number: Int
            var bytes: ArraySlice<UInt8>
            var entry: AuditEntry?
        }
        var lines: [Line] = []
        var tornFile: (name: String, line: Int)?
        for (index, file) in files.enumerated() {
            let complete = completeLines(file.bytes)
            for (number, bytes) in complete.enumerated() {
                lines.append(Line(file: file.name, number: number + 1, bytes: bytes, entry: decode(bytes)))
            }
            if let last = file.bytes.last, last != UInt8(ascii: "\n") {
                if index == files.count - 1 {
                    tornFile = (file.name, complete.count + 1)
                } else {
                    return AuditVerification(
                        entryCount: lines.count, problem: .edited, file: file.name, line: complete.count + 1,
                        message: "\(file.name) line \(complete.count + 1) is incomplete in a rotated file: it was edited")
                }
            }
        }
        func broken(_ problem: AuditVerification.Problem, _ line: Line, _ why: String) -> AuditVerification {
            AuditVerification(
                entryCount: lines.count, problem: problem, file: line.file, line: line.number,
                message: "\(line.file) line \(line.number) is \(problem.rawValue): \(why)")
        }
        let seqs = Set(lines.compactMap { $0.entry?.seq })
        var previous: (line: Line, entry: AuditEntry)?
        for line in lines {
            guard let entry = line.entry else { return broken(.edited, line, "it is not an audit entry") }
            defer { previous = (line, entry) }
            guard let before = previous else {
                if entry.seq == 1, entry.prev != AuditEntry.genesis {
                    return broken(.edited, line, "the first entry does not start the chain")
                }
                continue
            }
            if entry.seq == before.entry.seq + 1 {
                if entry.prev != hash(before.line.bytes) {
                    return broken(.edited, before.line, "its content is not what the next entry chained")
                }
            } else if entry.seq > before.entry.seq + 1 {
                if seqs.contains(before.entry.seq + 1) {
                    return broken(.reordered, line, "entry \(entry.seq) comes before entry \(before.entry.seq + 1)")
                }
                let missing = entry.seq - before.entry.seq - 1
                return broken(.deleted, line, "\(missing) entr\(missing == 1 ? "y is" : "ies are") missing before it")
            } else {
                return broken(.reordered, line, "entry \(entry.seq) comes after entry \(before.entry.seq)")
            }
        }
        if let head, let last = previous {
            if last.entry.seq < head.seq {
                let missing = head.seq - last.entry.seq
                return broken(
                    .truncated, last.line, "the daemon wrote \(missing) more entr\(missing == 1 ? "y" : "ies") after it")
            }
            if last.entry.seq == head.seq, hash(last.line.bytes) != head.hash {
                return broken(.edited, last.line, "it is not the line the daemon wrote")
            }
        } else if let head, previous == nil {
            return AuditVerification(
                entryCount: 0, problem: .truncated, file: fileName, line: 1,
                message: "\(fileName) is empty, but the daemon wrote \(head.seq) entries")
        }
        if let tornFile {
            return AuditVerification(
                entryCount: lines.count, problem: .torn, file: tornFile.name, line: tornFile.line,
                message:
                    "\(tornFile.name) line \(tornFile.line) is torn: a write was interrupted (a crash), not tampering; "
                    + "the chain before it is intact")
        }
        return AuditVerification(
            entryCount: lines.count, message: "the audit log is intact: \(lines.count) entries checked")
    }
}
