import Glibc
import RainCore

extension Syscall {
    /// Starts a detached thread (pthread, default attributes) that runs `body` and ends with it:
    /// for the few loops that block in system calls and so must stay off the Swift concurrency
    /// pool. Foundation's `Thread` does the same, but lives in the Foundation module that links ICU
    /// (docs/performance.md, "Size").
    /// - Returns: false when the thread could not be made (`pthread_create` failed: no memory, or
    ///   the process's thread limit), and then `body` never runs.
    @discardableResult
    public static func startThread(_ body: @escaping @Sendable () -> Void) -> Bool {
        let context = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
        var attributes = pthread_attr_t()
        guard pthread_attr_init(&attributes) == 0 else {
            Unmanaged<ThreadBody>.fromOpaque(context).release()
            return false
        }
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        var thread = pthread_t()
        let result = pthread_create(
            &thread, &attributes,
            { raw in
                guard let raw else { return nil }
                Unmanaged<ThreadBody>.fromOpaque(raw).takeRetainedValue().body()
                return nil
            }, context)
        if result != 0 { Unmanaged<ThreadBody>.fromOpaque(context).release() }
        return result == 0
    }
}

/// The closure a new thread runs, carried through `pthread_create`'s context pointer.
private final class ThreadBody: Sendable {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
}
