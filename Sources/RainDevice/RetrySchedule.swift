import FoundationEssentials
import RainCore

/// What one attempt of a retried call came to.
enum RetryStep<Success> {
    /// Stop with this result.
    case finished(Result<Success, RainError>)
    /// Try again at once, without counting a retry or waiting: the state changed under the call
    /// (a token rotated meanwhile, or a refresh just renewed it).
    case again
    /// A transient failure: try again after the backoff while retries are left.
    case transient(RainError)
}

extension RetryStep: Sendable where Success: Sendable {}

/// The one retry policy of the session's reads and of its refresh (docs/user-guide.md "Sessions"): after a transient
/// failure wait `initialDelay`, doubling each time up to `maxDelay`, at most `retries` times; sends
/// are never retried (`retries` 0). The waits run on the injected clock.
struct RetrySchedule: Sendable, Hashable {
    /// Retries after the first attempt.
    var retries: Int
    /// The wait before the first retry.
    var initialDelay: Duration
    /// The longest wait between two attempts.
    var maxDelay: Duration

    init(retries: Int, initialDelay: Duration, maxDelay: Duration) {
        self.retries = max(0, retries)
        self.initialDelay = initialDelay
        self.maxDelay = maxDelay
    }

    /// The policy's backoff with `retries` retries (the policy's own count for reads and refresh,
    /// 0 for sends and exports, 0 for the single calls at the cap after the retries ran out).
    init(policy: RainWalletSessionPolicy, retries: Int) {
        self.init(retries: retries, initialDelay: policy.retryInitialDelay, maxDelay: policy.retryMaxDelay)
    }

    /// The wait before retry `number` (1 is the first retry).
    func delay(beforeRetry number: Int) -> Duration {
        var delay = initialDelay
        for _ in 1..<max(1, number) { delay = min(delay * 2, maxDelay) }
        return delay
    }

    /// Runs `attempt` until it finishes, waiting the backoff after each transient failure; when the
    /// retries run out, the last transient failure goes through `exhausted`.
    /// - Parameters:
    ///   - clock: the clock the waits run on.
    ///   - isolation: where `attempt` runs (the caller's actor).
    ///   - attempt: one try; gets its number (1 + the transient failures so far).
    ///   - exhausted: the error to give when the retries ran out, from the last transient one.
    ///   - deadline: when the whole operation must have ended (a read's bound, on `clock`): no
    ///     retry starts whose wait would reach it; nil for no bound.
    /// - Returns: what the attempt finished with, or the exhausted error.
    func run<Success>(
        clock: any RainClock, deadline: Date? = nil, isolation: isolated (any Actor)? = #isolation,
        _ attempt: (_ number: Int) async -> RetryStep<Success>,
        exhausted: (RainError) -> RainError
    ) async -> Result<Success, RainError> {
        var failures = 0
        while true {
            switch await attempt(failures + 1) {
            case .finished(let result):
                return result
            case .again:
                continue
            case .transient(let error):
                guard failures < retries else { return .failure(exhausted(error)) }
                if let deadline, clock.now.adding(delay(beforeRetry: failures + 1)) >= deadline {
                    return .failure(exhausted(error))
                }
                failures += 1
                await clock.sleep(for: delay(beforeRetry: failures))
            }
        }
    }
}
