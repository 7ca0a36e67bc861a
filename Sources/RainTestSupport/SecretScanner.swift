import Foundation
import RainCore
import RainCrypto

/// Finds secrets in text (logs, CLI output, error messages), in every encoding they could leak
/// as, for tests that prove none ever appears.
///
/// - Codes (6 digits) match as a number of their own: not inside a longer run of letters or
///   digits, where six digits occur by chance.
/// - Tokens match raw, without their `rwa_`/`rwr_` prefix, as hex and base64 (standard and URL,
///   padded or not) of their UTF-8, and their base64url body decoded, as hex and base64.
/// - Key bytes match as hex (either case), base64 (standard and URL, padded or not) and base58.
/// - A recovery phrase matches when any 3 of its words appear in order, separated only by
///   non-letters (spaces, commas, JSON quotes).
///
/// A finding names the secret's label and the encoding, never the secret itself.
public struct SecretScanner: Sendable {
    /// One secret found in one text.
    public struct Finding: Sendable, Equatable, CustomStringConvertible {
        /// The label the secret was added with (`"access token"`, `"device key"`, …).
        public var label: String
        /// How it appeared (`"raw"`, `"hex"`, `"base64url"`, `"phrase words 4-6"`, …).
        public var encoding: String
        /// The index of the text it appeared in.
        public var textIndex: Int

        public var description: String { "\(label) appears (\(encoding)) in text #\(textIndex)" }
    }

    private struct Needle: Sendable {
        var label: String
        var encoding: String
        var text: String
        var isWholeNumber: Bool
    }

    private var needles: [Needle] = []
    private var phrases: [(label: String, words: [String])] = []

    /// An empty scanner.
    public init() {}

    /// Adds a one-time code (matched as a number of its own).
    public mutating func addCode(_ code: String, label: String = "code") {
        guard !code.isEmpty else { return }
        needles.append(Needle(label: label, encoding: "raw", text: code, isWholeNumber: true))
    }

    /// Adds a token (access or refresh): raw, its body without the `xxx_` prefix, and encodings.
    public mutating func addToken(_ token: String, label: String = "token") {
        guard !token.isEmpty else { return }
        addText(token, label: label)
        if let underscore = token.firstIndex(of: "_"), token.distance(from: token.startIndex, to: underscore) <= 4 {
            let body = String(token[token.index(after: underscore)...])
            if body.count >= 16 {
                addText(body, label: label + " body")
                if let raw = Base64URL.decode(body), raw.count >= 16 { addKey(raw, label: label + " bytes") }
            }
        }
    }

    /// Adds key bytes (or any binary secret of at least 16 bytes).
    public mutating func addKey(_ bytes: [UInt8], label: String = "key") {
        guard bytes.count >= 8 else { return }
        let hex = Hex.encode(bytes)
        for (encoding, text) in [
            ("hex", hex.lowercased()), ("HEX", hex.uppercased()), ("base58", Base58.encode(bytes)),
        ] + Self.base64Forms(bytes) {
            needles.append(Needle(label: label, encoding: encoding, text: text, isWholeNumber: false))
        }
    }

    /// Adds a recovery phrase (its words, in order).
    public mutating func addPhrase(_ words: [String], label: String = "recovery phrase") {
        let lowered = words.map { $0.lowercased() }.filter { !$0.isEmpty }
        guard lowered.count >= 3 else { return }
        phrases.append((label, lowered))
    }

    /// Adds a text secret (an exported key string, a password): raw and as hex/base64 of its UTF-8.
    public mutating func addText(_ text: String, label: String) {
        needles.append(Needle(label: label, encoding: "raw", text: text, isWholeNumber: false))
        let bytes = Array(text.utf8)
        let hex = Hex.encode(bytes)
        for (encoding, form) in [("utf8 hex", hex.lowercased()), ("utf8 HEX", hex.uppercased())]
            + Self.base64Forms(bytes).map({ ("utf8 " + $0.0, $0.1) })
        {
            needles.append(Needle(label: label, encoding: encoding, text: form, isWholeNumber: false))
        }
    }

    private static func base64Forms(_ bytes: [UInt8]) -> [(String, String)] {
        let standard = Data(bytes).base64EncodedString()
        let unpadded = String(standard.reversed().drop(while: { $0 == "=" }).reversed())
        let url = Base64URL.encode(bytes)
        // Padded forms are covered by their unpadded prefix; the URL form differs only in - and _.
        return [("base64", unpadded), ("base64url", url)]
    }

    /// Every secret found in `texts`, in order.
    public func findings(in texts: [String]) -> [Finding] {
        var found: [Finding] = []
        for (index, text) in texts.enumerated() {
            for needle in needles where Self.contains(text, needle.text, wholeNumber: needle.isWholeNumber) {
                found.append(Finding(label: needle.label, encoding: needle.encoding, textIndex: index))
            }
            let words = Self.words(text)
            for phrase in phrases {
                if let start = Self.firstRun(of: phrase.words, in: words, length: 3) {
                    found.append(
                        Finding(label: phrase.label, encoding: "phrase words \(start + 1)-\(start + 3)", textIndex: index))
                }
            }
        }
        return found
    }

    /// Whether `text` holds `needle`; with `wholeNumber`, not touching a letter or digit.
    static func contains(_ text: String, _ needle: String, wholeNumber: Bool) -> Bool {
        guard wholeNumber else { return text.contains(needle) }
        var search = text[...]
        while let range = search.range(of: needle) {
            let before = range.lowerBound == text.startIndex ? nil : text[text.index(before: range.lowerBound)]
            let after = range.upperBound == text.endIndex ? nil : text[range.upperBound]
            func isAlphanumeric(_ c: Character?) -> Bool { c.map { $0.isLetter || $0.isNumber } ?? false }
            if !isAlphanumeric(before) && !isAlphanumeric(after) { return true }
            search = text[range.upperBound...]
        }
        return false
    }

    /// The lower-cased runs of letters in `text`.
    static func words(_ text: String) -> [Substring] {
        text.lowercased().split(whereSeparator: { !$0.isLetter })
    }

    /// The index in `phrase` of the first run of `length` consecutive words that appears,
    /// consecutive and in order, in `words`; nil when none does.
    static func firstRun(of phrase: [String], in words: [Substring], length: Int) -> Int? {
        guard phrase.count >= length, words.count >= length else { return nil }
        var positions: [Substring: [Int]] = [:]
        for (i, w) in words.enumerated() { positions[w, default: []].append(i) }
        for start in 0...(phrase.count - length) {
            for i in positions[Substring(phrase[start])] ?? [] where i + length <= words.count {
                if (1..<length).allSatisfy({ words[i + $0] == phrase[start + $0] }) { return start }
            }
        }
        return nil
    }
}
