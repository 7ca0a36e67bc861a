import Foundation
import RainAccess
import RainConfig
import RainCore
import RainCrypto
import RainTestSupport
@testable import RainTransport
import Synchronization
import Testing

@testable import RainDevice

/// Per-app access decisions with a fake identity reader and a fake prompt (the real ones have
/// their own tests in RainAccessTests and the integration tests).
@Suite("Per-app access (AppAccess)")
struct AppAccessTests {
    final class Resolver: CallerResolving {
        let identities = Mutex<[ConnectionID: CallerIdentity]>([:])
        let rechecks = Mutex(0)
        let recheckError = Mutex<RainError?>(nil)
        func identity(of context: CallerHandle) async throws(RainError) -> CallerIdentity {
            guard let identity = identities.withLock({ $0[context.connection] }) else {
                throw RainError(.unauthorized, "unknown connection")
            }
            return identity
        }
        func recheck(_ identity: CallerIdentity, of context: CallerHandle) async throws(RainError) {
            rechecks.withLock { $0 += 1 }
            if let error = recheckError.withLock({ $0 }) { throw error }
        }
    }

    final class Prompt: UserConfirming {
        let available: Bool
        let answers = Mutex<[RainError?]>([])
        let questions = Mutex<[UserQuestion]>([])
        init(available: Bool) { self.available = available }
        var canPrompt: Bool { available }
        /// While true, a prompt stays on screen (the answer waits).
        let isHeld = Mutex(false)
        func confirm(_ question: UserQuestion) async throws(RainError) {
            questions.withLock { $0.append(question) }
            while isHeld.withLock({ $0 }) { try? await Task.sleep(for: .milliseconds(5)) }
            let answer = answers.withLock { $0.isEmpty ? RainError(.userCancelled, "no answer scripted") : $0.removeFirst() }
            if let answer { throw answer }
        }
        func script(_ list: [RainError?]) { answers.withLock { $0 = list } }
        var asked: [String] { questions.withLock { $0.map(\.action) } }
    }

    static let dismissed = RainError(.userCancelled, "dismissed", details: .init(reason: "prompt_dismissed"))

    final class Events: Sendable {
        let list = Mutex<[AccessEvent]>([])
        func withLock<T>(_ body: ([AccessEvent]) -> T) -> T { list.withLock { body($0) } }
        func append(_ event: AccessEvent) { list.withLock { $0.append(event) } }
    }

    struct World {
        let access: AppAccess
        let resolver: Resolver
        let prompt: Prompt
        let events: Events
        let store: AppApprovalStore?
    }

    static func world(
        prompt available: Bool = true, preApproved: [String: [PreApprovedApp]] = [:], store: AppApprovalStore? = nil,
        clock: ManualClock = ManualClock()
    ) throws -> World {
        let resolver = Resolver()
        let prompt = Prompt(available: available)
        let events = Events()
        let access = try AppAccess(
            store: store, resolver: resolver, confirmer: prompt, preApproved: preApproved, clock: clock,
            audit: { event in events.append(event) })
        return World(access: access, resolver: resolver, prompt: prompt, events: events, store: store)
    }

    static func app(_ path: String, hash: UInt8, pid: Int32 = 10) -> CallerIdentity {
        CallerIdentity(pid: pid, uid: getuid(), executablePath: path, executableSHA256: [UInt8](repeating: hash, count: 32))
    }

    static func connect(_ w: World, _ n: UInt64, _ identity: CallerIdentity) -> CallerHandle {
        let id = ConnectionID(rawValue: n)
        w.resolver.identities.withLock { $0[id] = identity }
        return CallerHandle(connection: id, peer: PeerCredentials(pid: identity.pid, uid: identity.uid, gid: 0))
    }

    static func reason(_ body: () async throws(RainError) -> Void) async -> String? {
        do throws(RainError) {
            try await body()
            return nil
        } catch {
            return error.details.reason ?? "\(error.code)"
        }
    }

    @Test("the first app becomes the owner once the user approves; a second app is refused with how to approve it")
    func ownerThenOther() async throws {
        let w = try Self.world()
        let wallet = Self.connect(w, 1, Self.app("/usr/bin/wallet", hash: 1))
        w.prompt.script([nil])
        try await w.access.authorize(profile: "default", context: wallet)
        #expect(w.prompt.asked.count == 1)
        #expect(w.access.isApproved(connection: wallet.connection, profile: "default"))
        try await w.access.authorize(profile: "default", context: wallet)
        #expect(w.prompt.asked.count == 1, "approved once, not asked again")

        let other = Self.connect(w, 2, Self.app("/usr/bin/other", hash: 2))
        do throws(RainError) {
            try await w.access.authorize(profile: "default", context: other)
            Issue.record("another app was let in")
        } catch {
            #expect(error.code == .unauthorized)
            #expect(error.details.reason == "app_not_approved")
            #expect(error.message.contains("rainwallet apps approve --profile default /usr/bin/other"), "\(error.message)")
        }
        #expect(!w.access.isApproved(connection: other.connection, profile: "default"))
        #expect(w.events.withLock { $0.map(\.event) } == ["app_approved", "app_refused"])
    }

    @Test(
        "at most 3 approval prompts a minute per uid for apps not yet approved; the 4th is RAIN_302 prompt_rate_limited, audited")
    func approvalPromptsAreRateLimitedPerUID() async throws {
        let clock = ManualClock()
        let w = try Self.world(clock: clock)
        // Copies of one program at four paths, each asking for its own profile: three prompts.
        let copies = (1...4).map { n in Self.connect(w, UInt64(n), Self.app("/tmp/copy-\(n)/app", hash: 1, pid: Int32(n))) }
        w.prompt.script([Self.dismissed, Self.dismissed, Self.dismissed])
        for (n, copy) in copies.prefix(3).enumerated() {
            clock.advance(by: .seconds(10))
            #expect(
                await Self.reason { () throws(RainError) in _ = try await w.access.authorize(profile: "p\(n)", context: copy) }
                    == "prompt_dismissed")
        }
        #expect(w.prompt.asked.count == 3)
        let limited = try #require(
            await Self.error { () throws(RainError) in _ = try await w.access.authorize(profile: "p3", context: copies[3]) })
        #expect(limited.code == .refused)
        #expect(limited.details.reason == "prompt_rate_limited")
        // The first prompt was 20 s ago: it leaves the rolling minute in 40 s.
        #expect(limited.details.retryAfterMilliseconds == 40_000)
        #expect(w.prompt.asked.count == 3, "no fourth prompt")
        #expect(
            w.events.withLock { $0.last.map { ($0.event, $0.result, $0.app?.appPath) } }
                ?? ("", "", nil) == ("app_refused", "prompt_rate_limited", "/tmp/copy-4/app"))

        // Another uid has its own budget.
        var stranger = Self.app("/tmp/other-uid/app", hash: 2, pid: 50)
        stranger.uid = getuid() &+ 1
        let other = Self.connect(w, 9, stranger)
        w.prompt.script([nil])
        try await w.access.authorize(profile: "theirs", context: other)

        // 39 s on the first prompt is still within the minute; 1 s later its slot is free, once.
        clock.advance(by: .seconds(39))
        #expect(
            await Self.reason { () throws(RainError) in _ = try await w.access.authorize(profile: "p3", context: copies[3]) }
                == "prompt_rate_limited")
        clock.advance(by: .seconds(1))
        w.prompt.script([nil])
        try await w.access.authorize(profile: "p3", context: copies[3])
        #expect(w.prompt.asked.count == 5)
        #expect(
            await Self.reason { () throws(RainError) in _ = try await w.access.authorize(profile: "p0", context: copies[0]) }
                == "prompt_rate_limited")

        // An approved app's calls and its exports are not approval prompts: never limited.
        w.prompt.script([nil])
        try await w.access.confirmSensitive(action: "export the wallet's recovery phrase", profile: "p3", context: copies[3])
    }

    @Test(
        "a script's prompt on each connection and `apps approve` asked by an unapproved program count toward the 3 a minute; an approved program's `apps approve` does not"
    )
    func everyUnapprovedPromptCounts() async throws {
        let clock = ManualClock()
        let w = try Self.world(clock: clock)
        w.prompt.script([nil, Self.dismissed, Self.dismissed])
        // Approved first (one prompt), an owner asks for another app without limit.
        let owner = Self.connect(w, 1, Self.app("/usr/bin/wallet", hash: 1))
        try await w.access.authorize(profile: "p", context: owner)
        // Two script connections (on profiles of their own: "p" has an owner) and one `apps approve`
        // by an unapproved program: the 2nd–4th prompts.
        _ = try? await w.access.authorize(profile: "s1", context: Self.connect(w, 2, Self.script(pid: 31)))
        _ = try? await w.access.authorize(profile: "s2", context: Self.connect(w, 3, Self.script(pid: 32)))
        #expect(w.prompt.asked.count == 3)
        let stranger = Self.connect(w, 4, Self.app("/tmp/stranger", hash: 3, pid: 40))
        let limited = await Self.reason { () async throws(RainError) in
            try await w.access.approve(app: Self.app("/tmp/other", hash: 4), profile: "p", context: stranger)
        }
        #expect(limited == "prompt_rate_limited")
        #expect(w.prompt.asked.count == 3)
        // The owner's `apps approve` is not an unapproved program's prompt.
        w.prompt.script([Self.dismissed])
        let owned = await Self.reason { () async throws(RainError) in
            try await w.access.approve(app: Self.app("/tmp/other", hash: 4), profile: "p", context: owner)
        }
        #expect(owned == "prompt_dismissed")
    }

    static func error(_ body: () async throws(RainError) -> Void) async -> RainError? {
        do throws(RainError) {
            try await body()
            return nil
        } catch {
            return error
        }
    }

    @Test("a dismissed approval prompt approves nothing")
    func dismissedApproval() async throws {
        let w = try Self.world()
        let wallet = Self.connect(w, 1, Self.app("/usr/bin/wallet", hash: 1))
        w.prompt.script([Self.dismissed])
        #expect(
            await Self.reason { () async throws(RainError) in try await w.access.authorize(profile: "p", context: wallet) }
                == "prompt_dismissed")
        #expect(w.access.list().approvals == AppApprovals())
        w.prompt.script([nil])
        try await w.access.authorize(profile: "p", context: wallet)
        #expect(w.access.list().approvals.owner(of: "p")?.appPath == "/usr/bin/wallet")
    }

    @Test("without any prompt the first app is trusted and audited; the second is still refused")
    func firstUseWithoutPrompt() async throws {
        let w = try Self.world(prompt: false)
        let wallet = Self.connect(w, 1, Self.app("/usr/bin/wallet", hash: 1))
        try await w.access.authorize(profile: "default", context: wallet)
        #expect(w.access.list().approvals.owner(of: "default")?.source == .firstUse)
        #expect(w.events.withLock { $0.first?.event } == "first_use_trusted")
        let other = Self.connect(w, 2, Self.app("/usr/bin/other", hash: 2))
        #expect(
            await Self.reason { () async throws(RainError) in try await w.access.authorize(profile: "default", context: other) }
                == "app_not_approved")
    }

    @Test("a replaced binary is asked about once: refused, it stays refused without a new prompt")
    func changedBinary() async throws {
        let w = try Self.world()
        let v1 = Self.connect(w, 1, Self.app("/usr/bin/wallet", hash: 1))
        w.prompt.script([nil])
        try await w.access.authorize(profile: "default", context: v1)
        let v2 = Self.connect(w, 2, Self.app("/usr/bin/wallet", hash: 2))
        w.prompt.script([Self.dismissed])
        #expect(
            await Self.reason { () async throws(RainError) in try await w.access.authorize(profile: "default", context: v2) }
                == "prompt_dismissed")
        #expect(w.prompt.asked.last?.contains("new version") == true)
        #expect(
            await Self.reason { () async throws(RainError) in try await w.access.authorize(profile: "default", context: v2) }
                == "app_not_approved")
        #expect(w.prompt.asked.count == 2, "not asked again")
        // Each later refusal of the refused version is audited (the log aggregates repeats).
        #expect(
            await Self.reason { () async throws(RainError) in try await w.access.authorize(profile: "default", context: v2) }
                == "app_not_approved")
        let refusals = w.events.withLock { $0.filter { $0.event == "app_refused" } }
        #expect(refusals.map(\.result) == ["prompt_dismissed", "app_not_approved", "app_not_approved"], "\(refusals)")
        #expect(refusals.dropFirst().allSatisfy { $0.app?.contentHash == Self.app("/usr/bin/wallet", hash: 2).contentHash })
        #expect(refusals.last?.detail == "this version was refused on the prompt")
        // Approved explicitly (apps approve), the new version works.
        w.prompt.script([nil])
        try await w.access.approve(app: Self.app("/usr/bin/wallet", hash: 2), profile: "default", context: v1)
        try await w.access.authorize(profile: "default", context: v2)
    }

    @Test("LD_PRELOAD: refused even for the approved app, without a prompt")
    func unapprovable() async throws {
        let w = try Self.world()
        let clean = Self.connect(w, 1, Self.app("/usr/bin/wallet", hash: 1))
        w.prompt.script([nil])
        try await w.access.authorize(profile: "default", context: clean)
        var preloaded = Self.app("/usr/bin/wallet", hash: 1, pid: 11)
        preloaded.unapprovable = ["LD_PRELOAD is set"]
        let hooked = Self.connect(w, 2, preloaded)
        do throws(RainError) {
            try await w.access.authorize(profile: "default", context: hooked)
            Issue.record("an LD_PRELOAD caller was let in")
        } catch {
            #expect(error.details.reason == "app_not_approved")
            #expect(error.message.contains("LD_PRELOAD"))
        }
        #expect(w.prompt.asked.count == 1)
    }

    @Test("an app's connections opened together are asked about once, and share the answer", arguments: [true, false])
    func concurrentFirstCallsShareOnePrompt(confirmed: Bool) async throws {
        let w = try Self.world()
        let wallet = Self.app("/usr/bin/wallet", hash: 1)
        let first = Self.connect(w, 1, wallet)
        let second = Self.connect(w, 2, wallet)
        w.prompt.script([confirmed ? nil : Self.dismissed])
        w.prompt.isHeld.withLock { $0 = true }
        let access = w.access
        let a = Task { () async -> String? in
            do throws(RainError) {
                try await access.authorize(profile: "default", context: first)
                return nil
            } catch {
                return error.details.reason ?? "\(error.code)"
            }
        }
        while w.prompt.asked.isEmpty { try await Task.sleep(for: .milliseconds(5)) }
        let b = Task { () async -> String? in
            do throws(RainError) {
                try await access.authorize(profile: "default", context: second)
                return nil
            } catch {
                return error.details.reason ?? "\(error.code)"
            }
        }
        // The second call meets the prompt on screen: it waits for its answer (no prompt_busy). The
        // prompt is answered once it waits (a fixed pause is not enough on a loaded machine: the
        // second call could come after the answer and ask again). The bound is only reached when
        // the call never joins: the parallel unit stage can keep the second task off the two-thread
        // pool for seconds, so it is generous; a passing run waits milliseconds.
        let joinedBy = ContinuousClock.now + .seconds(30)
        while w.access.approvalWaiters == 0 && ContinuousClock.now < joinedBy {
            try await Task.sleep(for: .milliseconds(5))
        }
        try #require(w.access.approvalWaiters == 1, "the second call did not join the prompt within 30 s")
        w.prompt.isHeld.withLock { $0 = false }
        let (resultA, resultB) = (await a.value, await b.value)
        #expect(w.prompt.asked.count == 1, "\(w.prompt.asked)")
        #expect(resultA == (confirmed ? nil : "prompt_dismissed"))
        #expect(resultB == resultA)
        #expect(w.access.approvalWaiters == 0)
    }

    @Test("an export asks every time, re-checks the caller, and a dismissal stops it; no prompt at all refuses it")
    func sensitive() async throws {
        let w = try Self.world()
        let wallet = Self.connect(w, 1, Self.app("/usr/bin/wallet", hash: 1))
        w.prompt.script([nil, nil, Self.dismissed])
        try await w.access.confirmSensitive(action: "export the recovery phrase", profile: "default", context: wallet)
        #expect(w.prompt.asked.count == 2, "approval, then the export")
        #expect(
            await Self.reason { () async throws(RainError) in
                try await w.access.confirmSensitive(action: "export the recovery phrase", profile: "default", context: wallet)
            } == "prompt_dismissed")
        // Before and after the confirmed export's prompt, and before the dismissed one's.
        #expect(w.resolver.rechecks.withLock { $0 } == 3)
        w.resolver.recheckError.withLock { $0 = RainError(.unauthorized, "exe changed", details: .init(reason: "app_changed")) }
        #expect(
            await Self.reason { () async throws(RainError) in
                try await w.access.confirmSensitive(action: "export the recovery phrase", profile: "default", context: wallet)
            } == "app_changed")

        let headless = try Self.world(prompt: false)
        let app = Self.connect(headless, 1, Self.app("/usr/bin/wallet", hash: 1))
        #expect(
            await Self.reason { () async throws(RainError) in
                try await headless.access.confirmSensitive(action: "export the recovery phrase", profile: "default", context: app)
            } == "no_prompt")
    }

    @Test("pre-approved apps (for one profile or every one) need no prompt; revoke asks and forgets")
    func preApprovedAndRevoke() async throws {
        let w = try Self.world(preApproved: [
            "*": [PreApprovedApp(path: "/usr/bin/rainwallet")], "work": [PreApprovedApp(path: "/opt/w")],
        ])
        let cli = Self.connect(w, 1, Self.app("/usr/bin/rainwallet", hash: 7))
        try await w.access.authorize(profile: "anything", context: cli)
        let work = Self.connect(w, 2, Self.app("/opt/w", hash: 8))
        try await w.access.authorize(profile: "work", context: work)
        #expect(w.prompt.asked.isEmpty)
        w.prompt.script([Self.dismissed])
        #expect(
            await Self.reason { () async throws(RainError) in try await w.access.authorize(profile: "home", context: work) }
                == "prompt_dismissed")

        let wallet = Self.connect(w, 3, Self.app("/usr/bin/wallet", hash: 1))
        w.prompt.script([nil])
        try await w.access.authorize(profile: "home", context: wallet)
        w.prompt.script([Self.dismissed])
        #expect(
            await Self.reason { () async throws(RainError) in
                try await w.access.revoke(appPath: "/usr/bin/wallet", profile: "home", context: cli)
            } == "prompt_dismissed")
        #expect(w.access.isApproved(connection: wallet.connection, profile: "home"))
        w.prompt.script([nil])
        try await w.access.revoke(appPath: "/usr/bin/wallet", profile: "home", context: cli)
        #expect(!w.access.isApproved(connection: wallet.connection, profile: "home"))
        #expect(
            await Self.reason { () async throws(RainError) in
                try await w.access.revoke(appPath: "/usr/bin/wallet", profile: "home", context: cli)
            } == "RAIN_102")
    }

    @Test("approvals persist in the sealed store and are there after a restart")
    func persisted() async throws {
        let directory = NSTemporaryDirectory() + "rain-apps-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try AppApprovalStore(
            stateDirectory: directory, storageKey: SymmetricKey(bytes: [UInt8](repeating: 5, count: 32)))
        let w = try Self.world(store: store)
        let wallet = Self.connect(w, 1, Self.app("/usr/bin/wallet", hash: 1))
        w.prompt.script([nil])
        try await w.access.authorize(profile: "default", context: wallet)
        let restarted = try Self.world(store: store)
        let again = Self.connect(restarted, 9, Self.app("/usr/bin/wallet", hash: 1))
        try await restarted.access.authorize(profile: "default", context: again)
        #expect(restarted.prompt.asked.isEmpty)
    }

    static func script(pid: Int32 = 30) -> CallerIdentity {
        CallerIdentity(
            pid: pid, uid: getuid(), executablePath: "/usr/bin/python3.11",
            executableSHA256: [UInt8](repeating: 7, count: 32),
            script: .init(path: "/home/u/pay.py", sha256: [UInt8](repeating: 8, count: 32)))
    }

    @Test("a script is asked on each connection, owns nothing, and is never remembered in the approvals")
    func scriptAskedPerConnection() async throws {
        let w = try Self.world()
        w.prompt.script([nil, nil])
        let first = Self.connect(w, 1, Self.script())
        try await w.access.authorize(profile: "p", context: first)
        // The connection is approved for the profile (its next calls are not asked again).
        #expect(w.access.isApproved(connection: first.connection, profile: "p"))
        #expect(w.prompt.asked.count == 1)
        #expect(w.prompt.asked.first?.contains("the script /usr/bin/python3.11 /home/u/pay.py") == true, "\(w.prompt.asked)")
        // A new connection of the same script is asked again.
        try await w.access.authorize(profile: "p", context: Self.connect(w, 2, Self.script(pid: 31)))
        #expect(w.prompt.asked.count == 2)
        #expect(w.access.list().approvals.profiles["p"] == nil)
        // A binary can still become the profile's owner: the script took nothing.
        w.prompt.script([nil])
        try await w.access.authorize(profile: "p", context: Self.connect(w, 3, Self.app("/usr/bin/wallet", hash: 1)))
        #expect(w.access.list().approvals.owner(of: "p")?.appPath == "/usr/bin/wallet")
    }

    @Test(
        "a script's connection is asked about once: a call the user confirms on it asks only its action, and takes none of the uid's approval prompts"
    )
    func scriptConnectionAskedOnceBeforeConfirmedCalls() async throws {
        let w = try Self.world()
        w.prompt.script([nil, nil, nil, nil])
        let script = Self.connect(w, 1, Self.script())
        try await w.access.authorize(profile: "p", context: script)
        // Three calls the user confirms: without the connection's answer kept, each would ask about
        // the connection again, and the third such question would be the uid's 4th in a minute.
        for _ in 0..<3 {
            try await w.access.confirmSensitive(action: "add a backup contact to the account", profile: "p", context: script)
        }
        #expect(w.prompt.asked.count == 4, "\(w.prompt.asked)")
        #expect(w.prompt.asked.dropFirst().allSatisfy { $0 == "add a backup contact to the account" }, "\(w.prompt.asked)")
        // The other two approval prompts of the minute are still there.
        w.prompt.script([nil, nil])
        for n in 2...3 {
            try await w.access.authorize(profile: "p", context: Self.connect(w, UInt64(n), Self.script(pid: Int32(30 + n))))
        }
        #expect(w.prompt.asked.count == 6, "\(w.prompt.asked)")
    }

    @Test("where no prompt can be shown, a script is refused (no_prompt), never trusted on first use")
    func scriptWithoutPrompt() async throws {
        let w = try Self.world(prompt: false)
        let reason = await Self.reason { () async throws(RainError) in
            try await w.access.authorize(profile: "p", context: Self.connect(w, 1, Self.script()))
        }
        #expect(reason == "no_prompt")
        #expect(w.access.list().approvals.profiles["p"] == nil)
        #expect(w.events.withLock { $0.contains { $0.event == "app_refused" && $0.result == "no_prompt" } })
    }

    @Test("root's policy vouches for a script: it is not asked; `apps approve` of a script is refused")
    func scriptInPolicy() async throws {
        let w = try Self.world(preApproved: ["p": [PreApprovedApp(path: "/usr/bin/python3.11 /home/u/pay.py")]])
        try await w.access.authorize(profile: "p", context: Self.connect(w, 1, Self.script()))
        #expect(w.prompt.asked.isEmpty)
        let reason = await Self.reason { () async throws(RainError) in
            try await w.access.approve(
                app: Self.script(), profile: "q", context: Self.connect(w, 2, Self.app("/usr/bin/cli", hash: 2)))
        }
        #expect(reason == "script_not_verifiable")
        #expect(CallerIdentity.isScript(appPath: "/usr/bin/python3.11 /home/u/pay.py"))
        #expect(!CallerIdentity.isScript(appPath: "/usr/bin/wallet"))
    }
}
