import Foundation
import Glibc
import RainCore
import RainSystem
import RainTestSupport
import Testing

@testable import RainAccess

/// A stand-in pinentry: a shell script that records how it was started, then answers Assuan with
/// `getpin` (shell commands) for GETPIN.
struct FakePinentry {
    let directory: URL
    var program: String { directory.appendingPathComponent("pinentry").path }

    init(getpin: String, greeting: String = "echo 'OK fake pinentry'", leakCheck: Int32 = -1) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("pinentry-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let dir = directory.path
        let script = """
            #!/bin/sh
            /usr/bin/env > \(dir)/env
            echo "$@" > \(dir)/args
            [ -e /proc/$$/fd/\(leakCheck) ] && echo leaked > \(dir)/leak
            /usr/bin/cut -d' ' -f6 /proc/$$/stat > \(dir)/sid
            echo $$ > \(dir)/pid
            \(greeting)
            while read -r line; do
              case "$line" in
                GETPIN*) \(getpin) ;;
                BYE*) echo OK; exit 0 ;;
                *) echo OK ;;
              esac
            done
            """
        try script.write(to: directory.appendingPathComponent("pinentry"), atomically: true, encoding: .utf8)
        #expect(chmod(program, 0o755) == 0)
    }

    func recorded(_ name: String) -> String? {
        (try? String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func remove() { try? FileManager.default.removeItem(at: directory) }

    static let dialog = PinentryDialog(title: "t", description: "d", prompt: "Code:", timeoutSeconds: 0)

    /// Runs one dialog on a display target.
    func run(on target: PromptTarget? = nil) throws(RainError)
        -> PinentryOutcome
    {
        let target = target ?? DisplayEnvironment(environment: ["DISPLAY": ":9"]).map { .display($0) }
        guard let target else { throw RainError.internalError }
        let prepared = try target.prepare(for: PromptFixture.caller())
        return try Pinentry(program: program).run(Self.dialog, on: prepared, control: try PinentryControl())
    }
}

@Suite("Pinentry client")
struct PinentryTests {
    @Test("a terminal pinentry gets --ttyname and TERM only; a display pinentry only the display's variables")
    func cleanEnvironment() throws {
        let fake = try FakePinentry(getpin: "echo 'D K7QX'; echo OK")
        defer { fake.remove() }
        let pty = try PseudoTerminal()
        #expect(try fake.run(on: .terminal(path: pty.path, term: "vt100")) == .entered(Array("K7QX".utf8)))
        #expect(fake.recorded("args") == "--ttyname \(pty.path)")
        #expect(fake.recorded("env")?.split(separator: "\n").filter { !$0.hasPrefix("PWD=") } == ["TERM=vt100"])

        let display = try #require(
            DisplayEnvironment(environment: [
                "WAYLAND_DISPLAY": "wayland-0", "XDG_RUNTIME_DIR": "/run/user/0", "HOME": "/root", "LD_PRELOAD": "/x.so",
            ]))
        #expect(try fake.run(on: .display(display)) == .entered(Array("K7QX".utf8)))
        #expect(fake.recorded("args") == "")
        let variables = fake.recorded("env")?.split(separator: "\n").filter { !$0.hasPrefix("PWD=") }.sorted()
        #expect(variables == ["WAYLAND_DISPLAY=wayland-0", "XDG_RUNTIME_DIR=/run/user/0"])
    }

    @Test("the pinentry runs in a session of its own and inherits no descriptor of the daemon")
    func isolation() throws {
        // A descriptor without close-on-exec: it must still not reach the pinentry.
        let leaky = Glibc.open("/dev/null", O_RDONLY)
        #expect(leaky > 2)
        defer { Glibc.close(leaky) }
        let fake = try FakePinentry(getpin: "echo 'D X'; echo OK", leakCheck: leaky)
        defer { fake.remove() }
        _ = try fake.run()
        #expect(fake.recorded("leak") == nil)
        let pid = try #require(fake.recorded("pid"))
        #expect(fake.recorded("sid") == pid)
        #expect(getsid(0) != Int32(pid))
    }

    @Test("ERR answers and end of file map to results; anything else is RAIN_501 prompt_failed")
    func outcomes() throws {
        let cases: [(String, PinentryOutcome?)] = [
            ("echo 'ERR 83886179 Operation cancelled <Pinentry>'", .cancelled),
            ("echo 'ERR 83886142 Timeout <Pinentry>'", .timedOut),
            ("echo 'S ERROR x'; echo '# note'; echo 'D AB%0A'; echo 'D CD'; echo OK", .entered(Array("AB\nCD".utf8))),
            ("exit 0", .cancelled),  // its terminal or window went away during GETPIN
            ("echo 'ERR 83918950 Inappropriate ioctl for device'", nil),
            ("printf 'D %01200d\\n' 0; echo OK", nil),  // a line longer than Assuan allows
            ("i=0; while [ $i -lt 20 ]; do echo 'D 0123456789012345678901234567890123456789'; i=$((i+1)); done; echo OK", nil),
            ("while true; do echo 'S PROGRESS'; done", nil),
            ("echo 'HELLO'", nil),
        ]
        for (getpin, expected) in cases {
            let fake = try FakePinentry(getpin: getpin)
            defer { fake.remove() }
            do {
                let outcome = try fake.run()
                #expect(outcome == expected, "\(getpin)")
            } catch {
                #expect(expected == nil, "\(getpin): \(error)")
                #expect(error.code == .provider)
                #expect(error.details.reason == PromptReason.failed)
            }
            if let pid = fake.recorded("pid").flatMap(Int32.init) { #expect(PromptFixture.isGone(pid), "\(getpin)") }
        }
    }

    @Test("a program that cannot start or exits before its greeting is RAIN_501 prompt_failed")
    func brokenPrograms() throws {
        let missing = FakePinentry.dialog
        let display = try #require(DisplayEnvironment(environment: ["DISPLAY": ":9"]))
        do throws(RainError) {
            let prepared = try PromptTarget.display(display).prepare(for: PromptFixture.caller())
            _ = try Pinentry(program: "/nonexistent/pinentry").run(missing, on: prepared, control: try PinentryControl())
            Issue.record("a missing program ran")
        } catch {
            #expect(error.code == .provider)
            #expect(error.details.reason == PromptReason.failed)
        }
        let silent = try FakePinentry(getpin: "", greeting: "exit 0")
        defer { silent.remove() }
        #expect(throws: RainError.provider) { try silent.run() }
    }

    @Test("a pinentry that stays after BYE is killed and reaped")
    func lingeringProgramKilled() throws {
        let fake = try FakePinentry(getpin: "echo 'D X'; echo OK; exec /bin/sleep 30")
        defer { fake.remove() }
        #expect(try fake.run() == .entered(Array("X".utf8)))
        let pid = try #require(fake.recorded("pid").flatMap(Int32.init))
        #expect(PromptFixture.isGone(pid))
    }

    @Test("pinentry-tty's own timeout (SETTIMEOUT) ends in timedOut")
    func pinentryOwnTimeout() throws {
        let pty = try PseudoTerminal()
        let prepared = try PromptTarget.terminal(path: pty.path, term: "vt100").prepare(for: PromptFixture.caller())
        var dialog = FakePinentry.dialog
        dialog.timeoutSeconds = 1
        let started = ContinuousClock.now
        let outcome = try Pinentry(program: PromptFixture.pinentryTTY).run(dialog, on: prepared, control: try PinentryControl())
        #expect(outcome == .timedOut)
        #expect(ContinuousClock.now - started < .seconds(2))
    }
}
