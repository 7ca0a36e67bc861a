import Dispatch
import FoundationEssentials
import Glibc
import RainCore
import Synchronization

/// A fixed set of PostgreSQL connections, each used only on its own serial queue, so blocking
/// libpq calls never run on the Swift concurrency pool. A caller waits (asynchronously) for a free
/// connection, runs its whole unit of work on that connection's queue, and hands it back.
final class PostgresConnectionPool: Sendable {
    /// One connection and the queue it is used on.
    private final class Slot: @unchecked Sendable {
        // @unchecked: `connection` is read and written only on `queue` (a serial queue).
        let queue: DispatchQueue
        var connection: PostgresConnection?

        init(index: Int, connection: PostgresConnection) {
            self.queue = DispatchQueue(label: "rain.authority.postgres.\(index)")
            self.connection = connection
        }
    }

    private struct State {
        var free: [Int]
        var waiters: [CheckedContinuation<Int?, Never>] = []
        var isClosed = false
    }

    private let slots: [Slot]
    private let state: Mutex<State>
    /// `user@host:port/database`, for messages.
    let target: String

    /// Takes ownership of `connections` (at least one).
    init(connections: [PostgresConnection]) {
        self.slots = connections.enumerated().map { Slot(index: $0.offset, connection: $0.element) }
        self.state = Mutex(State(free: Array(connections.indices.reversed())))
        self.target = connections.first?.target ?? ""
    }

    /// Runs `body` with a free connection on that connection's queue.
    /// - Throws: what `body` throws; RAIN_502 when the pool is closed.
    func withConnection<T: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection) throws(RainError) -> T
    ) async throws(RainError) -> T {
        guard let index = await checkout() else { throw Self.closedError }
        let slot = slots[index]
        let result: Result<T, RainError>
        do {
            result = .success(
                try await slot.queue.runBlocking { () throws(RainError) -> T in
                    guard let connection = slot.connection else { throw Self.closedError }
                    return try body(connection)
                })
        } catch {
            result = .failure(error)
        }
        checkin(index)
        return try result.get()
    }

    /// Closes every connection once its current work is done; later calls throw RAIN_502.
    func close() async {
        let waiters = state.withLock { s in
            s.isClosed = true
            defer { s.waiters.removeAll() }
            return s.waiters
        }
        for waiter in waiters { waiter.resume(returning: nil) }
        for slot in slots {
            _ = try? await slot.queue.runBlocking { () throws(RainError) in slot.connection = nil }
        }
    }

    private func checkout() async -> Int? {
        await withCheckedContinuation { (continuation: CheckedContinuation<Int?, Never>) in
            enum Action {
                case resume(Int?)
                case wait
            }
            let action = state.withLock { s -> Action in
                if s.isClosed { return .resume(nil) }
                if let index = s.free.popLast() { return .resume(index) }
                s.waiters.append(continuation)
                return .wait
            }
            if case .resume(let index) = action { continuation.resume(returning: index) }
        }
    }

    private func checkin(_ index: Int) {
        let waiter = state.withLock { s -> CheckedContinuation<Int?, Never>? in
            if !s.waiters.isEmpty { return s.waiters.removeFirst() }
            s.free.append(index)
            return nil
        }
        waiter?.resume(returning: index)
    }

    private static var closedError: RainError { RainError(.internalError, "authority store: the database is closed") }
}
