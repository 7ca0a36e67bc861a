import Foundation
import RainCore
import RainStore
import Synchronization

/// The PostgreSQL server the tests share, started once per test process.
///
/// `$RAINWALLET_TEST_POSTGRES_URL` (a `postgres://…/postgres` URL of a running server) is used when
/// set. Otherwise the first caller starts a private cluster with `scripts/lib/pg-cluster start`
/// (which installs PostgreSQL when missing, runs it as uid 65534 when root, on 127.0.0.1 only)
/// and passes this process's pid, so the cluster's watchdog stops it and deletes its directory
/// when the test process exits, however it exits. A cluster that cannot start is an error the
/// tests report (they never skip silently).
public enum PostgresTestCluster {
    private enum StartState {
        case idle
        case starting([CheckedContinuation<String, Error>])
        case done(Result<String, HarnessError>)
    }

    private static let state = Mutex(StartState.idle)
    private static let counter = Mutex(0)

    /// The server URL (of its `postgres` database), starting the cluster on first use.
    /// - Throws: `HarnessError` with the script's output when the cluster cannot be started.
    public static func serverURL() async throws -> String {
        if let env = ProcessInfo.processInfo.environment["RAINWALLET_TEST_POSTGRES_URL"], !env.isEmpty { return env }
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<String, Error>) in
            enum Action {
                case launch
                case wait
                case resume(Result<String, HarnessError>)
            }
            let action = state.withLock { s -> Action in
                switch s {
                case .idle:
                    s = .starting([continuation])
                    return .launch
                case .starting(var waiters):
                    waiters.append(continuation)
                    s = .starting(waiters)
                    return .wait
                case .done(let result):
                    return .resume(result)
                }
            }
            switch action {
            case .launch: launchCluster()
            case .wait: break
            case .resume(let result): continuation.resume(with: result.mapError { $0 as Error })
            }
        }
    }

    /// Records the outcome of the one start and wakes every caller waiting for it.
    private static func finish(_ result: Result<String, HarnessError>) {
        let waiters = state.withLock { s -> [CheckedContinuation<String, Error>] in
            defer { s = .done(result) }
            if case .starting(let waiters) = s { return waiters }
            return []
        }
        for waiter in waiters { waiter.resume(with: result.mapError { $0 as Error }) }
    }

    /// A new, empty database on the shared server, named after `label`; returns its URL.
    public static func freshDatabaseURL(label: String = "t") async throws -> String {
        let server = try await serverURL()
        let n = counter.withLock { c -> Int in
            c += 1
            return c
        }
        let safe = String(label.lowercased().unicodeScalars.filter { ("a"..."z").contains($0) }.prefix(20))
        let name = "rw_\(safe)_\(getpid())_\(n)_\(UInt32.random(in: 0...UInt32.max))"
        do {
            return try await PostgresAuthorityStore.createDatabase(named: name, serverURL: server)
        } catch {
            throw HarnessError("cannot create test database \(name) on \(server): \(error.code): \(error.message)")
        }
    }

    /// The repository's `scripts/lib/pg-cluster`, found from this source file's location.
    public static var scriptPath: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("scripts/lib/pg-cluster").path
    }

    /// Launches `pg-cluster start` and returns at once: a thread of its own waits for it and
    /// reports the outcome.
    private static func launchCluster() {
        let directory = "/tmp/rain-pg-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let output = "/tmp/rain-pg-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).out"
        let process: TestProcess
        do {
            process = try TestProcess(
                "/bin/bash", [scriptPath, "start", directory, String(getpid())], stdout: .file(output), stderr: .file(output))
        } catch {
            return finish(.failure(HarnessError("cannot run \(scriptPath): \(error)")))
        }
        Thread {
            let status = process.waitForExitBlocking(timeout: .seconds(300))
            let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
            try? FileManager.default.removeItem(atPath: output)
            let url = text.split(separator: "\n").last(where: { $0.hasPrefix("postgres://") })
            guard status == 0, let url else {
                return finish(
                    .failure(
                        HarnessError(
                            "PostgreSQL tests need a server: `\(scriptPath) start \(directory)` exited with status "
                                + "\(status.map(String.init) ?? "none (still running after 300 s)"):\n\(text)\n"
                                + "Install PostgreSQL (apt-get install postgresql) "
                                + "or set RAINWALLET_TEST_POSTGRES_URL=postgres://USER@HOST:PORT/postgres")))
            }
            finish(.success(String(url)))
        }.start()
    }
}
