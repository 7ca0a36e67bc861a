import Dispatch
import FoundationEssentials
import Glibc
import RainCore
import RainCrypto
import RainSystem
import Synchronization

/// Where the daemon's parts record sensitive operations. `AuditLog` is the one the daemon uses;
/// tests may give another.
public protocol AuditRecorder: Sendable {
    /// Records `record` durably (or holds a repeated refusal for aggregation).
    /// - Throws: RAIN_502 (reason `audit_not_written`) when the entry could not be written.
    func record(_ record: AuditRecord) async throws(RainError)
    /// The entries recorded at or after `since` (all when nil), oldest first, as written.
    func read(since: Date?, maximumBytes: Int) async throws(RainError) -> AuditReadout
    /// Checks the hash chain of every file kept.
    func verify() async throws(RainError) -> AuditVerification
}

/// What a read returns: the lines as written, oldest first.
public struct AuditReadout: Sendable, Equatable {
    /// The JSON lines (without their newlines).
    public var lines: [String]
    /// True when older matching lines were left out to stay under the byte limit.
    public var isTruncated: Bool

    /// A readout.
    public init(lines: [String], isTruncated: Bool) {
        self.lines = lines
        self.isTruncated = isTruncated
    }
}

/// The per-user audit log of sensitive operations: append-only JSON lines in
/// `<state>/audit.jsonl`, mode 0600, each carrying the SHA-256 of the line before it, so an edited,
/// deleted or reordered line breaks the chain (`verify`).
///
/// - The file is opened `O_APPEND | O_NOFOLLOW` and checked like every file the daemon trusts
///   (`Syscall.openOwnFile`): a regular file of this uid with no access for group or others; a
///   symbolic link planted as `audit.jsonl` is refused (RAIN_102).
/// - Every entry is written with one `write` and fsynced before `record` returns: sensitive
///   operations come at human pace, so a batch would save nothing worth the window in which an
///   answered export has no entry on disk. The one case that comes fast, a program retrying a
///   refused call, is aggregated instead (below).
/// - Rotation at `Limits.maximumFileBytes`: `audit.jsonl` becomes `audit.jsonl.1` (and so on, up to
///   `Limits.rotatedFiles`, the oldest dropped); the first line of the new file carries the hash of
///   the last line of the previous one, so the chain runs across files.
/// - Identical refusals from the same app (same event, profile, executable and hash, result and
///   detail; any pid) within `Limits.aggregationWindow` of the first become one entry with a
///   `count`, written when the window ends or any other event is recorded.
/// - A crash mid-write leaves at most a torn last line: `verify` reports it as `torn`, not as
///   tampering, and the next open cuts it off and records an `audit_recovered` entry, so the next
///   append starts on a clean line.
/// - A failed write (a full disk) throws RAIN_502 `audit_not_written`, after cutting off whatever
///   part of the line reached the file; the entries lost are counted and an `audit_gap` entry with
///   their count is written first as soon as writing works again. Nothing is skipped silently.
///
/// File work runs on the log's own serial queue (`rainwallet.audit`), never on the Swift pool.
public final class AuditLog: AuditRecorder {
    /// Sizes and windows; smaller in tests.
    public struct Limits: Sendable {
        /// The size past which the file is rotated.
        public var maximumFileBytes: Int
        /// How many rotated files (`audit.jsonl.1` …) are kept.
        public var rotatedFiles: Int
        /// How long identical refusals are gathered into one entry.
        public var aggregationWindow: Duration

        /// Limits; the defaults are 1 MiB, 4 rotated files (5 MiB in all) and 60 s.
        public init(maximumFileBytes: Int = 1 << 20, rotatedFiles: Int = 4, aggregationWindow: Duration = .seconds(60)) {
            self.maximumFileBytes = maximumFileBytes
            self.rotatedFiles = rotatedFiles
            self.aggregationWindow = aggregationWindow
        }
    }

    /// The file's name in the state directory.
    public static let fileName = "audit.jsonl"
    /// The longest `detail` kept.
    public static let maximumDetailLength = 200
    /// The most bytes one file may hold when it is read (a file grown far past the cap by hand).
    static let readLimit = 64 << 20

    /// The last line written: its entry number and hash.
    struct Head: Equatable {
        var seq: UInt64
        var hash: String
    }

    /// Refusals being gathered.
    struct Pending {
        var record: AuditRecord
        var time: Date
        var count: Int
        var timer: (any RainTimer)?
    }

    struct State {
        /// The open `audit.jsonl`; -1 after a failed rotation (reopened by the next write).
        var fd: Int32
        /// Its size.
        var size: Int
        var head: Head
        var pending: Pending?
        /// Entries that could not be written since the last successful write.
        var lost = 0
    }

    /// The state directory.
    public let directory: String
    /// `<directory>/audit.jsonl`.
    public let path: String
    let clock: any RainClock
    let logger: Logger
    let limits: Limits
    /// Where every file operation runs.
    let queue = DispatchQueue(label: "rainwallet.audit")
    /// Touched only on `queue` (the mutex makes that checkable, and is never contended).
    let state: Mutex<State>
    /// Told of each new head (`observeHeads`); set and called on `queue`.
    let headObserver = Mutex<(@Sendable (AuditHead) -> Void)?>(nil)

    /// Opens (or creates) `<directory>/audit.jsonl`, reads where its chain stands and cuts off a
    /// torn last line (recording that it did). Blocking: call it from a dispatch queue.
    /// - Throws: RAIN_102 when `audit.jsonl` is a symbolic link, not a regular file, another uid's
    ///   or open to group or others; RAIN_502 when a call fails.
    public init(directory: String, clock: any RainClock, logger: Logger, limits: Limits = Limits()) throws(RainError) {
        self.directory = directory
        self.path = "\(directory)/\(Self.fileName)"
        self.clock = clock
        self.logger = logger
        self.limits = limits
        let fd = try Self.openFile(path)
        var torn = 0
        var content: [UInt8]
        do throws(RainError) {
            content = try AtomicFile.readAll(fd: fd, path: path, limit: Self.readLimit)
            if let last = content.last, last != UInt8(ascii: "\n") {
                let keep = (content.lastIndex(of: UInt8(ascii: "\n")).map { $0 + 1 }) ?? 0
                torn = content.count - keep
                try Syscall.call("ftruncate", path: path) { ftruncate(fd, off_t(keep)) }
                try Syscall.fsync(fd, path: path)
                content.removeLast(torn)
            }
        } catch {
            Syscall.closeUnchecked(fd, because: .failurePath)
            throw error
        }
        var head = Self.head(of: content)
        if head == nil {
            for file in Self.rotatedPaths(path: path, directory: directory).reversed() {
                if let bytes = try AtomicFile.read(file, limit: Self.readLimit, options: [.noFollow]),
                    let found = Self.head(of: bytes)
                {
                    head = found
                    break
                }
            }
        }
        state = Mutex(State(fd: fd, size: content.count, head: head ?? Head(seq: 0, hash: AuditEntry.genesis)))
        if torn > 0 {
            logger.warning("audit.torn_line_removed", ["path": path, "bytes": "\(torn)"])
            let record = AuditRecord(
                .auditRecovered, profile: nil, app: nil,
                detail: "removed a torn last line of \(torn) bytes (a write was interrupted)")
            try state.withLock { s throws(RainError) in try write(record, time: clock.now, count: nil, &s) }
        }
    }

    deinit {
        let fd = state.withLock { $0.fd }
        if fd >= 0 { Syscall.closeUnchecked(fd, because: .synced) }
    }

    /// Opens `audit.jsonl` for appending, refusing anything but this uid's private regular file.
    static func openFile(_ path: String) throws(RainError) -> Int32 {
        try Syscall.openOwnFile(
            path, .readWrite, options: [.create, .append, .noControllingTerminal], mode: 0o600, isPrivate: true,
            name: "audit log", field: "audit",
            fix:
                "remove it (keep a copy if you want to inspect it) and restart rainwalletd, or run chmod 600 \(path) if it is yours"
        )
    }

    // MARK: recording

    public func record(_ record: AuditRecord) async throws(RainError) {
        try await queue.runBlocking { () throws(RainError) in try self.append(record) }
    }

    /// Records `record`, blocking the calling thread (never the log's queue) until it is written:
    /// for the daemon's start, which runs on a queue of its own.
    public func recordNow(_ record: AuditRecord) throws(RainError) {
        try queue.sync { Result { () throws(RainError) in try self.append(record) } }.get()
    }

    /// Writes the refusals being gathered now (the daemon stops).
    public func flush() async {
        _ = try? await queue.runBlocking { () throws(RainError) in
            self.state.withLock { s in self.flushPending(&s) }
        }
    }

    /// Writes the refusals being gathered now, blocking (the daemon's last step before it exits).
    public func flushNow() {
        queue.sync { state.withLock { s in flushPending(&s) } }
    }

    /// Records on the log's queue.
    func append(_ record: AuditRecord) throws(RainError) {
        dispatchPrecondition(condition: .onQueue(queue))
        var record = record
        if let detail = record.detail, detail.count > Self.maximumDetailLength {
            record.detail = String(detail.prefix(Self.maximumDetailLength))
        }
        let now = clock.now
        try state.withLock { s throws(RainError) in
            if record.result.isRefusal {
                if var pending = s.pending, pending.record.aggregationKey == record.aggregationKey,
                    now < pending.time.adding(limits.aggregationWindow)
                {
                    pending.count += 1
                    s.pending = pending
                    return
                }
                flushPending(&s)
                let timer = clock.schedule(after: limits.aggregationWindow, on: queue) { [weak self] in
                    self?.windowEnded()
                }
                s.pending = Pending(record: record, time: now, count: 1, timer: timer)
                return
            }
            flushPending(&s)
            try write(record, time: now, count: nil, &s)
        }
    }

    /// The aggregation window's timer fired (on `queue`).
    private func windowEnded() {
        let now = clock.now
        state.withLock { s in
            guard let pending = s.pending, now >= pending.time.adding(limits.aggregationWindow) else { return }
            flushPending(&s)
        }
    }

    /// Writes the gathered refusals as one entry; a failure is logged and counted as lost.
    func flushPending(_ s: inout State) {
        guard let pending = s.pending else { return }
        s.pending = nil
        pending.timer?.cancel()
        do {
            try write(pending.record, time: pending.time, count: pending.count > 1 ? pending.count : nil, &s)
        } catch {
            // `write` counted the entry as lost; the others it stood for are lost with it.
            s.lost += pending.count - 1
            logger.error("audit.not_written", ["event": pending.record.event.rawValue, "error": error.message])
        }
    }

    /// Writes one entry (after an `audit_gap` entry when earlier ones were lost) and fsyncs it.
    private func write(_ record: AuditRecord, time: Date, count: Int?, _ s: inout State) throws(RainError) {
        do throws(RainError) {
            if s.lost > 0 {
                let gap = AuditRecord(
                    .auditGap, profile: nil, app: nil, result: AuditResult(outcome: "failed"),
                    detail: "entries that could not be written (see the daemon's log)")
                try writeLine(gap, time: clock.now, count: s.lost, &s)
                s.lost = 0
            }
            try writeLine(record, time: time, count: count, &s)
        } catch {
            s.lost += 1
            throw RainError(
                .internalError,
                "the audit log \(path) could not be written (\(error.message)); free disk space in \(directory)",
                details: .init(reason: "audit_not_written"), underlying: error)
        }
    }

    private func writeLine(_ record: AuditRecord, time: Date, count: Int?, _ s: inout State) throws(RainError) {
        let entry = AuditEntry(
            seq: s.head.seq + 1, time: AuditTime.string(time), event: record.event, profile: record.profile,
            app: record.app, result: record.result.outcome, code: record.result.code, reason: record.result.reason,
            detail: record.detail, count: count, prev: s.head.hash)
        let body = try Self.encode(entry)
        let line = body + [UInt8(ascii: "\n")]
        if s.fd < 0 {
            s.fd = try Self.openFile(path)
            s.size = Int(try Self.fileSize(s.fd, path: path))
        }
        if s.size > 0, s.size + line.count > limits.maximumFileBytes { try rotate(&s) }
        let fd = s.fd
        let path = path
        do throws(RainError) {
            try line.withUnsafeBytes { buffer in
                Result { () throws(RainError) in try Syscall.writeAll(fd, buffer, path: path) }
            }.get()
            try Syscall.fsync(fd, path: path)
        } catch {
            // Cut off what part of the line reached the file, so the next entry starts a clean line.
            if ftruncate(fd, off_t(s.size)) != 0 {
                logger.error("audit.truncate_failed", ["path": path, "errno": "\(errno)"])
            }
            throw error
        }
        s.size += line.count
        s.head = Head(seq: entry.seq, hash: Self.hash(body))
        headObserver.withLock { $0 }?(AuditHead(entries: s.head.seq, hash: s.head.hash))
    }

    /// `audit.jsonl` → `audit.jsonl.1` → … → `audit.jsonl.<rotatedFiles>` (the oldest dropped),
    /// then a new `audit.jsonl`. The chain continues from the head kept in memory.
    private func rotate(_ s: inout State) throws(RainError) {
        Syscall.closeUnchecked(s.fd, because: .synced)
        s.fd = -1
        if limits.rotatedFiles > 0 {
            for index in stride(from: limits.rotatedFiles, through: 2, by: -1) {
                try Self.renameIfPresent("\(path).\(index - 1)", to: "\(path).\(index)")
            }
            try Self.renameIfPresent(path, to: "\(path).1")
        } else {
            _ = try Syscall.removeFile(path)
        }
        s.fd = try Self.openFile(path)
        s.size = 0
        try AtomicFile.syncDirectory(directory)
        logger.info("audit.rotated", ["path": path])
    }

    static func renameIfPresent(_ from: String, to: String) throws(RainError) {
        switch Syscall.retrying({ rename(from, to) }) {
        case .success: return
        case .failure(let e) where e.code == ENOENT: return
        case .failure(let e): throw Syscall.error("rename", path: from, e)
        }
    }

    static func fileSize(_ fd: Int32, path: String) throws(RainError) -> off_t {
        var st = stat()
        try Syscall.call("fstat", path: path) { fstat(fd, &st) }
        return st.st_size
    }

    // MARK: lines

    /// One entry as JSON (keys sorted, slashes unescaped), without a newline.
    static func encode(_ entry: AuditEntry) throws(RainError) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do {
            return Array(try encoder.encode(entry))
        } catch {
            throw RainError(.internalError, "cannot encode an audit entry: \(error)")
        }
    }

    /// Decodes one line; nil when it is not an entry.
    static func decode(_ line: ArraySlice<UInt8>) -> AuditEntry? {
        try? JSONDecoder().decode(AuditEntry.self, from: Data(line))
    }

    /// The lowercase hex SHA-256 of a line's bytes (without its newline).
    static func hash(_ line: some Collection<UInt8>) -> String { Hex.encode(SHA256.hash(Array(line))) }

    /// The head of a file's complete lines: the last line's hash, and its entry number (counted on
    /// from the last line that decodes, when the last ones do not).
    static func head(of content: [UInt8]) -> Head? {
        let lines = content.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).dropLast()
        guard let last = lines.last else { return nil }
        var seq: UInt64 = 0
        var after: UInt64 = 0
        for line in lines.reversed() {
            if let entry = decode(line) {
                seq = entry.seq
                break
            }
            after += 1
        }
        return Head(seq: seq + after, hash: hash(last))
    }

    /// The rotated files that exist, oldest (highest number) first.
    static func rotatedPaths(path: String, directory: String) -> [String] {
        let prefix = fileName + "."
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        let numbers = names.compactMap { name -> Int? in
            guard name.hasPrefix(prefix) else { return nil }
            return Int(name.dropFirst(prefix.count)).flatMap { $0 > 0 ? $0 : nil }
        }
        return numbers.sorted(by: >).map { "\(path).\($0)" }
    }
}
