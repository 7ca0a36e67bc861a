import Foundation
import RainTestSupport
import RainWallet
import RainWire
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The disk is full when a refreshed pair is saved. The real daemon and CLI,
/// the state directory on a small tmpfs (tests run as root), the embedded authority's directory on
/// a roomy tmpfs of its own (as a remote authority's disk would be), the daemon's clock moved
/// through a `TestClockFile`.
@Suite("A full disk at refresh", .serialized)
struct FullDiskTests {
    /// The tmpfs mounts of one test, unmounted (lazily: a process may still hold a file) in reverse.
    final class Mounts: Sendable {
        let paths: [String]
        init(_ paths: [String]) { self.paths = paths }

        static func mountTmpfs(at path: String, size: String) throws {
            if !FileManager.default.fileExists(atPath: path) {
                try FileManager.default.createDirectory(
                    atPath: path, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
            }
            guard mount("tmpfs", path, "tmpfs", 0, "size=\(size),mode=0700") == 0 else {
                throw HarnessError("mount tmpfs on \(path): \(String(cString: strerror(errno)))")
            }
        }

        func unmountAll() {
            for path in paths.reversed() { _ = umount2(path, Int32(MNT_DETACH)) }
        }
    }

    /// Writes zeros to `path` until the filesystem is full.
    static func fillDisk(_ path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0 else { throw HarnessError("open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                guard errno == ENOSPC else { throw HarnessError("write \(path): \(String(cString: strerror(errno)))") }
                return
            }
        }
    }

    /// Launches the daemon on the test clock and waits until it is ready.
    static func launch(_ h: DaemonHarness, clock: TestClockFile) async throws {
        try h.launch(
            executable: h.binaryDirectory.appendingPathComponent("rainwalletd-test"), arguments: h.daemonArguments,
            environment: clock.environment)
        try await h.waitUntilReady()
    }

    @Test("refresh on a full disk fails with RAIN_502; after a restart past the grace window the session lives")
    func fullDiskAtRefresh() async throws {
        let h = try DaemonHarness.prepare()
        let state = h.stateDirectory
        let mounts = Mounts([state, "\(state)/authority"])
        // The daemon must be gone before its directories are unmounted: waited for asynchronously
        // (a `defer` would hold a thread of the concurrency pool while it drains).
        func cleanUp() async {
            await h.shutdownAsync()
            mounts.unmountAll()
            try? FileManager.default.removeItem(atPath: h.directory)
        }
        do {
            try await Self.fullDiskAtRefresh(h, state: state)
        } catch {
            await cleanUp()
            throw error
        }
        await cleanUp()
    }

    static func fullDiskAtRefresh(_ h: DaemonHarness, state: String) async throws {
        try Mounts.mountTmpfs(at: state, size: "1m")
        try Mounts.mountTmpfs(at: "\(state)/authority", size: "64m")
        let clock = try TestClockFile(path: "\(h.directory)/clock")
        try await Self.launch(h, clock: clock)

        let provider = h.provider()
        let login = try await h.logIn(provider, .email("full-disk@example.com"))
        let accountID = try #require(login.session.accountID)
        let filler = "\(state)/filler"
        try Self.fillDisk(filler)

        // The refresh rotates at the authority but cannot save the new pair: reported, not hidden.
        let refresh = try await h.runCLI(["refresh"])
        #expect(refresh.status != 0, "\(refresh)")
        #expect(!refresh.stdout.contains("Session refreshed"), "\(refresh)")
        #expect(refresh.stderr.contains("RAIN_502"), "\(refresh)")
        #expect(refresh.stderr.contains("free disk space"), "\(refresh)")
        let status = try await h.runCLI(["--json", "status"])
        #expect(status.status == 0, "\(status)")
        let snapshot = try jsonObject(status.stdout)
        #expect(snapshot["storageWarning"] as? String == "session_not_persisted")
        #expect(snapshot["authState"] as? String == "authenticated")
        // Calls do not use the unsaved pair.
        let account = await rainError { _ = try await provider.account() }
        #expect(account?.code.rawValue == 502)
        #expect(account?.details.reason == "session_not_persisted")

        // The daemon stops with the pair unsaved; it starts again a minute later (past the 10 s grace
        // window) with the disk freed and only the previous pair on disk.
        try await h.stop()
        try clock.advance(by: .seconds(60))
        try FileManager.default.removeItem(atPath: filler)
        try await Self.launch(h, clock: clock)

        let restarted = h.provider()
        let info = try await restarted.account()
        #expect(info.accountID == accountID)
        let again = try await h.runCLI(["refresh"])
        #expect(again.status == 0, "\(again)")
        #expect(again.stdout.contains("Session refreshed"), "\(again)")
        _ = try await restarted.account()
        let after = try jsonObject(try await h.runCLI(["--json", "status"]).stdout)
        #expect(after["storageWarning"] is NSNull)

        let log = h.log
        #expect(log.components(separatedBy: "refresh.not_persisted").count == 2, "logged once:\n\(log)")
        #expect(!log.contains("session.family_revoked"), "\(log)")
        #expect(log.contains("session.refresh_repeated"), "\(log)")
    }
}
