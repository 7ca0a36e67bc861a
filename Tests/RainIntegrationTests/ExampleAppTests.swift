import Foundation
import RainTestSupport
import RainWallet
import Testing

/// The seed's Swift snippets, built as `rainwallet-example-login` (Examples/LoginExample), run end
/// to end against a real daemon (issue 16, point 1).
@Suite(.timeLimit(.minutes(2))) struct ExampleAppTests {
    /// Runs the example against `h` and returns its exit status, stdout and stderr.
    static func runExample(_ h: DaemonHarness, run: Int) async throws -> (status: Int32, stdout: String, stderr: String) {
        let outPath = "\(h.directory)/example-\(run).out"
        let errPath = "\(h.directory)/example-\(run).err"
        for path in [outPath, errPath] {
            guard FileManager.default.createFile(atPath: path, contents: nil) else { throw HarnessError("cannot write \(path)") }
        }
        let out = try #require(FileHandle(forWritingAtPath: outPath))
        let err = try #require(FileHandle(forWritingAtPath: errPath))
        defer {
            try? out.close()
            try? err.close()
        }
        let p = Process()
        p.executableURL = h.binaryDirectory.appendingPathComponent("rainwallet-example-login")
        p.environment = h.daemonEnvironment.merging(["RAINWALLET_SOCKET": h.socketPath]) { $1 }
        p.standardOutput = out
        p.standardError = err
        p.standardInput = FileHandle.nullDevice
        try DaemonHarness.withProcessLaunchLock { try p.run() }
        // No deadline of its own: the suite's time limit ends a run that would hang.
        try await onThread { p.waitUntilExit() }
        let text = { (path: String) in (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }
        return (p.terminationStatus, text(outPath), text(errPath))
    }

    @Test("rainwallet-example-login runs the seed's flows end to end: code login, gate, passkeys, export")
    func loginExampleRunsEndToEnd() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let fresh = try await Self.runExample(h, run: 1)
        #expect(fresh.status == 0, "\(fresh.stderr)")
        for line in [
            "inline error: That code didn't work. Check it and try again.",  // the seed's catch … where
            "login gate: authenticated",
            "sign-up refused over a live session (log out first): RAIN_102",
            "passkey sheet dismissed: RAIN_401",
            "export is off for this profile: RAIN_202",
            "logged out (had a session: true)",
        ] {
            #expect(fresh.stdout.contains(line), "missing \(line) in:\n\(fresh.stdout)")
        }
        #expect(fresh.stdout.components(separatedBy: "inline error:").count - 1 == 1, "\(fresh.stdout)")
        #expect(!fresh.stdout.contains("session expired"), "\(fresh.stdout)")

        // With a stored session: awaitSessionRestore, then hasActiveSession skips the login screen.
        let p = h.provider()
        try await h.logIn(p, .email("user@example.com"))
        let restored = try await Self.runExample(h, run: 2)
        #expect(restored.status == 0, "\(restored.stderr)")
        #expect(restored.stdout.contains("restored a session: no login screen"), "\(restored.stdout)")
        #expect(!restored.stdout.contains("inline error:"), "\(restored.stdout)")
    }

    @Test("an app that links RainWallet links no OpenSSL, SQLite, libpq, libpsl or libcbor")
    func exampleLinksNoServerLibraries() async throws {
        let binary = try DaemonHarness.binaryDirectory().appendingPathComponent("rainwallet-example-login")
        // The pipe is made under the launch lock (no other test's child inherits its write end, which
        // would keep the read below waiting for that child), and read on a thread of its own, never
        // on the two threads of the concurrency pool that every other test shares.
        let (p, output) = try DaemonHarness.withProcessLaunchLock { () throws -> (Process, Pipe) in
            let output = Pipe()
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/ldd")
            p.arguments = [binary.path]
            p.standardOutput = output
            p.standardError = FileHandle.nullDevice
            try p.run()
            return (p, output)
        }
        let text = try await onThread { String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self) }
        try await onThread { p.waitUntilExit() }
        #expect(p.terminationStatus == 0, "ldd \(binary.path): \(text)")
        // Lines read "\tlibfoo.so.1 => /path (0x…)".
        let libraries = text.split(separator: "\n").compactMap { line in
            line.split(whereSeparator: { $0 == " " || $0 == "\t" }).first.map(String.init)
        }
        #expect(libraries.contains { $0.hasPrefix("libprotobuf-c.so") }, "ldd output unexpected: \(text)")
        let banned = libraries.filter { name in
            ["libssl.so", "libcrypto.so", "libsqlite3.so", "libpq.so", "libpsl.so", "libcbor.so"].contains { name.hasPrefix($0) }
        }
        #expect(banned.isEmpty, "the thin client links \(banned)")
    }
}
