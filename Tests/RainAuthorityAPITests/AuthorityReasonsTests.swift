import RainAuthorityAPI
import Testing

/// The typed reasons keep the strings that travel in `details.reason` (clients match them).
@Suite struct AuthorityReasonsTests {
    @Test("code rejection reasons are the documented wire strings")
    func codeRejectionReasons() {
        #expect(
            CodeRejectionReason.allCases.map(\.rawValue) == ["wrong", "used", "retired", "locked", "expired", "no_pending_code"])
    }

    @Test("remote authority failures are the documented wire strings")
    func remoteFailures() {
        #expect(RemoteAuthorityFailure.allCases.map(\.rawValue) == ["authority_unreachable", "deadline_exceeded"])
    }
}
