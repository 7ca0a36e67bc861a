import Foundation
import Glibc
import RainCore
import RainCrypto
import RainTestSupport
import Testing

@testable import RainAccess

/// A private temp directory, removed when the test ends.
final class AuditDirectory: Sendable {
    let path: String

    init() throws {
        let template = "/tmp/rain-audit-XXXXXX"
        var bytes = Array(template.utf8CString)
        guard let made = mkdtemp(&bytes) else { throw RainError(.internalError, "mkdtemp failed") }
        path = String(cString: made)
    }

    var file: String { "\(path)/\(AuditLog.fileName)" }

    func lines(_ name: String = AuditLog.fileName) throws -> [String] {
        let text = try String(contentsOfFile: "\(path)/\(name)", encoding: .utf8)
        return text.split(separator: "\n", omittingEmptySubsequences: true).map(String.init)
    }

    func write(_ lines: [String], _ name: String = AuditLog.fileName) throws {
        try (lines.joined(separator: "\n") + "\n").write(toFile: "\(path)/\(name)", atomically: false, encoding: .utf8)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

@Suite("AuditLog")
struct AuditLogTests {
    let clock = ManualClock()
    let app = AuditApp(pid: 4242, uid: getuid(), path: "/usr/bin/tool", hash: "0123456789ab")

    func makeLog(_ dir: AuditDirectory, limits: AuditLog.Limits = .init()) throws -> AuditLog {
        try AuditLog(directory: dir.path, clock: clock, logger: Logger(label: "test", sink: CapturingLogSink()), limits: limits)
    }

    func entry(_ line: String) throws -> AuditEntry {
        try JSONDecoder().decode(AuditEntry.self, from: Data(line.utf8))
    }

    static func sha(_ line: String) -> String { Hex.encode(SHA256.hash(Array(line.utf8))) }

    @Test("each line carries the SHA-256 of the line before it; the file is 0600")
    func chain() async throws {
        let dir = try AuditDirectory()
        let log = try makeLog(dir)
        await #expect(throws: Never.self) {
            try await log.record(AuditRecord(.login, profile: "default", app: app, detail: "code"))
            try await log.record(AuditRecord(.export, profile: "default", app: app, detail: "recovery_phrase"))
            try await log.record(AuditRecord(.logout, profile: "default", app: app))
        }
        let lines = try dir.lines()
        #expect(lines.count == 3)
        let entries = try lines.map(entry)
        #expect(entries.map(\.seq) == [1, 2, 3])
        #expect(entries[0].prev == AuditEntry.genesis)
        #expect(entries[1].prev == Self.sha(lines[0]))
        #expect(entries[2].prev == Self.sha(lines[1]))
        #expect(entries[0].event == .login && entries[0].result == "ok" && entries[0].app == app)
        #expect(entries[0].time == "2027-01-15T08:00:00.000Z")
        var st = stat()
        #expect(lstat(dir.file, &st) == 0)
        #expect(st.st_mode & 0o777 == 0o600)
        let verification = try await log.verify()
        #expect(verification.problem == nil && verification.entryCount == 3, "\(verification)")

        // A new log on the same file continues the chain.
        let reopened = try makeLog(dir)
        try await reopened.record(AuditRecord(.login, profile: "default", app: app))
        let after = try dir.lines()
        #expect(try entry(after[3]).seq == 4)
        #expect(try entry(after[3]).prev == Self.sha(after[2]))
    }

    @Test("rotation at the size cap keeps the chain across files and drops the oldest file")
    func rotation() async throws {
        let dir = try AuditDirectory()
        let log = try makeLog(dir, limits: .init(maximumFileBytes: 600, rotatedFiles: 2))
        for index in 0..<20 {
            try await log.record(AuditRecord(.login, profile: "p\(index)", app: app))
        }
        let rotated = try dir.lines("\(AuditLog.fileName).1")
        let current = try dir.lines()
        #expect(!rotated.isEmpty && !current.isEmpty)
        #expect(try entry(current[0]).prev == Self.sha(rotated[rotated.count - 1]))
        #expect(!FileManager.default.fileExists(atPath: "\(dir.file).3"))
        let older = try dir.lines("\(AuditLog.fileName).2")
        #expect(try entry(rotated[0]).prev == Self.sha(older[older.count - 1]))
        for name in [AuditLog.fileName, "\(AuditLog.fileName).1", "\(AuditLog.fileName).2"] {
            let size = (try FileManager.default.attributesOfItem(atPath: "\(dir.path)/\(name)")[.size] as? Int) ?? 0
            #expect(size <= 600, "\(name): \(size) bytes")
        }
        #expect(try entry(current[current.count - 1]).seq == 20)
        let verification = try await log.verify()
        #expect(verification.problem == nil, "\(verification)")
        // A log opened after a rotation (the new file not created yet) continues from the rotated file.
        try FileManager.default.moveItem(atPath: "\(dir.file).2", toPath: "\(dir.file).3")
        try FileManager.default.moveItem(atPath: "\(dir.file).1", toPath: "\(dir.file).2")
        try FileManager.default.moveItem(atPath: dir.file, toPath: "\(dir.file).1")
        let reopened = try makeLog(dir, limits: .init(maximumFileBytes: 600, rotatedFiles: 3))
        try await reopened.record(AuditRecord(.logout, profile: "p", app: app))
        #expect(try entry(try dir.lines()[0]).seq == 21)
        #expect(try await reopened.verify().problem == nil)
    }

    @Test("identical refusals from one app within the window become one entry with a count")
    func aggregation() async throws {
        let dir = try AuditDirectory()
        let log = try makeLog(dir, limits: .init(aggregationWindow: .seconds(10)))
        let refused = AuditResult(outcome: "refused", code: "RAIN_202", reason: "app_not_approved")
        for pid in Int32(100)..<Int32(105) {
            var other = app
            other.pid = pid  // the same app run again
            try await log.record(AuditRecord(.appRefused, profile: "default", app: other, result: refused))
        }
        let before = try dir.lines()
        #expect(before.isEmpty)
        clock.advance(by: .seconds(10))
        var lines = try dir.lines()
        #expect(lines.count == 1)
        #expect(try entry(lines[0]).count == 5)
        #expect(try entry(lines[0]).app?.pid == 100)

        // Another event flushes the refusals gathered so far; another app is not the same refusal.
        var stranger = app
        stranger.path = "/usr/bin/other"
        try await log.record(AuditRecord(.appRefused, profile: "default", app: app, result: refused))
        try await log.record(AuditRecord(.appRefused, profile: "default", app: app, result: refused))
        try await log.record(AuditRecord(.appRefused, profile: "default", app: stranger, result: refused))
        try await log.record(AuditRecord(.login, profile: "default", app: app))
        lines = try dir.lines()
        let entries = try lines.map(entry)
        #expect(entries.map(\.event) == [.appRefused, .appRefused, .appRefused, .login])
        #expect(entries.map(\.count) == [5, 2, nil, nil])
        #expect(entries[2].app?.path == "/usr/bin/other")

        // A refusal after the window is a new entry.
        try await log.record(AuditRecord(.appRefused, profile: "default", app: app, result: refused))
        clock.advance(by: .seconds(11))
        try await log.record(AuditRecord(.appRefused, profile: "default", app: app, result: refused))
        await log.flush()
        let last = try dir.lines().suffix(2).map(entry)
        #expect(last.map(\.count) == [nil, nil])
        #expect(try await log.verify().problem == nil)
    }

    @Test("refusals still being gathered are written when the daemon stops")
    func flushAtStop() async throws {
        let dir = try AuditDirectory()
        let log = try makeLog(dir)
        let refused = AuditResult(outcome: "refused", code: "RAIN_202")
        try await log.record(AuditRecord(.export, profile: "default", app: app, result: refused))
        try await log.record(AuditRecord(.export, profile: "default", app: app, result: refused))
        #expect(try dir.lines().isEmpty)
        log.flushNow()
        let lines = try dir.lines()
        #expect(lines.count == 1)
        #expect(try entry(lines[0]).count == 2)
    }

    @Test("a torn last line is reported as torn, and the next open cuts it off and starts cleanly")
    func tornLine() async throws {
        let dir = try AuditDirectory()
        let log = try makeLog(dir)
        try await log.record(AuditRecord(.login, profile: "default", app: app))
        try await log.record(AuditRecord(.export, profile: "default", app: app))
        let handle = try #require(FileHandle(forWritingAtPath: dir.file))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(#"{"app":{"pid":1"#.utf8))
        try handle.close()
        let torn = AuditLog.verify(try log.files(), head: nil)
        #expect(torn.problem == .torn, "\(torn)")
        #expect(torn.isIntact)
        #expect(torn.line == 3)

        let reopened = try makeLog(dir)
        let lines = try dir.lines()
        #expect(lines.count == 3)
        #expect(try entry(lines[2]).event == .auditRecovered)
        try await reopened.record(AuditRecord(.logout, profile: "default", app: app))
        let verification = try await reopened.verify()
        #expect(verification.problem == nil, "\(verification)")
        #expect(verification.entryCount == 4)
    }

    /// Four entries written, then `tamper` applied to the lines of the file.
    func tampered(_ tamper: (inout [String]) -> Void) async throws -> AuditVerification {
        let dir = try AuditDirectory()
        let log = try makeLog(dir)
        for profile in ["a", "b", "c", "d"] {
            try await log.record(AuditRecord(.login, profile: profile, app: app))
        }
        var lines = try dir.lines()
        tamper(&lines)
        try dir.write(lines)
        return try await log.verify()
    }

    @Test("verify names an edited line")
    func edited() async throws {
        let result = try await tampered { $0[1] = $0[1].replacingOccurrences(of: #""profile":"b""#, with: #""profile":"x""#) }
        #expect(result.problem == .edited, "\(result)")
        #expect(result.line == 2 && result.file == AuditLog.fileName)
        #expect(!result.isIntact)
        let last = try await tampered { $0[3] = $0[3].replacingOccurrences(of: #""ok""#, with: #""no""#) }
        #expect(last.problem == .edited && last.line == 4, "the daemon's head catches the last line: \(last)")
        let garbage = try await tampered { $0[2] = "not json" }
        #expect(garbage.problem == .edited && garbage.line == 3, "\(garbage)")
    }

    @Test("verify names a deleted line")
    func deleted() async throws {
        let result = try await tampered { $0.remove(at: 1) }
        #expect(result.problem == .deleted && result.line == 2, "\(result)")
        let tail = try await tampered { $0.removeLast() }
        #expect(tail.problem == .truncated, "\(tail)")
    }

    @Test("verify names a reordered pair")
    func reordered() async throws {
        let result = try await tampered { $0.swapAt(1, 2) }
        #expect(result.problem == .reordered && result.line == 2, "\(result)")
    }

    @Test("a symbolic link planted as audit.jsonl is refused, and so is a file others can read")
    func plantedLink() throws {
        let dir = try AuditDirectory()
        let target = "\(dir.path)/elsewhere"
        _ = FileManager.default.createFile(atPath: target, contents: Data(), attributes: [.posixPermissions: 0o600])
        #expect(symlink(target, dir.file) == 0)
        #expect(throws: RainError.self) { _ = try makeLog(dir) }
        do {
            _ = try makeLog(dir)
        } catch let error as RainError {
            #expect(error.code == .invalidArgument)
        }
        #expect(unlink(dir.file) == 0)
        _ = FileManager.default.createFile(atPath: dir.file, contents: Data(), attributes: [.posixPermissions: 0o644])
        do {
            _ = try makeLog(dir)
            Issue.record("a 0644 audit log was opened")
        } catch let error as RainError {
            #expect(error.code == .invalidArgument)
        }
    }

    @Test("no message of an error reaches the log: only its code and reason")
    func noSecretFromErrors() async throws {
        let dir = try AuditDirectory()
        let log = try makeLog(dir)
        let phrase = BIP39EnglishWordlistSample.words
        let secret = RainError(.unauthorized, "the words were \(phrase.joined(separator: " "))", details: .init(reason: "x"))
        try await log.record(AuditRecord(.export, profile: "default", app: app, result: AuditResult(secret)))
        await log.flush()
        var scanner = SecretScanner()
        scanner.addPhrase(phrase)
        let text = try String(contentsOfFile: dir.file, encoding: .utf8)
        #expect(scanner.findings(in: [text]).isEmpty, "\(text)")
        #expect(text.contains("RAIN_202"))
    }

    @Test("a full disk: the record fails with RAIN_502, no partial line stays, and a gap entry follows")
    func fullDisk() async throws {
        let dir = try AuditDirectory()
        let mountPoint = "\(dir.path)/small"
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: false)
        guard mount("tmpfs", mountPoint, "tmpfs", 0, "size=64k,mode=0700") == 0 else {
            Issue.record("mount tmpfs: \(String(cString: strerror(errno)))")
            return
        }
        defer { umount2(mountPoint, Int32(MNT_DETACH)) }
        let log = try AuditLog(
            directory: mountPoint, clock: clock, logger: Logger(label: "test", sink: CapturingLogSink()))
        try await log.record(AuditRecord(.login, profile: "default", app: app))
        let filler = "\(mountPoint)/filler"
        let fd = open(filler, O_WRONLY | O_CREAT, 0o600)
        let chunk = [UInt8](repeating: 0, count: 1024)
        while chunk.withUnsafeBytes({ Glibc.write(fd, $0.baseAddress, $0.count) }) > 0 {}
        close(fd)
        let long = String(repeating: "d", count: 190)
        var failure: RainError?
        for _ in 0..<40 where failure == nil {
            do {
                try await log.record(AuditRecord(.export, profile: "default", app: app, detail: long))
            } catch {
                failure = error
            }
        }
        let error = try #require(failure, "a write on a full tmpfs failed")
        #expect(error.code == .internalError)
        #expect(error.details.reason == "audit_not_written")
        #expect(try await log.verify().problem == nil, "no partial line stays")

        unlink(filler)
        try await log.record(AuditRecord(.logout, profile: "default", app: app))
        let entries = try String(contentsOfFile: "\(mountPoint)/\(AuditLog.fileName)", encoding: .utf8)
            .split(separator: "\n").map { try entry(String($0)) }
        #expect(entries.suffix(2).map(\.event) == [.auditGap, .logout])
        #expect(entries.suffix(2).first?.count == 1)
        #expect(try await log.verify().problem == nil)
    }
}

/// Twelve words of the BIP-39 list, as a phrase would be.
enum BIP39EnglishWordlistSample {
    static let words = [
        "abandon", "ability", "able", "about", "above", "absent", "absorb", "abstract", "absurd", "abuse", "access",
        "accident",
    ]
}
