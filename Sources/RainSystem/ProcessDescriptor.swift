import Glibc
import RainCore
import Synchronization

/// A pidfd: a handle on one process that stays bound to it after it exits, so a reused pid never
/// passes for it. The daemon takes one for each Unix connection when it accepts it
/// (`peer(ofSocket:pid:)`) and closes it when the connection closes.
///
/// Closing is safe at any time from any thread: while `withDescriptor` runs, `close` only marks
/// the descriptor, and the last user closes it, so a reader never finds the number reused by
/// another file.
public final class ProcessDescriptor: Sendable {
    /// How the descriptor was obtained.
    public enum Source: Sendable, Equatable {
        /// `SO_PEERPIDFD`: the kernel named the process that connected (Linux 6.5 and later).
        case socketPeer
        /// `pidfd_open` of a pid: the pid could have been reused between the event that gave it
        /// and the open; `startTime` is checked before and after each read of `/proc`.
        case pid
    }

    /// The process id when the descriptor was taken (in the daemon's pid namespace).
    public let pid: Int32
    /// How the descriptor was obtained.
    public let source: Source
    /// For `.pid`: the process's start time (field 22 of `/proc/PID/stat`) read right after
    /// `pidfd_open`; nil for `.socketPeer`, whose pidfd needs no such check.
    public let startTime: UInt64?
    /// The file the process ran when its connection was accepted (`peer(ofSocket:pid:)`), read
    /// before any byte of the connection: an identity read later must find the same file, or the
    /// process ran another program since it connected.
    public let executableAtAccept: ExecutableMark

    /// What `executableAtAccept` found.
    public enum ExecutableMark: Sendable, Equatable {
        /// The device and inode of `/proc/PID/exe`.
        case file(device: UInt64, inode: UInt64)
        /// `/proc/PID/exe` could not be read (a process that is not dumpable, of another uid, or
        /// gone): no identity read later can stand for what wrote the connection's first bytes.
        case unreadable
        /// Not recorded: a descriptor not taken for a connection (`open(pid:)`).
        case notRecorded
    }

    private struct State {
        var fd: Int32
        var users = 0
        var isCloseRequested = false
    }

    private let state: Mutex<State>

    init(
        adopting fd: Int32, pid: Int32, source: Source, startTime: UInt64?, executableAtAccept: ExecutableMark = .notRecorded
    ) {
        self.pid = pid
        self.source = source
        self.startTime = startTime
        self.executableAtAccept = executableAtAccept
        self.state = Mutex(State(fd: fd))
    }

    deinit {
        let fd = state.withLock { $0.fd }
        if fd >= 0 { Syscall.closeUnchecked(fd, because: .eventDescriptor) }
    }

    /// The process at the other end of the Unix socket `fd`: its `SO_PEERPIDFD` where the kernel has
    /// it, else `pidfd_open(pid)` with the start time recorded (see `Source.pid`), and the file it
    /// runs now (`executableAtAccept`).
    /// - Parameters:
    ///   - fd: a connected Unix socket.
    ///   - pid: the peer's pid from `SO_PEERCRED`.
    ///   - usesPeerPidfd: false to take the `pidfd_open` path even where `SO_PEERPIDFD` exists
    ///     (tests of the fallback).
    /// - Throws: RAIN_502 when neither works (`error.errno` is `ESRCH` when the peer is gone).
    public static func peer(ofSocket fd: Int32, pid: Int32, usesPeerPidfd: Bool = true) throws(RainError) -> ProcessDescriptor {
        if usesPeerPidfd, let pidfd = try Syscall.peerProcessDescriptor(fd) {
            return ProcessDescriptor(
                adopting: pidfd, pid: pid, source: .socketPeer, startTime: nil,
                executableAtAccept: executableMark(pid: pid, pidfd: pidfd))
        }
        let (pidfd, startTime) = try openChecked(pid: pid)
        return ProcessDescriptor(
            adopting: pidfd, pid: pid, source: .pid, startTime: startTime,
            executableAtAccept: executableMark(pid: pid, pidfd: pidfd))
    }

    /// The file `/proc/PID/exe` names (followed by `stat`), kept only when the process is found
    /// alive afterwards: then the pid was still the pidfd's process when it was read.
    private static func executableMark(pid: Int32, pidfd: Int32) -> ExecutableMark {
        var status = stat()
        guard fstatat(AT_FDCWD, "/proc/\(pid)/exe", &status, 0) == 0,
            (try? Syscall.hasExited(processDescriptor: pidfd)) == false
        else { return .unreadable }
        return .file(device: UInt64(status.st_dev), inode: UInt64(status.st_ino))
    }

    /// A pidfd of the process `pid` (`pidfd_open`), with its start time recorded.
    /// - Throws: RAIN_502 when the process does not exist (`error.errno` `ESRCH`) or its
    ///   `/proc/PID/stat` cannot be read.
    public static func open(pid: Int32) throws(RainError) -> ProcessDescriptor {
        let (fd, startTime) = try openChecked(pid: pid)
        return ProcessDescriptor(adopting: fd, pid: pid, source: .pid, startTime: startTime)
    }

    /// `pidfd_open(pid)` and the start time read after it.
    private static func openChecked(pid: Int32) throws(RainError) -> (fd: Int32, startTime: UInt64) {
        let fd = try Syscall.openProcessDescriptor(pid: pid)
        do throws(RainError) {
            // Read after pidfd_open and found alive after the read: the stat read is the pidfd's
            // process, since its pid could not be reused while it lived.
            let stat = try readStat(pid: pid)
            guard try !Syscall.hasExited(processDescriptor: fd) else {
                throw RainError(
                    .internalError, "process \(pid) exited while it was being identified", underlying: ErrnoError(code: ESRCH))
            }
            return (fd, stat.startTime)
        } catch {
            Syscall.closeUnchecked(fd, because: .failurePath)
            throw error
        }
    }

    /// `/proc/PID/stat`, parsed.
    /// - Throws: RAIN_502 when it cannot be read (`error.errno` `ENOENT` or `ESRCH`: the process is gone).
    public static func readStat(pid: Int32) throws(RainError) -> ProcessStat {
        let path = "/proc/\(pid)/stat"
        let fd = try Syscall.open(path, .readOnly)
        defer { Syscall.closeUnchecked(fd, because: .readOnly) }
        return try ProcessStat(parsing: try AtomicFile.readAll(fd: fd, path: path, limit: 4096))
    }

    /// Runs `body` with the pidfd; the descriptor is not closed while `body` runs.
    /// - Throws: RAIN_202 when the descriptor was closed (its connection ended), or what `body` throws.
    public func withDescriptor<T>(_ body: (Int32) throws(RainError) -> T) throws(RainError) -> T {
        let fd = state.withLock { s -> Int32 in
            guard s.fd >= 0, !s.isCloseRequested else { return -1 }
            s.users += 1
            return s.fd
        }
        guard fd >= 0 else {
            throw RainError(
                .unauthorized, "the caller's connection has closed; its process can no longer be identified",
                details: .init(reason: "caller_gone"))
        }
        defer {
            let closing = state.withLock { s -> Int32 in
                s.users -= 1
                guard s.users == 0, s.isCloseRequested, s.fd >= 0 else { return -1 }
                defer { s.fd = -1 }
                return s.fd
            }
            if closing >= 0 { Syscall.closeUnchecked(closing, because: .eventDescriptor) }
        }
        return try body(fd)
    }

    /// Whether the process has exited (or the descriptor is closed).
    /// - Throws: RAIN_502 when `poll` fails.
    public func hasExited() throws(RainError) -> Bool {
        do throws(RainError) {
            return try withDescriptor { fd throws(RainError) in try Syscall.hasExited(processDescriptor: fd) }
        } catch  where error.details.reason == "caller_gone" {
            return true
        }
    }

    /// Closes the pidfd now, or when the last `withDescriptor` in progress ends. Idempotent.
    public func close() {
        let closing = state.withLock { s -> Int32 in
            s.isCloseRequested = true
            guard s.users == 0, s.fd >= 0 else { return -1 }
            defer { s.fd = -1 }
            return s.fd
        }
        if closing >= 0 { Syscall.closeUnchecked(closing, because: .eventDescriptor) }
    }

    /// True once `close` was called.
    public var isClosed: Bool { state.withLock { $0.isCloseRequested } }
}
