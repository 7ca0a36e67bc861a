import Foundation
import RainTestSupport
import Testing

/// The first app to use a profile owns it; a command that only looks (status, the dev outbox)
/// must not be that app, or a developer who runs `rainwallet status` first finds their own app
/// refused.
@Suite("Profile ownership: looking claims nothing")
struct ProfileOwnershipTests {
    @Test(
        "status and dev outbox on a profile nobody owns answer without a prompt and make no owner; the app's first send does, and then they are refused to others"
    )
    func lookingClaimsNothing() async throws {
        let h = try await DaemonHarness.start(
            config: PerAppAccessTests.config, access: .enforced(pinentry: DaemonHarness.autoPinentryName))
        defer { h.shutdown() }
        let apps = try await PerAppAccessTests.Apps.make(h)

        // The CLI (A) looks first: answered, no prompt, no owner.
        let status = try await h.runCLI(["--json", "status"], program: apps.a)
        #expect(status.status == 0 && status.stdout.contains(#""authState":"unauthenticated""#), "\(status)")
        let outbox = try await h.runCLI(["--json", "dev", "outbox"], program: apps.a)
        #expect(outbox.status == 0 && outbox.stdout.contains("[]"), "\(outbox)")
        #expect(h.answeredPrompts.isEmpty, "\(h.answeredPrompts)")
        let list = try await h.runCLI(["--json", "apps", "list"], program: apps.a)
        #expect(list.status == 0 && !list.stdout.contains(apps.a.path), "\(list)")

        // The developer's app (B) sends a code: asked, and it owns the profile.
        let send = try await h.runCLI(["code", "send", "--email", "ownership@example.com"], program: apps.b)
        #expect(send.status == 0, "\(send)")
        #expect(h.answeredPrompts.count == 1 && h.answeredPrompts.first?.contains(apps.b.path) == true, "\(h.answeredPrompts)")
        let owner = try await h.runCLI(["--json", "dev", "outbox"], program: apps.b)
        #expect(owner.status == 0 && owner.stdout.contains("ownership@example.com"), "\(owner)")

        // Owned now: A's look is refused like any call of an app not approved for it.
        let refused = try await h.runCLI(["status"], program: apps.a)
        #expect(refused.status == 5 && refused.stderr.contains("is not approved for profile default"), "\(refused)")
        #expect(h.answeredPrompts.count == 1)
    }
}
