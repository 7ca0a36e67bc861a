import Foundation
import RainAuthorityAPI
import RainCore
import RainTransport
import RainWire
import Synchronization

// Running `rainwallet` against the harness's daemon.
extension DaemonHarness {
    /// Runs `rainwallet --socket DIR/d.sock ARGS…` (or `--socket socketPath`) with `RAINWALLET_SOCKET`
    /// unset and waits for it to exit.
    /// - Parameters:
    ///   - stdin: text for its standard input (empty input when nil).
    ///   - socketPath: another socket to point it at (for example one nothing listens on).
    public func runCLI(
        _ arguments: [String], stdin: String? = nil, socketPath: String? = nil, timeout: Duration = .seconds(30)
    ) async throws -> CLIResult {
        // Input from a file, not a pipe: the CLI sees end of input however the test goes on.
        let n = nextNumber()
        let inputPath = "\(directory)/cli-\(n).in"
        guard FileManager.default.createFile(atPath: inputPath, contents: Data((stdin ?? "").utf8)) else {
            throw HarnessError("cannot write \(inputPath)")
        }
        let input = try Self.openForReading(inputPath)
        defer { try? input.close() }
        let p = try launchCLI(arguments, socketPath: socketPath, number: n, input: input)
        return try await p.finish(timeout: timeout)
    }

    /// Starts `rainwallet` like `runCLI` but returns at once, with stdin open for `send(_:)`.
    /// - Parameters:
    ///   - program: another copy of the CLI to run (per-app access tests: two apps of one uid).
    ///   - environment: variables added to the CLI's environment (`LD_PRELOAD`).
    ///   - standardInput: the CLI's stdin (a terminal for `prompt here`); a pipe when nil.
    public func launchCLI(
        _ arguments: [String], socketPath: String? = nil, program: URL? = nil, environment: [String: String] = [:],
        standardInput: FileHandle? = nil
    ) throws -> CLIProcess {
        try launchCLI(
            arguments, socketPath: socketPath, number: nextNumber(), input: standardInput, program: program,
            extraEnvironment: environment)
    }

    /// Runs `program` (a copy of the CLI) like `runCLI`, with `environment` added to its own.
    public func runCLI(
        _ arguments: [String], program: URL, environment: [String: String] = [:], standardInput: FileHandle? = nil,
        timeout: Duration = .seconds(30)
    ) async throws -> CLIResult {
        let n = nextNumber()
        let input = try standardInput ?? Self.openForReading("/dev/null")
        let p = try launchCLI(
            arguments, socketPath: nil, number: n, input: input, program: program, extraEnvironment: environment)
        return try await p.finish(timeout: timeout)
    }

    /// Launches the CLI with `input` as stdin, or a pipe the returned process writes to when nil.
    private func launchCLI(
        _ arguments: [String], socketPath: String?, number n: Int, input: FileHandle?, program: URL? = nil,
        extraEnvironment: [String: String] = [:]
    ) throws -> CLIProcess {
        let out = "\(directory)/cli-\(n).out"
        let err = "\(directory)/cli-\(n).err"
        let outHandle = try Self.openForAppending(out)
        defer { try? outHandle.close() }
        let errHandle = try Self.openForAppending(err)
        defer { try? errHandle.close() }
        let environment = daemonEnvironment.merging(extraEnvironment) { $1 }
        let executable = program ?? binaryDirectory.appendingPathComponent("rainwallet")
        let allArguments = ["--socket", socketPath ?? self.socketPath] + arguments
        let (child, writer) = try ChildProcess.launchLock.withLock { _ -> (ChildProcess, FileHandle?) in
            // The pipe is made under the lock too, so no other child inherits its write end.
            let pipe = input == nil ? Pipe() : nil
            let stdin: FileHandle
            if let input {
                stdin = input
            } else if let pipe {
                stdin = pipe.fileHandleForReading
            } else {
                stdin = FileHandle.nullDevice
            }
            let child = try ChildProcess(
                executable: executable, arguments: allArguments, environment: environment, standardInput: stdin,
                standardOutput: outHandle, standardError: errHandle)
            if let pipe { try? pipe.fileHandleForReading.close() }
            return (child, pipe?.fileHandleForWriting)
        }
        clients.withLock { $0.append(child) }
        return CLIProcess(child: child, input: writer, stdoutPath: out, stderrPath: err)
    }
}
