import Foundation
import RainAuthorityAPI
import RainCore
import RainSystem
import RainTestSupport
import RainWire
import Testing

@testable import RainAuthority
@testable import RainStore

@Suite("Code senders")
struct CodeSenderTests {
    static let delivery = OutboxDelivery(
        appID: "app-one", kind: "email", contact: "user@example.com", code: "012345",
        sentAt: Date(unixMilliseconds: 1_800_000_000_123))

    @Test("the outbox appends one JSON line per delivery and reads them back in order")
    func outboxRoundTrip() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let outbox = OutboxCodeSender(stateDirectory: directory, logger: Logger(label: "t", sink: CapturingLogSink()))
        #expect(try await outbox.entries().isEmpty)
        var second = Self.delivery
        second.code = "999999"
        second.kind = "phone"
        second.contact = "+15551234567"
        try await outbox.deliver(Self.delivery)
        try await outbox.deliver(second)
        #expect(try await outbox.entries() == [Self.delivery, second])
        let text = String(decoding: try #require(try AtomicFile.read(outbox.path)), as: UTF8.self)
        #expect(text.split(separator: "\n").count == 2)
        #expect(text.hasSuffix("\n"))
        #expect(text.contains("\"appId\":\"app-one\""))
        #expect(text.contains("\"sentAt\":\"2027-01-15T08:00:00.123Z\""))
    }

    @Test("corrupt outbox lines are skipped with a warning that does not quote them")
    func outboxCorruptLines() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let sink = CapturingLogSink()
        let outbox = OutboxCodeSender(stateDirectory: directory, logger: Logger(label: "t", sink: sink))
        try await outbox.deliver(Self.delivery)
        try AtomicFile.append(Array("{\"code\":\"777777\" torn\n\n".utf8), to: outbox.path)
        var later = Self.delivery
        later.sentAt = later.sentAt.addingTimeInterval(60)
        try await outbox.deliver(later)
        try AtomicFile.append(Array("{\"appId\":".utf8), to: outbox.path)
        #expect(try await outbox.entries() == [Self.delivery, later])
        #expect(sink.captured.count == 2)
        #expect(sink.captured.allSatisfy { $0.contains("outbox.corrupt_line") && !$0.contains("777777") })
    }

    @Test("prune(olderThan:) rewrites the outbox without old and corrupt lines")
    func outboxPrune() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let outbox = OutboxCodeSender(stateDirectory: directory, logger: Logger(label: "t", sink: CapturingLogSink()))
        #expect(try await outbox.prune(olderThan: Date()) == 0)
        try await outbox.deliver(Self.delivery)
        try AtomicFile.append(Array("garbage\n".utf8), to: outbox.path)
        var later = Self.delivery
        later.sentAt = later.sentAt.addingTimeInterval(3600)
        try await outbox.deliver(later)
        #expect(try await outbox.prune(olderThan: later.sentAt) == 2)
        #expect(try await outbox.entries() == [later])
        var info = stat()
        #expect(stat(outbox.path, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
        #expect(try await outbox.prune(olderThan: later.sentAt) == 0)
    }

    @Test("timestamps parse back exactly, and malformed ones are refused")
    func timestamps() {
        for ms: Int64 in [0, 1_800_000_000_000, 1_800_000_000_999, 951_782_400_000, 4_102_444_799_999] {
            let date = Date(unixMilliseconds: ms)
            let text = RFC3339.string(from: date, fractional: true)
            #expect(OutboxCodeSender.parseTimestamp(text)?.unixMilliseconds == ms, "\(text)")
            #expect(
                OutboxCodeSender.parseTimestamp(RFC3339.string(from: date))?.unixMilliseconds == ms / 1000 * 1000)
        }
        for bad in [
            "", "2027-01-15", "2027-13-15T08:00:00Z", "2027-01-15T08:00:00.12Z", "2027-01-15 08:00:00Z",
            "x027-01-15T08:00:00Z",
        ] {
            #expect(OutboxCodeSender.parseTimestamp(bad) == nil, "\(bad)")
        }
    }

    @Test("the command sender writes the delivery as JSON to the program's standard input")
    func commandReceivesJSON() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/received.json"
        let sender = try CommandCodeSender(
            // The timeout is not under test here: a generous one, so a loaded machine cannot trip it.
            command: ["/bin/sh", "-c", "cat > \"$0\"", file], timeout: .seconds(120),
            logger: Logger(label: "t", sink: CapturingLogSink()))
        try await sender.deliver(Self.delivery)
        let bytes = try #require(try AtomicFile.read(file))
        #expect(bytes.last == UInt8(ascii: "\n"))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: String])
        #expect(object == ["appId": "app-one", "kind": "email", "contact": "user@example.com", "code": "012345"])
    }

    @Test("a command that fails is RAIN_501 naming the program, never the code")
    func commandFails() async throws {
        let sender = try CommandCodeSender(
            command: ["/bin/false"], logger: Logger(label: "t", sink: CapturingLogSink()))
        let error = try #require(await rainError { try await sender.deliver(Self.delivery) })
        #expect(error.code == .provider)
        #expect(error.message.contains("/bin/false"))
        #expect(!error.message.contains("012345"))

        let missing = try CommandCodeSender(
            command: ["/nonexistent/send-code"], logger: Logger(label: "t", sink: CapturingLogSink()))
        let notStarted = try #require(await rainError { try await missing.deliver(Self.delivery) })
        #expect(notStarted.code == .provider)
    }

    @Test("a command that runs past its timeout is killed and is RAIN_501")
    func commandTimeout() async throws {
        let sender = try CommandCodeSender(
            command: ["/bin/sh", "-c", "exec sleep 30"], timeout: .milliseconds(200),
            logger: Logger(label: "t", sink: CapturingLogSink()))
        // Unkilled, `sleep 30` would exit 0 and the delivery would succeed: the error is the proof.
        let error = try #require(await rainError { try await sender.deliver(Self.delivery) })
        #expect(error.code == .provider)
    }

    @Test("a command sender needs an absolute program path", arguments: [[String](), [""], ["send-code"]])
    func commandValidation(_ command: [String]) throws {
        let error = try #require(
            throws: RainError.self,
            performing: {
                _ = try CommandCodeSender(command: command, logger: Logger(label: "t", sink: CapturingLogSink()))
            })
        #expect(error.code == .invalidArgument)
    }

    @Test("the authority reports a failing command as RAIN_501 and retires the challenge")
    func authorityWithFailingCommand() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let logger = Logger(label: "t", sink: CapturingLogSink())
        let authority = try await EmbeddedAuthority(
            stateDirectory: directory, clock: ManualClock(),
            sender: try CommandCodeSender(command: ["/bin/false"], logger: logger), logger: logger)
        let error = try #require(
            await rainError {
                _ = try await authority.sendLoginCode(
                    SendCodeRequest(appID: "app", deviceID: "dev", contact: .email("a@example.com")))
            })
        #expect(error.code == .provider)
        let outboxError = try #require(await rainError { _ = try await authority.listOutbox() })
        #expect(outboxError.code == .unauthorized)
        let store = try #require(authority.store as? SQLiteAuthorityStore)
        let states = try #require(try await store.dumpAllRows()["challenges"]).compactMap { try? $0.text(10, "state") }
        #expect(states == ["retired"])
        await store.close()
    }

    @Test("codes a development outbox left in outbox.jsonl are removed once the outbox is off, kept while it is on")
    func outboxLeftoversRemovedWhenOff() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let sink = CapturingLogSink()
        let logger = Logger(label: "t", sink: sink)
        let outbox = OutboxCodeSender(stateDirectory: directory, logger: logger)
        try await outbox.deliver(Self.delivery)
        for isOn in [true, false] {
            let authority = try await EmbeddedAuthority(
                stateDirectory: directory, settings: AuthoritySettings(isDevOutboxEnabled: isOn), clock: ManualClock(),
                logger: logger)
            await authority.store.close()
            #expect(FileManager.default.fileExists(atPath: outbox.path) == isOn, "dev outbox on: \(isOn)")
        }
        #expect(sink.captured.contains { $0.contains("outbox.removed") })
        #expect(!sink.captured.joined().contains(Self.delivery.code))
    }
}
