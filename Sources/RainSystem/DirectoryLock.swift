import FoundationEssentials
import Glibc
import RainCore

/// An exclusive `flock` on a lock file in a state directory, held for the life of the process (or
/// of this object): one daemon per state directory. The file holds the holder's pid, so
/// a second daemon can say which process it found.
public final class DirectoryLock: Sendable {
    /// The lock file.
    public let path: String
    private let fd: Int32

    /// Takes the lock on `directory/name`, creating the file (0600, never through a symbolic link).
    /// - Parameter role: the program named in the refusal (`"rainwalletd"`).
    /// - Throws: RAIN_102 naming the pid that holds the lock and what to do; RAIN_102 for a lock
    ///   file that is a symbolic link or not this uid's; RAIN_502 when a call fails.
    public init(directory: String, name: String = "rainwalletd.lock", role: String = "rainwalletd") throws(RainError) {
        let path = "\(directory)/\(name)"
        let fd = try Syscall.openOwnFile(
            path, .readWrite, options: [.create, .nonBlocking, .noControllingTerminal], mode: 0o600, isPrivate: false,
            name: "lock file", field: "state-dir", fix: "remove it")
        do throws(RainError) {
            switch Syscall.retrying({ flock(fd, LOCK_EX | LOCK_NB) }) {
            case .success: break
            case .failure(let e) where e.isWouldBlock:
                let holder = Self.holder(fd: fd, path: path)
                throw RainError.invalid(
                    "another \(role)\(holder.map { " (pid \($0))" } ?? "") is using the state directory \(directory) "
                        + "(it holds \(path)); stop it first, or give this one another --state-dir", field: "state-dir")
            case .failure(let e): throw Syscall.error("flock", path: path, e)
            }
            try Syscall.call("ftruncate", path: path) { ftruncate(fd, 0) }
            let line = Array("\(getpid())\n".utf8)
            try line.withUnsafeBytes { buffer in
                Result { () throws(RainError) in try Syscall.writeAll(fd, buffer, path: path) }
            }.get()
        } catch {
            Syscall.closeUnchecked(fd, because: .failurePath)
            throw error
        }
        self.path = path
        self.fd = fd
    }

    /// The pid written in the lock file by the process that holds it.
    static func holder(fd: Int32, path: String) -> Int32? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let n = buffer.withUnsafeMutableBytes { b in Syscall.retrying { pread(fd, b.baseAddress, b.count, 0) } }
        guard case .success(let count) = n else { return nil }
        let text = String(decoding: buffer[0..<count], as: UTF8.self).trimmingWhitespaceAndNewlines()
        return Int32(text)
    }

    // The pid in the file is a hint for messages, never read back durably (`.scratch`). The lock
    // goes with the descriptor; the file stays (removing it would let a third daemon lock
    // a new file while a second still waits on the old one).
    deinit { Syscall.closeUnchecked(fd, because: .scratch) }
}
