import Foundation
import RainCore
import Testing

@testable import RainWire

/// The `authority_link` of a `SessionState` (read on every answer of the cheap calls) against
/// protobuf-c: each phase read back as written, and any other name left to protobuf-c.
@Suite struct AuthorityLinkCodecTests {
    @Test func everyPhaseIsReadAsProtobufCReadsIt() throws {
        for phase in AuthorityLinkState.Phase.allCases {
            for lastError in [nil, "timed out", "é✓"] {
                for since in [0, 1, 1_800_000_000_000] as [Int64] {
                    let link = AuthorityLinkState(phase: phase, lastError: lastError, since: Date(unixMilliseconds: since))
                    let s = SessionSnapshot(authState: .unauthenticated, sessionState: .none, authorityLink: link)
                    let bytes = try s.encode()
                    let reference = try SessionSnapshot.decodeReference(bytes)
                    #expect(reference.authorityLink == link)
                    #expect(SessionSnapshot.decodeCanonical(bytes) == reference, "\(link)")
                }
            }
        }
    }

    /// A `SessionState` holding only `authority_link { state: name }`.
    static func linkNamed(_ name: [UInt8]) -> [UInt8] {
        [0x4A, UInt8(name.count + 2), 0x0A, UInt8(name.count)] + name
    }

    @Test func aNameThatIsNoPhaseIsLeftToProtobufC() throws {
        let names: [[UInt8]] = [
            [], Array("connecte".utf8), Array("connectedx".utf8), Array("Connected".utf8), Array("degraded".utf8) + [0],
            Array("unreachabl".utf8) + [0xC3, 0xA9], [0xFF, 0x01], Array("xonnected".utf8),
        ]
        for name in names {
            let bytes = Self.linkNamed(name)
            #expect(SessionSnapshot.decodeCanonical(bytes) == nil, "\(name)")
            let reference = Result { () throws(RainError) in try SessionSnapshot.decodeReference(bytes) }
            let decoded = Result { () throws(RainError) in try SessionSnapshot.decode(bytes) }
            EnvelopeCodecTests.expectSameOutcome(decoded, reference, "\(name)")
        }
        // Each phase's own name, alone, is read.
        for phase in AuthorityLinkState.Phase.allCases {
            let bytes = Self.linkNamed(Array(phase.rawValue.utf8))
            #expect(SessionSnapshot.decodeCanonical(bytes)?.authorityLink?.phase == phase)
            #expect(SessionSnapshot.decodeCanonical(bytes) == (try SessionSnapshot.decodeReference(bytes)))
        }
    }
}
