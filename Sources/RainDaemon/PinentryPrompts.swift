import Dispatch
import FoundationEssentials
import Glibc
import RainAccess
import RainCore
import RainDevice
import Synchronization

/// The user's confirmation through pinentry (`PromptCoordinator`), and where it appears: the
/// daemon's display, or the terminal `rainwallet prompt here` registered (kept across restarts
/// while it is open).
///
/// A new place is confirmed where the user already is: on the place still open, else on the
/// display. With neither, only the very first place is trusted (and audited); once a place has
/// existed (`PromptPlaceHistory`), a new one is confirmed by the place secret chosen with the first,
/// then waits `PromptPlaceHistory.moveWait` before it takes over.
final class PinentryPrompts: UserConfirming, PromptPlaceRegistry {
    private let coordinator: PromptCoordinator?
    private let hasDisplay: Bool
    /// The registered terminal (restored at start while it is still open, or registered since).
    private let registered: Mutex<PromptPlace?>
    /// Where the registered terminal is kept across restarts; nil in tests that keep none.
    private let store: PromptPlaceStore?
    /// Where the places' history is kept (the approvals record); set once per-app access exists.
    private let history = Mutex<(any PromptPlaceHistoryKeeping)?>(nil)
    /// Set while a registration runs: another one meanwhile is RAIN_302 `prompt_busy` (two
    /// "first" registrations at once must not both be trusted).
    private let isRegistering = Mutex(false)
    private let clock: any RainClock
    /// PBKDF2 iterations of a new place secret.
    private let secretIterations: Int
    private let audit: @Sendable (AccessEvent) async -> Void
    /// PBKDF2 takes a good part of a second: never on the event loop or the concurrency pool.
    private let derivations = DispatchQueue(label: "rainwalletd.place-secret")
    /// The confirmation keys; nil in a daemon without security key support.
    private let keyring = Mutex<ConfirmationKeyring?>(nil)

    init(
        coordinator: PromptCoordinator?, hasDisplay: Bool, registered: PromptPlace? = nil,
        store: PromptPlaceStore? = nil, clock: any RainClock = SystemClock(),
        secretIterations: Int = PromptPlaceHistory.iterations, audit: @escaping @Sendable (AccessEvent) async -> Void
    ) {
        self.coordinator = coordinator
        self.hasDisplay = hasDisplay
        self.registered = Mutex(registered)
        self.store = store
        self.clock = clock
        self.secretIterations = secretIterations
        self.audit = audit
    }

    /// Keeps the places' history in `keeper` from now on.
    func keepHistory(in keeper: any PromptPlaceHistoryKeeping) { history.withLock { $0 = keeper } }

    var canPrompt: Bool { coordinator != nil && (hasDisplay || registered.withLock { $0 != nil }) }

    func confirm(_ question: UserQuestion) async throws(RainError) {
        guard let coordinator else { throw Self.noPinentry() }
        let keyring = keyring.withLock { $0 }.flatMap { $0.isRequired ? $0 : nil }
        var question = question
        if let keyring {
            question.notes.append(ConfirmationKeyring.promptNote)
            // One confirmation at a time, its touch included: a second prompt while the keys blink
            // for the first would leave the user not knowing which action a touch confirms.
            try keyring.takeSlot()
        }
        defer { keyring?.releaseSlot() }
        let confirmation = try await coordinator.confirm(question)
        // Always after the typed code, never instead of it: a program can read the code off the
        // screen, it cannot press the key.
        guard let keyring else { return }
        let request = [question.profile, question.caller.appPath, String(question.caller.pid), question.action]
            .joined(separator: "\u{0}")
        try await keyring.confirm(text: confirmation.text, code: confirmation.code, request: Array(request.utf8))
    }

    /// Uses `keyring`'s keys from now on: every confirmation is followed by a touch once one is
    /// registered.
    func requireTouches(from keyring: ConfirmationKeyring) { self.keyring.withLock { $0 = keyring } }

    func addConfirmationKey(caller: CallerIdentity, profile: String) async throws(RainError) -> (
        name: String, keyCount: Int
    ) {
        guard let keyring = keyring.withLock({ $0 }) else {
            throw RainError(
                .unavailable, "this rainwalletd has no security key support: confirmation keys cannot be added",
                details: .init(reason: "security_key_unavailable"))
        }
        let question = UserQuestion(
            action: "use the security key you touch next to confirm, with a touch after the code, every export, "
                + "signature, app approval and settings change",
            caller: caller, profile: profile)
        // Confirmed like any settings change: once a key is registered, adding another also
        // takes a touch of a registered one.
        try await confirm(question)
        do {
            let added = try await keyring.add(prompt: KeyPINPrompt(prompts: self, question: question))
            await audit(
                AccessEvent(
                    event: "confirmation_key_added", profile: profile, app: caller, result: "ok",
                    detail: "\(added.name.isEmpty ? "a security key" : added.name), \(added.keyCount) registered"))
            return added
        } catch {
            await audit(
                AccessEvent(
                    event: "confirmation_key_added", profile: profile, app: caller,
                    result: error.details.reason ?? "\(error.code)"))
            throw error
        }
    }

    func removeConfirmationKeys(caller: CallerIdentity, profile: String) async throws(RainError) -> Int {
        guard let keyring = keyring.withLock({ $0 }), keyring.isRequired else { return 0 }
        let count = keyring.names.count
        // The code and a touch of a registered key: a program that can read the screen cannot
        // take the touch away.
        try await confirm(
            UserQuestion(
                action: "stop asking a touch of a confirmation key after the code (remove the \(count) registered)",
                caller: caller, profile: profile))
        let removed = try keyring.removeAll()
        await audit(
            AccessEvent(
                event: "confirmation_keys_removed", profile: profile, app: caller, result: "ok", detail: "\(removed) removed"))
        return removed
    }

    func confirmationKeyNames() -> [String] { keyring.withLock { $0 }?.names ?? [] }

    /// A key's PIN, asked on the prompt under the add-key request.
    private struct KeyPINPrompt: DaemonAuthenticatorPrompt {
        let prompts: PinentryPrompts
        let question: UserQuestion

        func askSecret(_ secret: SecretQuestion) async throws(RainError) -> SecretBytes {
            try await prompts.askSecret(question, secret: secret)
        }
        func confirm(_ what: String) async throws(RainError) {}
        func whileWaiting<T: Sendable>(
            _ status: String, _ body: @escaping @Sendable () async throws(RainError) -> T
        ) async throws(RainError) -> T {
            try await prompts.showWhile(question, status: status, body)
        }
    }

    func askSecret(_ question: UserQuestion, secret: SecretQuestion) async throws(RainError) -> SecretBytes {
        guard let coordinator else { throw Self.noPinentry() }
        return try await coordinator.askSecret(question, question: secret)
    }

    func showWhile<T: Sendable>(
        _ question: UserQuestion, status: String, _ body: @escaping @Sendable () async throws(RainError) -> T
    ) async throws(RainError) -> T {
        guard let coordinator else { return try await body() }
        return try await coordinator.showWhile(question, status: status, body)
    }

    func register(terminal: String, secret: String?, caller: CallerIdentity, profile: String) async throws(RainError)
        -> String
    {
        guard let coordinator else { throw Self.noPinentry() }
        try RegisteredTerminal.check(path: terminal)
        let isFree = isRegistering.withLock { busy in
            defer { busy = true }
            return !busy
        }
        guard isFree else {
            throw RainError(
                .refused, "another prompt place is being registered; try again when it is done",
                details: RainError.Details(reason: PromptReason.busy))
        }
        defer { isRegistering.withLock { $0 = false } }
        // A registered terminal that was closed since (its node gone, or made anew for another
        // terminal) is no place to confirm on: the display is, if there is one.
        if let previous = registered.withLock({ $0 }), !previous.isOpen {
            registered.withLock { $0 = nil }
            var targets = await coordinator.currentTargets
            targets.terminal = nil
            await coordinator.setTargets(targets)
        }
        guard
            let place = PromptPlace.current(
                path: terminal, term: RegisteredTerminal(path: terminal).term,
                sessionLeader: caller.sessionID > 0 ? caller.sessionID : nil)
        else {
            throw RainError(
                .invalidArgument, "the prompt terminal \(terminal) is gone; run `rainwallet prompt here` again",
                details: RainError.Details(reason: PromptReason.invalidTarget, field: "prompt.terminal"))
        }
        let keeper = history.withLock { $0 }
        let before = keeper?.promptPlaceHistory
        var next = before ?? PromptPlaceHistory(firstRegisteredAt: clock.now)
        // Without a display, the secret is what will confirm a place once none is left: chosen
        // with the first place, or with the next one confirmed on an open place when none was.
        if !hasDisplay, next.secret == nil, before == nil || canPrompt {
            guard let secret else { throw Self.secretToChoose() }
            next.secret = try await derive { [secretIterations] () throws(RainError) in
                try PromptPlaceHistory.makeSecret(secret, iterations: secretIterations)
            }
        }
        let how: String
        if canPrompt {
            try await confirm(
                UserQuestion(
                    action: "show RainWallet's confirmation prompts on the terminal \(terminal) from now on",
                    caller: caller, profile: profile))
            how = terminal
        } else if before == nil {
            how = "\(terminal) (first place, trusted: nothing to confirm it on)"
        } else {
            try await confirmBySecret(secret, place: place, history: &next, keeper: keeper, caller: caller, profile: profile)
            how =
                "\(terminal) (confirmed by the place secret after a \(PromptPlaceHistory.minutes(PromptPlaceHistory.moveWait)) wait)"
        }
        next.pendingMove = nil
        // Kept before it is used: a restart finds it again, a later registration is confirmed on
        // it, and the history says a place existed even if the place's own file goes.
        if next != before { try keeper?.recordPromptPlaceHistory(next) }
        try store?.save(place)
        var targets = await coordinator.currentTargets
        targets.terminal = place.terminal
        await coordinator.setTargets(targets)
        registered.withLock { $0 = place }
        await audit(
            AccessEvent(event: "prompt_registered", profile: profile, app: caller, result: "ok", detail: how))
        return terminal
    }

    /// Confirms a new place by the place secret, on a machine where no place and no display are
    /// left: a wrong secret counts toward the lock; a right one starts the wait, and the same
    /// terminal registering again after it takes over.
    private func confirmBySecret(
        _ secret: String?, place: PromptPlace, history: inout PromptPlaceHistory,
        keeper: (any PromptPlaceHistoryKeeping)?, caller: CallerIdentity, profile: String
    ) async throws(RainError) {
        guard let recorded = history.secret, let keeper else {
            throw RainError(
                .unavailable,
                "the prompt place registered before is gone, this machine has no display to confirm a new one on, and "
                    + "no place secret was chosen: start rainwalletd where it has a display (DISPLAY or WAYLAND_DISPLAY) "
                    + "and register the terminal from there",
                details: RainError.Details(reason: PromptReason.placeUnconfirmable))
        }
        let now = clock.now
        if let remaining = history.lockRemaining(at: now) { throw PromptPlaceHistory.locked(remaining) }
        guard let secret else {
            throw RainError(
                .invalidArgument,
                "the prompt place registered before is gone and this machine has no display: the place secret chosen "
                    + "with the first place confirms a new one; `rainwallet prompt here` asks for it",
                details: RainError.Details(reason: PromptReason.secretRequired, field: "secret"))
        }
        let isRight = try await derive { () throws(RainError) in try PromptPlaceHistory.matches(secret, recorded) }
        guard isRight else {
            let error = history.recordWrongSecret(at: now)
            try keeper.recordPromptPlaceHistory(history)
            await audit(
                AccessEvent(
                    event: "prompt_secret_wrong", profile: profile, app: caller, result: error.details.reason ?? "refused",
                    detail: place.path))
            throw error
        }
        history.failedTries = 0
        let nowMilliseconds = PromptPlaceHistory.milliseconds(now)
        if let pending = history.pendingMove, pending.place == place {
            if nowMilliseconds >= pending.movesAtMilliseconds { return }
            try keeper.recordPromptPlaceHistory(history)
            throw PromptPlaceHistory.waiting(place.path, .milliseconds(pending.movesAtMilliseconds - nowMilliseconds))
        }
        history.pendingMove = PromptPlaceHistory.PendingMove(
            place: place, movesAtMilliseconds: nowMilliseconds + PromptPlaceHistory.moveWait.milliseconds)
        try keeper.recordPromptPlaceHistory(history)
        await audit(
            AccessEvent(
                event: "prompt_move_requested", profile: profile, app: caller, result: "ok",
                detail:
                    "\(place.path) (place secret right; takes over after a \(PromptPlaceHistory.minutes(PromptPlaceHistory.moveWait)) wait)"
            ))
        throw PromptPlaceHistory.waiting(place.path, PromptPlaceHistory.moveWait)
    }

    /// Runs a key derivation on `derivations`.
    private func derive<T: Sendable>(_ work: @escaping @Sendable () throws(RainError) -> T) async throws(RainError) -> T {
        let result = await withCheckedContinuation { (c: CheckedContinuation<Result<T, RainError>, Never>) in
            derivations.async { c.resume(returning: Result { () throws(RainError) in try work() }) }
        }
        return try result.get()
    }

    static func secretToChoose() -> RainError {
        RainError(
            .invalidArgument,
            "this machine has no display: choose a place secret (at least \(PromptPlaceHistory.minimumSecretLength) "
                + "characters) with this place; it confirms a new place if this one is ever gone. `rainwallet prompt "
                + "here` asks for it",
            details: RainError.Details(reason: PromptReason.secretToChoose, field: "secret"))
    }

    func place() async -> PromptPlaceReport {
        // Without a pinentry no prompt appears anywhere.
        guard let coordinator else { return PromptPlaceReport() }
        return await PromptPlaceReport.read(coordinator.currentTargets)
    }

    static func noPinentry() -> RainError {
        RainError(
            .unavailable,
            "no pinentry program is installed: install pinentry-tty (or pinentry-gnome3 on a desktop), or set "
                + "access.pinentry, then restart rainwalletd",
            details: RainError.Details(reason: PromptReason.unavailable))
    }
}
