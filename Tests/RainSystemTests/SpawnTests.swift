import Foundation
import RainCore
import Testing

@testable import RainSystem

@Suite("Syscall.spawn")
struct SpawnTests {
    @Test("a program still open for writing (ETXTBSY) is tried again until the writer closes it")
    func busyProgramIsRetried() throws {
        let path = NSTemporaryDirectory() + "rain-spawn-\(UUID().uuidString.prefix(8)).sh"
        defer { unlink(path) }
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o700)
        #expect(fd >= 0)
        let script = Array("#!/bin/sh\nexit 7\n".utf8)
        #expect(script.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == script.count)
        // The writer goes away 30 ms later, as a forked child's inherited descriptor would. A thread of
        // its own, not a Dispatch queue: with hundreds of tests blocking the global queues, a queued
        // close could wait longer than the 200 ms the retries allow.
        let writer = Thread {
            usleep(30_000)
            close(fd)
        }
        writer.start()
        let null = open("/dev/null", O_RDWR | O_CLOEXEC)
        defer { close(null) }
        let pid = try Syscall.spawn(path, arguments: [], environment: [:], standardInput: null, standardOutput: null)
        let status = try Syscall.waitForExit(pid)
        #expect(status >> 8 & 0xff == 7)
    }
}
