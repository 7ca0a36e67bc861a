import Foundation
import RainAccess
import RainAuthorityAPI
import RainCore
import RainTestSupport
import RainWire
import Synchronization
import Testing

@testable import RainDevice

/// An authority that keeps one audit anchor in memory, can be unreachable, and can hold its
/// anchor calls at a gate; every other call is refused.
final class AnchorStub: ForwardingAuthority {
    struct State {
        var anchor: AuthorityAuditAnchor?
        var isReachable = true
        var isGateClosed = false
        var reads = 0
        var sent: [UInt64] = []
    }
    let state = Mutex(State())

    var sent: [UInt64] { state.withLock { $0.sent } }
    var reads: Int { state.withLock { $0.reads } }

    private func reachable() throws(RainError) {
        guard state.withLock({ $0.isReachable }) else {
            throw RainError(.network, "unreachable (test)", details: .init(reason: RemoteAuthorityFailure.unreachable.rawValue))
        }
    }

    func getAuditAnchor(_ request: AuthorityGetAuditAnchorRequest, caller: AuthorityCaller) async throws(RainError)
        -> AuthorityGetAuditAnchorResponse
    {
        state.withLock { $0.reads += 1 }
        try reachable()
        return AuthorityGetAuditAnchorResponse(anchor: state.withLock { $0.anchor })
    }

    func anchorAuditHead(_ request: AuthorityAnchorAuditHeadRequest, caller: AuthorityCaller) async throws(RainError)
        -> AuthorityAnchorAuditHeadResponse
    {
        while state.withLock({ $0.isGateClosed }) { try? await Task.sleep(for: .milliseconds(2)) }
        try reachable()
        guard let head = request.head else { throw RainError.invalid("no head (test)", field: "head") }
        let refusal = state.withLock { s -> AuditAnchorRefusal? in
            if let current = s.anchor, current.entries > head.entries { return .behind }
            if let current = s.anchor, current.entries == head.entries, current.headHash != head.headHash { return .conflict }
            s.anchor = head
            s.sent.append(head.entries)
            return nil
        }
        if let refusal { throw RainError(.refused, "refused (test)", details: .init(reason: refusal.rawValue)) }
        return AuthorityAnchorAuditHeadResponse()
    }

    var forwarded: any Authority { self }

    func intercept<Response>(_ method: String, _ call: () async throws(RainError) -> Response) async throws(RainError)
        -> Response
    {
        throw RainError(.provider, "not used by these tests")
    }
}

@Suite("Audit anchoring (device)")
struct AuditAnchoringTests {
    let dir = TempDir()
    let stub = AnchorStub()

    func makeLog() throws -> AuditLog {
        try AuditLog(directory: dir.path, clock: ManualClock(), logger: Logger(label: "test", sink: CapturingLogSink()))
    }

    func anchoring(_ log: AuditLog) -> AuditAnchoring {
        AuditAnchoring(log: log, authority: stub, deviceID: "device-a", logger: Logger(label: "test", sink: CapturingLogSink()))
    }

    static func record(_ log: AuditLog, _ n: Int) async throws {
        for i in 0..<n { try await log.record(AuditRecord(.login, profile: "p\(i)", app: nil, detail: "code")) }
    }

    /// The events of the log's entries, in order.
    func events() throws -> [String] {
        let text = try String(contentsOfFile: "\(dir.path)/\(AuditLog.fileName)", encoding: .utf8)
        return try text.split(separator: "\n").map {
            try JSONDecoder().decode(AuditEntry.self, from: Data($0.utf8)).event.rawValue
        }
    }

    @Test("appends never wait for the authority, and the heads written while one is sent are coalesced into the newest")
    func coalesced() async throws {
        let log = try makeLog()
        let anchoring = anchoring(log)
        stub.state.withLock { $0.isGateClosed = true }
        anchoring.start()
        defer { anchoring.stop() }
        try await Self.record(log, 1)
        await eventually("the check at start") { anchoring.status == .matched(entries: 0) }
        // The first head's send is held at the gate: four more entries are written meanwhile.
        try await Self.record(log, 4)
        #expect(stub.sent.isEmpty)
        stub.state.withLock { $0.isGateClosed = false }
        await eventually("the newest head anchored") { stub.sent.last == 5 }
        #expect(stub.sent == [1, 5])
    }

    @Test("an unreachable authority is asked again at the next entry, and no head is sent before the check")
    func unreachable() async throws {
        let log = try makeLog()
        try await Self.record(log, 2)
        let anchoring = anchoring(log)
        stub.state.withLock { $0.isReachable = false }
        anchoring.start()
        defer { anchoring.stop() }
        await eventually("the check tried") { stub.reads >= 1 }
        let tries = stub.reads
        try await Self.record(log, 1)
        await eventually("the check tried again") { stub.reads > tries }
        #expect(anchoring.status == .unchecked)
        #expect(stub.sent.isEmpty)
        stub.state.withLock { $0.isReachable = true }
        try await Self.record(log, 1)
        await eventually("checked, then the head anchored") { stub.sent == [4] }
        #expect(anchoring.status == .matched(entries: 0))
    }

    @Test("a log that does not hold its anchor at start is a mismatch, recorded once, and anchoring goes on from its head")
    func mismatchAtStart() async throws {
        let log = try makeLog()
        try await Self.record(log, 3)
        // The authority holds entry 3 of another chain.
        stub.state.withLock { $0.anchor = AuthorityAuditAnchor(entries: 3, headHash: String(repeating: "0", count: 64)) }
        let anchoring = anchoring(log)
        anchoring.start()
        defer { anchoring.stop() }
        await eventually("the mismatch entry anchored") { stub.sent == [4] }
        guard case .mismatch(let message) = anchoring.status else {
            Issue.record("expected a mismatch, got \(anchoring.status)")
            return
        }
        #expect(message.contains("rewritten"), "\(message)")
        try await Self.record(log, 1)
        await eventually("the next head anchored") { stub.sent == [4, 5] }
        let mismatchesRecorded = try events().filter { $0 == AuditEvent.auditAnchorMismatch.rawValue }.count
        #expect(mismatchesRecorded == 1)
    }

    @Test("a head the authority refuses (another chain anchored since) is a mismatch, recorded once")
    func refusedHead() async throws {
        let log = try makeLog()
        let anchoring = anchoring(log)
        anchoring.start()
        defer { anchoring.stop() }
        try await Self.record(log, 1)
        await eventually("the first head anchored") { stub.sent == [1] }
        stub.state.withLock { $0.anchor = AuthorityAuditAnchor(entries: 100, headHash: String(repeating: "f", count: 64)) }
        try await Self.record(log, 1)
        await eventually("the refusal seen") {
            if case .mismatch = anchoring.status { return true }
            return false
        }
        try await Self.record(log, 1)
        await eventually("the entries written") { (try? events().count) == 4 }
        let mismatchesRecorded = try events().filter { $0 == AuditEvent.auditAnchorMismatch.rawValue }.count
        #expect(mismatchesRecorded == 1)
        #expect(stub.sent == [1])
    }
}
