import Foundation
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainTestSupport
import RainWire
import Testing

@testable import RainAuthority
@testable import RainStore

/// The audit anchors a device keeps at the authority: per device key, only ever moving forward,
/// on both stores.
@Suite("Audit anchors")
struct AuditAnchorTests {
    static let kinds = StoreKind.allCases

    static func hash(_ n: Int) -> String { Hex.encode(SHA256.hash(Array("line \(n)".utf8))) }

    static func device(_ id: String = "device-a", keys: [Ed25519PrivateKey]) -> AuthorityCaller {
        AuthorityCaller(proof: TestDeviceKeys(deviceID: id, keys: keys).proof)
    }

    static func anchor(
        _ authority: EmbeddedAuthority, _ entries: UInt64, _ hash: String, as caller: AuthorityCaller,
        device: String = "device-a"
    ) async throws(RainError) {
        _ = try await authority.anchorAuditHead(
            AuthorityAnchorAuditHeadRequest(deviceID: device, head: AuthorityAuditAnchor(entries: entries, headHash: hash)),
            caller: caller)
    }

    static func anchored(_ authority: EmbeddedAuthority, as caller: AuthorityCaller, device: String = "device-a")
        async throws(RainError) -> AuthorityAuditAnchor?
    {
        try await authority.getAuditAnchor(AuthorityGetAuditAnchorRequest(deviceID: device), caller: caller).anchor
    }

    @Test("the rule: no anchor or more entries stores, the same head changes nothing, fewer entries or another hash is refused")
    func rule() {
        func record(_ entries: UInt64, _ hash: String) -> AuditAnchorRecord {
            AuditAnchorRecord(deviceKey: "k", deviceID: "d", entries: entries, headHash: hash, updatedAt: Date())
        }
        let current = record(5, "a")
        #expect(AuditAnchorOutcome.decide(current: nil, proposed: record(1, "x")) == .stored)
        #expect(AuditAnchorOutcome.decide(current: current, proposed: record(6, "z")) == .stored)
        #expect(AuditAnchorOutcome.decide(current: current, proposed: record(5, "a")) == .unchanged)
        #expect(AuditAnchorOutcome.decide(current: current, proposed: record(4, "a")) == .behind(current))
        #expect(AuditAnchorOutcome.decide(current: current, proposed: record(5, "b")) == .conflict(current))
    }

    @Test("an anchor only moves forward: behind and conflicting heads are RAIN_302 and change nothing", arguments: kinds)
    func forwardOnly(kind: StoreKind) async throws {
        try await StoreFixture.with(kind) { f in
            let me = Self.device(keys: [FixtureDevice.key])
            #expect(try await Self.anchored(f.authority, as: me) == nil)

            try await Self.anchor(f.authority, 3, Self.hash(3), as: me)
            #expect(try await Self.anchored(f.authority, as: me) == AuthorityAuditAnchor(entries: 3, headHash: Self.hash(3)))
            // The same head again (a retry whose answer was lost): a success that changes nothing.
            try await Self.anchor(f.authority, 3, Self.hash(3), as: me)
            try await Self.anchor(f.authority, 7, Self.hash(7), as: me)

            let behind = await rainError { try await Self.anchor(f.authority, 6, Self.hash(6), as: me) }
            #expect(behind?.code == .refused)
            #expect(behind?.details.reason == AuditAnchorRefusal.behind.rawValue)
            let conflict = await rainError { try await Self.anchor(f.authority, 7, Self.hash(70), as: me) }
            #expect(conflict?.code == .refused)
            #expect(conflict?.details.reason == AuditAnchorRefusal.conflict.rawValue)
            #expect(try await Self.anchored(f.authority, as: me) == AuthorityAuditAnchor(entries: 7, headHash: Self.hash(7)))
        }
    }

    @Test("anchors are per device key: another key neither sees nor moves this key's", arguments: kinds)
    func perDeviceKey(kind: StoreKind) async throws {
        try await StoreFixture.with(kind) { f in
            let mine = Self.device(keys: [FixtureDevice.key])
            // Another key, even under the same device id: an attacker that mints keys.
            let other = Self.device(keys: [try Ed25519PrivateKey()])
            try await Self.anchor(f.authority, 9, Self.hash(9), as: mine)
            #expect(try await Self.anchored(f.authority, as: other) == nil)
            try await Self.anchor(f.authority, 2, Self.hash(2), as: other)
            try await Self.anchor(f.authority, 100, Self.hash(100), as: other)
            #expect(try await Self.anchored(f.authority, as: mine) == AuthorityAuditAnchor(entries: 9, headHash: Self.hash(9)))
            #expect(
                try await Self.anchored(f.authority, as: other) == AuthorityAuditAnchor(entries: 100, headHash: Self.hash(100)))
        }
    }

    @Test("without a proof of the device's key, or with another device's, nothing is read or moved (RAIN_501)")
    func proofRequired() async throws {
        try await AuthorityFixture.with { f in
            let unproven = AuthorityCaller()
            let anchorError = await rainError { try await Self.anchor(f.authority, 1, Self.hash(1), as: unproven) }
            #expect(anchorError?.code == .provider)
            #expect(anchorError?.details.reason == DeviceBinding.proofRequiredReason)
            let readError = await rainError { _ = try await Self.anchored(f.authority, as: unproven) }
            #expect(readError?.details.reason == DeviceBinding.proofRequiredReason)
            // A proof of device-b's key names device-b, not the request's device-a.
            let otherDevice = Self.device("device-b", keys: [FixtureDevice.key])
            let mismatch = await rainError { try await Self.anchor(f.authority, 1, Self.hash(1), as: otherDevice) }
            #expect(mismatch?.details.reason == DeviceBinding.proofRequiredReason)
        }
    }

    @Test("no head, a head with no entries or a hash that is not 64 lowercase hex digits is RAIN_102")
    func malformedHeads() async throws {
        let heads: [(entries: UInt64, hash: String, field: String)] = [
            (0, Self.hash(0), "entries"), (UInt64.max, Self.hash(1), "entries"), (1, Self.hash(1).uppercased(), "headHash"),
            (1, "abc", "headHash"),
        ]
        try await AuthorityFixture.with { f in
            let me = Self.device(keys: [FixtureDevice.key])
            for (entries, hash, field) in heads {
                let error = await rainError { try await Self.anchor(f.authority, entries, hash, as: me) }
                #expect(error?.code == .invalidArgument, "\(entries) \(hash)")
                #expect(error?.details.field == field)
            }
            let headless = await rainError {
                _ = try await f.authority.anchorAuditHead(AuthorityAnchorAuditHeadRequest(deviceID: "device-a"), caller: me)
            }
            #expect(headless?.code == .invalidArgument)
            #expect(headless?.details.field == "head")
            let stored = try await Self.anchored(f.authority, as: me)
            #expect(stored == nil)
        }
    }

    @Test("a key move gives the new key the anchor of the old one, never moving a newer one back", arguments: kinds)
    func keyMoveCarriesTheAnchor(kind: StoreKind) async throws {
        try await StoreFixture.with(kind) { f in
            let old = FixtureDevice.key
            let new = try Ed25519PrivateKey()
            try await Self.anchor(f.authority, 12, Self.hash(12), as: Self.device(keys: [old]))
            try await f.authority.rebindDevice(
                deviceID: "device-a", newKey: .ed25519(new.publicKey),
                proof: TestDeviceKeys(deviceID: "device-a", keys: [old, new]).proof)
            let moved = Self.device(keys: [new])
            #expect(try await Self.anchored(f.authority, as: moved) == AuthorityAuditAnchor(entries: 12, headHash: Self.hash(12)))
            // It moves on from there, for the new key.
            try await Self.anchor(f.authority, 13, Self.hash(13), as: moved)
            let behind = await rainError { try await Self.anchor(f.authority, 12, Self.hash(12), as: moved) }
            #expect(behind?.details.reason == AuditAnchorRefusal.behind.rawValue)
            // Rebinding again (a migration run twice) does not move the new key's anchor back.
            try await f.authority.rebindDevice(
                deviceID: "device-a", newKey: .ed25519(new.publicKey),
                proof: TestDeviceKeys(deviceID: "device-a", keys: [old, new]).proof)
            #expect(try await Self.anchored(f.authority, as: moved) == AuthorityAuditAnchor(entries: 13, headHash: Self.hash(13)))
        }
    }

    @Test("over the wire: the anchor is the proven connection's key's, whatever the caller says")
    func remote() async throws {
        try await RemoteFixture.with { f in
            _ = try await f.remote.anchorAuditHead(
                AuthorityAnchorAuditHeadRequest(
                    deviceID: RemoteFixture.device, head: AuthorityAuditAnchor(entries: 4, headHash: Self.hash(4))),
                caller: AuthorityCaller(proof: .none()))
            let read = try await f.remote.getAuditAnchor(
                AuthorityGetAuditAnchorRequest(deviceID: RemoteFixture.device), caller: .anonymous)
            #expect(read.anchor == AuthorityAuditAnchor(entries: 4, headHash: Self.hash(4)))
            // Stored under the fixture device's key, which the connection proved.
            #expect(
                try await Self.anchored(f.embedded, as: Self.device(keys: [FixtureDevice.key]))
                    == AuthorityAuditAnchor(entries: 4, headHash: Self.hash(4)))
            let refused = await rainError {
                _ = try await f.remote.anchorAuditHead(
                    AuthorityAnchorAuditHeadRequest(
                        deviceID: RemoteFixture.device, head: AuthorityAuditAnchor(entries: 3, headHash: Self.hash(3))),
                    caller: .anonymous)
            }
            #expect(refused?.code == .refused)
            #expect(refused?.details.reason == AuditAnchorRefusal.behind.rawValue)
        }
    }
}
