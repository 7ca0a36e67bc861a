import Foundation
import Glibc
import RainCore
import RainCrypto
import RainTestSupport
import Synchronization
import Testing

@testable import RainAccess

/// The audit log against a head kept elsewhere (`AuditLog.check(anchor:)`), and the heads it
/// reports as it writes (`observeHeads`).
@Suite("AuditLog anchors")
struct AuditAnchorCheckTests {
    let clock = ManualClock()

    func makeLog(_ dir: AuditDirectory, limits: AuditLog.Limits = .init()) throws -> AuditLog {
        try AuditLog(directory: dir.path, clock: clock, logger: Logger(label: "test", sink: CapturingLogSink()), limits: limits)
    }

    /// A log of `count` entries; the head after each.
    func written(_ dir: AuditDirectory, _ count: Int, limits: AuditLog.Limits = .init()) async throws -> [AuditHead] {
        let log = try makeLog(dir, limits: limits)
        for i in 0..<count {
            try await log.record(AuditRecord(.login, profile: "p\(i)", app: nil, detail: "code"))
        }
        let lines = try dir.lines(AuditLog.fileName)
        return lines.enumerated().map { AuditHead(entries: UInt64($0.offset + 1), hash: AuditLogTests.sha($0.element)) }
    }

    @Test("a log holds every head it wrote; an anchor of 0 entries always matches")
    func matches() async throws {
        let dir = try AuditDirectory()
        let heads = try await written(dir, 4)
        let log = try makeLog(dir)
        for head in heads { #expect(try await log.check(anchor: head) == .matches, "\(head)") }
        #expect(try await log.check(anchor: AuditHead(entries: 0, hash: "")) == .matches)
    }

    @Test("a log cut below its anchor is missing it; one rewritten up to it differs, even with its chain recomputed")
    func cutAndRewritten() async throws {
        let dir = try AuditDirectory()
        let heads = try await written(dir, 4)
        var lines = try dir.lines()

        // Cut: the last entry removed at a line boundary. The chain itself stays intact.
        try dir.write(Array(lines.dropLast()))
        var log = try makeLog(dir)
        #expect(try await log.verify().isIntact)
        let cut = try await log.check(anchor: heads[3])
        #expect(cut == .missing(lastEntry: 3))
        #expect(cut.message(anchor: heads[3]).contains("cut off"))

        // Rewritten: entry 2 changed and every later prev recomputed (what a program that knows the
        // format does): the chain verifies, the anchor does not.
        lines[1] = lines[1].replacingOccurrences(of: "\"p1\"", with: "\"px\"")
        for i in 2..<lines.count {
            var entry = try JSONDecoder().decode(AuditEntry.self, from: Data(lines[i].utf8))
            entry.prev = AuditLogTests.sha(lines[i - 1])
            lines[i] = String(decoding: try AuditLog.encode(entry), as: UTF8.self)
        }
        try dir.write(lines)
        log = try makeLog(dir)
        #expect(try await log.verify().isIntact)
        #expect(try await log.check(anchor: heads[0]) == .matches)
        #expect(try await log.check(anchor: heads[1]) == .differs(file: AuditLog.fileName, line: 2))
        #expect(try await log.check(anchor: heads[3]) == .differs(file: AuditLog.fileName, line: 4))
    }

    @Test("an anchored entry older than every file kept is not kept")
    func rotatedAway() async throws {
        let dir = try AuditDirectory()
        let heads = try await written(dir, 12, limits: .init(maximumFileBytes: 600, rotatedFiles: 1))
        let log = try makeLog(dir, limits: .init(maximumFileBytes: 600, rotatedFiles: 1))
        guard case .notKept(let oldest) = try await log.check(anchor: heads[0]) else {
            Issue.record("the first entry should be gone with its file")
            return
        }
        #expect(oldest > 1)
    }

    @Test("the observer gets the head when it starts, then after each entry written, and nothing once removed")
    func observedHeads() async throws {
        let dir = try AuditDirectory()
        _ = try await written(dir, 2)
        let log = try makeLog(dir)
        let seen = Mutex<[AuditHead]>([])
        log.observeHeads { head in seen.withLock { $0.append(head) } }
        try await log.record(AuditRecord(.logout, profile: "p", app: nil))
        let lines = try dir.lines()
        #expect(
            seen.withLock { $0 } == [
                AuditHead(entries: 2, hash: AuditLogTests.sha(lines[1])),
                AuditHead(entries: 3, hash: AuditLogTests.sha(lines[2])),
            ])
        log.observeHeads(nil)
        try await log.record(AuditRecord(.logout, profile: "p", app: nil))
        #expect(seen.withLock { $0.count } == 2)
    }
}
