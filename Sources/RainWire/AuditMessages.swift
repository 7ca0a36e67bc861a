import Foundation
import RainCore

/// `Audit/Read` request: the daemon's audit log, since a time, optionally verified.
public struct ReadAuditLogRequest: WireMessage, Equatable {
    /// Only entries recorded at or after it; nil for all.
    public var since: Date?
    /// Also check the hash chain.
    public var isVerifyRequested: Bool
    public init(since: Date? = nil, isVerifyRequested: Bool = false) {
        self.since = since
        self.isVerifyRequested = isVerifyRequested
    }
}

/// `Audit/Read` response.
public struct ReadAuditLogResponse: WireMessage, Equatable {
    /// The entries as written (one JSON object each), oldest first.
    public var lines: [String]
    /// True when older matching entries were left out (the frame limit).
    public var isTruncated: Bool
    /// The chain check, when asked for.
    public var verification: AuditVerificationMessage?
    public init(lines: [String], isTruncated: Bool, verification: AuditVerificationMessage? = nil) {
        self.lines = lines
        self.isTruncated = isTruncated
        self.verification = verification
    }
}

/// The result of checking the audit log's hash chain.
public struct AuditVerificationMessage: Sendable, Equatable {
    /// The entries checked.
    public var entries: UInt64
    /// Empty when intact; else `edited`, `deleted`, `reordered`, `torn` or `truncated`.
    public var problem: String
    /// The file of the first broken line.
    public var file: String
    /// Its line number, from 1 (0 when intact).
    public var line: UInt32
    /// What was found, for people.
    public var message: String
    public init(entries: UInt64, problem: String, file: String, line: UInt32, message: String) {
        self.entries = entries
        self.problem = problem
        self.file = file
        self.line = line
        self.message = message
    }
}
