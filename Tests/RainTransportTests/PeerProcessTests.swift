import Foundation
import RainCore
import RainSystem
import RainWire
import Synchronization
import Testing

@testable import RainTransport

/// Keeps the peer process of each request.
final class PeerProcessRecorder: ServerHandler {
    let seen = Mutex<[ProcessDescriptor?]>([])
    func handle(_ request: WireRequest, context: RequestContext) -> HandlerDecision {
        seen.withLock { $0.append(context.peerProcess) }
        return .respond(.ok([]))
    }
    func cancel(connection: ConnectionID, requestID: UInt64) {}
    func connectionClosed(_ connection: ConnectionID) {}
}

/// The peer's pidfd taken at accept: it names the client process, reaches the handler
/// on the request context, and is closed when the connection closes.
@Suite("Peer process")
struct PeerProcessTests {
    /// A client in another process: connects, sends one frame, reads the answer, then closes the
    /// connection when told (a line on stdin) and stays alive until the next line.
    static let client = """
        import socket, sys, binascii
        s = socket.socket(socket.AF_UNIX)
        s.connect(sys.argv[1])
        s.sendall(binascii.unhexlify(sys.argv[2]))
        s.recv(65536)
        sys.stdin.readline()
        s.close()
        sys.stdin.readline()
        """

    /// The pidfds this process holds that name `pid` (`/proc/self/fdinfo`).
    static func pidfds(naming pid: Int32) -> Int {
        guard let fds = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") else { return -1 }
        return fds.filter { fd in
            guard (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(fd)")) == "anon_inode:[pidfd]",
                let info = try? String(contentsOfFile: "/proc/self/fdinfo/\(fd)", encoding: .utf8)
            else { return false }
            return info.contains("\nPid:\t\(pid)\n")
        }.count
    }

    @Test("the pidfd names the client process, reaches the handler and is closed with the connection", arguments: [true, false])
    func peerPidfd(usesPeerPidfd: Bool) async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/s.sock"
        var options = ServerOptions()
        options.usesPeerPidfd = usesPeerPidfd
        let recorder = PeerProcessRecorder()
        let server = try EventLoopServer(
            listeningSocket: try UnixSocket.listen(path: path, mode: 0o600), options: options, handler: recorder,
            logger: Logger(label: "peer", sink: CapturingLogSink()))
        let finished = Mutex(false)
        Thread {
            server.run()
            finished.withLock { $0 = true }
        }.start()
        defer {
            server.stop(drainTimeout: .zero)
        }

        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        let frame = try requestFrame(id: 1).map { String(format: "%02x", $0) }.joined()
        child.arguments = ["-c", Self.client, path, frame]
        child.environment = [:]
        let input = Pipe()
        child.standardInput = input
        try child.run()
        defer {
            child.terminate()
            child.waitUntilExit()
        }

        #expect(await eventually { recorder.seen.withLock { $0.count } == 1 })
        let process = try #require(recorder.seen.withLock { $0.first ?? nil })
        #expect(process.pid == child.processIdentifier)
        #expect(process.source == (usesPeerPidfd ? .socketPeer : .pid))
        #expect(!process.isClosed)
        let during = Self.pidfds(naming: child.processIdentifier)

        input.fileHandleForWriting.write(Data("close\n".utf8))
        #expect(await eventually { server.counts.connections == 0 })
        #expect(process.isClosed)
        // The child still runs, and the pidfd the server took for it is gone from this process.
        #expect(child.isRunning)
        #expect(during - Self.pidfds(naming: child.processIdentifier) == 1)
        input.fileHandleForWriting.write(Data("exit\n".utf8))
    }
}
