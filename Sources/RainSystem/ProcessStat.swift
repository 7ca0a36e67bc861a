import RainCore

/// The fields of `/proc/PID/stat` the caller identity uses. The command name (field 2) is in
/// parentheses and may hold spaces or parentheses of its own, so fields are counted from the last
/// `)`.
public struct ProcessStat: Sendable, Equatable {
    /// Field 6: the session id.
    public var sessionID: Int32
    /// Field 7: the controlling terminal (`tty_nr`, a device number; 0 for none).
    public var controllingTerminal: UInt64
    /// Field 22: when the process started, in clock ticks after boot. A pid that is reused names a
    /// process with another start time.
    public var startTime: UInt64
    /// Field 51: the end of the environment in the process's memory; 0 while the process is in
    /// the middle of `exec` (its new memory is not set up yet). Nil on a kernel that does not
    /// give the field.
    public var environmentEnd: UInt64?

    /// Parses the content of `/proc/PID/stat`.
    /// - Throws: RAIN_502 when the content does not have the fields of `/proc/PID/stat`.
    public init(parsing bytes: [UInt8]) throws(RainError) {
        guard let close = bytes.lastIndex(of: UInt8(ascii: ")")) else { throw Self.malformed }
        let fields = bytes[(close + 1)...].split(separator: UInt8(ascii: " "), omittingEmptySubsequences: true)
        // fields[0] is field 3 (the state).
        func field(_ number: Int) throws(RainError) -> Substring {
            guard fields.count > number - 3 else { throw Self.malformed }
            return Substring(decoding: fields[number - 3], as: UTF8.self)
        }
        guard let session = Int32(try field(6)), let tty = Int64(try field(7)),
            let start = UInt64(try field(22).trimmingSuffix(while: { $0 == "\n" }))
        else { throw Self.malformed }
        sessionID = session
        controllingTerminal = UInt64(bitPattern: tty)
        startTime = start
        environmentEnd = fields.count > 51 - 3 ? UInt64(try field(51).trimmingSuffix(while: { $0 == "\n" })) : nil
    }

    /// A value (tests).
    public init(sessionID: Int32, controllingTerminal: UInt64, startTime: UInt64, environmentEnd: UInt64? = nil) {
        self.sessionID = sessionID
        self.controllingTerminal = controllingTerminal
        self.startTime = startTime
        self.environmentEnd = environmentEnd
    }

    static let malformed = RainError(.internalError, "/proc/PID/stat does not have the expected fields")
}

extension Substring {
    fileprivate func trimmingSuffix(while predicate: (Character) -> Bool) -> Substring {
        var end = endIndex
        while end > startIndex, predicate(self[index(before: end)]) { end = index(before: end) }
        return self[startIndex..<end]
    }
}
