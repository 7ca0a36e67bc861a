import FoundationEssentials
import Glibc
import RainCore
import RainSystem
import RainWire
import Synchronization

// The connection as a task executor: jobs of tasks that prefer it run on its reader thread.
extension ClientConnection {
    /// Runs a job of a task that prefers this connection (`withTaskExecutorPreference`) on the
    /// connection's reader thread. A reply then resumes its task on the thread that read it, with
    /// no hand-off to another thread: the fastest way to make many small calls in a row. After the
    /// connection ends, jobs go to the global concurrent executor.
    public func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        let (accepted, mustWake) = jobQueue.withLock { q -> (Bool, Bool) in
            guard q.isRunning else { return (false, false) }
            q.jobs.append(unowned)
            return (true, readerThread.load(ordering: .relaxed) != pthread_self())
        }
        if !accepted {
            globalConcurrentExecutor.enqueue(ExecutorJob(unowned))
            return
        }
        if mustWake { wakeFD?.signal() }
    }

    public func asUnownedTaskExecutor() -> UnownedTaskExecutor { UnownedTaskExecutor(ordinary: self) }
}
