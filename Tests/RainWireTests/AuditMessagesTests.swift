import Foundation
import RainCore
import Testing

@testable import RainWire

@Suite("Audit/Read messages")
struct AuditMessagesTests {
    @Test("request and response round-trip, with and without a verification")
    func roundTrip() throws {
        let since = Date(unixMilliseconds: 1_800_000_000_123)
        for request in [ReadAuditLogRequest(), ReadAuditLogRequest(since: since, isVerifyRequested: true)] {
            #expect(try ReadAuditLogRequest.decode(try request.encode()) == request)
        }
        let verification = AuditVerificationMessage(
            entries: 7, problem: "edited", file: "audit.jsonl.1", line: 3, message: "audit.jsonl.1 line 3 is edited")
        for response in [
            ReadAuditLogResponse(lines: [], isTruncated: false),
            ReadAuditLogResponse(lines: [#"{"seq":1}"#, #"{"seq":2}"#], isTruncated: true, verification: verification),
        ] {
            #expect(try ReadAuditLogResponse.decode(try response.encode()) == response)
        }
    }
}
