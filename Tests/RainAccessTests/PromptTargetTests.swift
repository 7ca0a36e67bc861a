import Foundation
import Glibc
import RainCore
import RainSystem
import RainTestSupport
import Testing

@testable import RainAccess

@Suite("Where a prompt may appear")
struct PromptTargetTests {
    @Test("the caller's controlling terminal is refused (RAIN_202), and no pinentry is started there")
    func callerControllingTerminal() async throws {
        let pty = try PseudoTerminal()
        let caller = PromptFixture.caller(controllingTerminal: try pty.deviceNumber())
        let coordinator = try PromptFixture.coordinator(on: pty)
        do {
            _ = try await coordinator.confirm(PromptFixture.request(caller))
            Issue.record("a prompt was shown on the caller's own terminal")
        } catch {
            #expect(error.code == .unauthorized)
            #expect(error.details.reason == PromptReason.callerTerminal)
        }
        #expect(!pty.shown.contains("Code:"))
    }

    @Test("a terminal of the caller's session is refused (RAIN_202), found with TIOCGSID")
    func callerSessionTerminal() async throws {
        let pty = try PseudoTerminal()
        // A session leader that takes the terminal as its controlling terminal, as a login shell does.
        let leader = try SessionLeader(terminal: pty.path)
        defer { leader.stop() }
        let session = try #require(await leader.waitForTerminal())
        #expect(session.sessionID == leader.pid)

        // The terminal is not the caller's controlling terminal here, only in its session.
        let caller = PromptFixture.caller(pid: leader.pid, sessionID: session.sessionID)
        let coordinator = try PromptFixture.coordinator(on: pty)
        do {
            _ = try await coordinator.confirm(PromptFixture.request(caller))
            Issue.record("a prompt was shown on a terminal of the caller's session")
        } catch {
            #expect(error.code == .unauthorized)
            #expect(error.details.reason == PromptReason.callerSession)
        }
        #expect(!pty.shown.contains("Code:"))

        // The same terminal for a caller of another session passes the check.
        let stranger = PromptFixture.caller(pid: 1, controllingTerminal: 0, sessionID: leader.pid + 100_000)
        _ = try PromptTarget.terminal(path: pty.path, term: "vt100").prepare(for: stranger)
        // The caller's `tty_nr` from /proc names the same device as the terminal's st_rdev.
        #expect(DeviceNumber(encoded: session.terminal) == DeviceNumber(encoded: try pty.deviceNumber()))
        let own = PromptFixture.caller(pid: leader.pid, controllingTerminal: session.terminal)
        #expect(throws: RainError.unauthorized) { try PromptTarget.terminal(path: pty.path, term: "vt100").prepare(for: own) }
    }

    @Test(
        "a process outside the terminal's session holding it refuses the prompt (RAIN_202 prompt_terminal_shared), unless it is this process's child: its pinentry, or a child between its fork and its exec"
    )
    func foreignHoldersButNotOwnChildren() async throws {
        let pty = try PseudoTerminal()
        func holds(_ pid: Int32) -> Bool { TerminalHolders.descriptors(of: pid).contains { $0.target == pty.path } }
        // The terminal's session, as its shell holds it.
        let shell = try SessionLeader(terminal: pty.path)
        defer { shell.stop() }
        _ = try #require(await shell.waitForTerminal())
        let stranger = PromptFixture.caller(pid: 1, controllingTerminal: 0, sessionID: shell.pid + 100_000)
        let target = PromptTarget.terminal(path: pty.path, term: "vt100")
        _ = try target.prepare(for: stranger)

        // A child of this process, in a session of its own (the terminal is the shell's already).
        let child = try SessionLeader(terminal: pty.path)
        defer { child.stop() }
        #expect(await Self.waitUntil { holds(child.pid) })
        _ = try target.prepare(for: stranger)

        // The same, orphaned (its parent exits at once): another process's.
        let pidFile = NSTemporaryDirectory() + "holder-\(UUID().uuidString.prefix(8))"
        defer { unlink(pidFile) }
        let null = try Syscall.open("/dev/null", .readWrite)
        defer { Syscall.closeUnchecked(null, because: .readOnly) }
        let parent = try Syscall.spawn(
            "/bin/sh", arguments: ["-c", "/bin/sleep 30 < \(pty.path) & echo $! > \(pidFile)"], environment: [:],
            standardInput: null, standardOutput: null)
        _ = try Syscall.waitForExit(parent)
        let written = (try? String(contentsOfFile: pidFile, encoding: .utf8)) ?? ""
        let orphan = try #require(Int32(written.trimmingCharacters(in: .whitespacesAndNewlines)), "pid file: \(written)")
        defer { kill(orphan, SIGKILL) }
        #expect(await Self.waitUntil { holds(orphan) })
        do {
            _ = try target.prepare(for: stranger)
            Issue.record("a prompt was prepared on a terminal another process holds")
        } catch {
            #expect(error.code == .unauthorized)
            #expect(error.details.reason == PromptReason.terminalShared)
            #expect(error.message.contains("pid \(orphan) (sleep)"), "\(error.message)")
        }
    }

    /// Polls `condition` until it holds, for up to 20 s.
    static func waitUntil(_ condition: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(20)
        while !condition() {
            if ContinuousClock.now >= deadline { return false }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return true
    }

    @Test("a terminal of another uid, /dev/tty, /dev/null and paths outside /dev are refused (RAIN_102)")
    func invalidTerminals() throws {
        let caller = PromptFixture.caller()
        let pty = try PseudoTerminal()
        _ = try PromptTarget.terminal(path: pty.path, term: "vt100").prepare(for: caller)
        #expect(chown(pty.path, 65534, 65534) == 0)
        for path in [pty.path, "/dev/tty", "/dev/null", "/etc/hostname", "/dev/pts/../null", "/dev/pts/999999"] {
            do {
                _ = try PromptTarget.terminal(path: path, term: "vt100").prepare(for: caller)
                Issue.record("\(path) was accepted as a prompt terminal")
            } catch {
                #expect(error.code == .invalidArgument, "\(path)")
                #expect(error.details.reason == PromptReason.invalidTarget, "\(path)")
            }
        }
    }

    @Test("a registered terminal wins over the display; the display's environment keeps only what a pinentry needs")
    func selection() throws {
        #expect(DisplayEnvironment(environment: ["HOME": "/root", "XAUTHORITY": "/x"]) == nil)
        let display = try #require(
            DisplayEnvironment(environment: [
                "DISPLAY": ":0", "XAUTHORITY": "/run/user/0/xauth", "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/0/bus",
                "LD_PRELOAD": "/tmp/evil.so", "HOME": "/root", "PATH": "/tmp/evil:/usr/bin",
            ]))
        #expect(
            display.environment == [
                "DISPLAY": ":0", "XAUTHORITY": "/run/user/0/xauth", "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/0/bus",
            ])
        #expect(try PromptTargets(display: display).selected() == .display(display))
        let both = PromptTargets(display: display, terminal: RegisteredTerminal(path: "/dev/pts/7", term: "xterm"))
        #expect(try both.selected() == .terminal(path: "/dev/pts/7", term: "xterm"))
        #expect(throws: RainError.unavailable) { try PromptTargets().selected() }
    }
}

/// A process in a session of its own (`Syscall.spawn` starts one) that opens `terminal` without
/// `O_NOCTTY`, so the terminal becomes its session's controlling terminal.
final class SessionLeader: Sendable {
    let pid: Int32

    init(terminal: String) throws {
        let null = try Syscall.open("/dev/null", .readWrite)
        defer { Syscall.closeUnchecked(null, because: .readOnly) }
        pid = try Syscall.spawn(
            "/bin/sh", arguments: ["-c", "exec 3<>\(terminal); exec /bin/sleep 30"], environment: [:],
            standardInput: null, standardOutput: null)
    }

    /// Waits until `/proc/PID/stat` shows a controlling terminal: its `tty_nr` and session id.
    func waitForTerminal() async -> (terminal: UInt64, sessionID: Int32)? {
        for _ in 0..<500 {
            if let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                let close = stat.range(of: ")", options: .backwards)
            {
                let fields = stat[close.upperBound...].split(separator: " ")
                // After the command: state, ppid, pgrp, session, tty_nr.
                if fields.count > 4, let session = Int32(fields[3]), let tty = UInt64(fields[4]), tty != 0 {
                    return (tty, session)
                }
            }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return nil
    }

    func stop() {
        _ = try? Syscall.sendSignal(SIGKILL, to: pid)
        _ = try? Syscall.waitForExit(pid)
    }
}
