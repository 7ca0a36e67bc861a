import Foundation
import RainCore
import RainCrypto
import RainTestSupport
import RainWallet
import Testing

/// The audit log's head anchored at a real `rainwalletd authority` process: a device daemon stopped,
/// its log cut or rewritten, and started again finds it; an untouched log checks clean. With the
/// embedded authority nothing is anchored.
@Suite("Audit anchor at a remote authority (processes)")
struct AuditAnchorTests {
    /// The lines of the device's audit log.
    static func lines(_ device: DaemonHarness) throws -> [String] {
        try String(contentsOfFile: "\(device.stateDirectory)/audit.jsonl", encoding: .utf8)
            .split(separator: "\n").map(String.init)
    }

    static func write(_ lines: [String], _ device: DaemonHarness) throws {
        try (lines.joined(separator: "\n") + "\n").write(
            toFile: "\(device.stateDirectory)/audit.jsonl", atomically: false, encoding: .utf8)
    }

    static func sha(_ line: String) -> String { Hex.encode(SHA256.hash(Array(line.utf8))) }

    /// Whether a line of the device's log has `event` and every one of `fields`.
    static func logged(_ device: DaemonHarness, _ event: String, _ fields: String...) -> Bool {
        device.log.split(separator: "\n").contains { line in line.contains(event) && fields.allSatisfy { line.contains($0) } }
    }

    /// A device on `authority` that logged in (its log has entries) and stopped once the authority
    /// held its log's head.
    static func anchoredDevice(_ authority: AuthorityProcess, _ contact: String) async throws -> DaemonHarness {
        let device = try await DaemonHarness.start(extraArguments: ["--authority", "127.0.0.1:\(authority.port)"])
        do {
            try await device.logIn(device.provider(), .email(contact))
            let entries = try lines(device).count
            #expect(entries >= 2)
            let anchored = await eventually(timeout: .seconds(30)) { logged(device, "audit.anchored", "entries=\(entries)") }
            #expect(anchored, "\(device.log)")
            #expect(try await device.stop() == 0)
        } catch {
            device.shutdown()
            throw error
        }
        return device
    }

    /// `status --json`'s `auditAnchor`, once it is no longer `unchecked`.
    static func settledAnchor(_ device: DaemonHarness) async throws -> String? {
        var word: String?
        _ = try await eventually(timeout: .seconds(30)) {
            let status = try await device.runCLI(["--json", "status"])
            word = try jsonObject(status.stdout)["auditAnchor"] as? String
            return word != nil && word != "unchecked"
        }
        return word
    }

    @Test("an untouched log checks clean at the next start: status matched, audit --verify intact with its anchor")
    func untouched() async throws {
        let setup = try DaemonHarness.prepare()
        defer { setup.shutdown() }
        try await AuthorityProcess.with(in: setup.directory, ["--listen", "127.0.0.1:0"]) { authority in
            let device = try await Self.anchoredDevice(authority, "anchor-clean@example.com")
            defer { device.shutdown() }
            let entries = try Self.lines(device).count
            try await device.start()
            #expect(try await Self.settledAnchor(device) == "matched")
            #expect(Self.logged(device, "audit.anchor_checked", "anchored=\(entries)"), "\(device.log)")
            #expect(!device.log.contains("audit.anchor_mismatch"))
            let verify = try await device.runCLI(["--json", "audit", "--verify"])
            #expect(verify.status == 0, "\(verify)")
            let found = try jsonObject(verify.stdout)
            #expect(found["intact"] as? Bool == true)
            #expect(found["anchor"] as? String == "matched")
            #expect((found["message"] as? String)?.contains("anchored at the authority (\(entries) entries)") == true, "\(found)")
            let status = try await device.runCLI(["status"])
            #expect(status.stdout.contains("the log held its anchor at the authority"), "\(status)")
            #expect(!(try await device.runCLI(["--json", "audit"])).stdout.contains("audit_anchor_mismatch"))
        }
        // The embedded authority anchors nothing and says nothing about an anchor.
        let embedded = try await DaemonHarness.start()
        defer { embedded.shutdown() }
        #expect(try jsonObject(try await embedded.runCLI(["--json", "status"]).stdout)["auditAnchor"] as? String == nil)
        let verify = try await embedded.runCLI(["--json", "audit", "--verify"])
        #expect(verify.status == 0, "\(verify)")
        #expect(try jsonObject(verify.stdout)["anchor"] as? String == nil, "\(verify)")
        #expect(!embedded.log.contains("audit.anchor"))
    }

    @Test(
        "a log cut or rewritten (its chain recomputed) while the daemon was stopped: the daemon starts, logs the mismatch, records it, and status and audit --verify show it"
    )
    func cutAndRewritten() async throws {
        let setup = try DaemonHarness.prepare()
        defer { setup.shutdown() }
        try await AuthorityProcess.with(in: setup.directory, ["--listen", "127.0.0.1:0"]) { authority in
            let cut = try await Self.anchoredDevice(authority, "anchor-cut@example.com")
            defer { cut.shutdown() }
            let rewritten = try await Self.anchoredDevice(authority, "anchor-rewritten@example.com")
            defer { rewritten.shutdown() }

            // Cut at a line boundary: the chain that is left is intact in itself.
            try Self.write(Array(try Self.lines(cut).dropLast()), cut)
            // Rewritten as a program that knows the format would: entry 1 changed, and the next
            // entry's prev recomputed, so the chain verifies without its anchor.
            var lines = try Self.lines(rewritten)
            let original = Self.sha(lines[0])
            #expect(lines[0].contains(#""result":"ok""#))
            lines[0] = lines[0].replacingOccurrences(of: #""result":"ok""#, with: #""result":"failed""#)
            lines[1] = lines[1].replacingOccurrences(of: original, with: Self.sha(lines[0]))
            try Self.write(lines, rewritten)

            for (device, what) in [(cut, "cut off its end"), (rewritten, "rewritten")] {
                try await device.start()
                #expect(try await Self.settledAnchor(device) == "mismatch", "\(device.log)")
                #expect(Self.logged(device, "audit.anchor_mismatch", what), "\(device.log)")
                let verify = try await device.runCLI(["--json", "audit", "--verify"])
                #expect(verify.status == 1, "\(verify)")
                let found = try jsonObject(verify.stdout)
                #expect(found["problem"] as? String == "anchor_mismatch", "\(found)")
                #expect(found["anchor"] as? String == "mismatch")
                #expect((found["message"] as? String)?.contains(what) == true, "\(found)")
                let status = try await device.runCLI(["status"])
                #expect(status.status == 0 && status.stdout.contains("does NOT hold its anchor"), "\(status)")
                let listed = try await device.runCLI(["--json", "audit"])
                let events = try listed.stdout.split(separator: "\n").map { try jsonObject(String($0))["event"] as? String }
                #expect(events.filter { $0 == "audit_anchor_mismatch" }.count == 1, "\(listed.stdout)")
                // The daemon serves on.
                #expect(try await device.provider().currentSession().authState == .authenticated)
            }
        }
    }
}
