/// The `details.reason` of every error a prompt can end with, so callers and tests match on a
/// name, never on a message.
public enum PromptReason {
    /// RAIN_302: another prompt is on screen; only one at a time.
    public static let busy = "prompt_busy"
    /// RAIN_302: this app was refused three times in a row; no new prompt for it until
    /// `details.retryAfterMilliseconds` have passed.
    public static let lockedOut = "prompt_locked"
    /// RAIN_302: this uid's apps not yet approved had their 3 approval prompts of the last minute;
    /// no new one until `details.retryAfterMilliseconds` have passed.
    public static let rateLimited = "prompt_rate_limited"
    /// RAIN_401: the user dismissed the prompt (cancel, Ctrl-D, Escape, closed window).
    public static let dismissed = "prompt_dismissed"
    /// RAIN_401: nobody answered in time.
    public static let timedOut = "prompt_timeout"
    /// RAIN_401: what was typed is not the code the prompt showed.
    public static let wrongCode = "prompt_wrong_code"
    /// RAIN_401: the call was cancelled (its client went away) and the prompt was withdrawn.
    public static let withdrawn = "prompt_withdrawn"
    /// RAIN_404: no display and no registered terminal: nowhere to ask the user.
    public static let unavailable = "prompt_unavailable"
    /// RAIN_202: the prompt terminal is the caller's controlling terminal.
    public static let callerTerminal = "prompt_target_caller_terminal"
    /// RAIN_202: the prompt terminal belongs to the caller's session.
    public static let callerSession = "prompt_target_caller_session"
    /// RAIN_202: a process outside the registered shell's session holds the prompt terminal open.
    public static let terminalShared = "prompt_terminal_shared"
    /// RAIN_102: this registration must choose the place secret (a machine without a display,
    /// none chosen yet): `rainwallet prompt here` asks for it on the terminal.
    public static let secretToChoose = "prompt_secret_to_choose"
    /// RAIN_102: the place secret chosen is shorter than 8 characters.
    public static let secretTooShort = "prompt_secret_too_short"
    /// RAIN_102: no place and no display are left to confirm a new place on: the place secret
    /// confirms it; `rainwallet prompt here` asks for it.
    public static let secretRequired = "prompt_secret_required"
    /// RAIN_401: the place secret given is wrong (`attemptsRemaining`: tries before the lock).
    public static let secretWrong = "prompt_secret_wrong"
    /// RAIN_302: five wrong place secrets in a row: none is checked for 10 minutes (retry-after).
    public static let secretLocked = "prompt_secret_locked"
    /// RAIN_302: the move to a new place was confirmed by the secret and takes over after its
    /// wait (retry-after); the same terminal registering again then completes it.
    public static let moveWaiting = "prompt_move_waiting"
    /// RAIN_404: a place existed and is gone, there is no display, and no place secret was chosen:
    /// nothing can confirm a new place.
    public static let placeUnconfirmable = "prompt_place_unconfirmable"
    /// RAIN_102: the registered prompt terminal is not a terminal of this user (or is gone).
    public static let invalidTarget = "prompt_target_invalid"
    /// RAIN_102: the request (the app's path, the action, the profile) does not fit on the prompt
    /// in full; it is refused, never shown cut.
    public static let tooLong = "prompt_too_long"
    /// RAIN_501: the pinentry program could not be started or broke the protocol.
    public static let failed = "prompt_failed"
}
