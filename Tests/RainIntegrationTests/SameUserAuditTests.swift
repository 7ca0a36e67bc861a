import Foundation
import RainTestSupport
import Testing

/// The audit log rewritten by a program of the daemon's own user while the daemon is stopped: the
/// daemon, the app and that program all run as one unprivileged uid (`OtherUser`); the authority,
/// another machine in real life, anchors the log's head.
@Suite(
    "Same user: a log cut while the daemon was stopped is found against its remote anchor",
    .enabled(if: OtherUser.unavailableReason == nil, "needs a second uid: root and /usr/bin/setpriv (CI runs as root)"))
struct SameUserAuditTests {
    @Test(
        "a program of the user stops the daemon, cuts its audit log and starts it again: status and audit --verify say the log does not hold its anchor"
    )
    func cutLogIsFound() async throws {
        let setup = try DaemonHarness.prepare()
        defer { setup.shutdown() }
        try await AuthorityProcess.with(in: setup.directory, ["--listen", "127.0.0.1:0"]) { authority in
            let remote = ["--authority", "127.0.0.1:\(authority.port)"]
            let first = try await UserDaemon.start(arguments: remote)
            var stopped = false
            defer { if !stopped { first.stop() } }
            try await first.approveTheApp()
            let log = "\(first.home)/state/audit.jsonl"
            let entries = DaemonHarness.readFile(log).split(separator: "\n").count
            #expect(entries >= 2, "\(DaemonHarness.readFile(log))")
            #expect(
                await eventually(timeout: .seconds(30)) {
                    first.log.contains("audit.anchored") && first.log.contains("entries=\(entries)")
                }, "\(first.log)")

            // The attacker, of the same uid: stops the daemon, drops the log's last entry.
            let pid = first.daemon.pid
            #expect(try OtherUser.run(["/bin/kill", "-TERM", "\(pid)"]).status == 0)
            #expect(await first.daemon.waitForExit(timeout: .seconds(20)) != nil)
            let cut = try OtherUser.run(["/bin/sed", "-i", "$d", log])
            #expect(cut.status == 0, "\(cut)")
            #expect(DaemonHarness.readFile(log).split(separator: "\n").count == entries - 1)

            let again = try await first.restarted(arguments: remote)
            stopped = true
            defer { again.stop() }
            var anchor: String?
            _ = await eventually(timeout: .seconds(30)) {
                let status = try? await again.cli(["--json", "status"])
                anchor =
                    (status.flatMap { try? JSONSerialization.jsonObject(with: Data($0.stdout.utf8)) } as? [String: Any])?[
                        "auditAnchor"] as? String
                return anchor != nil && anchor != "unchecked"
            }
            #expect(anchor == "mismatch", "\(again.log)")
            #expect(again.log.contains("audit.anchor_mismatch"), "\(again.log)")
            let verify = try await again.cli(["--json", "audit", "--verify"])
            #expect(verify.status == 1 && verify.stdout.contains("anchor_mismatch"), "\(verify)")
        }
    }
}
