import Foundation
import Glibc
import RainCore
import RainSystem
import RainTestSupport
import Testing

@testable import RainAccess

/// Shared by the prompt tests: a real `pinentry-tty` on a pseudo-terminal the test holds.
enum PromptFixture {
    static let pinentryTTY = "/usr/bin/pinentry-tty"

    static func caller(
        pid: Int32 = 4242, path: String = "/usr/bin/wallet-tool", controllingTerminal: UInt64 = 0, sessionID: Int32 = 0
    ) -> CallerIdentity {
        CallerIdentity(
            pid: pid, uid: geteuid(), executablePath: path, executableSHA256: [UInt8](repeating: 0x5a, count: 32),
            controllingTerminal: controllingTerminal, sessionID: sessionID)
    }

    static func request(_ caller: CallerIdentity = caller(), action: String = "Export the recovery phrase") -> PromptRequest {
        PromptRequest(action: action, caller: caller, profile: "savings")
    }

    static func coordinator(
        on pty: PseudoTerminal?, clock: any RainClock = ManualClock(), timeout: Duration = .seconds(60),
        program: String = pinentryTTY
    ) throws -> PromptCoordinator {
        let targets = PromptTargets(terminal: pty.map { RegisteredTerminal(path: $0.path, term: "vt100") })
        return PromptCoordinator(
            settings: .init(pinentry: try Pinentry(program: program), timeout: timeout), targets: targets, clock: clock,
            logger: Logger(label: "test", sink: CapturingLogSink()))
    }

    /// Starts a confirmation in a task of its own.
    static func start(_ coordinator: PromptCoordinator, _ request: PromptRequest = request())
        -> Task<PromptCoordinator.Confirmation, any Error>
    {
        Task { try await coordinator.confirm(request) }
    }

    /// Waits until the prompt is on the terminal; returns the code it shows.
    static func waitForCode(on pty: PseudoTerminal) async throws -> String {
        let shown = try #require(await pty.waitForText("Code:"), "no prompt appeared on \(pty.path)")
        let marker = try #require(shown.range(of: "type the code  "), "no code in: \(shown)")
        return String(shown[marker.upperBound...].prefix(PromptCode.length))
    }

    /// The error a finished confirmation threw, or nil when it confirmed.
    static func error(of task: Task<PromptCoordinator.Confirmation, any Error>) async -> RainError? {
        do {
            _ = try await task.value
            return nil
        } catch let error as RainError {
            return error
        } catch {
            return RainError(.internalError, "unexpected \(error)")
        }
    }

    /// The error a confirmation threw, which must come within `limit` (a timeout or a withdrawal
    /// ends the prompt at once); past it, the test fails and the task is cancelled.
    static func error(of task: Task<PromptCoordinator.Confirmation, any Error>, within limit: Duration) async -> RainError? {
        let finished = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                _ = await task.result
                return true
            }
            group.addTask {
                try? await Task.sleep(for: limit)
                return false
            }
            let first = await group.next() ?? false
            if !first { task.cancel() }
            group.cancelAll()
            return first
        }
        #expect(finished, "the prompt did not end within \(limit)")
        return await error(of: task)
    }

    /// True when no process has this pid any more (killed and reaped).
    static func isGone(_ pid: Int32) -> Bool { kill(pid, 0) == -1 && errno == ESRCH }
}

@Suite("Prompt coordinator on a real pinentry-tty")
struct PromptCoordinatorTests {
    @Test("typing the code the prompt shows confirms; the prompt says what, which app and which profile")
    func confirmWithCode() async throws {
        let pty = try PseudoTerminal()
        let coordinator = try PromptFixture.coordinator(on: pty)
        let task = PromptFixture.start(coordinator)
        let code = try await PromptFixture.waitForCode(on: pty)
        let shown = pty.shown
        #expect(shown.contains("Export the recovery phrase"))
        #expect(shown.contains("/usr/bin/wallet-tool"))
        #expect(shown.contains("5a5a5a5a5a5a"))
        #expect(shown.contains("pid 4242"))
        #expect(shown.contains("savings"))
        try pty.type(code.lowercased() + "\n")
        let confirmation = try await task.value
        #expect(confirmation.target == .terminal(path: pty.path, term: "vt100"))
        #expect(await coordinator.activeProcessID == nil)
    }

    @Test("a wrong code is a refusal: RAIN_401 prompt_wrong_code")
    func wrongCode() async throws {
        let pty = try PseudoTerminal()
        let coordinator = try PromptFixture.coordinator(on: pty)
        let task = PromptFixture.start(coordinator)
        let code = try await PromptFixture.waitForCode(on: pty)
        try pty.type(String(code.reversed()) == code ? "ZZZZ\n" : String(code.reversed()) + "\n")
        let error = await PromptFixture.error(of: task)
        #expect(error?.code == .userCancelled)
        #expect(error?.details.reason == PromptReason.wrongCode)
    }

    @Test("Ctrl-D dismisses: RAIN_401 prompt_dismissed")
    func dismissed() async throws {
        let pty = try PseudoTerminal()
        let coordinator = try PromptFixture.coordinator(on: pty)
        let task = PromptFixture.start(coordinator)
        _ = try await PromptFixture.waitForCode(on: pty)
        try pty.type([0x04])
        let error = await PromptFixture.error(of: task)
        #expect(error?.code == .userCancelled)
        #expect(error?.details.reason == PromptReason.dismissed)
    }

    @Test("no answer within the timeout (the injected clock): RAIN_401 prompt_timeout, pinentry killed")
    func timeoutOnTheClock() async throws {
        let pty = try PseudoTerminal()
        let clock = ManualClock()
        let coordinator = try PromptFixture.coordinator(on: pty, clock: clock)
        let task = PromptFixture.start(coordinator)
        _ = try await PromptFixture.waitForCode(on: pty)
        let pid = try #require(await coordinator.activeProcessID)
        clock.advance(by: .seconds(59))
        #expect(await coordinator.activeProcessID == pid)
        clock.advance(by: .seconds(1))
        let error = await PromptFixture.error(of: task, within: .seconds(2))
        #expect(error?.code == .userCancelled)
        #expect(error?.details.reason == PromptReason.timedOut)
        #expect(PromptFixture.isGone(pid))
        // The killed pinentry-tty had turned echo off; the terminal is put back and told why.
        #expect(await pty.waitForText("withdrawn", timeout: .seconds(2)) != nil)
    }

    @Test("a short real timeout ends the prompt on its own")
    func shortRealTimeout() async throws {
        let pty = try PseudoTerminal()
        let coordinator = try PromptFixture.coordinator(on: pty, clock: SystemClock(), timeout: .milliseconds(300))
        let task = PromptFixture.start(coordinator)
        let error = await PromptFixture.error(of: task, within: .seconds(2))
        #expect(error?.details.reason == PromptReason.timedOut)
    }

    @Test("a cancelled task withdraws its prompt: pinentry killed and reaped, RAIN_401 prompt_withdrawn")
    func cancelledTaskWithdraws() async throws {
        let pty = try PseudoTerminal()
        let coordinator = try PromptFixture.coordinator(on: pty)
        let task = PromptFixture.start(coordinator)
        _ = try await PromptFixture.waitForCode(on: pty)
        let pid = try #require(await coordinator.activeProcessID)
        task.cancel()
        let error = await PromptFixture.error(of: task, within: .seconds(2))
        #expect(error?.code == .userCancelled)
        #expect(error?.details.reason == PromptReason.withdrawn)
        #expect(PromptFixture.isGone(pid))
        #expect(await coordinator.activeProcessID == nil)
    }

    @Test("one prompt at a time: a second request meanwhile is RAIN_302 prompt_busy")
    func busy() async throws {
        let pty = try PseudoTerminal()
        let coordinator = try PromptFixture.coordinator(on: pty)
        let first = PromptFixture.start(coordinator)
        let code = try await PromptFixture.waitForCode(on: pty)
        let other = PromptFixture.request(PromptFixture.caller(pid: 99, path: "/usr/bin/other"))
        await #expect(throws: RainError.refused) { try await coordinator.confirm(other) }
        do {
            _ = try await coordinator.confirm(other)
        } catch {
            #expect(error.details.reason == PromptReason.busy)
        }
        try pty.type(code + "\n")
        _ = try await first.value
    }

    @Test("three refusals in a row lock the app out for 10 minutes (RAIN_302 prompt_locked, time left); other apps are not")
    func lockout() async throws {
        let pty = try PseudoTerminal()
        let clock = ManualClock()
        let coordinator = try PromptFixture.coordinator(on: pty, clock: clock)
        for _ in 0..<3 {
            pty.clearShown()
            let task = PromptFixture.start(coordinator)
            _ = try await PromptFixture.waitForCode(on: pty)
            try pty.type([0x04])
            #expect(await PromptFixture.error(of: task)?.details.reason == PromptReason.dismissed)
        }
        do {
            _ = try await coordinator.confirm(PromptFixture.request())
            Issue.record("a locked-out app got a prompt")
        } catch {
            #expect(error.code == .refused)
            #expect(error.details.reason == PromptReason.lockedOut)
            #expect(error.details.retryAfterMilliseconds == 600_000)
        }
        clock.advance(by: .seconds(599))
        do {
            _ = try await coordinator.confirm(PromptFixture.request())
            Issue.record("a locked-out app got a prompt")
        } catch {
            #expect(error.details.reason == PromptReason.lockedOut)
            #expect(error.details.retryAfterMilliseconds == 1000)
        }

        // Another app still gets its prompt.
        pty.clearShown()
        let other = PromptFixture.start(coordinator, PromptFixture.request(PromptFixture.caller(pid: 77, path: "/usr/bin/other")))
        try pty.type(try await PromptFixture.waitForCode(on: pty) + "\n")
        _ = try await other.value

        clock.advance(by: .seconds(1))
        pty.clearShown()
        let again = PromptFixture.start(coordinator)
        try pty.type(try await PromptFixture.waitForCode(on: pty) + "\n")
        _ = try await again.value
    }

    @Test("a confirmation resets the count: refusals must come in a row")
    func confirmationResetsRefusals() async throws {
        let pty = try PseudoTerminal()
        let coordinator = try PromptFixture.coordinator(on: pty)
        for answer in ["cancel", "cancel", "code", "cancel", "cancel"] {
            pty.clearShown()
            let task = PromptFixture.start(coordinator)
            let code = try await PromptFixture.waitForCode(on: pty)
            if answer == "code" {
                try pty.type(code + "\n")
                _ = try await task.value
            } else {
                try pty.type([0x04])
                #expect(await PromptFixture.error(of: task)?.details.reason == PromptReason.dismissed)
            }
        }
        pty.clearShown()
        let last = PromptFixture.start(coordinator)
        try pty.type(try await PromptFixture.waitForCode(on: pty) + "\n")
        _ = try await last.value
    }

    @Test(
        "keystrokes injected into the prompt's terminal (TIOCSTI) by another process cannot confirm",
        arguments: ["OK\n", "\n", "y\n", "AAAA\n"])
    func injectedKeystrokes(_ keys: String) async throws {
        let pty = try PseudoTerminal()
        let coordinator = try PromptFixture.coordinator(on: pty)
        let task = PromptFixture.start(coordinator)
        _ = try await PromptFixture.waitForCode(on: pty)
        // The injector opens the terminal and pushes each key into its input queue, as a program
        // of the user's could (dev.tty.legacy_tiocsti=1; as root, on any terminal).
        let injector = Process()
        injector.executableURL = URL(fileURLWithPath: "/usr/bin/perl")
        injector.arguments = [
            "-e",
            #"open(my $t, "+<", $ARGV[0]) or die "open: $!"; for my $c (split //, $ARGV[1]) { ioctl($t, 0x5412, $c) or die "TIOCSTI: $!" }"#,
            pty.path, keys,
        ]
        try injector.run()
        injector.waitUntilExit()
        #expect(injector.terminationStatus == 0, "TIOCSTI injection failed")
        let error = await PromptFixture.error(of: task)
        // The injected line reached pinentry (an answer, not a timeout), and was refused.
        #expect(error?.code == .userCancelled)
        #expect(error?.details.reason == PromptReason.wrongCode)
    }

    @Test("no display and no registered terminal: RAIN_404 prompt_unavailable")
    func noPromptAvailable() async throws {
        let coordinator = try PromptFixture.coordinator(on: nil)
        do {
            _ = try await coordinator.confirm(PromptFixture.request())
            Issue.record("confirmed without a prompt")
        } catch {
            #expect(error.code == .unavailable)
            #expect(error.details.reason == PromptReason.unavailable)
        }
    }
}

@Suite("Prompt pages on a real pinentry-tty")
struct PromptPagesOnTerminalTests {
    static func pagedRequest() -> PromptRequest {
        var request = PromptFixture.request(action: "Sign typed data on Base (8453)")
        request.details = PromptDetails(
            lines: (1...45).map { "Field message.items[\($0)]: the value of item \($0)" },
            closing: "SHA-256 of what is signed: " + String(repeating: "cd", count: 32))
        return request
    }

    @Test("each page waits for Next; the code shows on the last page only, and typing it confirms")
    func walkThrough() async throws {
        let pty = try PseudoTerminal()
        let coordinator = try PromptFixture.coordinator(on: pty)
        let request = Self.pagedRequest()
        let count = try request.pages(code: PromptCode(text: "XXXX")).count
        #expect(count >= 3)
        let task = PromptFixture.start(coordinator, request)
        for page in 1..<count {
            let shown = try #require(await pty.waitForText("Page \(page) of \(count)"), "page \(page) not shown")
            #expect(!shown.contains("type the code"), "the code showed before the last page")
            _ = try #require(await pty.waitForText("]? "), "page \(page) does not ask Next or Refuse")
            pty.clearShown()
            try pty.type("n")
        }
        let code = try await PromptFixture.waitForCode(on: pty)
        #expect(pty.shown.contains("Page \(count) of \(count)"))
        #expect(pty.shown.contains("SHA-256 of what is signed: cdcd"))
        try pty.type(code + "\n")
        _ = try await task.value
    }

    @Test("a paged prompt has the timeout once per page in all: it stays up one second short of that, then times out")
    func timeoutPerPage() async throws {
        let pty = try PseudoTerminal()
        let clock = ManualClock()
        let coordinator = try PromptFixture.coordinator(on: pty, clock: clock)
        let request = Self.pagedRequest()
        let count = try request.pages(code: PromptCode(text: "XXXX")).count
        let task = PromptFixture.start(coordinator, request)
        _ = try #require(await pty.waitForText("Page 1 of \(count)"))
        let pid = try #require(await coordinator.activeProcessID)
        clock.advance(by: .seconds(60 * count - 1))
        #expect(await coordinator.activeProcessID == pid)
        clock.advance(by: .seconds(1))
        let error = await PromptFixture.error(of: task, within: .seconds(2))
        #expect(error?.details.reason == PromptReason.timedOut)
        #expect(PromptFixture.isGone(pid))
    }

    @Test("Refuse on a middle page ends it: RAIN_401 prompt_dismissed, and no code was shown")
    func refuseOnAPage() async throws {
        let pty = try PseudoTerminal()
        let coordinator = try PromptFixture.coordinator(on: pty)
        let task = PromptFixture.start(coordinator, Self.pagedRequest())
        _ = try #require(await pty.waitForText("]? "))
        pty.clearShown()
        try pty.type("n")
        _ = try #require(await pty.waitForText("Page 2 of"))
        _ = try #require(await pty.waitForText("]? "))
        try pty.type("r")
        let error = await PromptFixture.error(of: task)
        #expect(error?.code == .userCancelled)
        #expect(error?.details.reason == PromptReason.dismissed)
        #expect(!pty.shown.contains("type the code"))
    }

    @Test("keys typed ahead of a page are discarded: a page cannot be skipped by typing early")
    func typeAheadDiscarded() async throws {
        let pty = try PseudoTerminal()
        let coordinator = try PromptFixture.coordinator(on: pty)
        let request = Self.pagedRequest()
        let count = try request.pages(code: PromptCode(text: "XXXX")).count
        // Keys typed before the prompt opens: pinentry-tty flushes them when it sets up the terminal.
        try pty.type(String(repeating: "n", count: count))
        let task = PromptFixture.start(coordinator, request)
        _ = try #require(await pty.waitForText("Page 1 of \(count)"))
        _ = try #require(await pty.waitForText("]? "))
        try await Task.sleep(for: .milliseconds(200))
        #expect(!pty.shown.contains("Page 2 of"), "a key typed before the page showed turned it")
        task.cancel()
        _ = await PromptFixture.error(of: task, within: .seconds(5))
    }
}
