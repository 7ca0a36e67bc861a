import Dispatch
import Foundation
import RainAuthorityAPI
import RainCore
import RainTestSupport
import RainWire
import Synchronization
import Testing

@testable import RainAuthority
@testable import RainStore

/// Group commit on the SQLite store: concurrent requests share one transaction and one
/// fsync, each answered only after that commit, each failing alone.
@Suite("SQLite group commit")
struct SQLiteGroupCommitTests {
    /// A store in a temp directory with a table `t (id TEXT PRIMARY KEY)` to write to, and a hook
    /// that records each commit's number of waiting requests (or fails it while `failCommits`).
    final class Fixture: Sendable {
        let directory: String
        let store: SQLiteAuthorityStore
        let hooks = Hooks()

        /// What the commit hook saw, and whether it fails commits.
        final class Hooks: Sendable {
            let commits = Mutex<[Int]>([])
            let failCommits = Mutex(false)
        }

        var commits: [Int] { hooks.commits.withLock { $0 } }

        func setFailCommits(_ fail: Bool) { hooks.failCommits.withLock { $0 = fail } }

        init() async throws {
            directory = try makeTemporaryDirectory()
            store = try await SQLiteAuthorityStore.open(stateDirectory: directory)
            _ = try await store.perform { db throws(RainError) in
                try db.execute("CREATE TABLE t (id TEXT PRIMARY KEY)", operation: "create the test table")
            }
            let hooks = self.hooks
            store.writer.setHooks(
                GroupCommitHooks(beforeCommit: { requests throws(RainError) in
                    hooks.commits.withLock { $0.append(requests) }
                    if hooks.failCommits.withLock({ $0 }) { throw RainError(.internalError, "injected commit failure") }
                }))
        }

        func close() async {
            await store.close()
            try? FileManager.default.removeItem(atPath: directory)
        }

        /// Inserts `id` in a request of its own.
        func insert(_ id: String) async throws(RainError) {
            _ = try await store.perform { db throws(RainError) in
                try db.execute("INSERT INTO t VALUES (?)", [.text(id)], operation: "insert a test row")
            }
        }

        /// The ids in `t`, read by a connection of its own (committed rows only).
        func committedIDs() throws -> [String] {
            let db = try SQLiteConnection(path: store.path, createIfMissing: false)
            return try db.query("SELECT id FROM t ORDER BY id", operation: "read the test rows").map {
                try $0.text(0, "read a test row")
            }
        }

        /// Blocks the writer's queue until the returned semaphore is signalled (at most 2 s), so the
        /// requests made meanwhile wait together and form one group.
        func holdWriter() -> DispatchSemaphore {
            let gate = DispatchSemaphore(value: 0)
            store.writer.queue.async { _ = gate.wait(timeout: .now() + 2) }
            return gate
        }

    }

    /// One request's statements.
    typealias Body = @Sendable (SQLiteConnection) throws(RainError) -> Void

    /// A request that inserts `id`.
    static func insert(_ id: String) -> Body {
        { db throws(RainError) in
            try db.execute("INSERT INTO t VALUES (?)", [.text(id)], operation: "insert a test row")
        }
    }

    /// Holds the writer, queues `bodies` in this order (at once, no task involved), then lets the
    /// writer go: they run in one group, in this order. Returns how each ended, in the same order.
    static func inOneGroup(_ fixture: Fixture, _ bodies: [Body]) async -> [Outcome] {
        let gate = fixture.holdWriter()
        let (answers, answer) = AsyncStream.makeStream(of: (Int, Outcome).self)
        for (index, body) in bodies.enumerated() {
            fixture.store.writer.submit(body) { result in
                switch result {
                case .success: answer.yield((index, Outcome(code: nil)))
                case .failure(let error): answer.yield((index, Outcome(code: error.code)))
                }
            }
        }
        gate.signal()
        var outcomes = [Outcome](repeating: Outcome(code: nil), count: bodies.count)
        var received = 0
        for await (index, outcome) in answers {
            outcomes[index] = outcome
            received += 1
            if received == bodies.count { break }
        }
        return outcomes
    }

    /// How a request ended: its error's code, or nil when it succeeded.
    struct Outcome: Sendable {
        var code: RainError.Code?
        var succeeded: Bool { code == nil }
    }

    @Test("the count of changes moves with each committed write, before its caller hears, and never for reads or failures")
    func changesMoveWithCommittedWritesOnly() async throws {
        let f = try await Fixture()
        let changes = try #require(f.store.soleWriterChanges)
        let start = changes.value
        try await f.insert("a")
        #expect(changes.value == start + 1, "moved before the insert was answered")
        _ = try await f.store.perform { db throws(RainError) in
            try db.query("SELECT id FROM t", operation: "read the test rows").count
        }
        #expect(changes.value == start + 1, "a read changes nothing")
        let refused = await rainError { try await f.insert("a") }  // the primary key refuses it
        #expect(refused != nil)
        #expect(changes.value == start + 1, "a write that failed changed nothing")
        f.setFailCommits(true)
        #expect(await rainError { try await f.insert("b") } != nil)
        f.setFailCommits(false)
        #expect(changes.value == start + 1, "a commit that failed changed nothing")
        await f.close()
    }

    @Test("concurrent writes wait together, commit once, and are all on disk when answered")
    func oneGroup() async throws {
        let f = try await Fixture()
        let ids = (0..<8).map { "row-\($0)" }
        let results = await Self.inOneGroup(f, ids.map { Self.insert($0) })
        #expect(results.allSatisfy { $0.succeeded })
        #expect(f.commits == [ids.count])
        #expect(try f.committedIDs() == ids.sorted())
        await f.close()
    }

    @Test("a request that fails rolls back its own writes only; the others of its group commit")
    func failureStaysAlone() async throws {
        let f = try await Fixture()
        let duplicate: Body = { db throws(RainError) in
            // Writes, then fails on its second statement (a duplicate key).
            try db.execute("INSERT INTO t VALUES ('b-own')", operation: "insert its own row")
            try db.execute("INSERT INTO t VALUES ('a')", operation: "insert a duplicate")
        }
        let givesUp: Body = { db throws(RainError) in
            // Throws after writing, inside the store's own transaction call (a nested savepoint).
            try db.transaction("a use case that gives up") { () throws(RainError) in
                try db.execute("INSERT INTO t VALUES ('c-own')", operation: "insert its own row")
                throw RainError(.refused, "gave up")
            }
        }
        let results = await Self.inOneGroup(f, [Self.insert("a"), duplicate, givesUp, Self.insert("d")])
        #expect(results[0].succeeded)
        #expect(results[1].code == .internalError)
        #expect(results[2].code == .refused)
        #expect(results[3].succeeded)
        #expect(try f.committedIDs() == ["a", "d"])
        #expect(f.commits == [2])
        await f.close()
    }

    @Test("answers wait for the commit: a failed commit fails every request that wrote or read a write")
    func commitFailureFailsTheGroup() async throws {
        let f = try await Fixture()
        try await f.insert("before")
        f.setFailCommits(true)
        let count: Body = { db throws(RainError) in
            _ = try db.query("SELECT COUNT(*) FROM t", operation: "count the test rows")
        }
        let results = await Self.inOneGroup(
            f,
            [
                count,  // reads committed rows only: answered without waiting for the commit
                Self.insert("x"),
                Self.insert("y"),
                count,  // read "x" and "y", which the failed commit lost
            ])
        #expect(results[0].succeeded)
        for index in 1...3 { #expect(results[index].code == .internalError, "request \(index)") }
        #expect(try f.committedIDs() == ["before"])
        #expect(f.commits.last == 3)

        // The store goes on: the next group commits.
        f.setFailCommits(false)
        try await f.insert("after")
        #expect(try f.committedIDs() == ["after", "before"])
        await f.close()
    }

    @Test("a failure that ends the whole transaction fails the requests before it; the rest commit on")
    func lostTransaction() async throws {
        let f = try await Fixture()
        let ioError: Body = { db throws(RainError) in
            // What SQLite does on some I/O errors and a full disk: the transaction is gone.
            try db.execute("INSERT INTO t VALUES ('b')", operation: "insert its own row")
            db.rollback()
            throw RainError(.internalError, "disk I/O error")
        }
        let results = await Self.inOneGroup(f, [Self.insert("a"), ioError, Self.insert("c")])
        #expect(results[0].code == .internalError)
        #expect(results[1].code == .internalError)
        #expect(results[2].succeeded)
        #expect(try f.committedIDs() == ["c"])
        await f.close()
    }

    @Test("a request that swallows the failure that ended the transaction still fails (its savepoint is gone)")
    func swallowedLostTransaction() async throws {
        let f = try await Fixture()
        let swallowed: Body = { db throws(RainError) in
            try db.execute("INSERT INTO t VALUES ('a')", operation: "insert its own row")
            db.rollback()  // as SQLite does on a full disk; the request then returns as if fine
        }
        let results = await Self.inOneGroup(f, [swallowed, Self.insert("b")])
        #expect(results[0].code == .internalError)
        #expect(results[1].succeeded)
        #expect(try f.committedIDs() == ["b"])
        await f.close()
    }

    @Test("a closed store fails every waiting request with RAIN_502")
    func closedStore() async throws {
        let f = try await Fixture()
        await f.store.close()
        let error = try #require(await rainError { try await f.insert("late") })
        #expect(error.code == .internalError)
        try? FileManager.default.removeItem(atPath: f.directory)
    }

    @Test("concurrent first logins through the authority all complete and leave a consistent store")
    func concurrentLogins() async throws {
        try await AuthorityFixture.with { f in
            let sent = try await (0..<12).asyncMap { i in
                try await f.send(.email("user\(i)@example.com"), device: "device-\(i)")
            }
            try await withThrowingTaskGroup(of: LoginResult.self) { group in
                for (i, s) in sent.enumerated() {
                    group.addTask {
                        try await f.authority.confirmLoginCode(
                            ConfirmCodeRequest(
                                appID: AuthorityFixture.app, deviceID: "device-\(i)", challengeID: s.challenge.challengeID,
                                code: s.code))
                    }
                }
                var accounts = Set<String>()
                for try await result in group {
                    #expect(result.accountCreated)
                    accounts.insert(result.accountID)
                }
                #expect(accounts.count == sent.count)
            }
            #expect(try await f.store.consistencyViolations().isEmpty)
        }
    }
}

extension Sequence {
    /// `map` with an async transform, one element after another.
    fileprivate func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var out: [T] = []
        for element in self { out.append(try await transform(element)) }
        return out
    }
}
