import Foundation
import RainCore
import RainSystem
import RainTestSupport
import Synchronization
import Testing

/// How many times the SIGUSR1 handler ran (it may only touch lock-free state).
private let signalsHandled = Atomic<Int>(0)

/// A pipe whose two ends close when the test ends.
private final class Pipe2 {
    let readEnd: Int32
    let writeEnd: Int32
    init(nonBlocking: Bool = false) throws {
        var fds: [Int32] = [-1, -1]
        try Syscall.call("pipe") { pipe(&fds) }
        readEnd = fds[0]
        writeEnd = fds[1]
        for fd in fds {
            try Syscall.setCloseOnExec(fd)
            try Syscall.setNonBlocking(fd, nonBlocking)
        }
    }
    func write(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { buffer in Result { () throws(RainError) in try Syscall.writeAll(writeEnd, buffer) } }.get()
    }
    deinit {
        Syscall.closeUnchecked(readEnd, because: .readOnly)
        Syscall.closeUnchecked(writeEnd, because: .scratch)
    }
}

/// What the reader thread of `retriesEINTR` shares with the test.
private final class ReaderState: Sendable {
    let attempts = Atomic<Int>(0)
    let unblocked = Atomic<Bool>(false)
    let reader = Mutex<pthread_t?>(nil)
    let result = Mutex<Result<[UInt8], RainError>?>(nil)
    let done = DispatchSemaphore(value: 0)
}

@Suite struct SyscallTests {
    /// What `body` returns when run on a thread of its own (a thread's own settings are tested there,
    /// away from the test's).
    private func onOwnThread(_ body: @escaping @Sendable () -> [String]) -> [String] {
        let seen = Mutex<[String]>([])
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            defer { done.signal() }
            let result = body()
            seen.withLock { $0 = result }
        }
        thread.start()
        done.wait()
        return seen.withLock { $0 }
    }

    @Test("a thread gives itself the batch scheduling policy and back, and no other thread changes")
    func batchScheduling() throws {
        let seen = onOwnThread {
            do {
                let before = try ProcFiles.schedulingPolicyOfCurrentThread()
                try Syscall.setCurrentThreadBatchScheduling(true)
                let batch = try ProcFiles.schedulingPolicyOfCurrentThread()
                try Syscall.setCurrentThreadBatchScheduling(false)
                let after = try ProcFiles.schedulingPolicyOfCurrentThread()
                return ["\(before)", "\(batch)", "\(after)"]
            } catch {
                return ["\(error)"]
            }
        }
        // SCHED_OTHER is 0, SCHED_BATCH 3.
        #expect(seen == ["0", "3", "0"])
        #expect(try ProcFiles.schedulingPolicyOfCurrentThread() == 0)
    }

    @Test("a thread's name reaches the kernel, cut to Linux's 15 bytes")
    func threadName() throws {
        let seen = onOwnThread {
            Syscall.setCurrentThreadName("rainwallet.read")
            let exact = (try? ProcFiles.nameOfCurrentThread()) ?? "unreadable"
            Syscall.setCurrentThreadName("a-name-longer-than-fifteen-bytes")
            let cut = (try? ProcFiles.nameOfCurrentThread()) ?? "unreadable"
            return [exact, cut]
        }
        #expect(seen == ["rainwallet.read", "a-name-longer-t"])
        // Only the calling thread was named.
        #expect(try ProcFiles.nameOfCurrentThread() != "rainwallet.read")
    }

    @Test("a blocking read interrupted by a signal (no SA_RESTART) is called again and gets the data")
    func retriesEINTR() throws {
        // The handler is installed without SA_RESTART, so the kernel ends the blocked read with EINTR.
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in signalsHandled.add(1, ordering: .relaxed) }
        sigemptyset(&action.sa_mask)
        action.sa_flags = 0
        var previous = sigaction()
        try Syscall.call("sigaction") { sigaction(SIGUSR1, &action, &previous) }
        defer { _ = sigaction(SIGUSR1, &previous, nil) }

        let pipe = try Pipe2()
        let shared = ReaderState()
        let attempts = { shared.attempts.load(ordering: .relaxed) }
        let readEnd = pipe.readEnd
        let thread = Thread {
            // The test runner's threads may block signals: this one takes SIGUSR1.
            var mask = sigset_t()
            sigemptyset(&mask)
            sigaddset(&mask, SIGUSR1)
            shared.unblocked.store(pthread_sigmask(SIG_UNBLOCK, &mask, nil) == 0, ordering: .relaxed)
            shared.reader.withLock { $0 = pthread_self() }
            var buffer = [UInt8](repeating: 0, count: 16)
            let outcome = buffer.withUnsafeMutableBytes { raw in
                Result { () throws(RainError) -> Int in
                    try Syscall.call("read") {
                        shared.attempts.add(1, ordering: .relaxed)
                        return read(readEnd, raw.baseAddress, raw.count)
                    }
                }
            }
            shared.result.withLock { $0 = outcome.map { Array(buffer[0..<$0]) } }
            shared.done.signal()
        }
        thread.start()

        // Signal the reader until its read has been interrupted and called again (the gate), at
        // most 2 s; each round waits 1 ms for the thread to block or the handler to run.
        let limit = ContinuousClock.now + .seconds(2)
        while attempts() < 2 && ContinuousClock.now < limit {
            if let target = shared.reader.withLock({ $0 }), attempts() >= 1 {
                pthread_kill(target, SIGUSR1)
            }
            usleep(1000)
        }
        let isUnblocked = shared.unblocked.load(ordering: .relaxed)
        #expect(isUnblocked)
        #expect(attempts() >= 2)
        #expect(signalsHandled.load(ordering: .relaxed) >= 1)
        try pipe.write([1, 2, 3])
        #expect(shared.done.wait(timeout: .now() + 2) == .success)
        let bytes = try #require(shared.result.withLock { $0 }).get()
        #expect(bytes == [1, 2, 3])
    }

    @Test("EAGAIN on a non-blocking descriptor comes back as .wouldBlock, not as an error")
    func wouldBlockIsAResult() throws {
        let pipe = try Pipe2(nonBlocking: true)
        var buffer = [UInt8](repeating: 0, count: 8)
        let empty = try buffer.withUnsafeMutableBytes { raw in
            Result { () throws(RainError) in try Syscall.readNonBlocking(pipe.readEnd, into: raw) }
        }.get()
        #expect(empty == .wouldBlock)
        try pipe.write([9, 8])
        let full = try buffer.withUnsafeMutableBytes { raw in
            Result { () throws(RainError) in try Syscall.readNonBlocking(pipe.readEnd, into: raw) }
        }.get()
        #expect(full == .processed(2))
        #expect(buffer[0..<2] == [9, 8])

        // A full pipe: send-side EAGAIN is a result too.
        let chunk = [UInt8](repeating: 7, count: 4096)
        var wrote = 0
        var sawWouldBlock = false
        while wrote < 16 << 20 {
            let r = try chunk.withUnsafeBytes { raw in
                Result { () throws(RainError) in
                    try Syscall.callNonBlocking("write") { write(pipe.writeEnd, raw.baseAddress, raw.count) }
                }
            }.get()
            guard case .processed(let n) = r else {
                sawWouldBlock = true
                break
            }
            wrote += n
        }
        #expect(sawWouldBlock)
    }

    @Test("a failed call throws a RainError naming the call, with the errno kept")
    func errnoMapsToRainError() throws {
        var buffer = [UInt8](repeating: 0, count: 4)
        let failure = buffer.withUnsafeMutableBytes { raw in
            Result { () throws(RainError) in try Syscall.read(-1, into: raw) }
        }
        guard case .failure(let error) = failure else {
            Issue.record("read(-1) succeeded")
            return
        }
        #expect(error.code == .internalError)
        #expect(error.errno == EBADF)
        #expect(error.message.hasPrefix("read failed: "))

        let path = "/nonexistent-\(getpid())/key"
        let missing = try #require(throws: RainError.self) { try Syscall.open(path, .readOnly) }
        #expect(missing.errno == ENOENT)
        #expect(missing.code == .internalError)
        #expect(missing.message.hasPrefix("cannot open \(path): "))
        let refused = try #require(throws: RainError.self) { try Syscall.call("connect", code: .network) { Int32(-1) } }
        #expect(refused.code == .network)
        #expect(try Syscall.removeFile(path) == false)
    }

    @Test("epoll: add, modify and delete on a real eventfd and pipe")
    func epollOperations() throws {
        let epoll = try Epoll(maximumEvents: 8)
        let wake = try EventFD()
        let pipe = try Pipe2(nonBlocking: true)
        var events: [EpollEvent] = []

        try epoll.add(wake.descriptor, events: .input, token: 7)
        #expect(try epoll.wait(into: &events, timeoutMilliseconds: 0) == 0)
        wake.signal()
        #expect(try epoll.wait(into: &events, timeoutMilliseconds: 0) == 1)
        #expect(events[0].token == 7 && events[0].events.contains(.input))
        wake.drain()
        #expect(try epoll.wait(into: &events, timeoutMilliseconds: 0) == 0)

        // A second add of the same descriptor is refused (EEXIST).
        let twice = try #require(throws: RainError.self) { try epoll.add(wake.descriptor, events: .input, token: 8) }
        #expect(twice.errno == EEXIST)

        // Modify: an eventfd below its limit is always writable.
        try epoll.modify(wake.descriptor, events: .output, token: 9)
        #expect(try epoll.wait(into: &events, timeoutMilliseconds: 0) == 1)
        #expect(events[0].token == 9 && events[0].events.contains(.output) && !events[0].events.contains(.input))

        // A pipe's read end: readable once written, nothing after delete.
        try epoll.add(pipe.readEnd, events: [.input, .readHangUp], token: 11)
        try epoll.delete(wake.descriptor)
        #expect(try epoll.wait(into: &events, timeoutMilliseconds: 0) == 0)
        try pipe.write([1])
        #expect(try epoll.wait(into: &events, timeoutMilliseconds: 0) == 1)
        #expect(events[0] == EpollEvent(events: .input, token: 11))
        try epoll.delete(pipe.readEnd)
        #expect(try epoll.wait(into: &events, timeoutMilliseconds: 0) == 0)

        // Deleting what is not watched is refused (ENOENT); modify too.
        let deleted = try #require(throws: RainError.self) { try epoll.delete(pipe.readEnd) }
        #expect(deleted.errno == ENOENT)
        let unwatched = try #require(throws: RainError.self) { try epoll.modify(pipe.readEnd, events: .input, token: 1) }
        #expect(unwatched.errno == ENOENT)
    }

    @Test("poll: a timeout returns 0; a readable descriptor is reported")
    func pollReportsReadiness() throws {
        let pipe = try Pipe2(nonBlocking: true)
        var fds = [pollfd(fd: pipe.readEnd, events: Int16(POLLIN), revents: 0)]
        #expect(try Syscall.poll(&fds, timeoutMilliseconds: 0) == 0)
        try pipe.write([5])
        #expect(try Syscall.poll(&fds, timeoutMilliseconds: 0) == 1)
        #expect(fds[0].revents & Int16(POLLIN) != 0)
    }
}
