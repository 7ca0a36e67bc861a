import Glibc
import RainCore

/// How `Syscall.open` opens a file: read, write or both.
public enum FileAccess: Sendable {
    case readOnly, writeOnly, readWrite

    var flags: Int32 {
        switch self {
        case .readOnly: return O_RDONLY
        case .writeOnly: return O_WRONLY
        case .readWrite: return O_RDWR
        }
    }
}

/// The `O_…` options of `Syscall.open`. `O_CLOEXEC` is always set: no descriptor of the daemon
/// leaks into a program it starts (a code sender).
public struct OpenOptions: OptionSet, Sendable {
    public var rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// `O_CREAT`: create the file (with the mode given to `open`) when it does not exist.
    public static let create = OpenOptions(rawValue: O_CREAT)
    /// `O_EXCL`: with `create`, fail with `EEXIST` when the path exists, even as a symbolic link.
    public static let exclusive = OpenOptions(rawValue: O_EXCL)
    /// `O_APPEND`: every write goes to the end.
    public static let append = OpenOptions(rawValue: O_APPEND)
    /// `O_TRUNC`: empty the file.
    public static let truncate = OpenOptions(rawValue: O_TRUNC)
    /// `O_DIRECTORY`: fail unless the path is a directory (to fsync it).
    public static let directory = OpenOptions(rawValue: O_DIRECTORY)
    /// `O_NOCTTY`: a terminal opened here never becomes the controlling terminal.
    public static let noControllingTerminal = OpenOptions(rawValue: O_NOCTTY)
    /// `O_NONBLOCK`: opening a FIFO planted at the path does not hang.
    public static let nonBlocking = OpenOptions(rawValue: O_NONBLOCK)
    /// `O_NOFOLLOW`: fail with `ELOOP` when the last component of the path is a symbolic link.
    public static let noFollow = OpenOptions(rawValue: O_NOFOLLOW)
}

/// Why a descriptor may be closed without looking at the result (`Syscall.closeUnchecked`).
/// Linux releases the descriptor even when `close` fails, so it is never closed twice; what a
/// failure could report is lost data, and each case says why there is none to report.
public enum UncheckedClose: Sendable {
    /// An error is already on its way to the caller: a second one would hide the first.
    case failurePath
    /// A socket: `close` reports nothing about data sent (no `SO_LINGER`); delivery is the peer's
    /// answer, not `close`'s.
    case socket
    /// Nothing was written through the descriptor, so nothing can be lost.
    case readOnly
    /// What was written was `fsync`ed (and checked) before: `close` cannot lose it.
    case synced
    /// An `epoll` or `eventfd` descriptor: it holds no data.
    case eventDescriptor
    /// Scratch output nobody reads back durably (fuzzing inputs), written without `fsync` on
    /// purpose.
    case scratch
}

extension Syscall {
    /// Opens `path` close-on-exec.
    /// - Parameters:
    ///   - access: read, write or both.
    ///   - options: the other `O_…` flags.
    ///   - mode: the permissions of a file `create` makes (the umask narrows them).
    /// - Returns: the descriptor.
    /// - Throws: RAIN_502 `cannot open <path>: <strerror>`; `error.errno` tells `ENOENT`, `EEXIST`, ….
    public static func open(
        _ path: String, _ access: FileAccess, options: OpenOptions = [], mode: mode_t = 0
    ) throws(RainError) -> Int32 {
        let flags = access.flags | options.rawValue | O_CLOEXEC
        return try call("open", path: path) { Glibc.open(path, flags, mode) }
    }

    /// Opens (or with `.create` makes) a file of this uid's own without following a symbolic link
    /// (`.noFollow` is added), and checks what was opened: a regular file owned by this uid, with no
    /// permission for group or others when `isPrivate`. The descriptor is closed when it is refused.
    /// - Parameters:
    ///   - name: what the file is, for the messages ("lock file", "the outbox").
    ///   - field: the `details.field` of a refusal.
    ///   - fix: what the user should do about a refused file.
    /// - Returns: the descriptor.
    /// - Throws: RAIN_102 naming the file and `fix` when it is a link or not such a file; RAIN_502
    ///   when a call fails.
    public static func openOwnFile(
        _ path: String, _ access: FileAccess, options: OpenOptions, mode: mode_t, isPrivate: Bool, name: String,
        field: String, fix: String
    ) throws(RainError) -> Int32 {
        let fd: Int32
        do throws(RainError) {
            fd = try open(path, access, options: options.union(.noFollow), mode: mode)
        } catch {
            if error.errno == ELOOP {
                throw RainError.invalid("\(name) \(path) is a symbolic link; refusing to use it: \(fix)", field: field)
            }
            throw error
        }
        do throws(RainError) {
            let s = try status(fd, path: path)
            guard s.type == S_IFREG, s.uid == geteuid(), !isPrivate || s.permissions & 0o077 == 0 else {
                let wanted = isPrivate ? " with mode 600" : ""
                throw RainError.invalid(
                    "\(name) \(path) is \(s.typeName) owned by uid \(s.uid) with mode \(s.octalPermissions); "
                        + "it must be a regular file of uid \(geteuid())\(wanted): \(fix)",
                    field: field)
            }
        } catch {
            closeUnchecked(fd, because: .failurePath)
            throw error
        }
        return fd
    }

    /// Reads up to `buffer.count` bytes from a blocking descriptor.
    /// - Parameter path: the file, for the message.
    /// - Returns: the count read; 0 at end of file.
    /// - Throws: RAIN_502 naming `read` (and `path`).
    public static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, path: String? = nil) throws(RainError) -> Int
    {
        try call("read", path: path) { Glibc.read(fd, buffer.baseAddress, buffer.count) }
    }

    /// Reads up to `buffer.count` bytes from a non-blocking descriptor.
    /// - Returns: the count read (0 at end of file), or `.wouldBlock` when nothing is there yet.
    /// - Throws: RAIN_502 naming `read`.
    public static func readNonBlocking(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(RainError) -> IOResult<Int>
    {
        try callNonBlocking("read") { plainRead(fd, buffer.baseAddress, buffer.count) }
    }

    /// Writes up to `bytes.count` bytes to a blocking descriptor (a file or a pipe).
    /// - Returns: the count written.
    /// - Throws: RAIN_502 naming `write` (and `path`).
    public static func write(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, path: String? = nil) throws(RainError) -> Int {
        try call("write", path: path) { Glibc.write(fd, bytes.baseAddress, bytes.count) }
    }

    /// Writes all of `bytes` to a blocking descriptor, as many calls as it takes.
    /// - Throws: RAIN_502 naming `write` (and `path`).
    public static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, path: String? = nil) throws(RainError) {
        var offset = 0
        while offset < bytes.count {
            let count = try write(fd, UnsafeRawBufferPointer(rebasing: bytes[offset...]), path: path)
            // A write that makes no progress would loop for ever; the kernel reports none for a
            // file or a pipe, so call it an I/O error.
            guard count > 0 else { throw error("write", path: path, ErrnoError(code: EIO)) }
            offset += count
        }
    }

    /// Reads exactly `buffer.count` bytes.
    /// - Returns: false when the file ended first (the bytes read so far are in `buffer`).
    /// - Throws: RAIN_502 naming `read` (and `path`).
    public static func readExactly(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, path: String? = nil) throws(RainError)
        -> Bool
    {
        var offset = 0
        while offset < buffer.count {
            let count = try read(fd, into: UnsafeMutableRawBufferPointer(rebasing: buffer[offset...]), path: path)
            if count == 0 { return false }
            offset += count
        }
        return true
    }

    /// Flushes the file's data and metadata to the disk.
    /// - Throws: RAIN_502 naming `fsync` (and `path`).
    public static func fsync(_ fd: Int32, path: String? = nil) throws(RainError) {
        try call("fsync", path: path) { Glibc.fsync(fd) }
    }

    /// Sets the permission bits of an open file.
    /// - Throws: RAIN_502 naming `chmod` (and `path`).
    public static func setMode(_ fd: Int32, _ mode: mode_t, path: String? = nil) throws(RainError) {
        try call("chmod", path: path) { fchmod(fd, mode) }
    }

    /// Closes `fd` and reports a failure (for a file written without `fsync`, a failed close may
    /// mean lost data). `EINTR` is not retried: Linux has released the descriptor by then, and a
    /// second close could close a descriptor another thread just opened.
    /// - Throws: RAIN_502 naming `close` (and `path`).
    public static func close(_ fd: Int32, path: String? = nil) throws(RainError) {
        guard Glibc.close(fd) != 0 else { return }
        let e = ErrnoError(code: errno)
        if e.code == EINTR { return }
        throw error("close", path: path, e)
    }

    /// Closes `fd` without looking at the result, for the `reason` given (see `UncheckedClose`).
    public static func closeUnchecked(_ fd: Int32, because reason: UncheckedClose) {
        // The result is ignored on purpose: the descriptor is released either way, and `reason`
        // says why there is nothing a failure could tell.
        _ = Glibc.close(fd)
    }

    /// Removes the file at `path`.
    /// - Returns: false when there was nothing to remove (`ENOENT`).
    /// - Throws: RAIN_502 `cannot remove <path>: <strerror>` for any other failure.
    @discardableResult
    public static func removeFile(_ path: String) throws(RainError) -> Bool {
        switch retrying({ unlink(path) }) {
        case .success: return true
        case .failure(let e) where e.code == ENOENT: return false
        case .failure(let e): throw error("remove", path: path, e)
        }
    }
}
