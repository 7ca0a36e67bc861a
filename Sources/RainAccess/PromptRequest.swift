import RainCore

/// What a prompt asks the user: the action, the app that asks (path, hash prefix, pid) and the
/// profile it is for.
public struct PromptRequest: Sendable {
    /// The action, as a phrase the user can judge: "Export the recovery phrase",
    /// "Approve this app for the profile".
    public var action: String
    /// The app that asks.
    public var caller: CallerIdentity
    /// The profile the action is for.
    public var profile: String

    /// A request.
    public init(action: String, caller: CallerIdentity, profile: String) {
        self.action = action
        self.caller = caller
        self.profile = profile
    }

    /// The prompt's title (a desktop pinentry shows it; `pinentry-tty` does not).
    static let title = "RainWallet: confirm"
    /// The label of the entry field.
    static let entryPrompt = "Code:"

    /// The text the prompt shows. Every field that comes from the caller is made displayable
    /// (`PromptText.displayable`): a crafted path cannot draw fake lines, hide text or push the
    /// code out of the line limit.
    func description(code: PromptCode) -> String {
        let action = PromptText.displayable(self.action, maximumLength: 200)
        var app = PromptText.displayable(caller.appPath, maximumLength: 300)
        if let flatpak = caller.flatpakAppID {
            app += " (Flatpak app " + PromptText.displayable(flatpak, maximumLength: 100) + ")"
        }
        let profile = PromptText.displayable(self.profile, maximumLength: 100)
        return """
            RainWallet asks you to confirm: \(action)
            App: \(app)
                 sha256 \(caller.hashPrefix)…, pid \(caller.pid)
            Profile: \(profile)

            To allow it, type the code  \(code.text)  and press Enter.
            To refuse, cancel (Ctrl-D on a terminal).
            """
    }
}

/// Text that came from a caller, made safe to show on a prompt.
public enum PromptText {
    /// `text` with every control, format (bidirectional overrides, zero-width characters), line
    /// or paragraph separator character replaced by `?`, cut to at most `maximumLength` bytes in
    /// its Assuan-escaped form (then ending in `…`), so the whole description stays within one
    /// Assuan line.
    public static func displayable(_ text: String, maximumLength: Int) -> String {
        let safe = text.map { $0.unicodeScalars.allSatisfy(isShown) ? String($0) : "?" }
        if safe.reduce(0, { $0 + Assuan.escapedLength($1[...]) }) <= maximumLength { return safe.joined() }
        let ellipsis = "…"
        var out = ""
        var length = ellipsis.utf8.count
        for piece in safe {
            length += Assuan.escapedLength(piece[...])
            if length > maximumLength { break }
            out += piece
        }
        return out + ellipsis
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
