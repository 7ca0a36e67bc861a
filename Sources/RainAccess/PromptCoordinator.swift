import Dispatch
import FoundationEssentials
import RainCore

/// Asks the user to confirm what an app wants to do, one prompt at a time, through pinentry.
///
/// The rules, each enforced here:
/// - a prompt shows the action, the app (path, hash prefix, pid) and the profile, each in full (a
///   request that does not fit one Assuan line is refused, never cut), with a random
///   code (`PromptCode`) the user must type back: an answer without the code is a refusal, so
///   injected keystrokes cannot confirm;
/// - it appears where the user chose (`PromptTargets`), never on a terminal of the caller;
/// - it times out (60 s unless set), after which it is killed;
/// - one prompt at a time: another request meanwhile is RAIN_302 `prompt_busy`;
/// - after `refusalLimit` refusals in a row (dismissed, wrong code, timed out) for one app, no new
///   prompt for that app for `lockout` (RAIN_302 `prompt_locked`, with the time left);
/// - a cancelled task withdraws its prompt (the pinentry is killed);
/// - anything but a confirmation throws, so the caller's action cannot run.
public actor PromptCoordinator {
    /// How prompts behave.
    public struct Settings: Sendable {
        /// The pinentry program.
        public var pinentry: Pinentry
        /// How long the user has to answer.
        public var timeout: Duration
        /// Refusals in a row after which an app is locked out.
        public var refusalLimit: Int
        /// How long a locked-out app gets no new prompt.
        public var lockout: Duration
        /// A line every prompt shows above its code (`PromptRequest.note`).
        public var note: String?

        /// Settings: 60 s to answer, 3 refusals, 10 minutes of lockout unless told.
        public init(
            pinentry: Pinentry, timeout: Duration = .seconds(60), refusalLimit: Int = 3, lockout: Duration = .seconds(600),
            note: String? = nil
        ) {
            self.pinentry = pinentry
            self.timeout = timeout
            self.refusalLimit = max(1, refusalLimit)
            self.lockout = lockout
            self.note = note
        }
    }

    /// What a confirmation tells the caller (for the audit log).
    public struct Confirmation: Sendable, Equatable {
        /// Where the prompt was shown.
        public var target: PromptTarget
        /// The code the prompt showed and the user typed back: what a touch confirmation's
        /// challenge binds, so that no two prompts share one. Never logged.
        public var code: String
        /// Everything the prompt showed (its pages, in order).
        public var text: String
    }

    private struct AppRecord {
        var refusals = 0
        var lockedUntil: Duration?
    }

    private struct Active {
        var app: String
        var control: PinentryControl
    }

    private let settings: Settings
    private let clock: any RainClock
    private let logger: Logger
    private var targets: PromptTargets
    private var active: Active?
    private var apps: [String: AppRecord] = [:]
    /// Where the blocking conversation with pinentry runs (never the Swift concurrency pool).
    private let queue = DispatchQueue(label: "rainwallet.prompt")
    /// Where the timeout fires: not `queue`, which is busy with the conversation it must end.
    private let timerQueue = DispatchQueue(label: "rainwallet.prompt.timer")
    /// At most this many apps are remembered with refusals (locked-out apps are always kept).
    private static let maximumRemembered = 1024

    /// A coordinator.
    /// - Parameters:
    ///   - settings: the pinentry and the limits.
    ///   - targets: where prompts may appear.
    ///   - clock: time for the timeout and the lockout.
    ///   - logger: prompt events (never a code).
    public init(settings: Settings, targets: PromptTargets, clock: any RainClock, logger: Logger) {
        self.settings = settings
        self.targets = targets
        self.clock = clock
        self.logger = logger
    }

    /// Changes where prompts appear (after `rainwallet prompt here`, itself confirmed).
    public func setTargets(_ targets: PromptTargets) { self.targets = targets }

    /// Where prompts appear now.
    public var currentTargets: PromptTargets { targets }

    /// The pid of the pinentry on screen, if any (tests check it is gone after a withdrawal).
    package var activeProcessID: Int32? { active?.control.processID }

    /// Asks the user to confirm `request`, and returns only when they typed the prompt's code.
    /// - Returns: where the prompt was shown.
    /// - Throws:
    ///   - RAIN_302 reason `prompt_locked` (with `retryAfterMilliseconds`) while the app is locked
    ///     out; `prompt_busy` while another prompt is on screen;
    ///   - RAIN_401 reason `prompt_dismissed`, `prompt_timeout`, `prompt_wrong_code` (a refusal,
    ///     counted towards the lockout) or `prompt_withdrawn` (the task was cancelled);
    ///   - RAIN_404 `prompt_unavailable` when there is nowhere to ask; RAIN_202
    ///     `prompt_target_caller_terminal` / `prompt_target_caller_session` and RAIN_102
    ///     `prompt_target_invalid` for a terminal that may not be used;
    ///   - RAIN_102 `prompt_too_long` when the request cannot be shown in full (it is never cut);
    ///   - RAIN_501 `prompt_failed` when the pinentry program fails.
    public func confirm(_ request: PromptRequest) async throws(RainError) -> Confirmation {
        let app = request.caller.appPath
        try checkLockout(app)
        // A request the prompt cannot show in full is refused before any prompt opens, never cut.
        let code = try PromptCode.random()
        var request = request
        request.notes = [settings.note].compactMap { $0 } + request.notes
        var pages = try request.pages(code: code)
        let target = try targets.selected()
        if case .terminal(let path, _) = target, let multiplexer = TerminalHolders.multiplexer(of: path) {
            request.notes.append(multiplexer.screenNote)
            pages = try request.pages(code: code)
        }
        let dialog = PinentryDialog(
            title: PromptRequest.title, description: pages.last ?? "", prompt: PromptRequest.entryPrompt,
            pages: Array(pages.dropLast()), timeoutSeconds: Int(settings.timeout.components.seconds) + 2)
        let (outcome, control) = try await show(dialog, request: request, target: target, pageCount: pages.count)
        switch outcome {
        case .entered(let typed) where code.matches(typed):
            if Task.isCancelled { throw withdrawnError() }
            apps[app] = nil
            logger.info("prompt.confirmed", ["app": app, "pid": String(request.caller.pid), "profile": request.profile])
            return Confirmation(target: target, code: code.text, text: pages.joined(separator: "\n"))
        case .entered:
            throw refuse(app, reason: PromptReason.wrongCode, "the code typed on the prompt was not the one it showed")
        default:
            throw refusal(outcome, control: control, app: app, request: request)
        }
    }

    /// Asks the user for a secret (a security key's PIN) on the prompt, which shows the request
    /// (the action, the app, the profile) above what is asked. Only the daemon reaches it: no call
    /// of the socket takes a secret to show or returns one.
    ///
    /// The typed bytes are moved into `SecretBytes` (zeroed when released) and the copies the
    /// conversation made are zeroed; nothing of them is logged.
    /// - Parameters:
    ///   - request: the call that needs the secret.
    ///   - question: what to type, and the tries left after a wrong one.
    /// - Returns: the secret.
    /// - Throws: as ``confirm(_:)`` (RAIN_401 `prompt_dismissed`, `prompt_timeout`,
    ///   `prompt_withdrawn`; RAIN_302 `prompt_busy`, `prompt_locked`; RAIN_102 `prompt_too_long`;
    ///   RAIN_404 `prompt_unavailable`); RAIN_401 `prompt_dismissed` for an empty entry.
    public func askSecret(_ request: PromptRequest, question: SecretQuestion) async throws(RainError) -> SecretBytes {
        let app = request.caller.appPath
        try checkLockout(app)
        var request = request
        request.notes = [settings.note].compactMap { $0 }
        let target = try targets.selected()
        if case .terminal(let path, _) = target, let multiplexer = TerminalHolders.multiplexer(of: path) {
            request.notes.append(multiplexer.screenNote)
        }
        let dialog = PinentryDialog(
            title: PromptRequest.secretTitle, description: try request.secretDescription(question),
            prompt: PromptRequest.secretEntryPrompt, okLabel: "OK",
            timeoutSeconds: Int(settings.timeout.components.seconds) + 2)
        let (outcome, control) = try await show(dialog, request: request, target: target, pageCount: 1)
        switch outcome {
        case .entered(var typed) where !typed.isEmpty:
            if Task.isCancelled {
                SecretBytes.wipe(&typed)
                throw withdrawnError()
            }
            guard let secret = SecretBytes(taking: &typed) else {
                throw RainError.invalid("what was typed holds a NUL character; type it again", field: "secret")
            }
            apps[app] = nil
            logger.info("prompt.secret_entered", ["app": app, "pid": String(request.caller.pid), "profile": request.profile])
            return secret
        case .entered:
            throw refuse(app, reason: PromptReason.dismissed, "nothing was typed on the prompt")
        default:
            throw refusal(outcome, control: control, app: app, request: request)
        }
    }

    /// Runs `body` while the prompt shows `status` with the request and one button, Cancel, which
    /// stops `body` (its task is cancelled); the status is withdrawn as soon as `body` ends. A
    /// status is help, not a question: when it cannot be shown (another prompt is open, nowhere to
    /// show it, too long) `body` runs without it; its timeout is `body`'s own, and it never counts
    /// toward the app's lockout.
    /// - Throws: `body`'s errors; RAIN_401 `prompt_dismissed` when the user chose Cancel.
    public func showWhile<T: Sendable>(
        _ request: PromptRequest, status: String, _ body: @escaping @Sendable () async throws(RainError) -> T
    ) async throws(RainError) -> T {
        var request = request
        request.notes = [settings.note].compactMap { $0 }
        guard active == nil, let description = try? request.statusDescription(status),
            let target = try? targets.selected()
        else { return try await body() }
        let dialog = PinentryDialog(
            title: PromptRequest.statusTitle, description: description, prompt: PromptRequest.entryPrompt,
            okLabel: "_Cancel", cancelLabel: "_Cancel", isStatus: true, timeoutSeconds: 0)
        let (result, isStopped) = await withTaskGroup(of: StatusRace<T>.self) { group in
            group.addTask {
                do throws(RainError) { return .body(.success(try await body())) } catch { return .body(.failure(error)) }
            }
            let shown = request
            group.addTask { [self] in
                .status(try? await self.show(dialog, request: shown, target: target, pageCount: 1).0)
            }
            var result: Result<T, RainError>?
            var isStopped = false
            while let next = await group.next() {
                switch next {
                case .body(let outcome):
                    result = outcome
                    group.cancelAll()  // withdraws the status
                case .status(let outcome):
                    if result == nil, outcome == .cancelled {
                        isStopped = true
                        group.cancelAll()  // stops what it waited for
                    }
                }
            }
            return (result, isStopped)
        }
        if isStopped {
            logger.info("prompt.status_cancelled", ["app": request.caller.appPath, "profile": request.profile])
            throw RainError(
                .userCancelled, "it was cancelled on the prompt", details: RainError.Details(reason: PromptReason.dismissed))
        }
        guard let result else { throw withdrawnError() }
        return try result.get()
    }

    /// What ended first in `showWhile`: the work, or the status (the user's Cancel, or a withdrawal).
    private enum StatusRace<T: Sendable>: Sendable {
        case body(Result<T, RainError>)
        case status(PinentryOutcome?)
    }

    /// The error for an outcome that is neither a confirmation nor an entry.
    private func refusal(_ outcome: PinentryOutcome, control: PinentryControl, app: String, request: PromptRequest) -> RainError {
        switch outcome {
        case .entered, .cancelled:
            return refuse(app, reason: PromptReason.dismissed, "the prompt was dismissed")
        case .timedOut:
            return refuse(app, reason: PromptReason.timedOut, "nobody answered the prompt in time")
        case .withdrawn where control.withdrawal == .timedOut:
            return refuse(
                app, reason: PromptReason.timedOut,
                "nobody answered the prompt within \(settings.timeout.components.seconds) s")
        case .withdrawn:
            logger.info("prompt.withdrawn", ["app": app, "pid": String(request.caller.pid)])
            return withdrawnError()
        }
    }

    /// Shows `dialog` where `target` is, one prompt at a time, with the timeout and the withdrawal
    /// of a cancelled task.
    private func show(
        _ dialog: PinentryDialog, request: PromptRequest, target: PromptTarget, pageCount: Int
    ) async throws(RainError) -> (PinentryOutcome, PinentryControl) {
        let app = request.caller.appPath
        guard active == nil else {
            throw RainError(
                .refused, "another confirmation prompt is open; answer it first, then try again",
                details: RainError.Details(reason: PromptReason.busy))
        }
        guard !Task.isCancelled else { throw withdrawnError() }
        let control = try PinentryControl()
        active = Active(app: app, control: control)
        defer { active = nil }

        logger.info(
            "prompt.shown",
            [
                "app": app, "pid": String(request.caller.pid), "profile": request.profile, "target": target.description,
                "pages": String(pageCount),
            ])
        // Each page has the whole timeout: a long request is read, not rushed.
        let timer = clock.schedule(after: settings.timeout * pageCount, on: timerQueue) { control.withdraw(.timedOut) }
        let pinentry = settings.pinentry
        let caller = request.caller
        let queue = self.queue
        let result: Result<PinentryOutcome, RainError> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                queue.async {
                    continuation.resume(
                        returning: Result { () throws(RainError) in
                            let prepared = try target.prepare(for: caller)
                            return try pinentry.run(dialog, on: prepared, control: control)
                        })
                }
            }
        } onCancel: {
            control.withdraw(.cancelled)
        }
        timer.cancel()

        switch result {
        case .success(let value): return (value, control)
        case .failure(let error):
            logger.warning("prompt.failed", ["app": app, "reason": error.details.reason ?? "", "error": error.message])
            throw error
        }
    }

    private func checkLockout(_ app: String) throws(RainError) {
        let now = clock.monotonic
        apps = apps.filter { $0.value.lockedUntil.map { $0 > now } ?? true }
        guard let until = apps[app]?.lockedUntil else { return }
        let left = until - now
        let milliseconds =
            UInt64(max(0, left.components.seconds)) * 1000
            + UInt64(max(0, left.components.attoseconds) / 1_000_000_000_000_000)
        throw RainError(
            .refused,
            "this app was refused \(settings.refusalLimit) times in a row; no new prompt for it for "
                + "\((milliseconds + 999) / 1000) s",
            details: RainError.Details(reason: PromptReason.lockedOut, retryAfterMilliseconds: milliseconds))
    }

    /// Counts a refusal (and locks the app out at the limit); returns the RAIN_401 to throw.
    private func refuse(_ app: String, reason: String, _ message: String) -> RainError {
        var record = apps[app] ?? AppRecord()
        record.refusals += 1
        var text = "\(message); the action was not carried out"
        if record.refusals >= settings.refusalLimit {
            record.refusals = 0
            record.lockedUntil = clock.monotonic + settings.lockout
            text +=
                "; after \(settings.refusalLimit) refusals in a row this app gets no new prompt for "
                + "\(settings.lockout.components.seconds) s"
        }
        if apps[app] == nil, apps.count >= Self.maximumRemembered {
            apps = apps.filter { $0.value.lockedUntil != nil }
        }
        apps[app] = record
        logger.info("prompt.refused", ["app": app, "reason": reason, "refusals": String(record.refusals)])
        return RainError(.userCancelled, text, details: RainError.Details(reason: reason))
    }

    private func withdrawnError() -> RainError {
        RainError(
            .userCancelled, "the call was cancelled and its prompt withdrawn; nothing was done",
            details: RainError.Details(reason: PromptReason.withdrawn))
    }
}
