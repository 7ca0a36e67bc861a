import RainCore
import Testing

@testable import RainAccess

@Suite("Assuan and prompt text")
struct PinentryAssuanTests {
    @Test("parameters are percent-escaped: %, +, CR, LF and other controls; the rest goes as it is")
    func escaping() throws {
        #expect(Assuan.escape("a%b+c\nd\re\u{7f}é") == Array("a%25b%2Bc%0Ad%0De%7Fé".utf8))
        let line = try Assuan.command("SETDESC", "line 1\nline 2")
        #expect(line == Array("SETDESC line 1%0Aline 2\n".utf8))
        #expect(Assuan.unescape(Array("100%25 %0a%0D%zz%4".utf8)[...]) == Array("100% \n\r%zz%4".utf8))
    }

    @Test("a command line longer than 1000 bytes is refused, never sent cut")
    func commandLineBound() throws {
        _ = try Assuan.command("SETDESC", String(repeating: "a", count: 992))
        #expect(throws: RainError.internalError) { try Assuan.command("SETDESC", String(repeating: "a", count: 993)) }
        #expect(throws: RainError.internalError) { try Assuan.command("SETDESC", String(repeating: "%", count: 331)) }
    }

    @Test("responses: OK, ERR with its code, D unescaped, S, comments, INQUIRE; a long or unknown line fails")
    func parsing() throws {
        #expect(try Assuan.parse(Array("OK Pleased to meet you".utf8)) == .ok("Pleased to meet you"))
        #expect(try Assuan.parse(Array("OK\r".utf8)) == .ok(""))
        #expect(
            try Assuan.parse(Array("ERR 83886179 Operation cancelled <Pinentry>".utf8))
                == .error(code: 83_886_179, text: "Operation cancelled <Pinentry>"))
        #expect(try Assuan.parse(Array("D K7%25Q".utf8)) == .data(Array("K7%Q".utf8)))
        #expect(try Assuan.parse(Array("S ERROR tty.? 83886142 ".utf8)) == .status("ERROR tty.? 83886142 "))
        #expect(try Assuan.parse(Array("# comment".utf8)) == .comment)
        #expect(try Assuan.parse([]) == .comment)
        #expect(try Assuan.parse(Array("INQUIRE QUALITY x".utf8)) == .inquire("QUALITY x"))
        #expect(throws: RainError.provider) { try Assuan.parse(Array("HELLO".utf8)) }
        #expect(throws: RainError.provider) { try Assuan.parse(Array("ERR nocode".utf8)) }
        #expect(throws: RainError.provider) { try Assuan.parse(Array("D ".utf8) + [UInt8](repeating: 0x41, count: 999)) }
    }

    @Test("ERR codes map by their error number: cancelled, timed out, or a failure")
    func errorCodes() {
        #expect(PinentryOutcome.forError(83_886_179) == .cancelled)  // GPG_ERR_CANCELED from pinentry
        #expect(PinentryOutcome.forError(83_886_278) == .cancelled)  // GPG_ERR_FULLY_CANCELED
        #expect(PinentryOutcome.forError(83_886_194) == .cancelled)  // GPG_ERR_NOT_CONFIRMED
        #expect(PinentryOutcome.forError(83_886_142) == .timedOut)  // GPG_ERR_TIMEOUT
        #expect(PinentryOutcome.forError(83_918_950) == nil)  // ENOTTY: a failure, not an answer
    }

    @Test("caller-supplied text cannot draw lines or hide text, and is never cut")
    func displayableText() throws {
        #expect(PromptText.displayable("/usr/bin/ok") == "/usr/bin/ok")
        #expect(PromptText.displayable("/tmp/x\nApp: /usr/bin/firefox") == "/tmp/x?App: /usr/bin/firefox")
        #expect(PromptText.displayable("/tmp/\u{202E}txt.exe\u{200B}") == "/tmp/?txt.exe?")
        #expect(PromptText.displayable("/tmp/\u{1b}[2J") == "/tmp/?[2J")
        let long = String(repeating: "%", count: 500)
        #expect(PromptText.displayable(long) == long)
    }

    @Test(
        "the prompt shows the action, the app's path, hash prefixes (an interpreter's and its script's) and pid, the profile and the code"
    )
    func description() throws {
        let caller = CallerIdentity(
            pid: 4242, uid: 1000, executablePath: "/usr/bin/python3", executableSHA256: [UInt8](repeating: 0xab, count: 32),
            script: .init(path: "/home/u/tool.py", sha256: [UInt8](repeating: 0xcd, count: 32)))
        let text = try PromptRequest(action: "Export the recovery phrase", caller: caller, profile: "savings")
            .description(code: PromptCode(text: "K7QX"))
        #expect(text.contains("Export the recovery phrase"))
        #expect(text.contains("/usr/bin/python3 /home/u/tool.py"))
        #expect(text.contains("sha256 abababababab…, script sha256 cdcdcdcdcdcd…"), "\(text)")
        #expect(text.contains("pid 4242"))
        #expect(text.contains("savings"))
        #expect(text.contains("K7QX"))
    }

    @Test("codes: 4 characters of an alphabet without 0, O, 1, I or L; typed back in either case")
    func codes() throws {
        #expect(PromptCode.alphabet.count == 31)
        for excluded in "0O1IL" { #expect(!PromptCode.alphabet.contains(excluded)) }
        var seen = Set<String>()
        for _ in 0..<200 {
            let code = try PromptCode.random()
            #expect(code.text.count == 4)
            #expect(code.text.allSatisfy { PromptCode.alphabet.contains($0) })
            seen.insert(code.text)
        }
        #expect(seen.count > 150)
        let code = PromptCode(text: "K7QX")
        #expect(code.matches(Array("K7QX".utf8)))
        #expect(code.matches(Array(" k7qx \n".utf8)))
        #expect(!code.matches(Array("K7Q".utf8)))
        #expect(!code.matches(Array("K7QY".utf8)))
        #expect(!code.matches(Array("OK".utf8)))
        #expect(!code.matches([]))
        #expect("\(code)" == "<redacted>")
    }

    @Test("the pinentry program must be an absolute path")
    func absoluteProgram() throws {
        #expect(throws: RainError.invalidArgument) { try Pinentry(program: "pinentry-tty") }
        _ = try Pinentry(program: "/usr/bin/pinentry-tty")
    }
}
