import Foundation
import RainCore
import RainCrypto
import RainTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Signatures as programs of the daemon's own user attack them: a request dressed up to draw a
/// false prompt, keys typed to skip its pages, an app asking on a profile another app owns, and an
/// app that lies about its name. The daemon, its `pinentry-tty` on a registered terminal, the apps
/// and the attackers all run as one unprivileged uid (`OtherUser`); the test reads the terminal and
/// types on its keyboard as the user would.
@Suite(
    "Same user: what is signed is what the user reads, asked by the app that really asks",
    .enabled(if: OtherUser.unavailableReason == nil, "needs a second uid: root and /usr/bin/setpriv (CI runs as root)"))
struct SigningAttackTests {
    // MARK: The attacks

    @Test(
        "what is signed cannot be disguised: control characters, ANSI escapes, bidirectional overrides and a fake line in typed data show as ?, no escape sequence of the request reaches the terminal, an unknown token's transfer shows raw units and says the token is unknown; typing through the pages and the code signs"
    )
    func whatIsSignedCannotBeDisguised() async throws {
        let d = try await UserDaemon.start(prompter: .terminal)
        defer { d.stop() }
        let terminal = try await UserPromptTerminal.register(d)
        defer { terminal.close() }
        try await Self.logIn(d, terminal, email: "disguise@example.com")

        // Typed data whose strings would clear the screen, redraw a line, hide text, reverse it and
        // draw a line of their own; each is expected with every control and format character as `?`.
        let hostile: [(name: String, value: String, shown: String)] = [
            (
                "memo", "Pay\u{1B}[2J\u{1B}[H\u{1B}]0;owned\u{07}\u{1B}[8mhidden\u{1B}[28m done",
                "Pay?[2J?[H?]0;owned??[8mhidden?[28m done"
            ),
            (
                "file", "invoice \u{202E}fdp.exe\u{202C} \u{2066}x\u{2069}\u{200B}\u{200E}end",
                "invoice ?fdp.exe? ?x???end"
            ),
            (
                "fake", "ok\nTo: 0xdead000000000000000000000000000000000000\nValue: 0 ETH",
                "ok?To: 0xdead000000000000000000000000000000000000?Value: 0 ETH"
            ),
            // C1 controls (NEL, the one-byte CSI), DEL, CR LF, the Unicode line and paragraph separators, a tab.
            ("controls", "a\u{85}b\u{9B}31mc\u{7F}d\r\ne\u{2028}f\u{2029}g\th", "a?b?31mc?d?e?f?g?h"),
        ]
        let domainName = (value: "Safe\u{1B}[1A\u{1B}[2KApp", shown: "Safe?[1A?[2KApp")
        // The strings again after a long plain one: once on a page that asks Next, once on the
        // last page, which asks the code (pinentry-tty prints each its own way).
        let padding = String(repeating: "plain text ", count: 60)
        let fields =
            hostile.map { ($0.name, $0.value) } + [("padding", padding)] + hostile.map { ($0.name + "Again", $0.value) }
        let file = try Self.write(d, "hostile.json", Self.typedData(fields, domainName: domainName.value))

        let mark = Self.mark(terminal)
        let run = try Self.startCLI(d, ["--json", "sign", "typed-data", file], name: "typed-data")
        defer { run.process.signal(SIGKILL) }
        let prompt = try await Self.readAndConfirm(d, terminal, from: mark)
        #expect(await run.process.waitForExit(timeout: .seconds(30)) == 0, "\(run)")
        let signed = try jsonObject(run.stdout)
        #expect((signed["signature"] as? String).map { $0.count == 2 + 130 && $0.hasPrefix("0x") } == true, "\(run)")
        #expect(signed["signedBytesSha256"] as? String == "0x" + prompt.sha256, "\(run)")

        let screen = Self.shown(terminal, after: mark)
        try #require(prompt.pages.count >= 2, "\(screen)")
        let (before, last) = (prompt.pages.dropLast().joined(), prompt.pages[prompt.pages.count - 1])
        for field in hostile {
            #expect(before.contains("note.\(field.name): \(field.shown)\r\n"), "note.\(field.name) not as expected:\n\(screen)")
            #expect(screen.contains("note.\(field.name)Again: \(field.shown)\r\n"), "note.\(field.name)Again:\n\(screen)")
        }
        #expect(hostile.contains { last.contains("note.\($0.name)Again: \($0.shown)\r\n") }, "the last page:\n\(last)")
        #expect(screen.contains("Domain name: \(domainName.shown)\r\n"), "\(screen)")
        Self.expectNothingOfTheRequestDraws(screen)
        let lines = Self.lines(screen)
        #expect(!lines.contains { $0.hasPrefix("To: 0xdead") || $0.hasPrefix("Value: 0 ETH") }, "a fake line:\n\(screen)")

        // An ERC-20 transfer of a token the wallet does not know (Base's USDC transfer sent to
        // another contract): its amount in raw units, and the token said to be unknown.
        let token = "1234512345123451234512345123451234512345"
        let unsigned = unsignedBaseUSDCTransfer.replacingOccurrences(of: "833589fcd6edb6e08f4c7c32d4f71b54bda02913", with: token)
        try #require(unsigned != unsignedBaseUSDCTransfer)
        let bytes = try #require(Hex.decode(unsigned))
        let transaction = try Self.write(d, "unknown-token.hex", "0x" + unsigned)
        let txMark = Self.mark(terminal)
        let txRun = try Self.startCLI(d, ["--json", "sign", "tx", "--chain-id", "8453", transaction], name: "unknown-token")
        defer { txRun.process.signal(SIGKILL) }
        let txPrompt = try await Self.readAndConfirm(d, terminal, from: txMark)
        #expect(await txRun.process.waitForExit(timeout: .seconds(30)) == 0, "\(txRun)")
        let txSigned = try jsonObject(txRun.stdout)
        #expect(txPrompt.sha256 == Hex.encode(SHA256.hash(bytes)), "\(txPrompt.text)")
        #expect(txSigned["signedBytesSha256"] as? String == "0x" + txPrompt.sha256, "\(txRun)")
        #expect((txSigned["signedTransaction"] as? String)?.hasPrefix("0x02") == true, "\(txRun)")
        for shown in [
            "Call: ERC-20 transfer",
            "Token: unknown token at 0x\(token): not in the wallet's list, its amount is in raw units",
            "Token amount: 5000000 raw units (unknown token, decimals not known)",
        ] {
            #expect(txPrompt.text.contains(shown + "\r\n"), "the prompt does not show \(shown):\n\(txPrompt.text)")
        }
        #expect(!txPrompt.text.contains("USDC"), "\(txPrompt.text)")
    }

    @Test(
        "a page cannot be skipped: keys typed before a page opens are discarded, no page before the last shows the code or the hash, and Refuse on page 2 ends it: RAIN_401 (exit 9), audited as refused with the SHA-256 of what would have been signed"
    )
    func aPageCannotBeSkipped() async throws {
        let d = try await UserDaemon.start(prompter: .terminal)
        defer { d.stop() }
        let terminal = try await UserPromptTerminal.register(d)
        defer { terminal.close() }
        try await Self.logIn(d, terminal, email: "pages@example.com")
        let message = (1...64).map { String(format: "part %02d of a long message, read to its end; ", $0) }.joined()
        let file = try Self.write(d, "long.txt", message)
        let signedBytes = Array("\u{19}Ethereum Signed Message:\n\(message.utf8.count)".utf8) + Array(message.utf8)
        let sha256 = Hex.encode(SHA256.hash(signedBytes))

        // Keys typed before the prompt opens wait in the terminal's input, Next eight times over.
        let mark = Self.mark(terminal)
        try terminal.pty.type(String(repeating: "n", count: 8))
        let run = try Self.startCLI(d, ["--json", "sign", "message", file], name: "pages")
        defer { run.process.signal(SIGKILL) }
        let first = try #require(
            await Self.waitFor("]? ", on: terminal, after: mark), "no page: \(Self.shown(terminal, after: mark))")
        let count = try #require(first.firstMatch(of: /Page 1 of (\d)/).flatMap { Int($0.output.1) }, "\(first)")
        try #require(count >= 3, "a request of \(count) pages: \(first)")
        // A key page 1 reads now is not Next: it asks again. Had one of the keys typed before
        // reached it, page 2 would have opened before this one was read.
        try await Self.expectOnlyThisPageReads(terminal, page: 1, since: mark)

        // Next, and eight more keys at once: those reach no page that opens after them.
        let next = Self.mark(terminal)
        try terminal.pty.type(String(repeating: "n", count: 9))
        let second = try #require(await Self.waitFor("]? ", on: terminal, after: next), "\(Self.shown(terminal, after: next))")
        #expect(second.contains("Page 2 of \(count)"), "\(second)")
        try await Self.expectOnlyThisPageReads(terminal, page: 2, since: mark)

        // Refuse on page 2.
        try terminal.pty.type("r")
        let status = await run.process.waitForExit(timeout: .seconds(30))
        let screen = Self.shown(terminal, after: mark)
        for never in ["type the code", "SHA-256 of what is signed", sha256, "Page 3 of"] {
            #expect(!screen.contains(never), "\(never) was shown:\n\(screen)")
        }
        #expect(status == 9 && Self.error(of: run)["code"] as? String == "RAIN_401", "\(run)")
        #expect(run.stdout.isEmpty, "\(run)")
        #expect(await eventually(timeout: .seconds(20)) { d.children(named: "pinentry-tty").isEmpty })

        let audit = try await Self.audit(d)
        let answers = audit.filter {
            $0["event"] as? String == "prompt_result" && $0["detail"] as? String == "message ethereum sha256:\(sha256)"
        }
        #expect(answers.count == 1 && answers.first?["result"] as? String == "refused", "\(audit)")
        #expect(!audit.contains { $0["event"] as? String == "signature" }, "\(audit)")
    }

    @Test(
        "an app cannot sign on a profile another app owns: RAIN_202 app_not_approved, no prompt, nothing signed, the refusal audited with the asking app's real path and pid; the profile's own app signs the same request"
    )
    func anAppCannotSignForAnotherProfile() async throws {
        let d = try await UserDaemon.start(prompter: .terminal)
        defer { d.stop() }
        let terminal = try await UserPromptTerminal.register(d)
        defer { terminal.close() }
        // The same program at another path is another app: it owns profile beta, logged in.
        let directory = "\(d.bin.directory)/other-app"
        #expect(mkdir(directory, 0o755) == 0, "errno \(errno)")
        let other = "\(directory)/rainwallet"
        #expect(link(d.approvedApp, other) == 0, "errno \(errno)")
        try await Self.logIn(d, terminal, email: "beta@example.com", profile: "beta", program: other)
        // The CLI at its own path owns profile alpha.
        let mark = Self.mark(terminal)
        let claim = try Self.startCLI(d, ["--profile", "alpha", "code", "send", "--email", "alpha@example.com"], name: "alpha")
        defer { claim.process.signal(SIGKILL) }
        _ = try await Self.readAndConfirm(d, terminal, from: mark)
        #expect(await claim.process.waitForExit(timeout: .seconds(30)) == 0, "\(claim)")

        // The app of alpha asks to sign on beta.
        let file = try Self.write(d, "request.txt", "Sign in to example.com as beta")
        let askedAt = Self.mark(terminal)
        let run = try Self.startCLI(d, ["--json", "--profile", "beta", "sign", "message", file], name: "cross")
        defer { run.process.signal(SIGKILL) }
        _ = await eventually(timeout: .seconds(30)) {
            !run.process.isRunning || Self.shown(terminal, after: askedAt).contains("RainWallet asks you to confirm")
        }
        let prompted = Self.shown(terminal, after: askedAt)
        #expect(!prompted.contains("RainWallet asks you to confirm"), "a prompt was shown:\n\(prompted)")
        if run.process.isRunning { try terminal.pty.type([4]) }
        #expect(await run.process.waitForExit(timeout: .seconds(30)) == 5, "\(run)")
        let error = Self.error(of: run)
        #expect(error["code"] as? String == "RAIN_202" && error["reason"] as? String == "app_not_approved", "\(run)")
        #expect(run.stdout.isEmpty, "\(run)")
        #expect(d.children(named: "pinentry-tty").isEmpty)

        var audit = try await Self.audit(d)
        let refusals = audit.filter { $0["event"] as? String == "app_refused" && $0["profile"] as? String == "beta" }
        #expect(refusals.count == 1, "\(audit)")
        let refusal = try #require(refusals.first, "\(audit)")
        #expect(refusal["result"] as? String == "refused" && refusal["reason"] as? String == "app_not_approved", "\(refusal)")
        let app = try #require(refusal["app"] as? [String: Any], "\(refusal)")
        #expect(app["path"] as? String == d.approvedApp && app["pid"] as? Int == Int(run.pid), "\(refusal)")
        // Nothing was asked or signed on beta.
        #expect(
            !audit.contains {
                $0["event"] as? String == "signature"
                    || ($0["event"] as? String == "prompt_result" && $0["profile"] as? String == "beta")
            }, "\(audit)")

        // The same request from beta's own app is shown, naming it, and signed.
        let ownAt = Self.mark(terminal)
        let own = try Self.startCLI(d, ["--json", "--profile", "beta", "sign", "message", file], name: "own", program: other)
        defer { own.process.signal(SIGKILL) }
        let prompt = try await Self.readAndConfirm(d, terminal, from: ownAt)
        #expect(prompt.text.contains("App: \(other)\r\n") && prompt.text.contains("Profile: beta\r\n"), "\(prompt.text)")
        #expect(await own.process.waitForExit(timeout: .seconds(30)) == 0, "\(own)")
        audit = try await Self.audit(d)
        let signatures = audit.filter { $0["event"] as? String == "signature" }
        #expect(signatures.count == 1, "\(audit)")
        #expect((signatures.first?["app"] as? [String: Any])?["path"] as? String == other, "\(audit)")
        #expect(signatures.first?["profile"] as? String == "beta", "\(audit)")
    }

    @Test(
        "the audit names the real caller: an app started through a symbolic link with a spoofed argv[0] is shown on the prompt and audited by its executable's real path and its pid"
    )
    func theAuditNamesTheRealCaller() async throws {
        let d = try await UserDaemon.start(prompter: .terminal)
        defer { d.stop() }
        let terminal = try await UserPromptTerminal.register(d)
        defer { terminal.close() }
        try await Self.logIn(d, terminal, email: "caller@example.com")

        // The approved CLI, reached through a link, its argv[0] naming another program.
        let links = "\(d.home)/links"
        try OtherUser.makeDirectory(links, mode: 0o755)
        let link = "\(links)/wallet"
        #expect(symlink(d.approvedApp, link) == 0, "errno \(errno)")
        let spoofed = "/usr/bin/trusted-wallet"
        let script = "\(d.bin.directory)/spoofed-start"
        #expect(
            FileManager.default.createFile(
                atPath: script, contents: Data(#"exec -a "$1" "$2" --socket "$3" --json sign message "$4""#.utf8),
                attributes: [.posixPermissions: 0o644]))
        let file = try Self.write(d, "caller.txt", "Sign in to example.com")
        let mark = Self.mark(terminal)
        // Read by bash, not executed (ETXTBSY); its `exec` keeps the pid.
        let run = try Self.start(d, "/bin/bash", [script, spoofed, link, d.socket, file], name: "spoofed")
        defer { run.process.signal(SIGKILL) }
        let asked = try #require(await Self.waitFor("and press Enter", on: terminal, after: mark), "\(run)")
        // The spoof took: the process the daemon must name claims to be another program.
        let arguments = DaemonHarness.readFile("/proc/\(run.pid)/cmdline").split(separator: "\u{0}")
        #expect(arguments.first.map(String.init) == spoofed, "\(arguments)")
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(run.pid)/exe")) == d.approvedApp)
        #expect(asked.contains("App: \(d.approvedApp)\r\n") && asked.contains("pid \(run.pid)\r\n"), "\(asked)")
        #expect(!asked.contains(spoofed) && !asked.contains(link), "\(asked)")
        let prompt = try await Self.readAndConfirm(d, terminal, from: mark)
        #expect(await run.process.waitForExit(timeout: .seconds(30)) == 0, "\(run)")

        let detail = "message ethereum sha256:\(prompt.sha256)"
        let audit = try await Self.audit(d)
        let entries = audit.filter { $0["detail"] as? String == detail }
        #expect(
            entries.compactMap { $0["event"] as? String }.sorted() == ["prompt_result", "signature"]
                && entries.allSatisfy { $0["result"] as? String == "ok" }, "\(audit)")
        let binary = try #require(FileManager.default.contents(atPath: d.approvedApp))
        let hash = String(Hex.encode(SHA256.hash(Array(binary))).prefix(12))
        for entry in entries {
            let app = try #require(entry["app"] as? [String: Any], "\(entry)")
            #expect(app["path"] as? String == d.approvedApp, "\(entry)")
            #expect(app["pid"] as? Int == Int(run.pid), "\(entry)")
            #expect(app["hash"] as? String == hash, "\(entry)")
        }
        let everything = try await d.cli(["--json", "audit"])
        #expect(!everything.stdout.contains(spoofed) && !everything.stdout.contains(link), "\(everything)")
    }

    // MARK: Apps of the user

    /// One run of a program of the daemon's uid, its output in files of its own.
    struct AppRun: CustomStringConvertible {
        let process: TestProcess
        let stdoutPath: String
        let stderrPath: String
        var pid: Int32 { process.pid }
        var stdout: String { DaemonHarness.readFile(stdoutPath) }
        var stderr: String { DaemonHarness.readFile(stderrPath) }
        var description: String {
            "pid \(pid), exit \(process.exitStatus.map { "\($0)" } ?? "none")\nstdout: \(stdout)\nstderr: \(stderr)"
        }
    }

    /// Starts `executable ARGUMENTS…` as the daemon's uid without waiting for it.
    static func start(_ d: UserDaemon, _ executable: String, _ arguments: [String], name: String) throws -> AppRun {
        let n = "\(name)-\(UUID().uuidString.prefix(8))"
        let (out, err) = ("\(d.bin.directory)/\(n).out", "\(d.bin.directory)/\(n).err")
        let process = try d.bin.launch(
            as: OtherUser.uid, executable: executable, arguments, home: d.bin.directory, log: err, stdout: out)
        return AppRun(process: process, stdoutPath: out, stderrPath: err)
    }

    /// Starts the CLI (the approved copy, or `program`) on the daemon's socket.
    static func startCLI(_ d: UserDaemon, _ arguments: [String], name: String, program: String? = nil) throws -> AppRun {
        try start(d, program ?? d.approvedApp, ["--socket", d.socket] + arguments, name: name)
    }

    /// The `error` object of a run's JSON error line (empty when it printed none).
    static func error(of run: AppRun) -> [String: Any] {
        let last = run.stderr.split(separator: "\n").last.map(String.init) ?? ""
        let line = try? JSONSerialization.jsonObject(with: Data(last.utf8)) as? [String: Any]
        return line?["error"] as? [String: Any] ?? [:]
    }

    /// Writes `text` to a file the daemon's uid can read; returns its path.
    static func write(_ d: UserDaemon, _ name: String, _ text: String) throws -> String {
        let path = "\(d.home)/\(name)"
        #expect(FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o644]))
        return path
    }

    /// The user approves `program` (the CLI by default) for `profile` on the terminal, then logs it
    /// in with the code from the development outbox.
    static func logIn(
        _ d: UserDaemon, _ terminal: UserPromptTerminal, email: String, profile: String? = nil, program: String? = nil
    ) async throws {
        let profileArguments = profile.map { ["--profile", $0] } ?? []
        let mark = Self.mark(terminal)
        let send = try startCLI(d, profileArguments + ["code", "send", "--email", email], name: "send", program: program)
        defer { send.process.signal(SIGKILL) }
        // Its first use of the profile: the user approves the app.
        _ = try await readAndConfirm(d, terminal, from: mark)
        try #require(await send.process.waitForExit(timeout: .seconds(30)) == 0, "\(send)")
        let code = try await d.code(for: email)
        let confirmed = try await d.cli(profileArguments + ["code", "confirm", code], program: program)
        try #require(confirmed.status == 0, "\(confirmed)")
    }

    /// The audit log's entries, read through the daemon (which writes the refusals it is still
    /// gathering first).
    static func audit(_ d: UserDaemon) async throws -> [[String: Any]] {
        let read = try await d.cli(["--json", "audit"])
        try #require(read.status == 0, "\(read)")
        return try read.stdout.split(separator: "\n").map { try jsonObject(String($0)) }
    }

    // MARK: The terminal

    /// What the user read on one prompt.
    struct ReadPrompt {
        /// Each page as the terminal showed it, the last with the code.
        var pages: [String]
        var code: String
        /// The SHA-256 the last page showed, in hex (empty for a prompt that shows none).
        var sha256: String
        var text: String { pages.joined() }
    }

    /// How far the terminal has shown: a mark to read what it shows next.
    static func mark(_ terminal: UserPromptTerminal) -> Int { terminal.pty.shown.utf8.count }

    /// What the terminal showed after `mark`.
    static func shown(_ terminal: UserPromptTerminal, after mark: Int) -> String {
        String(decoding: terminal.pty.shown.utf8.dropFirst(mark), as: UTF8.self)
    }

    /// Waits until the terminal shows `text` after `mark`.
    /// - Returns: what it showed after `mark`, or nil at the deadline.
    static func waitFor(_ text: String, on terminal: UserPromptTerminal, after mark: Int) async -> String? {
        var tail = ""
        let found = await eventually(timeout: .seconds(20)) {
            tail = shown(terminal, after: mark)
            return tail.contains(text)
        }
        return found ? tail : nil
    }

    /// Reads the prompt shown after `mark` as the user does: Next (`n`) on each page but the last,
    /// which none may skip to, then the last page's code.
    static func readAndConfirm(
        _ d: UserDaemon, _ terminal: UserPromptTerminal, from mark: Int, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> ReadPrompt {
        var pages: [String] = []
        var at = mark
        while true {
            var page = ""
            let isShown = await eventually(timeout: .seconds(20)) {
                page = Self.shown(terminal, after: at)
                // "]? " ends a page that asks Next or Refuse; the last page ends asking the code.
                return page.contains("]? ") || page.contains("\r\nCode: ")
            }
            try #require(isShown, "page \(pages.count + 1) not shown: \(page)\n\(d.log)", sourceLocation: sourceLocation)
            pages.append(page)
            if !page.contains("]? ") { break }
            #expect(
                !page.contains("type the code") && !page.contains("SHA-256 of what is signed"),
                "page \(pages.count) shows the code or the hash:\n\(page)", sourceLocation: sourceLocation)
            try #require(pages.count < 8, "more pages than a prompt shows", sourceLocation: sourceLocation)
            at = Self.mark(terminal)
            try terminal.pty.type("n")
        }
        let last = pages[pages.count - 1]
        let code = try #require(last.firstMatch(of: /type the code  (\S+)  and press/)?.output.1, sourceLocation: sourceLocation)
        let sha256 = last.firstMatch(of: /SHA-256 of what is signed: ([0-9a-f]{64})/).map { String($0.output.1) } ?? ""
        try await typeWhenRead(String(code) + "\n", d, terminal, sourceLocation: sourceLocation)
        return ReadPrompt(pages: pages, code: String(code), sha256: sha256)
    }

    /// On a page that asks Next or Refuse, types a key that is neither: the page itself must read
    /// it (it says so and asks again), with no later page opened before it.
    static func expectOnlyThisPageReads(
        _ terminal: UserPromptTerminal, page: Int, since mark: Int, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let at = Self.mark(terminal)
        try terminal.pty.type("x")
        let answered = try #require(
            await waitFor("Invalid selection.", on: terminal, after: at), "\(shown(terminal, after: at))",
            sourceLocation: sourceLocation)
        _ = try #require(await waitFor("]? ", on: terminal, after: at), sourceLocation: sourceLocation)
        let screen = shown(terminal, after: mark)
        #expect(
            !screen.contains("Page \(page + 1) of"), "a key typed before page \(page + 1) opened it:\n\(screen)",
            sourceLocation: sourceLocation)
        #expect(!answered.contains("Page "), "\(answered)", sourceLocation: sourceLocation)
    }

    /// `read` on x86_64 and on arm64 (as `/proc/PID/syscall` numbers it).
    static var readSyscall: Int {
        #if arch(arm64)
            63
        #else
            0
        #endif
    }

    /// Types `text` once the daemon's pinentry waits in `read` on the terminal. pinentry-tty prints
    /// the code's question before it switches the terminal to single keys, a switch that throws away
    /// what was typed (`TCSAFLUSH`): a code typed as the question shows could be thrown away with it.
    static func typeWhenRead(
        _ text: String, _ d: UserDaemon, _ terminal: UserPromptTerminal, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let reading = await eventually(timeout: .seconds(20)) {
            d.children(named: "pinentry-tty").contains { pid in
                let call = DaemonHarness.readFile("/proc/\(pid)/syscall").split(separator: " ")
                guard call.count > 1, Int(call[0]) == readSyscall, let fd = Int(call[1].dropFirst(2), radix: 16) else {
                    return false
                }
                return (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)")) == terminal.path
            }
        }
        try #require(reading, "the pinentry never read \(terminal.path)", sourceLocation: sourceLocation)
        try terminal.pty.type(text)
    }

    /// The terminal's lines (its output ends lines with CR LF).
    static func lines(_ screen: String) -> [Substring] {
        screen.replacingOccurrences(of: "\r\n", with: "\n").split(separator: "\n", omittingEmptySubsequences: false)
    }

    /// pinentry-tty's own escape sequences: underline the key of a button, bold red for an error,
    /// and back to normal. Any other reached the terminal from a request.
    static let pinentryEscapes = ["\u{1B}[4m", "\u{1B}[0m", "\u{1B}[1;31m"]

    /// Nothing on `screen` came from a request that could move the cursor, hide, reverse or
    /// redraw: its only controls are line ends (CR LF) and pinentry-tty's own escape sequences.
    static func expectNothingOfTheRequestDraws(_ screen: String, sourceLocation: SourceLocation = #_sourceLocation) {
        var rest = Substring(screen)
        var foreign: [String] = []
        while let escape = rest.firstIndex(of: "\u{1B}") {
            let after = rest[escape...]
            if let own = pinentryEscapes.first(where: { after.hasPrefix($0) }) {
                rest = after.dropFirst(own.count)
            } else {
                foreign.append(String(after.prefix(8).debugDescription))
                rest = after.dropFirst()
            }
        }
        #expect(foreign.isEmpty, "escape sequences not pinentry-tty's: \(foreign)", sourceLocation: sourceLocation)
        let controls = screen.unicodeScalars.filter { scalar in
            switch scalar.properties.generalCategory {
            case .control, .format, .lineSeparator, .paragraphSeparator: !["\n", "\r", "\u{1B}"].contains(scalar)
            default: false
            }
        }
        #expect(
            controls.isEmpty, "controls on the terminal: \(controls.map { String(format: "U+%04X", $0.value) })",
            sourceLocation: sourceLocation)
        #expect(
            !screen.replacingOccurrences(of: "\r\n", with: "").contains("\r"), "a bare CR: \(screen.debugDescription)",
            sourceLocation: sourceLocation)
    }

    // MARK: Requests

    /// EIP-712 typed data on Base whose message is `strings` (all of type string), under a domain
    /// named `domainName`.
    static func typedData(_ strings: [(name: String, value: String)], domainName: String) -> String {
        let fields = strings.map { #"{"name":"\#($0.name)","type":"string"}"# }.joined(separator: ",")
        let values = strings.map { #""\#($0.name)":\#(json($0.value))"# }.joined(separator: ",")
        return """
            {"types":{"EIP712Domain":[{"name":"name","type":"string"},{"name":"version","type":"string"},\
            {"name":"chainId","type":"uint256"},{"name":"verifyingContract","type":"address"}],\
            "Note":[\(fields)]},"primaryType":"Note",\
            "domain":{"name":\(json(domainName)),"version":"1","chainId":8453,\
            "verifyingContract":"0x1234512345123451234512345123451234512345"},"message":{\(values)}}
            """
    }

    /// `text` as a JSON string, every character outside printable ASCII as a `\u` escape.
    static func json(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case " "..."~": out.unicodeScalars.append(scalar)
            default: out += String(format: "\\u%04x", scalar.value)
            }
        }
        return out + "\""
    }
}
