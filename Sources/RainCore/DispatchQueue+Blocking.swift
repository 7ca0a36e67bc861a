import Dispatch

extension DispatchQueue {
    /// Runs blocking `body` (file I/O, fsync, SQLite, child processes) on this queue and awaits it
    /// without holding a thread of the Swift concurrency pool (two threads wide here).
    package func runBlocking<T: Sendable>(_ body: @escaping @Sendable () throws(RainError) -> T) async throws(RainError) -> T {
        let result: Result<T, RainError> = await withCheckedContinuation { continuation in
            self.async {
                do throws(RainError) {
                    continuation.resume(returning: .success(try body()))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
        return try result.get()
    }
}
