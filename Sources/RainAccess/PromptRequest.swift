import RainCore

/// What a prompt asks the user: the action, the app that asks (path, hash prefix, pid) and the
/// profile it is for.
///
/// The prompt shows every field in full or is not shown at all: the whole description must fit
/// one Assuan line (SETDESC), and a request that does not fit is refused (RAIN_102
/// `prompt_too_long`) rather than cut, so the user never confirms what they could not see.
public struct PromptRequest: Sendable {
    /// The action, as a phrase the user can judge: "Export the recovery phrase",
    /// "Approve this app for the profile".
    public var action: String
    /// A shorter phrasing of the same action, shown when `action` does not fit: it must still name
    /// everything the user judges, for example a count and a digest the user can compare with a
    /// full list shown elsewhere (`rainwallet settings`). Nil: `action` must fit as it is.
    public var shortAction: String?
    /// The app that asks.
    public var caller: CallerIdentity
    /// The profile the action is for.
    public var profile: String
    /// Lines about the machine shown above the code, one each: on a kernel where programs of the
    /// user can read each other's memory, that the code can be read
    /// (`PromptCoordinator.Settings.note`); on a terminal whose other end a multiplexer holds,
    /// that it can read the screen. A confirmation's own notes (the touch that follows the code)
    /// come after those.
    public var notes: [String] = []
    /// What the request asks in detail (a signature's decoded fields), shown in pages before the
    /// code; nil for a request its action says all of.
    public var details: PromptDetails?

    /// A request.
    public init(
        action: String, caller: CallerIdentity, profile: String, shortAction: String? = nil, details: PromptDetails? = nil
    ) {
        self.action = action
        self.caller = caller
        self.profile = profile
        self.shortAction = shortAction
        self.details = details
    }

    /// The prompt's title (a desktop pinentry shows it; `pinentry-tty` does not).
    static let title = "RainWallet: confirm"
    /// The label of the entry field.
    static let entryPrompt = "Code:"
    /// The longest description, once Assuan-escaped: one `SETDESC` line.
    public static let maximumDescriptionLength = Assuan.maximumLineLength - "SETDESC ".utf8.count

    /// The text the prompt shows: the action (or, when it does not fit, the short action), the
    /// app, the profile and the code, every field in full. Every field that comes from a caller is
    /// made displayable (`PromptText.displayable`): a crafted path cannot draw fake lines or hide
    /// text.
    /// - Throws: RAIN_102 reason `prompt_too_long` when even the short action leaves the
    ///   description longer than one Assuan line: the request is refused, never shown cut.
    package func description(code: PromptCode) throws(RainError) -> String {
        let full = layout(action: action, code: code)
        if Self.fits(full) { return full }
        if let shortAction {
            let short = layout(action: shortAction, code: code)
            if Self.fits(short) { return short }
        }
        throw tooLong(code: code)
    }

    /// Whether `description` fits one SETDESC line.
    static func fits(_ description: String) -> Bool {
        Assuan.escapedLength(description[...]) <= maximumDescriptionLength
    }

    private func layout(action: String, code: PromptCode) -> String {
        // A script is shown for what it is: an interpreter and the path its command line claims.
        var app = (caller.script == nil ? "" : "script, not verifiable: ") + PromptText.displayable(caller.appPath)
        if let flatpak = caller.flatpakAppID {
            app += " (Flatpak app " + PromptText.displayable(flatpak) + ")"
        }
        let note = notes.map { "Note: \(PromptText.displayable($0))\n" }.joined()
        return """
            RainWallet asks you to confirm: \(PromptText.displayable(action))
            App: \(app)
                 \(caller.hashDescription), pid \(caller.pid)
            Profile: \(PromptText.displayable(profile))

            \(note)To allow it, type the code  \(code.text)  and press Enter.
            To refuse, cancel (Ctrl-D on a terminal).
            """
    }

    /// The title of a prompt that asks for a secret.
    static let secretTitle = "RainWallet: enter a PIN"
    static let statusTitle = "RainWallet: waiting for you"
    /// The label of a secret's entry field.
    static let secretEntryPrompt = "PIN:"

    /// The text of a prompt that asks for a secret: the action, the app, the profile (each in
    /// full, as a confirmation shows them), what to type, and after a wrong entry the tries left.
    /// - Throws: RAIN_102 `prompt_too_long` when it does not fit one Assuan line.
    package func secretDescription(_ question: SecretQuestion) throws(RainError) -> String {
        func layout(_ action: String) -> String {
            var app = (caller.script == nil ? "" : "script, not verifiable: ") + PromptText.displayable(caller.appPath)
            if let flatpak = caller.flatpakAppID {
                app += " (Flatpak app " + PromptText.displayable(flatpak) + ")"
            }
            let note = notes.map { "Note: \(PromptText.displayable($0))\n" }.joined()
            let then = question.then.map { ", then " + PromptText.displayable($0) } ?? ""
            let retries =
                question.attemptsRemaining.map {
                    "That PIN was wrong: \($0) \($0 == 1 ? "try" : "tries") left before the key blocks it.\n"
                } ?? ""
            return """
                RainWallet needs \(PromptText.displayable(question.what)) to \(PromptText.displayable(action))
                App: \(app)
                     \(caller.hashDescription), pid \(caller.pid)
                Profile: \(PromptText.displayable(profile))

                \(note)\(retries)To allow it, type the PIN and press Enter\(then).
                To refuse, cancel (Ctrl-D on a terminal).
                """
        }
        let full = layout(action)
        if Self.fits(full) { return full }
        if let shortAction, Self.fits(layout(shortAction)) { return layout(shortAction) }
        throw RainError.invalid(
            "the prompt cannot show this request in full, and a request is never shown cut: move the program to a "
                + "shorter path, or use a shorter profile name, and try again", field: "prompt", reason: PromptReason.tooLong)
    }

    /// The text of a status shown while an authenticator waits for the user: what it waits for,
    /// then the action, the app and the profile as a confirmation shows them.
    /// - Throws: RAIN_102 `prompt_too_long` when it does not fit one Assuan line.
    package func statusDescription(_ status: String) throws(RainError) -> String {
        func layout(_ action: String) -> String {
            var app = (caller.script == nil ? "" : "script, not verifiable: ") + PromptText.displayable(caller.appPath)
            if let flatpak = caller.flatpakAppID {
                app += " (Flatpak app " + PromptText.displayable(flatpak) + ")"
            }
            return """
                RainWallet waits: \(PromptText.displayable(status)), to \(PromptText.displayable(action))
                App: \(app)
                     \(caller.hashDescription), pid \(caller.pid)
                Profile: \(PromptText.displayable(profile))

                This closes by itself once done. To stop, choose Cancel (Ctrl-D on a terminal).
                """
        }
        let full = layout(action)
        if Self.fits(full) { return full }
        if let shortAction, Self.fits(layout(shortAction)) { return layout(shortAction) }
        throw RainError.invalid(
            "the prompt cannot show this request in full: move the program to a shorter path, or use a shorter "
                + "profile name, and try again", field: "prompt", reason: PromptReason.tooLong)
    }

    /// What to say when the request cannot be shown in full: how long each part is, and what the
    /// user can do.
    private func tooLong(code: PromptCode) -> RainError {
        func length(_ text: String) -> Int { Assuan.escapedLength(PromptText.displayable(text)[...]) }
        let action = shortAction ?? self.action
        let fixed =
            Assuan.escapedLength(layout(action: "", code: code)[...]) - length(caller.appPath)
            - (caller.flatpakAppID.map(length) ?? 0) - length(profile)
        var parts = ["the app's path \(length(caller.appPath)) bytes", "the action \(length(action))"]
        if let flatpak = caller.flatpakAppID { parts.append("the Flatpak app id \(length(flatpak))") }
        parts.append("the profile name \(length(profile))")
        return RainError.invalid(
            """
            the prompt cannot show this request in full (\(parts.joined(separator: ", ")); at most \
            \(Self.maximumDescriptionLength - fixed) fit together), and a request is never shown cut: move the \
            program (or the program the action names) to a shorter path, or use a shorter profile name, and try again
            """, field: "prompt", reason: PromptReason.tooLong)
    }
}

/// Text that came from a caller, made safe to show on a prompt.
public enum PromptText {
    /// `text` with every control, format (bidirectional overrides, zero-width characters), line
    /// or paragraph separator character replaced by `?`, so it cannot draw fake lines or hide
    /// text. Never cut: `PromptRequest` refuses a request whose text does not fit.
    public static func displayable(_ text: String) -> String {
        String(text.map { $0.unicodeScalars.allSatisfy(isShown) ? $0 : "?" })
    }

    private static func isShown(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator, .unassigned, .surrogate, .privateUse:
            return false
        default:
            return true
        }
    }
}
