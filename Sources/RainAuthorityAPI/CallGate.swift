import RainCore
import Synchronization

/// How a bounded call failed: its own error, or its deadline.
enum CallFailure: Error {
    case error(RainError)
    case deadline

    var isError: Bool {
        if case .error = self { return true }
        return false
    }
}

/// Resumes one call's continuation exactly once, with the first of: the answer, the deadline.
/// Whichever comes first stops the other (cancels the timer or the work).
final class CallGate<Value: Sendable>: Sendable {
    typealias Continuation = CheckedContinuation<Result<Value, CallFailure>, Never>

    private struct State {
        var continuation: Continuation?
        var work: Task<Void, Never>?
        var timer: (any RainTimer)?
        var isFinished = false
        var isCancelled = false
    }

    private let state = Mutex(State())

    func begin(_ continuation: Continuation) {
        state.withLock { $0.continuation = continuation }
    }

    /// Keeps the work and the timer so the loser can be stopped; stops them at once if the race is
    /// already over or the caller was cancelled.
    func attach(work: Task<Void, Never>, timer: any RainTimer) {
        let (finished, cancelled) = state.withLock { s -> (Bool, Bool) in
            s.work = work
            s.timer = timer
            return (s.isFinished, s.isCancelled)
        }
        if finished {
            timer.cancel()
            work.cancel()
        } else if cancelled {
            work.cancel()
        }
    }

    func finish(_ result: Result<Value, CallFailure>) {
        let taken = state.withLock { s -> (Continuation, Task<Void, Never>?, (any RainTimer)?)? in
            guard !s.isFinished, let c = s.continuation else { return nil }
            s.isFinished = true
            s.continuation = nil
            return (c, s.work, s.timer)
        }
        guard let (continuation, work, timer) = taken else { return }
        timer?.cancel()
        // When the deadline won, stop the call (the server is sent a cancel); when the answer won,
        // the task is finishing anyway.
        work?.cancel()
        continuation.resume(returning: result)
    }

    func cancelWork() {
        let work = state.withLock { s -> Task<Void, Never>? in
            s.isCancelled = true
            return s.work
        }
        work?.cancel()
    }
}
