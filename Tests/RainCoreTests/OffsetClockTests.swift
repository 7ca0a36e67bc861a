import Dispatch
import Foundation
@testable import RainCore
import RainTestSupport
import Synchronization
import Testing

/// `OffsetClock` is moved by a file. The poll is set an hour apart so only `reload()` reads the
/// file, and each step is explicit.
@Suite struct OffsetClockTests {
    let dir: String
    let file: TestClockFile

    init() throws {
        dir = "/tmp/rwoc-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false)
        file = try TestClockFile(path: "\(dir)/clock")
    }

    func makeClock(_ sink: CapturingLogSink = CapturingLogSink()) -> OffsetClock {
        OffsetClock(
            file: file.path, pollInterval: .seconds(3600), logger: Logger(label: "test", minimumLevel: .debug, sink: sink))
    }

    /// Counts the runs of a timer's work.
    final class Fired: Sendable {
        let count = Mutex(0)
        var value: Int { count.withLock { $0 } }
        func hit() { count.withLock { $0 += 1 } }
    }

    @Test func wallAndMonotonicTimeMoveByTheOffsetInTheFile() throws {
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try file.advance(by: .seconds(5))
        let clock = makeClock()
        #expect(clock.offset == .seconds(5))
        let wall = clock.now.timeIntervalSince(Date())
        let monotonic = clock.monotonic - SystemClock().monotonic
        // Both differences are read back to back; the second read is later, so they can only be smaller.
        #expect(wall > 4 && wall <= 5)
        #expect(monotonic > .seconds(4) && monotonic <= .seconds(5))
        try file.advance(by: .milliseconds(1500))
        clock.reload()
        #expect(clock.offset == .milliseconds(6500))
    }

    @Test func anAdvancePastTheDueTimeFiresTheTimerAndNotBefore() throws {
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let clock = makeClock()
        let queue = DispatchQueue(label: "test.timers")
        let fired = Fired()
        let timer = clock.schedule(after: .seconds(60), on: queue) { fired.hit() }
        try file.advance(by: .seconds(59))
        clock.reload()
        queue.sync {}  // anything the reload fired is queued before this
        #expect(fired.value == 0)
        try file.advance(by: .seconds(2))
        clock.reload()
        queue.sync {}
        #expect(fired.value == 1)
        try file.advance(by: .seconds(60))
        clock.reload()
        queue.sync {}
        #expect(fired.value == 1)  // one-shot
        timer.cancel()
    }

    @Test func timersFireInDueOrderAfterOneBigAdvance() throws {
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let clock = makeClock()
        let queue = DispatchQueue(label: "test.timers")
        let order = Mutex<[Int]>([])
        let timers = [30, 10, 20].map { s in
            clock.schedule(after: .seconds(Int64(s)), on: queue) { order.withLock { $0.append(s) } }
        }
        try file.advance(by: .seconds(31))
        clock.reload()
        queue.sync {}
        #expect(order.withLock { $0 } == [10, 20, 30])
        timers.forEach { $0.cancel() }
    }

    @Test func aCancelledOrReleasedTimerNeverFires() throws {
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let clock = makeClock()
        let queue = DispatchQueue(label: "test.timers")
        let fired = Fired()
        let cancelled = clock.schedule(after: .seconds(10), on: queue) { fired.hit() }
        cancelled.cancel()
        _ = clock.schedule(after: .seconds(10), on: queue) { fired.hit() }  // released at once, like a Dispatch timer
        try file.advance(by: .seconds(11))
        clock.reload()
        queue.sync {}
        #expect(fired.value == 0)
    }

    @Test func withoutAnAdvanceATimerFiresAtItsDueTime() async throws {
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let clock = makeClock()
        let start = SystemClock().monotonic
        let firedAt = Mutex<Duration?>(nil)
        let timer = clock.schedule(after: .milliseconds(50), on: .global()) { firedAt.withLock { $0 = SystemClock().monotonic } }
        defer { timer.cancel() }
        await clock.sleep(for: .milliseconds(60))  // the clock's own sleep, a timer too
        let at = try #require(await waitFor { firedAt.withLock { $0 } })
        #expect(at - start >= .milliseconds(50))
    }

    @Test func thePollPicksUpAnAdvanceWithoutAReload() async throws {
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let clock = OffsetClock(
            file: file.path, pollInterval: .milliseconds(10), logger: Logger(label: "test", sink: CapturingLogSink()))
        let fired = Fired()
        let timer = clock.schedule(after: .seconds(3600), on: .global()) { fired.hit() }
        defer { timer.cancel() }
        try file.advance(by: .seconds(3601))
        #expect(await waitFor { fired.value == 1 ? true : nil } == true)
        #expect(clock.offset == .seconds(3601))
    }

    @Test(arguments: ["abc", "", "12.5", "1e3", "0x10", "99999999999999999999", "5 5"])
    func aMalformedFileIsRefusedLoggedOnceAndTheOffsetStays(_ text: String) throws {
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try file.advance(by: .seconds(2))
        let sink = CapturingLogSink()
        let clock = makeClock(sink)
        try text.write(toFile: file.path, atomically: true, encoding: .utf8)
        clock.reload()
        clock.reload()
        #expect(clock.offset == .seconds(2))
        #expect(sink.captured.filter { $0.contains("clock.offset_refused") }.count == 1)
        // A good value afterwards is taken.
        try "3000\n".write(toFile: file.path, atomically: true, encoding: .utf8)
        clock.reload()
        #expect(clock.offset == .seconds(3))
    }

    @Test func aSmallerOffsetIsRefusedBecauseMonotonicTimeNeverGoesBack() throws {
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try file.advance(by: .seconds(10))
        let sink = CapturingLogSink()
        let clock = makeClock(sink)
        let before = clock.monotonic
        try "4000".write(toFile: file.path, atomically: true, encoding: .utf8)
        clock.reload()
        #expect(clock.offset == .seconds(10))
        #expect(clock.monotonic >= before)
        #expect(sink.captured.contains { $0.contains("clock.offset_refused") })
    }

    @Test func aFileOthersMayWriteOrASymlinkIsRefused() throws {
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try file.advance(by: .seconds(1))
        let sink = CapturingLogSink()
        let clock = makeClock(sink)
        // Writable by others: refused, the offset stays.
        try "5000".write(toFile: file.path, atomically: true, encoding: .utf8)
        #expect(chmod(file.path, 0o666) == 0)
        clock.reload()
        #expect(clock.offset == .seconds(1))
        #expect(sink.captured.contains { $0.contains("clock.offset_refused") && $0.contains("writable by group or others") })
        // A symbolic link to a good file: refused too.
        let target = "\(dir)/target"
        try "6000".write(toFile: target, atomically: true, encoding: .utf8)
        #expect(chmod(target, 0o600) == 0)
        try FileManager.default.removeItem(atPath: file.path)
        try FileManager.default.createSymbolicLink(atPath: file.path, withDestinationPath: target)
        clock.reload()
        #expect(clock.offset == .seconds(1))
        #expect(sink.captured.contains { $0.contains("not a regular file") })
        // The same file, private and regular: taken.
        try FileManager.default.removeItem(atPath: file.path)
        try "6000".write(toFile: file.path, atomically: true, encoding: .utf8)
        #expect(chmod(file.path, 0o600) == 0)
        clock.reload()
        #expect(clock.offset == .seconds(6))
    }

    @Test func aMissingFileLeavesTheOffset() throws {
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try file.advance(by: .seconds(1))
        let sink = CapturingLogSink()
        let clock = makeClock(sink)
        try FileManager.default.removeItem(atPath: file.path)
        clock.reload()
        #expect(clock.offset == .seconds(1))
        #expect(sink.captured.allSatisfy { !$0.contains("clock.offset_refused") })
    }

    /// Polls `value` until it is non-nil (at most 2 s; returns as soon as it is).
    func waitFor<T: Sendable>(_ value: @Sendable () -> T?) async -> T? {
        let deadline = ContinuousClock.now + .seconds(2)
        while ContinuousClock.now < deadline {
            if let v = value() { return v }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return value()
    }
}

@Suite struct DurationNanosecondsTests {
    @Test("a duration in whole nanoseconds, truncated, clamped to Int64; Dispatch gets none below zero")
    func clampedNanoseconds() {
        #expect(Duration.milliseconds(1_500).clampedNanoseconds == 1_500_000_000)
        #expect(Duration.nanoseconds(-7).clampedNanoseconds == -7)
        #expect(Duration(secondsComponent: 0, attosecondsComponent: 3_999_999_999).clampedNanoseconds == 3)
        #expect(Duration.seconds(Int64.max).clampedNanoseconds == .max)
        #expect(Duration.seconds(Int64.min).clampedNanoseconds == .min)
        #expect(OffsetClock.dispatchInterval(.milliseconds(2)) == .nanoseconds(2_000_000))
        #expect(OffsetClock.dispatchInterval(.seconds(-1)) == .nanoseconds(0))
        #expect(OffsetClock.dispatchInterval(.seconds(Int64.max)) == .nanoseconds(Int.max))
    }
}
