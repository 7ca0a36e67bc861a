import Foundation
import RainTestSupport
import RainWallet
import Testing

@Suite("rainwallet CLI: exit statuses and output")
struct CLITests {
    @Test("code send with an invalid phone exits 3 and prints error: RAIN_102: on stderr")
    func invalidPhone() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let r = try await h.runCLI(["code", "send", "--phone", "+44 (0)20 7946 0958"])
        #expect(r.status == 3, "\(r)")
        #expect(r.stderr.contains("error: RAIN_102:"), "\(r)")
        #expect(try await h.outbox().isEmpty)
    }

    @Test("an unknown command exits 64")
    func unknownCommand() async throws {
        let h = try DaemonHarness.prepare()
        defer { h.shutdown() }
        let r = try await h.runCLI(["frobnicate"])
        #expect(r.status == 64, "\(r)")
    }

    @Test("no daemon on the socket exits 2")
    func noDaemon() async throws {
        let h = try DaemonHarness.prepare()
        defer { h.shutdown() }
        let r = try await h.runCLI(["status"], socketPath: "\(h.directory)/nothing.sock")
        #expect(r.status == 2, "\(r)")
        #expect(r.stderr.contains("RAIN_101"), "\(r)")
    }

    @Test("a stopped daemon exits 2")
    func stoppedDaemon() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        try await h.stop()
        let r = try await h.runCLI(["status", "--json"])
        #expect(r.status == 2, "\(r)")
    }

    @Test("code confirm with nothing pending exits 3")
    func confirmWithNothingPending() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let r = try await h.runCLI(["code", "confirm", "000000"])
        #expect(r.status == 3, "\(r)")
    }

    @Test("code send, then a wrong code exits 6, then the right code exits 0")
    func codeSendAndConfirm() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let sent = try await h.runCLI(["code", "send", "--email", "cli@example.com"])
        #expect(sent.status == 0, "\(sent)")
        let code = try await h.waitForCode(for: "cli@example.com")

        let wrong = try await h.runCLI(["code", "confirm", wrongCode(for: code)])
        #expect(wrong.status == 6, "\(wrong)")

        let right = try await h.runCLI(["--json", "code", "confirm", code])
        #expect(right.status == 0, "\(right)")
        let json = try jsonObject(right.stdout)
        #expect(json["authState"] as? String == "authenticated")
        #expect(json["accountCreated"] as? Bool == true)
    }

    @Test("status --json when logged out: the documented keys, null session fields")
    func statusJSONLoggedOut() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let r = try await h.runCLI(["status", "--json"])
        #expect(r.status == 0, "\(r)")
        let json = try jsonObject(r.stdout)
        for key in ["authState", "sessionState", "expiresAt", "accountId"] {
            #expect(json.keys.contains(key), "missing \(key) in \(r.stdout)")
        }
        #expect(json["authState"] as? String == "unauthenticated")
        #expect(json["sessionState"] is NSNull)
        #expect(json["expiresAt"] is NSNull)
        #expect(json["accountId"] is NSNull)
    }

    @Test("status --json when logged in: active, RFC 3339 UTC expiry, the account id")
    func statusJSONLoggedIn() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let login = try await h.logIn(h.provider(), .email("json@example.com"))

        let r = try await h.runCLI(["status", "--json"])
        #expect(r.status == 0, "\(r)")
        let json = try jsonObject(r.stdout)
        #expect(json["authState"] as? String == "authenticated")
        #expect(json["sessionState"] as? String == "active")
        #expect(json["accountId"] as? String == login.session.accountID)
        let expiresAt = try #require(json["expiresAt"] as? String)
        #expect(expiresAt.hasSuffix("Z"))
        let date = try #require(parseRFC3339UTC(expiresAt), "not RFC 3339 UTC: \(expiresAt)")
        #expect(date > Date())
        if let libraryExpiry = login.session.expiresAt {
            #expect(abs(date.timeIntervalSince(libraryExpiry)) < 1.5)
        }
    }

    @Test("dev outbox --json: an array of objects with contact, code and sentAt")
    func devOutboxJSON() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let empty = try await h.runCLI(["dev", "outbox", "--json"])
        #expect(empty.status == 0, "\(empty)")
        #expect((try JSONSerialization.jsonObject(with: Data(empty.stdout.utf8)) as? [Any])?.isEmpty == true, "\(empty)")

        let p = h.provider()
        try await p.sendLoginCode(to: .email("outbox@example.com"))
        try await p.sendLoginCode(to: .phone("+15551112222"))
        let r = try await h.runCLI(["dev", "outbox", "--json"])
        #expect(r.status == 0, "\(r)")
        let array = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]], "\(r)")
        #expect(array.count == 2)
        #expect(array.map { $0["contact"] as? String } == ["outbox@example.com", "+15551112222"])
        let codes = try await h.outboxCodes()
        #expect(array.map { $0["code"] as? String } == codes.map(Optional.some))
        for entry in array {
            let sentAt = try #require(entry["sentAt"] as? String)
            #expect(parseRFC3339UTC(sentAt) != nil, "not RFC 3339 UTC: \(sentAt)")
        }
    }

    static let helpInvocations: [[String]] = [
        ["--help"], ["-h"], ["help"], ["code", "--help"], ["code", "send", "--help"], ["code", "confirm", "--help"],
        ["login", "--help"], ["status", "--help"], ["watch", "--help"], ["logout", "--help"], ["info", "--help"],
        ["dev", "--help"], ["dev", "outbox", "--help"],
    ]

    @Test("--help works on every command: exit 0, usage on stdout", arguments: helpInvocations)
    func help(_ arguments: [String]) async throws {
        let h = try DaemonHarness.prepare()
        defer { h.shutdown() }
        // No daemon runs: help must not need one.
        let r = try await h.runCLI(arguments)
        let firstError = r.stderr.split(separator: "\n").first.map(String.init) ?? ""
        #expect(r.status == 0, "rainwallet \(arguments.joined(separator: " ")): exit \(r.status), \(firstError)")
        #expect(r.stdout.contains("usage:"), "rainwallet \(arguments.joined(separator: " ")) printed no usage")
    }

    @Test("every command the main help lists answers --help with exit 0 and its usage")
    func helpForListedCommands() async throws {
        let h = try DaemonHarness.prepare()
        defer { h.shutdown() }
        let main = try await h.runCLI(["help"])
        #expect(main.status == 0, "\(main)")
        // The lines under "commands:" start with the command words, then options or a placeholder.
        let lines = main.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let start = try #require(lines.firstIndex { $0.trimmingCharacters(in: .whitespaces) == "commands:" }) + 1
        var commands: [[String]] = []
        for line in lines[start...] {
            if line.trimmingCharacters(in: .whitespaces).isEmpty { break }
            // The usage column ends at the first run of two spaces; the abstract follows.
            let usage = String(line.drop { $0 == " " }).components(separatedBy: "  ").first ?? ""
            let words = usage.split(separator: " ").map(String.init).prefix { $0.allSatisfy { $0.isLowercase } }
            if !words.isEmpty { commands.append(Array(words)) }
        }
        #expect(commands.count >= 8, "parsed \(commands) from \(main.stdout)")
        for command in commands {
            let r = try await h.runCLI(command + ["--help"])
            let firstError = r.stderr.split(separator: "\n").first.map(String.init) ?? ""
            #expect(r.status == 0, "rainwallet \(command.joined(separator: " ")) --help: exit \(r.status), \(firstError)")
            #expect(r.stdout.contains("usage:"), "rainwallet \(command.joined(separator: " ")) --help printed no usage")
        }
    }
}
