import Foundation
import RainCore
import Synchronization

/// The test's side of `OffsetClock`: moves the clocks of the daemon processes that read this file
/// (through `RAINWALLET_TEST_CLOCK_FILE`).
public final class TestClockFile: Sendable {
    /// The offset file.
    public let path: String
    private let offset = Mutex<Duration>(.zero)

    /// Writes offset zero to `path`.
    public init(path: String) throws {
        self.path = path
        try write(.zero)
    }

    /// The environment that points a daemon at this file.
    public var environment: [String: String] { [TestClockEnvironment.variable: path] }

    /// How far the clocks have been moved.
    public var elapsed: Duration { offset.withLock { $0 } }

    /// Moves the clocks forward by `delta` (atomically: a reader sees the old or the new offset).
    public func advance(by delta: Duration) throws {
        // Written under the lock, so two advances never reach the file out of order.
        try offset.withLock { o in
            o += delta
            try write(o)
        }
    }

    private func write(_ value: Duration) throws {
        try "\(value.milliseconds)\n".write(toFile: path, atomically: true, encoding: .utf8)
    }
}
