import Foundation
import Glibc
import RainAccess
import RainCore
@testable import RainDaemon
import RainDevice
import RainTestSupport
import Synchronization
import Testing

/// A closed prompt place does not make the next one a first place again: once a place has
/// existed, a machine without a display confirms a new one by the place secret, with a lock after
/// wrong tries and a wait after a right one.
@Suite("Prompt place secret")
struct PlaceSecretTests {
    /// The approvals record's history, in memory.
    final class Keeper: PromptPlaceHistoryKeeping {
        let value = Mutex<PromptPlaceHistory?>(nil)
        var promptPlaceHistory: PromptPlaceHistory? { value.withLock { $0 } }
        func recordPromptPlaceHistory(_ history: PromptPlaceHistory) throws(RainError) { value.withLock { $0 = history } }
    }

    final class Events: Sendable {
        let list = Mutex<[AccessEvent]>([])
        var names: [String] { list.withLock { $0.map(\.event) } }
        var details: [String] { list.withLock { $0.compactMap(\.detail) } }
        func record(_ event: AccessEvent) { list.withLock { $0.append(event) } }
    }

    static let pinentry = "/usr/bin/pinentry-tty"
    static let secret = "correct horse battery"

    static func caller() -> CallerIdentity {
        CallerIdentity(
            pid: 4242, uid: geteuid(), executablePath: "/usr/bin/rainwallet",
            executableSHA256: [UInt8](repeating: 0x5a, count: 32))
    }

    /// A daemon's prompts without a display, keeping the history in `keeper` (as a restart does).
    static func prompts(clock: ManualClock, keeper: Keeper, events: Events) throws -> PinentryPrompts {
        let coordinator = PromptCoordinator(
            settings: PromptCoordinator.Settings(pinentry: try Pinentry(program: pinentry)), targets: PromptTargets(),
            clock: clock, logger: Logger(label: "test", sink: CapturingLogSink()))
        let prompts = PinentryPrompts(
            coordinator: coordinator, hasDisplay: false, clock: clock, secretIterations: 1_000,
            audit: { events.record($0) })
        prompts.keepHistory(in: keeper)
        return prompts
    }

    static func reason(_ body: () async throws(RainError) -> String) async -> RainError? {
        do throws(RainError) {
            _ = try await body()
            return nil
        } catch {
            return error
        }
    }

    @Test(
        "a new secret is kept as PBKDF2-HMAC-SHA256 with 600,000 iterations and a salt of its own, never as text, and must have 8 characters"
    )
    func secretIsDerived() throws {
        let secret = try PromptPlaceHistory.makeSecret(Self.secret)
        #expect(secret.iterations == 600_000)
        #expect(Data(base64Encoded: secret.salt)?.count == 16)
        #expect(Data(base64Encoded: secret.hash)?.count == 32)
        #expect(!secret.hash.contains(Self.secret) && !secret.salt.contains(Self.secret))
        #expect(try PromptPlaceHistory.matches(Self.secret, secret))
        #expect(try !PromptPlaceHistory.matches(Self.secret + " ", secret))
        #expect(try PromptPlaceHistory.makeSecret(Self.secret).salt != secret.salt)
        #expect(throws: RainError.self) { try PromptPlaceHistory.makeSecret("1234567") }
        #expect(try PromptPlaceHistory.makeSecret("12345678", iterations: 1).iterations == 1)
        do {
            _ = try PromptPlaceHistory.makeSecret("seven77")
        } catch {
            #expect(error.code == .invalidArgument && error.details.reason == "prompt_secret_too_short")
        }
    }

    @Test(
        "with no display, the first place asks for a secret; once that place's shell is gone the next is never a first place: it needs the secret, 5 wrong tries lock for 10 minutes, and a right one takes over only after a 10-minute wait, all audited"
    )
    func closedPlaceNeedsTheSecret() async throws {
        try #require(
            FileManager.default.isExecutableFile(atPath: Self.pinentry), "pinentry-tty is installed by scripts/lib/deps.sh")
        let clock = ManualClock()
        let keeper = Keeper()
        let events = Events()
        let prompts = try Self.prompts(clock: clock, keeper: keeper, events: events)
        let caller = Self.caller()
        let first = try PseudoTerminal()

        // The first place: a secret must be chosen with it, at least 8 characters.
        var error = await Self.reason { () throws(RainError) in
            try await prompts.register(terminal: first.path, secret: nil, caller: caller, profile: "default")
        }
        #expect(error?.details.reason == "prompt_secret_to_choose" && error?.code == .invalidArgument)
        error = await Self.reason { () throws(RainError) in
            try await prompts.register(terminal: first.path, secret: "short", caller: caller, profile: "default")
        }
        #expect(error?.details.reason == "prompt_secret_too_short")
        #expect(keeper.promptPlaceHistory == nil)
        #expect(
            try await prompts.register(terminal: first.path, secret: Self.secret, caller: caller, profile: "default")
                == first.path)
        #expect(keeper.promptPlaceHistory?.secret != nil)
        #expect(events.details.last?.contains("first place") == true)

        // The place is gone (its terminal closed). A restart keeps only the record.
        first.close()
        let restarted = try Self.prompts(clock: clock, keeper: keeper, events: events)
        #expect(!restarted.canPrompt)
        let attacker = try PseudoTerminal()
        defer { attacker.close() }
        func register(_ secret: String?, on pty: PseudoTerminal = attacker) async -> RainError? {
            await Self.reason { () throws(RainError) in
                try await restarted.register(terminal: pty.path, secret: secret, caller: caller, profile: "default")
            }
        }
        error = await register(nil)
        #expect(
            error?.details.reason == "prompt_secret_required" && error?.code == .invalidArgument, "\(String(describing: error))")
        for left in (1...4).reversed() {
            error = await register("not the secret")
            #expect(error?.code == .userCancelled && error?.details.reason == "prompt_secret_wrong")
            #expect(error?.details.attemptsRemaining == UInt32(left))
        }
        error = await register("not the secret")
        #expect(error?.code == .refused && error?.details.reason == "prompt_secret_locked")
        #expect(error?.details.retryAfterMilliseconds == 600_000)
        // Locked: even the right secret is not checked, and a restart does not lift the lock.
        let again = try Self.prompts(clock: clock, keeper: keeper, events: events)
        error = await Self.reason { () throws(RainError) in
            try await again.register(terminal: attacker.path, secret: Self.secret, caller: caller, profile: "default")
        }
        #expect(error?.details.reason == "prompt_secret_locked")
        #expect(events.names.filter { $0 == "prompt_secret_wrong" }.count == 5)

        // After the lock, the right secret starts the wait; the place is not taken before its end.
        clock.advance(by: .seconds(600))
        error = await register(Self.secret)
        #expect(error?.code == .refused && error?.details.reason == "prompt_move_waiting")
        #expect(error?.details.retryAfterMilliseconds == 600_000)
        #expect(events.names.last == "prompt_move_requested")
        #expect(!restarted.canPrompt)
        clock.advance(by: .seconds(599))
        error = await register(Self.secret)
        #expect(error?.details.reason == "prompt_move_waiting" && error?.details.retryAfterMilliseconds == 1_000)
        // Another terminal does not inherit the wait: it starts its own.
        let other = try PseudoTerminal()
        defer { other.close() }
        error = await register(Self.secret, on: other)
        #expect(error?.details.reason == "prompt_move_waiting" && error?.details.retryAfterMilliseconds == 600_000)
        clock.advance(by: .seconds(600))
        // The wait is over for `other` now; a wrong secret still takes nothing.
        error = await register("not the secret", on: other)
        #expect(error?.details.reason == "prompt_secret_wrong")
        #expect(
            try await restarted.register(terminal: other.path, secret: Self.secret, caller: caller, profile: "default")
                == other.path)
        #expect(restarted.canPrompt)
        #expect(keeper.promptPlaceHistory?.pendingMove == nil && keeper.promptPlaceHistory?.failedTries == 0)
        #expect(events.names.last == "prompt_registered")
        #expect(events.details.last?.contains("confirmed by the place secret") == true)
        #expect(events.details.filter { $0.contains("first place") }.count == 1)
    }

    @Test(
        "a place recorded without a secret, now gone, with no display: nothing can confirm a new one (RAIN_404 prompt_place_unconfirmable)"
    )
    func noSecretNoDisplay() async throws {
        try #require(
            FileManager.default.isExecutableFile(atPath: Self.pinentry), "pinentry-tty is installed by scripts/lib/deps.sh")
        let keeper = Keeper()
        try keeper.recordPromptPlaceHistory(PromptPlaceHistory(firstRegisteredAt: Date()))
        let prompts = try Self.prompts(clock: ManualClock(), keeper: keeper, events: Events())
        let pty = try PseudoTerminal()
        defer { pty.close() }
        let error = await Self.reason { () throws(RainError) in
            try await prompts.register(terminal: pty.path, secret: Self.secret, caller: Self.caller(), profile: "default")
        }
        #expect(error?.code == .unavailable && error?.details.reason == "prompt_place_unconfirmable")
        #expect(error?.message.contains("display") == true)
        #expect(!prompts.canPrompt)
    }
}
