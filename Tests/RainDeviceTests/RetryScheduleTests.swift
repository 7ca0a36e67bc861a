import Foundation
import RainCore
import RainTestSupport
import Synchronization
import Testing

@testable import RainDevice

/// The one retry helper of reads and refresh.
@Suite struct RetryScheduleTests {
    @Test func theDefaultScheduleIsTwoRetriesFrom500MillisecondsDoubling() {
        let schedule = RetrySchedule(policy: .default, retries: RainWalletSessionPolicy.default.transientRetries)
        #expect(schedule.retries == 2)
        #expect((1...2).map(schedule.delay(beforeRetry:)) == [.milliseconds(500), .seconds(1)])
    }

    @Test func theDelayDoublesUpToTheCapOfFourSeconds() {
        let schedule = RetrySchedule(policy: .default, retries: 7)
        #expect(
            (1...7).map(schedule.delay(beforeRetry:)) == [
                .milliseconds(500), .seconds(1), .seconds(2), .seconds(4), .seconds(4), .seconds(4), .seconds(4),
            ])
    }

    @Test func transientFailuresAreRetriedOnTheClockThenExhausted() async throws {
        let clock = ManualClock()
        let attempts = Mutex<[Int]>([])
        let schedule = RetrySchedule(policy: .default, retries: 2)
        let task = Task {
            await schedule.run(clock: clock) { number -> RetryStep<Int> in
                attempts.withLock { $0.append(number) }
                return .transient(RainError(.network, "down (test)"))
            } exhausted: { error in
                RainError(.network, "exhausted", details: .init(reason: "exhausted"), underlying: SendableErrorDescription(error))
            }
        }
        await eventually("first attempt, then its backoff") {
            attempts.withLock { $0.count } == 1 && clock.pendingTimerCount == 1
        }
        clock.advance(by: .milliseconds(499))
        #expect(attempts.withLock { $0.count } == 1)
        clock.advance(by: .milliseconds(1))
        await eventually("second attempt, then its backoff") {
            attempts.withLock { $0.count } == 2 && clock.pendingTimerCount == 1
        }
        clock.advance(by: .milliseconds(999))
        #expect(attempts.withLock { $0.count } == 2)
        clock.advance(by: .milliseconds(1))
        let result = await task.value
        #expect(attempts.withLock { $0 } == [1, 2, 3])
        #expect(clock.pendingTimerCount == 0)
        guard case .failure(let error) = result else {
            Issue.record("expected the exhausted error")
            return
        }
        #expect(error.details.reason == "exhausted")
    }

    @Test func aSuccessAfterAFailureStopsTheRetries() async throws {
        let clock = ManualClock()
        let attempts = Mutex(0)
        let task = Task {
            await RetrySchedule(policy: .default, retries: 2).run(clock: clock) { _ -> RetryStep<String> in
                let n = attempts.withLock { n in
                    n += 1
                    return n
                }
                return n == 1 ? .transient(RainError(.network, "down (test)")) : .finished(.success("ok"))
            } exhausted: {
                $0
            }
        }
        await eventually("backoff") { clock.pendingTimerCount == 1 }
        clock.advance(by: .milliseconds(500))
        #expect(try await task.value.get() == "ok")
        #expect(attempts.withLock { $0 } == 2)
    }

    @Test func againRetriesAtOnceWithoutCountingARetry() async throws {
        let clock = ManualClock()
        let attempts = Mutex<[Int]>([])
        let result = await RetrySchedule(policy: .default, retries: 0).run(clock: clock) { number -> RetryStep<Int> in
            let count = attempts.withLock { a in
                a.append(number)
                return a.count
            }
            return count < 3 ? .again : .finished(.success(count))
        } exhausted: {
            $0
        }
        #expect(try result.get() == 3)
        #expect(attempts.withLock { $0 } == [1, 1, 1])
        #expect(clock.pendingTimerCount == 0)
    }

    @Test func withoutRetriesATransientFailureIsExhaustedAtOnce() async throws {
        let clock = ManualClock()
        let attempts = Mutex(0)
        let result = await RetrySchedule(policy: .default, retries: 0).run(clock: clock) { _ -> RetryStep<Int> in
            attempts.withLock { $0 += 1 }
            return .transient(RainError(.network, "down (test)"))
        } exhausted: { _ in
            RainError(.unavailable, "gave up")
        }
        #expect(attempts.withLock { $0 } == 1)
        guard case .failure(let error) = result else {
            Issue.record("expected a failure")
            return
        }
        #expect(error.code == .unavailable)
    }
}
