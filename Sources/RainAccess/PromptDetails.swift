import RainCore

/// What a prompt shows about one request before its code, when the request carries more than an
/// action: the lines decoded from it (a signature's chain, recipient, amounts, fields) and a
/// closing line (the fingerprint of what runs once confirmed). They are shown in pages, each one
/// Assuan line (`SETDESC`) with the prompt's header: every page but the last asks Next or Refuse
/// (`CONFIRM`), and only the last shows the code, so no page can be skipped to reach it.
public struct PromptDetails: Sendable, Equatable {
    /// The lines, in order; each is made displayable (`PromptText.displayable`) when shown.
    public var lines: [String]
    /// The line shown last, just above the code.
    public var closing: String

    /// Details.
    public init(lines: [String], closing: String) {
        self.lines = lines
        self.closing = closing
    }

    /// The most pages a request may take: one more would be refused (`prompt_too_long`).
    public static let maximumPages = 8
}

extension PromptRequest {
    /// The descriptions of the request's pages, in order: every line of `details` in full (a line
    /// longer than a page continues on the next), the closing line and the code on the last.
    /// Each description fits one SETDESC line once escaped.
    /// - Throws: RAIN_102 reason `prompt_too_long` when the request needs more than
    ///   `PromptDetails.maximumPages` pages, or the header alone leaves no room.
    package func pages(code: PromptCode) throws(RainError) -> [String] {
        guard let details else { return [try description(code: code)] }
        let budget = Self.maximumDescriptionLength
        // Sizes are measured with the widest page numbers: at most one digit each.
        let middleFixed = length(page(index: 8, of: 8, body: [], isLast: false, code: code))
        let lastFixed = length(page(index: 8, of: 8, body: [details.closing], isLast: true, code: code))
        guard budget - middleFixed > 0, budget - lastFixed >= 0 else { throw pagesTooLong(pages: nil) }
        // A body line costs its escaped length plus the newline that ends it (3 bytes escaped).
        let lineCost = { (text: String) in length(PromptText.displayable(text)) + 3 }
        var pieces: [String] = []
        for line in details.lines {
            pieces += split(PromptText.displayable(line), maximum: budget - middleFixed - 3)
        }
        var bodies: [[String]] = [[]]
        var used = 0
        for piece in pieces {
            let cost = lineCost(piece)
            if used + cost > budget - middleFixed, !(bodies.last?.isEmpty ?? true) {
                bodies.append([])
                used = 0
            }
            bodies[bodies.count - 1].append(piece)
            used += cost
        }
        // The last page holds the closing line and the code: it starts afresh when the lines left
        // on the page before do not leave room for them.
        if used > budget - lastFixed { bodies.append([]) }
        guard bodies.count <= PromptDetails.maximumPages else { throw pagesTooLong(pages: bodies.count) }
        let count = bodies.count
        return bodies.enumerated().map { index, body in
            let isLast = index == count - 1
            return page(index: index + 1, of: count, body: isLast ? body + [details.closing] : body, isLast: isLast, code: code)
        }
    }

    private func length(_ text: String) -> Int { Assuan.escapedLength(text[...]) }

    /// `text` cut into pieces of at most `maximum` escaped bytes, at character boundaries.
    private func split(_ text: String, maximum: Int) -> [String] {
        guard length(text) > maximum, maximum > 0 else { return [text] }
        var pieces: [String] = []
        var current = ""
        var used = 0
        for character in text {
            let cost = length(String(character))
            if used + cost > maximum, !current.isEmpty {
                pieces.append(current)
                current = "  (continued) "
                used = length(current)
            }
            current.append(character)
            used += cost
        }
        if !current.isEmpty { pieces.append(current) }
        return pieces
    }

    private func page(index: Int, of count: Int, body: [String], isLast: Bool, code: PromptCode) -> String {
        var app = (caller.script == nil ? "" : "script, not verifiable: ") + PromptText.displayable(caller.appPath)
        if let flatpak = caller.flatpakAppID {
            app += " (Flatpak app " + PromptText.displayable(flatpak) + ")"
        }
        let header = """
            RainWallet asks you to confirm: \(PromptText.displayable(action))
            App: \(app)
                 \(caller.hashDescription), pid \(caller.pid)
            Profile: \(PromptText.displayable(profile))
            Page \(index) of \(count)

            """
        let text = body.map { PromptText.displayable($0) + "\n" }.joined()
        if !isLast {
            return header + text + "\nNext page: Next (N). To refuse: Refuse (R) or cancel."
        }
        let note = notes.map { "Note: \(PromptText.displayable($0))\n" }.joined()
        return header + text + """

            \(note)To allow it, type the code  \(code.text)  and press Enter.
            To refuse, cancel (Ctrl-D on a terminal).
            """
    }

    private func pagesTooLong(pages: Int?) -> RainError {
        let size = pages.map { "\($0) pages" } ?? "more than a page for its header alone"
        return RainError.invalid(
            """
            the prompt cannot show this request in full: it needs \(size), and at most \(PromptDetails.maximumPages) \
            are shown (typed data above about 5 KB does not fit); a request is never shown cut: sign less at once, \
            or move the program to a shorter path
            """, field: "prompt", reason: PromptReason.tooLong)
    }
}
