import Foundation
import Glibc
import RainCore
import RainCrypto
import Testing

@testable import RainSystem

/// A child process for identity tests: started with a clean environment (only what the test
/// gives), kept alive until `stop`, and found running its program (past `exec`) before the test
/// reads it. Every wait is bounded (2 s).
final class Child: @unchecked Sendable {
    // @unchecked Sendable: used by one test at a time.
    private(set) var process = Process()
    private let input = Pipe()
    let expectedExecutable: String

    /// Starts `executable arguments…`; waits until `/proc/PID/exe` is `executable` (symbolic links
    /// resolved).
    init(
        _ executable: String, _ arguments: [String] = [], environment: [String: String] = [:], directory: String? = nil
    ) throws {
        expectedExecutable = URL(fileURLWithPath: executable).resolvingSymlinksInPath().path
        let deadline = ContinuousClock.now + .seconds(2)
        // A test that has just written `executable` can meet ETXTBSY: a process another test
        // spawned at that moment holds a copy of the writing descriptor until its own exec.
        // Retried, as Go's os/exec does, until that child has gone past exec.
        while true {
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = arguments
            process.environment = environment
            if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
            process.standardInput = input
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            do {
                try process.run()
                break
            } catch let error as NSError
                where (error.userInfo[NSUnderlyingErrorKey] as? NSError)?.code == Int(ETXTBSY) && ContinuousClock.now < deadline
            {
                process = Process()
                usleep(5000)
            }
        }
        // Past exec: the new program's file is in place and its memory set up (environment placed).
        while executableLink() != expectedExecutable || (try? ProcessDescriptor.readStat(pid: pid))?.environmentEnd ?? 0 == 0 {
            guard ContinuousClock.now < deadline else {
                stop()
                throw HarnessFailure("child \(executable) did not start: exe is \(executableLink() ?? "unreadable")")
            }
            usleep(2000)
        }
    }

    var pid: Int32 { process.processIdentifier }

    /// The target of `/proc/PID/exe`.
    func executableLink() -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/\(pid)/exe", &buffer, buffer.count - 1)
        guard n > 0 else { return nil }
        return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// A pidfd of the child, as the daemon's fallback takes it.
    func descriptor() throws -> ProcessDescriptor { try ProcessDescriptor.open(pid: pid) }

    /// Writes `text` to the child's standard input.
    func send(_ text: String) { input.fileHandleForWriting.write(Data(text.utf8)) }

    /// Kills the child and reaps it.
    func stop() {
        if process.isRunning { kill(pid, SIGKILL) }
        process.waitUntilExit()
    }

    deinit { stop() }
}

struct HarnessFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Polls `condition` every 2 ms for up to 2 s.
func waitUntil(_ condition: () -> Bool) -> Bool {
    let deadline = ContinuousClock.now + .seconds(2)
    while !condition() {
        if ContinuousClock.now >= deadline { return false }
        usleep(2000)
    }
    return true
}

/// A fresh directory under /tmp.
func temporaryDirectory() throws -> String {
    var template = Array("/tmp/rci-XXXXXX".utf8CString)
    guard let made = mkdtemp(&template) else { throw HarnessFailure("mkdtemp: errno \(errno)") }
    return String(cString: made)
}

/// Copies `source` to `destination` with `extra` bytes appended, executable.
func copyExecutable(_ source: String, to destination: String, appending extra: [UInt8] = []) throws {
    var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: source)))
    bytes += extra
    try Data(bytes).write(to: URL(fileURLWithPath: destination))
    guard chmod(destination, 0o755) == 0 else { throw HarnessFailure("chmod: errno \(errno)") }
}

/// SHA-256 of a file's content as it is now.
func sha256(ofFile path: String) throws -> [UInt8] {
    SHA256.hash([UInt8](try Data(contentsOf: URL(fileURLWithPath: path))))
}

/// The `details.reason` of the RainError `body` throws, or nil when it throws none.
func failureReason(_ body: () throws -> Void) -> String? {
    do {
        try body()
        return nil
    } catch let error as RainError {
        return error.details.reason ?? "\(error.code)"
    } catch {
        return "\(error)"
    }
}
