import Dispatch
import RainCore
import Synchronization

/// The SQLite store's one writer: owns the connection and its serial queue, and commits the
/// requests that wait for it together (group commit).
///
/// Every request of the store is queued here. Whenever the queue is free, the writer takes every
/// waiting request (at most `maxGroupSize`), opens one `BEGIN IMMEDIATE` transaction, runs each
/// request in a savepoint of its own and commits once: one WAL append and one fsync
/// (`synchronous=FULL`) for the whole group instead of one per request. Requests that arrive
/// meanwhile form the next group, so the group grows with the load and a lone request is
/// committed at once, as before.
///
/// What each caller is promised is unchanged:
/// - its answer comes only after the commit that made its writes durable returned; when that
///   commit fails, every request of the group that wrote or read another's writes fails with it,
///   and none of their writes is kept;
/// - a request whose statements fail (or that throws) rolls back to its savepoint: its own writes
///   go, the others of its group stay, and it gets its own error at once;
/// - a request is atomic (its savepoint), and requests never interleave: each sees the writes of
///   the requests before it in its group, as it would after their commits.
/// A request that wrote nothing and ran before any request of its group wrote saw only committed
/// data: it is answered at once, without waiting for the group's commit.
final class SQLiteGroupCommitWriter: @unchecked Sendable {
    // @unchecked: `connection` is read and written only on `queue` (a serial queue); `waiting` and
    // `hooks` are behind mutexes; every other stored property is immutable and Sendable.
    private var connection: SQLiteConnection?
    /// The serial queue every SQLite call of the writer runs on.
    let queue: DispatchQueue
    private let waiting = Mutex(Waiting())
    private let hooks = Mutex(GroupCommitHooks())
    /// Counts the transactions that committed a write, moved before their requests are answered.
    let changes = StoreChangeCount()

    /// The most requests in one transaction: bounds how long the last one waits for the commit.
    static let maxGroupSize = 64

    private struct Waiting {
        var requests: [any GroupRequest] = []
        /// Whether a `drain` is queued on `queue`: at most one is, and it takes what waits then.
        var isDrainQueued = false
    }

    init(label: String) {
        queue = DispatchQueue(label: label)
    }

    // MARK: - Outside any group

    /// Runs `body` on the queue, alone and outside any group: opening, migrating, closing.
    func runAlone<T: Sendable>(_ body: @escaping @Sendable () throws(RainError) -> T) async throws(RainError) -> T {
        try await queue.runBlocking(body)
    }

    /// Sets (or, with nil, closes) the connection. Call on `queue` only (inside `runAlone`).
    func install(_ connection: SQLiteConnection?) {
        dispatchPrecondition(condition: .onQueue(queue))
        self.connection = connection
    }

    // MARK: - Requests

    /// Runs `body` with the connection in the next group and returns its result once it is
    /// committed (see the type's notes).
    /// - Throws: what `body` throws; RAIN_502 when the database is closed, or when the group's
    ///   transaction cannot begin or commit.
    func perform<T: Sendable>(
        _ body: @escaping @Sendable (SQLiteConnection) throws(RainError) -> T
    ) async throws(RainError) -> T {
        let result: Result<T, RainError> = await withCheckedContinuation { continuation in
            submit(body) { continuation.resume(returning: $0) }
        }
        return try result.get()
    }

    /// Queues `body` for the next group at once and calls `completion` (on the queue) with its
    /// result when `perform` would return it. Tests use it to queue requests in a known order.
    func submit<T: Sendable>(
        _ body: @escaping @Sendable (SQLiteConnection) throws(RainError) -> T,
        completion: @escaping @Sendable (Result<T, RainError>) -> Void
    ) {
        enqueue(Request(body: body, completion: completion))
    }

    private func enqueue(_ request: any GroupRequest) {
        let mustQueueDrain = waiting.withLock { waiting -> Bool in
            waiting.requests.append(request)
            guard !waiting.isDrainQueued else { return false }
            waiting.isDrainQueued = true
            return true
        }
        if mustQueueDrain { queue.async { self.drain() } }
    }

    /// Takes the waiting requests (one group's worth) and runs them. On `queue`.
    private func drain() {
        let group = waiting.withLock { waiting -> [any GroupRequest] in
            let count = min(waiting.requests.count, Self.maxGroupSize)
            let group = Array(waiting.requests.prefix(count))
            waiting.requests.removeFirst(count)
            // More than a group's worth waits: the next drain is queued behind this one, so
            // `isDrainQueued` stays true.
            if waiting.requests.isEmpty { waiting.isDrainQueued = false } else { queue.async { self.drain() } }
            return group
        }
        guard let connection else {
            let closed = RainError(.internalError, "authority store: the database is closed")
            for request in group { request.fail(closed) }
            return
        }
        var next = 0
        while next < group.count {
            next = runGroup(group, from: next, on: connection)
        }
    }

    /// Runs `group[start...]` in one transaction and commits it; returns the index after the last
    /// request it answered (`group.count`, unless a request's failure ended the transaction: the
    /// rest then go in a transaction of their own).
    private func runGroup(_ group: [any GroupRequest], from start: Int, on db: SQLiteConnection) -> Int {
        do {
            try db.beginImmediate("run a group of requests")
        } catch {
            for request in group[start...] { request.fail(error) }
            return group.count
        }
        // Whether a request of this transaction wrote and kept its writes: every later request
        // may have read them, so none is answered before the commit.
        var isDirty = false
        var uncommitted: [any GroupRequest] = []
        var index = start
        while index < group.count {
            let request = group[index]
            index += 1
            let writesBefore = db.writingStatementCount
            let succeeded = request.run(on: db)
            guard db.isInTransaction else {
                // The failure ended the whole transaction (an I/O error, a full disk): the writes
                // of the requests before it are gone with it. The request itself failed, even if it
                // swallowed the error: its savepoint could not be released.
                request.answer()
                let lost = RainError(
                    .internalError,
                    "authority store: a failure in the database rolled back this request's transaction; try again")
                for earlier in uncommitted { earlier.fail(lost) }
                return index
            }
            let wrote = db.writingStatementCount != writesBefore
            if !succeeded || (!wrote && !isDirty) {
                // Its own failure (its savepoint rolled back), or a read of committed data only.
                request.answer()
            } else {
                isDirty = isDirty || wrote
                uncommitted.append(request)
            }
        }
        do {
            if let beforeCommit = hooks.withLock({ $0.beforeCommit }) { try beforeCommit(uncommitted.count) }
            try db.commit("run a group of requests")
        } catch {
            db.rollback()
            for request in uncommitted { request.fail(error) }
            return index
        }
        // Before any caller hears its write is done: what was read before it is stale from now.
        if isDirty { changes.advance() }
        for request in uncommitted { request.answer() }
        return index
    }

    // MARK: - Tests

    /// Sets the hooks tests use to see and break group commits.
    func setHooks(_ newHooks: GroupCommitHooks) {
        hooks.withLock { $0 = newHooks }
    }
}

/// Test hooks of `SQLiteGroupCommitWriter`.
struct GroupCommitHooks: Sendable {
    /// Called on the writer's queue right before a group's `COMMIT`, with the number of requests
    /// waiting for it; an error thrown here fails the commit (rolled back, every one of them fails).
    var beforeCommit: (@Sendable (_ requests: Int) throws(RainError) -> Void)?
}

/// One queued request, its result type erased. Used only on the writer's queue.
private protocol GroupRequest: AnyObject, Sendable {
    /// Runs the request in a savepoint; false when it failed (its statements rolled back).
    func run(on db: SQLiteConnection) -> Bool
    /// Answers the caller with the request's own result.
    func answer()
    /// Answers the caller with `error` instead.
    func fail(_ error: RainError)
}

private final class Request<T: Sendable>: GroupRequest, @unchecked Sendable {
    // @unchecked: `result` is written and read only on the writer's queue; `body` and
    // `completion` are immutable and Sendable.
    private let body: @Sendable (SQLiteConnection) throws(RainError) -> T
    private let completion: @Sendable (Result<T, RainError>) -> Void
    private var result: Result<T, RainError>?

    init(
        body: @escaping @Sendable (SQLiteConnection) throws(RainError) -> T,
        completion: @escaping @Sendable (Result<T, RainError>) -> Void
    ) {
        self.body = body
        self.completion = completion
    }

    func run(on db: SQLiteConnection) -> Bool {
        let outcome = Result { () throws(RainError) -> T in
            try db.savepoint("run a request") { () throws(RainError) -> T in try body(db) }
        }
        result = outcome
        if case .success = outcome { return true }
        return false
    }

    func answer() {
        completion(result ?? .failure(RainError(.internalError, "authority store: a request was never run")))
    }

    func fail(_ error: RainError) {
        completion(.failure(error))
    }
}
