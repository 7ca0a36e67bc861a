import Dispatch
import FoundationEssentials
import Glibc
import RainAuthorityAPI
import RainCore
import RainSystem

/// The development code sender: appends each delivery as one JSON line to `outbox.jsonl` in the
/// state directory (mode 0600), where `rainwallet dev outbox` reads it back.
///
/// Line format: `{"appId":…,"code":…,"contact":…,"kind":…,"sentAt":"2027-01-15T08:00:00.000Z"}`.
/// File work runs on the sender's own serial queue, which also keeps appends and prunes in order.
public final class OutboxCodeSender: CodeSender {
    /// The outbox file's name inside the state directory.
    public static let fileName = "outbox.jsonl"

    /// The outbox file.
    public let path: String
    private let logger: Logger
    private let queue = DispatchQueue(label: "rain.authority.outbox")

    /// An outbox at `outbox.jsonl` in `stateDirectory`.
    public convenience init(stateDirectory: String, logger: Logger) {
        self.init(path: PathText.joined(stateDirectory, Self.fileName), logger: logger)
    }

    /// An outbox at `path`.
    public init(path: String, logger: Logger) {
        self.path = path
        self.logger = logger
    }

    /// Removes the outbox file of `stateDirectory` with the codes it holds, if there is one: with
    /// the development outbox off nobody may read them, so none stays on disk in clear.
    /// - Returns: whether a file was removed.
    /// - Throws: RAIN_502 when it exists and cannot be removed.
    @discardableResult
    public static func removeFile(stateDirectory: String) async throws(RainError) -> Bool {
        let path = PathText.joined(stateDirectory, fileName)
        return try await DispatchQueue(label: "rain.authority.outbox.remove").runBlocking { () throws(RainError) -> Bool in
            if unlink(path) == 0 {
                try AtomicFile.syncDirectory(stateDirectory)
                return true
            }
            if errno == ENOENT { return false }
            throw AtomicFile.ioError("remove", path)
        }
    }

    /// Appends the delivery and fsyncs the file.
    /// - Throws: RAIN_502 when the file cannot be written.
    public func deliver(_ delivery: OutboxDelivery) async throws(RainError) {
        let line = try Self.encode(delivery)
        let path = self.path
        try await queue.runBlocking { () throws(RainError) in
            try AtomicFile.append(line, to: path, mode: 0o600)
        }
    }

    /// Every delivery in the outbox, oldest first. Lines that do not decode are skipped with a
    /// warning that names the line number (never its content, which may hold a code).
    /// - Throws: RAIN_502 when the file cannot be read.
    public func entries() async throws(RainError) -> [OutboxDelivery] {
        let path = self.path
        let logger = self.logger
        return try await queue.runBlocking { () throws(RainError) -> [OutboxDelivery] in
            try Self.read(path: path, logger: logger)
        }
    }

    /// Removes deliveries sent before `cutoff` (and lines that do not decode) by rewriting the file
    /// atomically.
    /// - Returns: how many lines were removed.
    /// - Throws: RAIN_502 when the file cannot be read or rewritten.
    @discardableResult
    public func prune(olderThan cutoff: Date) async throws(RainError) -> Int {
        let path = self.path
        let logger = self.logger
        return try await queue.runBlocking { () throws(RainError) -> Int in
            guard let bytes = try AtomicFile.read(path, options: [.noFollow]) else { return 0 }
            let lines = Self.splitLines(bytes)
            var kept: [UInt8] = []
            var removed = 0
            for (index, line) in lines.enumerated() {
                guard let delivery = Self.decode(line) else {
                    logger.warning("outbox.corrupt_line", ["path": path, "line": String(index + 1)])
                    removed += 1
                    continue
                }
                if delivery.sentAt < cutoff {
                    removed += 1
                } else {
                    kept += line
                    kept.append(UInt8(ascii: "\n"))
                }
            }
            if removed > 0 { try AtomicFile.write(kept, to: path, mode: 0o600) }
            return removed
        }
    }

    // MARK: - Encoding

    private struct Line: Codable {
        var appId: String
        var kind: String
        var contact: String
        var code: String
        var sentAt: String
    }

    /// One line of the outbox file, newline included.
    /// - Throws: RAIN_502 when the entry cannot be encoded.
    package static func encode(_ delivery: OutboxDelivery) throws(RainError) -> [UInt8] {
        let line = Line(
            appId: delivery.appID, kind: delivery.kind, contact: delivery.contact, code: delivery.code,
            sentAt: RFC3339.string(from: delivery.sentAt, fractional: true))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do {
            return Array(try encoder.encode(line)) + [UInt8(ascii: "\n")]
        } catch {
            throw RainError(.internalError, "cannot encode an outbox entry")
        }
    }

    static func decode(_ line: [UInt8]) -> OutboxDelivery? {
        guard let decoded = try? JSONDecoder().decode(Line.self, from: Data(line)),
            let sentAt = parseTimestamp(decoded.sentAt)
        else { return nil }
        return OutboxDelivery(
            appID: decoded.appId, kind: decoded.kind, contact: decoded.contact, code: decoded.code, sentAt: sentAt)
    }

    /// Reads every entry of the outbox file at `path`; a line that does not decode is logged and skipped.
    /// - Throws: RAIN_502 when the file cannot be read.
    package static func read(path: String, logger: Logger) throws(RainError) -> [OutboxDelivery] {
        guard let bytes = try AtomicFile.read(path, options: [.noFollow]) else { return [] }
        var out: [OutboxDelivery] = []
        for (index, line) in splitLines(bytes).enumerated() {
            if let delivery = decode(line) {
                out.append(delivery)
            } else {
                logger.warning("outbox.corrupt_line", ["path": path, "line": String(index + 1)])
            }
        }
        return out
    }

    /// Non-empty lines (a torn last line without its newline is still returned, and fails to decode).
    private static func splitLines(_ bytes: [UInt8]) -> [[UInt8]] {
        bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true).map(Array.init)
    }

    /// Parses `YYYY-MM-DDTHH:MM:SS[.fff]Z` as written by `RFC3339.string(from:fractional:)`.
    static func parseTimestamp(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        guard bytes.count == 20 || bytes.count == 24, bytes.last == UInt8(ascii: "Z") else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for i in range {
                let b = bytes[i]
                guard b >= UInt8(ascii: "0"), b <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int(b - UInt8(ascii: "0"))
            }
            return value
        }
        func separator(_ i: Int, _ c: Character) -> Bool { bytes[i] == c.asciiValue }
        guard separator(4, "-"), separator(7, "-"), separator(10, "T"), separator(13, ":"), separator(16, ":"),
            let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
            let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
            (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        var millis = 0
        if bytes.count == 24 {
            guard separator(19, "."), let fraction = number(20..<23) else { return nil }
            millis = fraction
        }
        // Days from the civil date (Howard Hinnant's algorithm), so no calendar or locale is involved.
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let monthIndex = (month + 9) % 12
        let dayOfYear = (153 * monthIndex + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        let seconds = Int64(days) * 86_400 + Int64(hour * 3600 + minute * 60 + second)
        return Date(unixMilliseconds: seconds * 1000 + Int64(millis))
    }
}
