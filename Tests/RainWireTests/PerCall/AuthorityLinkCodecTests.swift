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

    @Test func theRevocationStreamAndTheKeysAreReadAsProtobufCReadsThem() throws {
        let streams: [RevocationStreamState?] = [
            nil, RevocationStreamState(isUp: true, since: Date(unixMilliseconds: 1)),
            RevocationStreamState(isUp: false, lastError: "the authority closed the stream", since: Date(unixMilliseconds: 2)),
            RevocationStreamState(isUp: false, since: Date(unixMilliseconds: 0)),
        ]
        let keys: [StorageHealthState?] = [
            nil, StorageHealthState(isAvailable: true, since: Date(unixMilliseconds: 3)),
            StorageHealthState(
                isAvailable: false, lastError: "the TPM at swtpm:path=/x cannot be reached", since: Date(unixMilliseconds: 5)),
        ]
        for stream in streams {
            for storage in keys {
                let link = AuthorityLinkState(
                    phase: .connected, since: Date(unixMilliseconds: 4), revocationStream: stream)
                let s = SessionSnapshot(
                    authState: .authenticated, sessionState: .none, authorityLink: link,
                    storage: storage)
                let bytes = try s.encode()
                let reference = try SessionSnapshot.decodeReference(bytes)
                #expect(reference == s, "\(String(describing: stream)) \(String(describing: storage))")
                #expect(SessionSnapshot.decodeCanonical(bytes) == reference)
                #expect(bytes == (try s.encodeReference()))
            }
        }
        // A stream or key state this build does not know is left to protobuf-c, which drops it.
        let unknownStream: [UInt8] = [0x4A, 0x0F, 0x0A, 0x09] + Array("connected".utf8) + [0x22, 0x02] + Array("up".utf8)
        #expect(SessionSnapshot.decodeCanonical(unknownStream)?.authorityLink?.revocationStream?.isUp == true)
        let sideways: [UInt8] = [0x4A, 0x13, 0x0A, 0x09] + Array("connected".utf8) + [0x22, 0x06] + Array("middle".utf8)
        #expect(SessionSnapshot.decodeCanonical(sideways) == nil)
        #expect(try SessionSnapshot.decodeReference(sideways).authorityLink?.revocationStream == nil)
        let oddKeys: [UInt8] = [0x52, 0x06, 0x0A, 0x04] + Array("soso".utf8)
        #expect(SessionSnapshot.decodeCanonical(oddKeys) == nil)
        #expect(try SessionSnapshot.decodeReference(oddKeys).storage == nil)
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
