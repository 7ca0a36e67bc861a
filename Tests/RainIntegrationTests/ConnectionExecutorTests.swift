import Foundation
import RainTestSupport
import RainWallet
import Testing

@Suite("Running tasks on a provider's connection thread")
struct ConnectionExecutorTests {
    @Test("calls made on the connection's executor work, in order and concurrently")
    func callsOnTheConnectionExecutor() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let p = h.provider()
        let states = try await withTaskExecutorPreference(try p.taskExecutor) {
            var states: [AuthState] = []
            for _ in 0..<200 { states.append(try await p.currentSession().authState) }
            // Child tasks inherit the preference: concurrent calls on the same thread still complete.
            try await withThrowingTaskGroup(of: AuthState.self) { group in
                for _ in 0..<20 { group.addTask { try await p.currentSession().authState } }
                for try await s in group { states.append(s) }
            }
            return states
        }
        #expect(states.count == 220)
        #expect(Set(states).isSubset(of: [.loading, .unauthenticated]))
    }

    @Test(
        "the connection thread has the batch scheduling policy by default, and the inherited one with .normal",
        arguments: [(RainWalletConfig.ReaderScheduling.batch, 3), (.normal, 0)])
    func connectionThreadScheduling(scheduling: RainWalletConfig.ReaderScheduling, policy: Int) async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        var config = RainWalletConfig(socketPath: h.socketPath)
        if scheduling == .normal { config.readerScheduling = .normal } else { #expect(config.readerScheduling == .batch) }
        let p = RainProvider(config)
        // Code on the provider's executor runs on the connection's reader thread.
        let (seen, name) = try await withTaskExecutorPreference(try p.taskExecutor) {
            _ = try await p.currentSession()
            return (try ProcFiles.schedulingPolicyOfCurrentThread(), try ProcFiles.nameOfCurrentThread())
        }
        #expect(seen == policy, "SCHED_BATCH is 3, SCHED_OTHER 0")
        // Named, so that `top -H` tells it from the app's own threads.
        #expect(name == "rainwallet.read")
        #expect(try ProcFiles.nameOfCurrentThread() != "rainwallet.read")
        // The test's own threads keep the normal policy: only the connection thread changed.
        #expect(try ProcFiles.schedulingPolicyOfCurrentThread() == 0)
    }

    @Test("when the daemon goes away, tasks on the connection's executor still finish with RAIN_101")
    func daemonGoneWhileOnTheExecutor() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let p = h.provider()
        let executor = try p.taskExecutor
        let error: RainError? = await withTaskExecutorPreference(executor) {
            do {
                _ = try await p.currentSession()
                await h.kill()
                for _ in 0..<100 {
                    _ = try await p.currentSession()
                    try await Task.sleep(for: .milliseconds(10))
                }
            } catch let e as RainError {
                return e
            } catch {}
            return nil
        }
        #expect(error?.code == .notInitialized)
    }
}
