import RainCore

/// The Assuan protocol as a pinentry speaks it (libassuan's "Client/Server protocol"): one command
/// per line, answered by any number of data (`D`), status (`S`) and comment (`#`) lines, then `OK`
/// or `ERR`. Lines are at most 1000 bytes before the newline; data and command parameters are
/// percent-escaped (`%25` for `%`, `%0A` for a newline).
public enum Assuan {
    /// The longest line either side may send, without its newline (libassuan's
    /// `ASSUAN_LINELENGTH`, 1002, minus CR LF).
    public static let maximumLineLength = 1000

    /// One line from the server.
    public enum Response: Sendable, Equatable {
        /// `OK [text]`: the command succeeded.
        case ok(String)
        /// `ERR code [text]`: the command failed with a gpg-error code.
        case error(code: UInt32, text: String)
        /// `D data`: data, already unescaped.
        case data([UInt8])
        /// `S keyword [text]`: a status line.
        case status(String)
        /// `# text`, or an empty line: nothing to act on.
        case comment
        /// `INQUIRE keyword`: the server asks for data.
        case inquire(String)
    }

    /// Parses one line (without its newline; a trailing CR is dropped).
    /// - Throws: RAIN_501 reason `prompt_failed` for a line too long or not a known response.
    public static func parse(_ line: [UInt8]) throws(RainError) -> Response {
        var line = line[...]
        if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
        guard line.count <= maximumLineLength else { throw protocolError("a line longer than \(maximumLineLength) bytes") }
        if line.isEmpty || line.first == UInt8(ascii: "#") { return .comment }
        let space = line.firstIndex(of: UInt8(ascii: " ")) ?? line.endIndex
        let verb = String(decoding: line[..<space], as: UTF8.self)
        let rest = space < line.endIndex ? line[line.index(after: space)...] : line[line.endIndex...]
        let text = String(decoding: rest, as: UTF8.self)
        switch verb {
        case "OK": return .ok(text)
        case "ERR":
            let digits = text.prefix { $0.isASCII && $0.isNumber }
            guard let code = UInt32(digits) else { throw protocolError("an ERR line without a code") }
            let message = text.dropFirst(digits.count).drop { $0 == " " }
            return .error(code: code, text: String(message))
        case "D": return .data(unescape(rest))
        case "S": return .status(text)
        case "INQUIRE": return .inquire(text)
        default: throw protocolError("an unknown line (\(verb.prefix(16)))")
        }
    }

    /// A command line: `verb`, and the parameter percent-escaped, with its newline.
    /// - Throws: RAIN_502 when the line would be longer than `maximumLineLength` (the caller
    ///   bounds what it sends).
    public static func command(_ verb: String, _ parameter: String? = nil) throws(RainError) -> [UInt8] {
        var line = Array(verb.utf8)
        if let parameter {
            line.append(UInt8(ascii: " "))
            line += escape(parameter)
        }
        guard line.count <= maximumLineLength else {
            throw RainError(.internalError, "internal error: an Assuan \(verb) line longer than \(maximumLineLength) bytes")
        }
        return line + [UInt8(ascii: "\n")]
    }

    /// Percent-escapes what a parameter may not hold as it is: `%`, `+` (some commands read it as
    /// a space), control characters (CR and LF would end the line) and DEL.
    public static func escape(_ text: String) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            if needsEscape(byte) {
                out += Array("%\(hexDigit(byte >> 4))\(hexDigit(byte & 0x0f))".utf8)
            } else {
                out.append(byte)
            }
        }
        return out
    }

    /// The length of `text` once escaped.
    public static func escapedLength(_ text: Substring) -> Int {
        text.utf8.reduce(0) { $0 + (needsEscape($1) ? 3 : 1) }
    }

    /// Undoes percent-escaping (`%XX`); a `%` not followed by two hex digits is kept as it is.
    public static func unescape(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = bytes.startIndex
        while i < bytes.endIndex {
            let byte = bytes[i]
            if byte == UInt8(ascii: "%"), bytes.endIndex - i >= 3, let high = hexValue(bytes[i + 1]),
                let low = hexValue(bytes[i + 2])
            {
                out.append(high << 4 | low)
                i += 3
            } else {
                out.append(byte)
                i += 1
            }
        }
        return out
    }

    private static func needsEscape(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == 0x7f || byte == UInt8(ascii: "%") || byte == UInt8(ascii: "+")
    }

    private static func hexDigit(_ value: UInt8) -> Character {
        Character(Unicode.Scalar(value < 10 ? 0x30 + value : 0x41 + value - 10))
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: return byte - 0x30
        case 0x41...0x46: return byte - 0x41 + 10
        case 0x61...0x66: return byte - 0x61 + 10
        default: return nil
        }
    }

    static func protocolError(_ what: String) -> RainError {
        RainError(
            .provider, "the pinentry program sent \(what); check that access.pinentry names a pinentry program",
            details: RainError.Details(reason: PromptReason.failed, field: "access.pinentry"))
    }
}
