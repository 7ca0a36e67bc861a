import FoundationEssentials
import Glibc
import RainAccess
import RainAuthorityAPI
import RainCore
import RainTransport
import RainWire

/// The audit log from the device's side: the sensitive calls record how they
/// ended, with the caller's pid and uid, and `Audit/Read` reads the log back.
///
/// When an entry cannot be written (a full disk), the daemon logs `audit.not_written` and the log
/// writes an `audit_gap` entry once it can. An export is then refused (RAIN_502
/// `audit_not_written`) and its secret dropped: an export nobody can see later is what the log is
/// there to prevent. Everything else has already happened at the authority when its entry is
/// written (a login, a passkey or a contact added), so refusing the answer would undo nothing, and
/// a logout must never be refused.
extension DeviceService {
    /// The most bytes of entries one `Audit/Read` answer carries (under the 1 MiB frame limit).
    static let auditReadLimit = 768 << 10

    /// Runs a sensitive call and records how it ended.
    /// - Parameters:
    ///   - detail: what to record beside the event (never a secret), read once the call ended;
    ///     `describe` may refine it from the call's answer.
    ///   - isEntryRequired: whether a successful call fails when its entry cannot be written.
    /// - Throws: the call's error; RAIN_502 `audit_not_written` when `isEntryRequired` and the
    ///   entry could not be written.
    static func audited<T: Sendable>(
        _ audit: (any AuditRecorder)?, _ logger: Logger, _ call: DeviceCall, _ event: AuditEvent,
        detail: @autoclosure () -> String? = nil,
        isEntryRequired: Bool = false, describe: (@Sendable (T) -> String?)? = nil,
        _ body: () async throws(RainError) -> T
    ) async throws(RainError) -> T {
        let outcome: Result<T, RainError>
        do throws(RainError) {
            outcome = .success(try await body())
        } catch {
            outcome = .failure(error)
        }
        guard let audit else { return try outcome.get() }
        let result: AuditResult
        var recorded = detail()
        switch outcome {
        case .success(let value):
            result = .ok
            if let describe, let more = describe(value) { recorded = more }
        case .failure(let error):
            result = AuditResult(error)
        }
        do {
            try await audit.record(
                AuditRecord(event, profile: call.profile, app: call.auditApp, result: result, detail: recorded))
        } catch {
            logger.error(
                "audit.not_written", ["event": event.rawValue, "profile": call.profile, "error": error.message])
            if isEntryRequired, case .success = outcome {
                throw RainError(
                    .internalError,
                    "refused: the audit log could not record this \(event.rawValue) (\(error.message)); nothing was "
                        + "released", details: .init(reason: "audit_not_written"))
            }
        }
        return try outcome.get()
    }

    /// `Audit/Read`: the entries since a time, and the chain check when asked (the daemon's own
    /// uid only: its route's policy), with what `anchoring` found against the remote authority.
    /// - Throws: RAIN_404 when this daemon keeps no audit log.
    static func readAuditLog(
        _ request: ReadAuditLogRequest, _ call: DeviceCall, audit: (any AuditRecorder)?, anchoring: AuditAnchoring? = nil
    ) async throws(RainError) -> ReadAuditLogResponse {
        guard let audit else { throw RainError(.unavailable, "this daemon keeps no audit log") }
        let readout = try await audit.read(since: request.since, maximumBytes: auditReadLimit)
        var verification: AuditVerificationMessage?
        if request.isVerifyRequested {
            verification = verificationMessage(try await audit.verify(), anchor: anchoring?.status)
        }
        return ReadAuditLogResponse(lines: readout.lines, isTruncated: readout.isTruncated, verification: verification)
    }

    /// The chain check as `Audit/Read` answers it: the local check, and the anchor's. A chain intact
    /// in itself that does not hold its anchor is `anchor_mismatch`; a broken line is named first.
    static func verificationMessage(_ found: AuditVerification, anchor: AuditAnchoring.Status?)
        -> AuditVerificationMessage
    {
        var message = AuditVerificationMessage(
            entries: UInt64(found.entryCount), problem: found.problem?.rawValue ?? "", file: found.file ?? "",
            line: UInt32(found.line ?? 0), message: found.message, anchor: anchor?.word ?? "")
        switch anchor {
        case nil:
            break
        case .unchecked:
            message.message +=
                "; its anchor at the authority is not checked yet (the authority has not answered since the daemon started)"
        case .matched(let entries) where entries > 0:
            message.message += "; at the last start it held the head anchored at the authority (\(entries) entries)"
        case .matched:
            message.message += "; nothing was anchored at the authority before the last start"
        case .mismatch(let what) where found.isIntact:
            message.problem = "anchor_mismatch"
            message.file = ""
            message.line = 0
            message.message = "the audit log does not hold its anchor at the authority: \(what)"
        case .mismatch(let what):
            message.message += "; nor does it hold its anchor at the authority: \(what)"
        }
        return message
    }

    /// What a passkey Finish records, from the kind of the ceremony it finishes.
    static func passkeyEvent(_ kind: PasskeyCeremonyKind?) -> (AuditEvent, String) {
        switch kind {
        case .add: (.passkeyAdded, "passkey")
        case .signUp: (.login, "passkey_signup")
        case .login, nil: (.login, "passkey")
        }
    }
}

extension DeviceCall {
    /// The caller as the audit log records it: its identity (path, hash, pid, uid) when per-app
    /// access read it, else its socket's pid and uid.
    var auditApp: AuditApp { identity.map(AuditApp.init) ?? AuditApp(pid: peer.pid, uid: peer.uid) }
}

extension ProfileSession {
    /// The kind of the pending passkey ceremony `ceremonyID`, if it is this profile's.
    func pendingPasskeyKind(_ ceremonyID: String) -> PasskeyCeremonyKind? {
        challenges.passkey?.id == ceremonyID ? challenges.passkey?.kind : nil
    }

    /// Records a session that ended without logout: a revocation when the authority refused it
    /// (`cause`: its reason, `refresh_token_reused`, `revoked`, …), an expiry otherwise. A failure
    /// is logged: the session is gone either way.
    func recordEnd(_ reason: ExpiryReason, cause: String?) async {
        guard let audit = context.audit else { return }
        let event: AuditEvent = reason == .expired && cause == nil ? .sessionExpired : .revocation
        let record = AuditRecord(
            event, profile: runtime.name, app: nil,
            result: AuditResult(outcome: "ok", reason: cause ?? reason.rawValue), detail: reason.rawValue)
        do {
            try await audit.record(record)
        } catch {
            logger.error("audit.not_written", ["event": event.rawValue, "profile": runtime.name, "error": error.message])
        }
    }
}
