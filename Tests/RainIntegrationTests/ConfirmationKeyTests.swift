import Foundation
import RainTestSupport
import Testing

/// `rainwallet prompt add-key` and the touch that then follows every typed code, against a real
/// `rainwalletd-test` whose libfido2 reaches a software key this process serves on a socket.
@Suite("A security key's touch to confirm")
struct ConfirmationKeyTests {
    static let config = #"{"profiles": {"default": {"allowExport": true}}}"#

    /// A software key served on a socket in a directory of its own, and a daemon that uses it.
    struct World {
        let key: SoftCTAP2Authenticator
        let server: SoftCTAP2SocketServer
        let harness: DaemonHarness
        let directory: String

        func stop() {
            harness.shutdown()
            server.stop()
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    /// Starts the key (a short wait for its touch, so that "nobody touched it" ends in seconds)
    /// and the daemon, with `config`.
    static func start(config: String = Self.config) async throws -> World {
        let directory = "/tmp/rc-" + UUID().uuidString.prefix(8).lowercased()
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        let key = try SoftCTAP2Authenticator(name: "confirm", touch: .immediately, userPresenceTimeout: 5)
        let server = try SoftCTAP2SocketServer(key: key, directory: directory, name: "confirm")
        do {
            let harness = try await DaemonHarness.start(
                config: config, environment: ["RAINWALLET_TEST_SECURITY_KEYS": directory],
                access: .enforced(pinentry: DaemonHarness.autoPinentryName))
            return World(key: key, server: server, harness: harness, directory: directory)
        } catch {
            server.stop()
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
    }

    @Test(
        "add-key is confirmed on the prompt and audited; then an export waits for the touch and succeeds after it, and without a touch it is RAIN_401 confirmation_key_timeout with nothing exported"
    )
    func exportNeedsTheTouchAfterTheCode() async throws {
        let w = try await Self.start()
        defer { w.stop() }
        let (key, server, h) = (w.key, w.server, w.harness)

        let send = try await h.runCLI(["code", "send", "--email", "touch@example.com"])
        #expect(send.status == 0, "\(send)")
        let outbox = try await h.runCLI(["--json", "dev", "outbox"])
        let code = try #require(outbox.stdout.matches(of: /"code":"([0-9]{6})"/).last?.output.1, "\(outbox)")
        #expect(try await h.runCLI(["code", "confirm", String(code)]).status == 0)

        let prompts = h.answeredPrompts.count
        let added = try await h.runCLI(["prompt", "add-key"])
        #expect(added.status == 0, "\(added)")
        #expect(added.stdout.contains("is a confirmation key (1 registered)"), "\(added)")
        #expect(added.stderr.contains("touch your security key"), "\(added)")
        // Confirmed on the prompt (typed code) before the key was asked.
        #expect(h.answeredPrompts.count == prompts + 1, "\(h.answeredPrompts)")
        #expect(h.answeredPrompts.last?.contains("security key you touch next") == true, "\(h.answeredPrompts)")
        let audit = try await h.runCLI(["--json", "audit"])
        #expect(
            audit.stdout.split(separator: "\n").contains {
                $0.contains("\"confirmation_key_added\"") && $0.contains("\"ok\"")
            }, "\(audit)")

        // With the key registered, the export waits for the touch after the typed code.
        key.setTouchPolicy(.manual)
        let export = Task { try await h.runCLI(["--json", "export", "phrase", "--yes"]) }
        #expect(await eventually(timeout: .seconds(30)) { key.isBlinking }, "the key never blinked")
        // While the key blinks for it, no other prompt opens: one touch, one action the user knows.
        let second = try await h.runCLI(["--json", "export", "phrase", "--yes"])
        #expect(second.status == 8 && second.stderr.contains("prompt_busy"), "\(second)")
        #expect(h.answeredPrompts.count == prompts + 2, "\(h.answeredPrompts)")
        key.touch()
        let exported = try await export.value
        #expect(exported.status == 0, "\(exported)")
        #expect(exported.stdout.contains("words"), "\(exported)")
        #expect(h.answeredPrompts.count == prompts + 2, "\(h.answeredPrompts)")
        // The prompt said the touch would follow; while it waited, the daemon logged it.
        #expect(h.answeredPrompts.last?.contains("touch your confirmation key") == true, "\(h.answeredPrompts)")
        #expect(h.log.contains("touch your confirmation key"), "\(h.log)")

        // The code typed, no touch: refused, nothing exported, the refusal audited.
        key.setTouchPolicy(.never)
        let refused = try await h.runCLI(["--json", "export", "phrase", "--yes"])
        #expect(refused.status == 9, "\(refused)")
        #expect(refused.stderr.contains("RAIN_401") && refused.stderr.contains("confirmation_key_timeout"), "\(refused)")
        #expect(!refused.stdout.contains("words"), "\(refused)")
        #expect(h.answeredPrompts.count == prompts + 3, "\(h.answeredPrompts)")
        let after = try await h.runCLI(["--json", "audit"])
        #expect(after.stdout.contains("confirmation_key_timeout"), "\(after)")

        // Listed by `status`; removed with the code and a touch; then the code alone confirms.
        let status = try await h.runCLI(["status"])
        #expect(status.stdout.contains("touch:          after the code, a touch of socket key confirm.sock"), "\(status)")
        key.setTouchPolicy(.immediately)
        let removed = try await h.runCLI(["--json", "prompt", "remove-keys"])
        #expect(removed.status == 0 && removed.stdout.contains("\"removed\":1"), "\(removed)")
        #expect(h.answeredPrompts.last?.contains("stop asking a touch") == true, "\(h.answeredPrompts)")
        key.setTouchPolicy(.never)
        let codeAlone = try await h.runCLI(["--json", "export", "phrase", "--yes"])
        #expect(codeAlone.status == 0 && codeAlone.stdout.contains("words"), "\(codeAlone)")
        #expect(h.answeredPrompts.last?.contains("touch your confirmation key") == false, "\(h.answeredPrompts)")
        let removals = try await h.runCLI(["--json", "audit"])
        #expect(removals.stdout.contains("\"confirmation_keys_removed\""), "\(removals)")
        key.setTouchPolicy(.immediately)
        let again = try await h.runCLI(["--json", "prompt", "add-key"])
        #expect(again.status == 0 && again.stdout.contains("\"keyCount\":1"), "\(again)")

        // The key unplugged: the code alone is not enough, and the error says what to do.
        server.stop()
        let unplugged = try await h.runCLI(["--json", "export", "phrase", "--yes"])
        #expect(unplugged.status == 10, "\(unplugged)")
        #expect(
            unplugged.stderr.contains("RAIN_404") && unplugged.stderr.contains("confirmation_key_missing")
                && unplugged.stderr.contains("prompt add-key"), "\(unplugged)")
        #expect(!unplugged.stdout.contains("words"), "\(unplugged)")
    }

    @Test(
        "with a confirmation key registered, a signature also waits for the touch after the code, and without the touch nothing is signed"
    )
    func signatureNeedsTheTouch() async throws {
        let w = try await Self.start()
        defer { w.stop() }
        let (key, h) = (w.key, w.harness)
        let wallet = h.provider()
        try await h.logIn(wallet, .email("sign-touch@example.com"))
        #expect(try await h.runCLI(["prompt", "add-key"]).status == 0)

        key.setTouchPolicy(.manual)
        let sign = Task { try await wallet.signMessage("hello, touch") }
        #expect(await eventually(timeout: .seconds(30)) { key.isBlinking }, "the key never blinked")
        key.touch()
        let signed = try await sign.value
        #expect(!signed.signature.isEmpty)

        key.setTouchPolicy(.never)
        let refused = await rainError { _ = try await wallet.signMessage("hello again") }
        #expect(
            refused?.code == .userCancelled && refused?.details.reason == "confirmation_key_timeout",
            "\(String(describing: refused))")
    }

    @Test(
        "with a confirmation key registered, an app approval and a settings change wait for the touch after the code; a revocation without the touch changes nothing"
    )
    func approvalsAndSettingsNeedTheTouch() async throws {
        let w = try await Self.start(config: #"{"profiles": {"default": {"allowExport": false}}}"#)
        defer { w.stop() }
        let (key, h) = (w.key, w.harness)
        let apps = try await PerAppAccessTests.Apps.make(h)
        try await PerAppAccessTests.logIn(h, apps.a, email: "approve-touch@example.com")
        #expect(try await h.runCLI(["prompt", "add-key"]).status == 0)

        // An approval: the code, then the touch.
        key.setTouchPolicy(.manual)
        let approve = Task { try await h.runCLI(["apps", "approve", apps.b.path], program: apps.a) }
        #expect(await eventually(timeout: .seconds(30)) { key.isBlinking }, "the key never blinked")
        key.touch()
        let approved = try await approve.value
        #expect(approved.status == 0, "\(approved)")
        #expect(try await h.runCLI(["account"], program: apps.b).status == 0)

        // A revocation with the code typed and no touch: refused, b keeps its approval.
        key.setTouchPolicy(.never)
        let revoke = try await h.runCLI(["apps", "revoke", apps.b.path], program: apps.a)
        #expect(revoke.status == 9 && revoke.stderr.contains("not touched in time"), "\(revoke)")
        #expect(try await h.runCLI(["account"], program: apps.b).status == 0)

        // A settings change (the config edited, the daemon restarted): the code, then the touch.
        let configPath = try #require(h.configPath)
        try #"{"profiles": {"default": {"allowExport": true}}}"#.write(toFile: configPath, atomically: true, encoding: .utf8)
        _ = try await h.stop()
        try await h.start()
        key.setTouchPolicy(.manual)
        let confirm = Task { try await h.runCLI(["settings", "confirm"], program: apps.a) }
        #expect(await eventually(timeout: .seconds(30)) { key.isBlinking }, "the key never blinked")
        key.touch()
        let confirmed = try await confirm.value
        #expect(confirmed.status == 0, "\(confirmed)")
        #expect(h.answeredPrompts.last?.contains("allowExport") == true, "\(h.answeredPrompts)")
    }
}
