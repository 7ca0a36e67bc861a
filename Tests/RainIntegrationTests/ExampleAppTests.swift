import Foundation
import RainTestSupport
import RainWallet
import Testing

/// The seed's Swift snippets, built as `rainwallet-example-login` (Examples/LoginExample), run end
/// to end against a real daemon.
@Suite(.timeLimit(.minutes(2))) struct ExampleAppTests {
    /// Runs the example against `h` and returns its exit status, stdout and stderr.
    static func runExample(_ h: DaemonHarness, run: Int) async throws -> (status: Int32, stdout: String, stderr: String) {
        let r = try await TestProcess.run(
            h.binaryDirectory.appendingPathComponent("rainwallet-example-login").path, [],
            environment: h.daemonEnvironment.merging(["RAINWALLET_SOCKET": h.socketPath]) { $1 }, timeout: .seconds(100))
        return (r.status, r.stdout, r.stderr)
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

    /// The README's first example: the file it is built from.
    static func firstSteps() throws -> String {
        try String(
            contentsOf: MultiDevice.repositoryRoot.appendingPathComponent("Examples/FirstSteps/main.swift"), encoding: .utf8)
    }

    @Test("README's and swift-library.md's first example is Examples/FirstSteps/main.swift, word for word")
    func firstExampleIsTheBuiltOne() throws {
        let example = try Self.firstSteps()
        for doc in ["README.md", "docs/swift-library.md"] {
            let text = try String(contentsOf: MultiDevice.repositoryRoot.appendingPathComponent(doc), encoding: .utf8)
            #expect(
                text.contains("```swift\n" + example + "```\n"), "\(doc) does not show Examples/FirstSteps/main.swift as it is")
        }
    }

    @Test(
        "the first example logs in against a real daemon: the code is read after the send, a wrong code is answered inline and asked again, then account, wallet and logout"
    )
    func firstExampleLogsIn() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let email = "first-steps@example.com"
        let output = "\(h.directory)/first-steps.out"
        let app = try TestProcess(
            h.binaryDirectory.appendingPathComponent("rainwallet-example-first-steps").path, [email],
            environment: h.daemonEnvironment.merging(["RAINWALLET_SOCKET": h.socketPath]) { $1 }, stdin: .pipe,
            stdout: .file(output), stderr: .file(output))
        defer { app.signal(SIGKILL) }
        func shown() -> String { DaemonHarness.readFile(output) }
        #expect(await eventually(timeout: .seconds(30)) { shown().contains("Code: ") }, "\(shown())")
        let code = try await h.waitForCode(for: email, profile: "my-wallet-app")
        let wrong = code == "000000" ? "000001" : "000000"
        try app.input?.write(contentsOf: Data("\(wrong)\n".utf8))
        #expect(await eventually(timeout: .seconds(30)) { shown().contains("That code didn't work") }, "\(shown())")
        try app.input?.write(contentsOf: Data("\(code)\n".utf8))
        let status = await app.waitForExit(timeout: .seconds(60))
        #expect(status == 0, "\(shown())")
        #expect(shown().contains("We sent a code to \(email)."), "\(shown())")
        #expect(shown().contains("Logged in: account acct_") && shown().contains("Ethereum 0x"), "\(shown())")
        #expect(shown().contains("Logged out."), "\(shown())")
        #expect(shown().components(separatedBy: "That code didn't work").count - 1 == 1, "\(shown())")

        // With no code on its input, it says so and exits 1, never "Error raised at top level".
        let empty = try await TestProcess.run(
            h.binaryDirectory.appendingPathComponent("rainwallet-example-first-steps").path, [email],
            environment: h.daemonEnvironment.merging(["RAINWALLET_SOCKET": h.socketPath]) { $1 }, timeout: .seconds(60))
        #expect(empty.status == 1 && empty.stdout.contains("error: RAIN_102: no code was entered"), "\(empty)")
    }

    @Test("an app that links RainWallet links no OpenSSL, SQLite, libpq, libpsl or libcbor")
    func exampleLinksNoServerLibraries() async throws {
        let binary = try DaemonHarness.binaryDirectory().appendingPathComponent("rainwallet-example-login")
        let r = try await TestProcess.run("/usr/bin/ldd", [binary.path])
        let text = r.stdout
        #expect(r.status == 0, "ldd \(binary.path): \(r)")
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
