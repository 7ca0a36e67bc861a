import Foundation
import RainCore
import RainWire
import Testing

/// `SessionState`'s direct codec (SessionStateCodec.swift) against protobuf-c, the reference.
@Suite struct SessionStateCodecTests {
    typealias Seeded = EnvelopeCodecTests.Seeded

    static func optionalString(_ g: inout Seeded) -> String? {
        let pool: [String?] = [
            nil, "", "acc_1f2e", "wal_0x9a", "é✓", "session_not_persisted", String(repeating: "k", count: 130),
        ]
        return pool[Int(g.next() % UInt64(pool.count))]
    }

    static func snapshot(_ g: inout Seeded) -> SessionSnapshot {
        let auth: AuthState = [.loading, .authenticated, .unauthenticated][Int(g.next() % 3)]
        let millis = [0, 1, -1, 1_800_000_000_000, Int64.min, Int64.max][Int(g.next() % 6)]
        let session: SessionState = [.loading, .none, .active(expiresAt: Date(unixMilliseconds: millis)), .expired][
            Int(g.next() % 4)]
        let contact: RainWalletContact? = [nil, .email("a@b.example"), .phone("+15550100"), .email("")][Int(g.next() % 4)]
        return SessionSnapshot(
            authState: auth, sessionState: session, accountID: optionalString(&g), walletID: optionalString(&g),
            contact: contact, hasActiveSession: g.next() % 2 == 0, storageWarning: optionalString(&g))
    }

    @Test func writesTheBytesProtobufCPacksAndReadsThemBack() throws {
        var g = Seeded(state: 0x5DEE_CE66_D1CE_4E5B)
        for _ in 0..<3000 {
            let s = Self.snapshot(&g)
            let bytes = try s.encode()
            #expect(bytes == (try s.encodeReference()), "\(s)")
            #expect(try s.directBytes() == bytes)
            let reference = try SessionSnapshot.decodeReference(bytes)
            #expect(SessionSnapshot.decodeCanonical(bytes) == reference, "\(s)")
            #expect(try SessionSnapshot.decode(bytes) == reference)
        }
    }

    @Test func whatTheCanonicalReaderTakesProtobufCReadsTheSame() throws {
        var g = Seeded(state: 0x1234_5678_9ABC_DEF1)
        var taken = 0
        var left = 0
        for _ in 0..<20_000 {
            var bytes = try Self.snapshot(&g).encode()
            g.mutate(&bytes)
            let reference = Result { () throws(RainError) in try SessionSnapshot.decodeReference(bytes) }
            if let canonical = SessionSnapshot.decodeCanonical(bytes) {
                taken += 1
                #expect(try reference.get() == canonical, "\(bytes)")
            } else {
                left += 1
            }
        }
        #expect(taken > 1000 && left > 1000, "taken \(taken), left \(left)")
    }

    @Test func unknownEnumValuesReadAsTheReferenceDoes() throws {
        // auth_state 9, session_status 7, contact { kind 5 value "x" }: unknown values.
        let bytes: [UInt8] = [0x08, 0x09, 0x10, 0x07, 0x3A, 0x05, 0x08, 0x05, 0x12, 0x01, 0x78]
        let reference = try SessionSnapshot.decodeReference(bytes)
        #expect(reference == SessionSnapshot(authState: .unauthenticated, sessionState: .none))
        #expect(SessionSnapshot.decodeCanonical(bytes) == reference)
        // An empty message is the unauthenticated state.
        #expect(SessionSnapshot.decodeCanonical([]) == (try SessionSnapshot.decodeReference([])))
    }

    @Test func aNULInAStringIsRefused() {
        let s = SessionSnapshot(authState: .authenticated, sessionState: .none, accountID: "a\u{0}b")
        #expect(throws: RainError.self) { try s.encode() }
        let bytes: [UInt8] = [0x08, 0x02, 0x22, 0x03, 0x61, 0x00, 0x62]
        #expect(SessionSnapshot.decodeCanonical(bytes) == nil)
        #expect(throws: RainError.self) { try SessionSnapshot.decode(bytes) }
    }
}
