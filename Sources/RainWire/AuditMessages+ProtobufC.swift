internal import CProtobufC
internal import CRainProto
import Foundation
import RainCore

extension ReadAuditLogRequest {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> ReadAuditLogRequest {
        try unpackMessage(bytes, name: "ReadAuditLogRequest", rain__wallet__v1__read_audit_log_request__init) {
            (p) throws(RainError) in
            let m = p.pointee
            return ReadAuditLogRequest(
                since: m.since_ms == 0 ? nil : Date(unixMilliseconds: m.since_ms), isVerifyRequested: m.verify != 0)
        }
    }
    public func encode() throws(RainError) -> [UInt8] {
        var m = cMessage(rain__wallet__v1__read_audit_log_request__init)
        m.since_ms = since?.unixMilliseconds ?? 0
        m.verify = isVerifyRequested ? 1 : 0
        return packMessage(&m)
    }
}

extension ReadAuditLogResponse {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> ReadAuditLogResponse {
        try unpackMessage(bytes, name: "ReadAuditLogResponse", rain__wallet__v1__read_audit_log_response__init) {
            (p) throws(RainError) in
            let m = p.pointee
            var verification: AuditVerificationMessage?
            if let v = m.verification?.pointee {
                verification = AuditVerificationMessage(
                    entries: v.entries, problem: try readString(v.problem, field: "problem"),
                    file: try readString(v.file, field: "file"), line: v.line,
                    message: try readString(v.message, field: "message"))
            }
            return ReadAuditLogResponse(
                lines: try readStrings(m.lines, count: m.n_lines, field: "line"), isTruncated: m.truncated != 0,
                verification: verification)
        }
    }
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__read_audit_log_response__init)
        (m.n_lines, m.lines) = try arena.strings(lines, field: "line")
        m.truncated = isTruncated ? 1 : 0
        if let verification {
            var v = cMessage(rain__wallet__v1__audit_verification__init)
            v.entries = verification.entries
            v.problem = try arena.string(verification.problem, field: "problem")
            v.file = try arena.string(verification.file, field: "file")
            v.line = verification.line
            v.message = try arena.string(verification.message, field: "message")
            m.verification = arena.box(v)
        }
        return packMessage(&m)
    }
}
