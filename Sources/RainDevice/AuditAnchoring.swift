import FoundationEssentials
import RainAccess
import RainAuthorityAPI
import RainCore
import RainWire
import Synchronization

/// Keeps the audit log's head at a remote authority, and checks the log against it when the daemon
/// starts, so that a log cut or rewritten while the daemon was stopped is found
/// (docs/security.md "The audit log"). Only with a remote authority: an embedded one lives in the
/// same state directory as the log, and anchoring there would prove nothing.
///
/// - At start it asks the authority for the head it keeps (`GetAuditAnchor`) and checks that the
///   log holds it (`AuditLog.check(anchor:)`). A log that does not is logged as an error
///   (`audit.anchor_mismatch`), recorded as an `audit_anchor_mismatch` entry, and shown by `status`
///   and `audit --verify`; the daemon runs on.
/// - Then, after each entry written, it sends the log's head (`AnchorAuditHead`) from a task:
///   appends never wait for it. Heads written while one is on its way are coalesced into the
///   newest. The authority keeps only heads that move forward, so a head it refuses means the log
///   it anchored is not this one: a mismatch too.
/// - An authority that cannot be reached is asked again at the next entry written, or when its
///   link is back; no head is sent before the check at start has run, so a rewritten log cannot
///   move the anchor past the evidence first.
public final class AuditAnchoring: Sendable {
    /// What is known of the log against its anchor.
    public enum Status: Sendable, Equatable {
        /// Not checked yet: the authority has not answered since the daemon started.
        case unchecked
        /// The log held the anchored head at start (`entries` 0: none was anchored before).
        case matched(entries: UInt64)
        /// The log does not hold the anchored head, or the authority refused its head.
        case mismatch(message: String)

        /// The word `GetInfo` and `audit --verify` carry: `unchecked`, `matched` or `mismatch`.
        public var word: String {
            switch self {
            case .unchecked: "unchecked"
            case .matched: "matched"
            case .mismatch: "mismatch"
            }
        }
    }

    private struct State {
        var isRunning = false
        /// A task is checking or sending; another waits for the next entry or the link.
        var isBusy = false
        var status = Status.unchecked
        /// The log's newest head.
        var latest: AuditHead?
        /// The entries the authority holds, as far as this run knows.
        var anchored: UInt64 = 0
        /// The mismatch is recorded once per run: recording it writes an entry, whose head is sent.
        var isMismatchRecorded = false
    }

    private let state = Mutex(State())
    private let log: AuditLog
    private let authority: any Authority
    private let deviceID: String
    private let logger: Logger

    /// Anchors `log` at `authority` (a remote one) for the device `deviceID`. Nothing happens
    /// before `start()`.
    public init(log: AuditLog, authority: any Authority, deviceID: String, logger: Logger) {
        self.log = log
        self.authority = authority
        self.deviceID = deviceID
        self.logger = logger
    }

    /// Checks the log against its anchor, then follows the log's heads.
    public func start() {
        state.withLock { $0.isRunning = true }
        log.observeHeads { [weak self] head in self?.appended(head) }
        authority.observeLink { [weak self] link in
            if link.phase == .connected { self?.kick() }
        }
        kick()
    }

    /// Stops following the log (the service retires); a task under way ends after its call.
    public func stop() {
        state.withLock { $0.isRunning = false }
        log.observeHeads(nil)
    }

    /// What is known now.
    public var status: Status { state.withLock { $0.status } }

    /// A new head (on the log's queue): noted, and a task started if none runs.
    private func appended(_ head: AuditHead) {
        state.withLock { $0.latest = head }
        kick()
    }

    private func kick() {
        let isStarting = state.withLock { s -> Bool in
            guard s.isRunning, !s.isBusy else { return false }
            s.isBusy = true
            return true
        }
        if isStarting { Task { await self.run() } }
    }

    /// Checks once, then sends heads until none is newer than what the authority holds or a call
    /// fails (the next entry or the link's return starts again).
    private func run() async {
        if status == .unchecked, await !checkAtStart() { return idle() }
        while let head = nextHead() {
            guard await send(head) else { return idle() }
        }
    }

    private func idle() { state.withLock { $0.isBusy = false } }

    /// The head to send, or nil (and no longer busy) when there is none.
    private func nextHead() -> AuditHead? {
        state.withLock { s -> AuditHead? in
            if s.isRunning, let latest = s.latest, latest.entries > s.anchored { return latest }
            s.isBusy = false
            return nil
        }
    }

    /// Asks for the anchor and checks the log against it; false when the authority did not answer.
    private func checkAtStart() async -> Bool {
        let anchor: AuthorityAuditAnchor?
        do {
            anchor = try await authority.getAuditAnchor(
                AuthorityGetAuditAnchorRequest(deviceID: deviceID), caller: .anonymous
            ).anchor
        } catch {
            logger.info("audit.anchor_unchecked", ["code": error.code.description, "reason": error.details.reason ?? ""])
            return false
        }
        guard let anchor, anchor.entries > 0 else {
            state.withLock { $0.status = .matched(entries: 0) }
            logger.info("audit.anchor_checked", ["anchored": "0"])
            return true
        }
        let head = AuditHead(entries: anchor.entries, hash: anchor.headHash)
        let check: AuditAnchorCheck
        do {
            check = try await log.check(anchor: head)
        } catch {
            await mismatch("the log could not be read to check its anchor: \(error.message)", anchored: anchor.entries)
            return true
        }
        guard check.isMatch else {
            await mismatch(check.message(anchor: head), anchored: anchor.entries)
            return true
        }
        state.withLock { s in
            s.status = .matched(entries: anchor.entries)
            s.anchored = max(s.anchored, anchor.entries)
        }
        logger.info("audit.anchor_checked", ["anchored": String(anchor.entries)])
        return true
    }

    /// Sends `head`; false when it was not anchored (the next entry tries again).
    private func send(_ head: AuditHead) async -> Bool {
        do {
            _ = try await authority.anchorAuditHead(
                AuthorityAnchorAuditHeadRequest(
                    deviceID: deviceID, head: AuthorityAuditAnchor(entries: head.entries, headHash: head.hash)),
                caller: .anonymous)
        } catch  where error.code == .refused && AuditAnchorRefusal(rawValue: error.details.reason ?? "") != nil {
            await mismatch("the authority refused the log's head (\(head.entries) entries): \(error.message)", anchored: nil)
            return false
        } catch {
            logger.debug("audit.anchor_deferred", ["code": error.code.description, "entries": String(head.entries)])
            return false
        }
        state.withLock { $0.anchored = max($0.anchored, head.entries) }
        // Sensitive operations come at human pace: one line for each is no flood.
        logger.info("audit.anchored", ["entries": String(head.entries)])
        return true
    }

    /// The log does not hold its anchor: shown from now on, logged and recorded once per run.
    private func mismatch(_ message: String, anchored: UInt64?) async {
        let isFirst = state.withLock { s -> Bool in
            s.status = .mismatch(message: message)
            if let anchored { s.anchored = max(s.anchored, anchored) }
            defer { s.isMismatchRecorded = true }
            return !s.isMismatchRecorded
        }
        guard isFirst else { return }
        logger.error("audit.anchor_mismatch", ["device": deviceID, "message": message])
        do {
            try await log.record(
                AuditRecord(
                    .auditAnchorMismatch, profile: nil, app: nil,
                    result: AuditResult(outcome: "failed", reason: "audit_anchor_mismatch"), detail: message))
        } catch {
            logger.error("audit.not_written", ["event": AuditEvent.auditAnchorMismatch.rawValue, "error": error.message])
        }
    }
}
