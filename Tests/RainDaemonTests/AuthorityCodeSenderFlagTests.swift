import Foundation
import RainAuthority
import RainCore
import Testing

@testable import RainDaemon

/// `rainwalletd authority --code-sender FILE`: the file holds a codeSender object, is
/// the daemon user's and not writable by others; its secrets stay in their own 0600 files.
@Suite struct AuthorityCodeSenderFlagTests {
    static func withDirectory(_ body: (String) throws -> Void) throws {
        let dir = "/tmp/rwcsf-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try body(dir)
    }

    static func write(_ text: String, to path: String, mode: Int16 = 0o600) throws {
        guard FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: mode])
        else { throw RainError(.internalError, "cannot write \(path)") }
    }

    @Test func parsesTheFlag() throws {
        let o = try #require(
            try AuthorityDaemon.parse(["--listen", "127.0.0.1:0", "--state-dir", "/a", "--code-sender", "/etc/rw/sender.json"]))
        #expect(o.codeSenderFile == "/etc/rw/sender.json")
    }

    @Test("the file holds the codeSender object alone or under a codeSender key, as docs/operations.md shows it")
    func bothForms() throws {
        try Self.withDirectory { dir in
            let logger = Logger(label: "test", sink: CapturingLogSink())
            let command = #"{"type": "command", "command": ["/bin/true"], "timeoutSeconds": 2}"#
            try Self.write(command, to: "\(dir)/inner.json")
            #expect(try AuthorityDaemon.codeSender(file: "\(dir)/inner.json", logger: logger) is CommandCodeSender)
            try Self.write(#"{"codeSender": \#(command)}"#, to: "\(dir)/wrapped.json")
            #expect(try AuthorityDaemon.codeSender(file: "\(dir)/wrapped.json", logger: logger) is CommandCodeSender)
            try Self.write(#"{"codeSender": {"type": "outbox"}}"#, to: "\(dir)/outbox.json")
            #expect(try AuthorityDaemon.codeSender(file: "\(dir)/outbox.json", logger: logger) == nil)
            // Anything beside the codeSender key: not the wrapped form, and no type of its own.
            try Self.write(#"{"codeSender": {"type": "outbox"}, "other": 1}"#, to: "\(dir)/mixed.json")
            let mixed = #expect(throws: RainError.self) {
                try AuthorityDaemon.codeSender(file: "\(dir)/mixed.json", logger: logger)
            }
            #expect(mixed?.details.field == "codeSender.type")
        }
    }

    @Test("outbox is nil (the default), command and smtp make their senders; secrets are checked at start")
    func senders() throws {
        try Self.withDirectory { dir in
            let logger = Logger(label: "test", sink: CapturingLogSink())
            try Self.write(#"{"type": "outbox"}"#, to: "\(dir)/outbox.json")
            #expect(try AuthorityDaemon.codeSender(file: "\(dir)/outbox.json", logger: logger) == nil)
            try Self.write(#"{"type": "command", "command": ["/bin/true"], "timeoutSeconds": 2}"#, to: "\(dir)/command.json")
            #expect(try AuthorityDaemon.codeSender(file: "\(dir)/command.json", logger: logger) is CommandCodeSender)
            try Self.write("user\npass\n", to: "\(dir)/credentials")
            let smtp = """
                {"type": "smtp", "smtp": {"host": "smtp.example.com", "from": "codes@example.com",
                 "credentialsFile": "\(dir)/credentials"}}
                """
            try Self.write(smtp, to: "\(dir)/smtp.json")
            #expect(try AuthorityDaemon.codeSender(file: "\(dir)/smtp.json", logger: logger) is ContactKindCodeSender)
            // The credentials readable by others: refused at start.
            guard chmod("\(dir)/credentials", 0o644) == 0 else { throw RainError(.internalError, "chmod") }
            let error = #expect(throws: RainError.self) {
                try AuthorityDaemon.codeSender(file: "\(dir)/smtp.json", logger: logger)
            }
            #expect(error?.details.field == "codeSender.credentialsFile")
            // The sender file itself writable by others: refused.
            try Self.write(#"{"type": "outbox"}"#, to: "\(dir)/open.json", mode: 0o666)
            guard chmod("\(dir)/open.json", 0o666) == 0 else { throw RainError(.internalError, "chmod") }
            let open = #expect(throws: RainError.self) {
                try AuthorityDaemon.codeSender(file: "\(dir)/open.json", logger: logger)
            }
            #expect(open?.details.field == "--code-sender")
            for (json, field) in [
                (#"{"type": "command", "command": ["/bin/true"], "timeoutSeconds": 900}"#, "codeSender.timeoutSeconds"),
                (#"{"type": "pigeon"}"#, "codeSender.type"), (#"{"type": "sms"}"#, "codeSender.sms"),
            ] {
                try Self.write(json, to: "\(dir)/bad.json")
                let bad = #expect(throws: RainError.self) {
                    try AuthorityDaemon.codeSender(file: "\(dir)/bad.json", logger: logger)
                }
                #expect(bad?.code == .invalidArgument)
                #expect(bad?.details.field == field, "\(json)")
                try FileManager.default.removeItem(atPath: "\(dir)/bad.json")
            }
        }
    }
}
