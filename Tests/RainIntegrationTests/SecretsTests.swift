import Foundation
import RainTestSupport
import RainWallet
import Testing

@Suite("Secrets stay out of logs, errors and files")
struct SecretsTests {
    /// True when `code` appears in `text` as a number of its own (not inside a longer run of
    /// digits or hex, where six digits can occur by chance).
    static func containsCode(_ text: String, _ code: String) -> Bool {
        var search = text[...]
        while let range = search.range(of: code) {
            let before = range.lowerBound == text.startIndex ? nil : text[text.index(before: range.lowerBound)]
            let after = range.upperBound == text.endIndex ? nil : text[range.upperBound]
            func isHex(_ c: Character?) -> Bool { c.map { $0.isHexDigit } ?? false }
            if !isHex(before) && !isHex(after) { return true }
            search = text[range.upperBound...]
        }
        return false
    }

    @Test("after a full login with a wrong attempt and a lockout, the daemon log holds no code and no token")
    func logHoldsNoSecrets() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let p = h.provider()
        var codes: [String] = []
        var messages: [String] = []

        // A challenge locked by three wrong attempts.
        try await p.sendLoginCode(to: .email("secret@example.com"))
        let locked = try await h.waitForCode(for: "secret@example.com", count: 1)
        codes.append(locked)
        for _ in 0..<3 {
            let wrong = wrongCode(for: locked)
            codes.append(wrong)
            if let e = await rainError({ try await p.confirmLoginCode(wrong) }) { messages.append(e.message) }
        }
        if let e = await rainError({ try await p.confirmLoginCode(locked) }) { messages.append(e.message) }

        // Then a successful login, and a replay of its code.
        let login = try await h.logIn(p, .email("secret@example.com"))
        codes.append(login.code)
        if let e = await rainError({ try await p.confirmLoginCode(login.code) }) { messages.append(e.message) }
        try await p.logout()

        // The CLI's error output for a wrong code.
        _ = try await h.runCLI(["code", "send", "--phone", "+15559876543"])
        let phoneCode = try await h.waitForCode(for: "+15559876543")
        codes.append(phoneCode)
        let cli = try await h.runCLI(["code", "confirm", wrongCode(for: phoneCode)])
        #expect(cli.status == 6, "\(cli)")
        messages.append(cli.stderr)

        try await h.stop()
        let log = h.log
        #expect(!log.isEmpty)
        for code in codes {
            #expect(!Self.containsCode(log, code), "the daemon log holds a login code")
            for m in messages { #expect(!Self.containsCode(m, code), "an error message holds a login code: \(m)") }
        }
        #expect(!log.contains("rwa_"), "the daemon log holds an access token")
        #expect(!log.contains("rwr_"), "the daemon log holds a refresh token")
        #expect(messages.count == 6)
    }

    @Test("the stored session file holds no token in the clear")
    func sessionFileEncrypted() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let login = try await h.logIn(h.provider(), .email("file@example.com"))
        let dir = "\(h.stateDirectory)/sessions"
        let files = try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasSuffix(".session") }
        #expect(!files.isEmpty)
        for name in files {
            let bytes = try #require(FileManager.default.contents(atPath: "\(dir)/\(name)"))
            let text = String(decoding: bytes, as: UTF8.self)
            #expect(!text.contains("rwa_") && !text.contains("rwr_"), "\(name) holds a token in the clear")
            #expect(!text.contains("file@example.com"), "\(name) holds the contact in the clear")
            if let account = login.session.accountID {
                #expect(!text.contains(account), "\(name) holds the account id in the clear")
            }
        }
    }
}
