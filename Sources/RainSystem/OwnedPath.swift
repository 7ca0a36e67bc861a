import Glibc
import RainCore

/// What `lstat` / `fstat` tell about a path: its type, permission bits and owner.
public struct FileStatus: Sendable, Equatable {
    /// The `S_IFMT` bits (`S_IFDIR`, `S_IFREG`, `S_IFLNK`, `S_IFSOCK`, …).
    public var type: mode_t
    /// The permission bits, with set-uid, set-gid and sticky (`mode & 0o7777`).
    public var permissions: mode_t
    /// The owner.
    public var uid: uid_t

    init(_ st: stat) {
        type = st.st_mode & S_IFMT
        permissions = st.st_mode & 0o7777
        uid = st.st_uid
    }

    /// True for a symbolic link (only `lstat` can say so).
    public var isSymbolicLink: Bool { type == S_IFLNK }
    /// True for a directory.
    public var isDirectory: Bool { type == S_IFDIR }
    /// True when group or others may write (create, remove or rename entries, for a directory).
    public var isWritableByOthers: Bool { permissions & 0o022 != 0 }
    /// The permissions in octal, as `chmod` takes them (`"700"`, `"1777"`).
    public var octalPermissions: String { String(permissions, radix: 8) }

    /// A phrase naming the type, for messages.
    public var typeName: String {
        switch type {
        case S_IFLNK: return "a symbolic link"
        case S_IFDIR: return "a directory"
        case S_IFREG: return "a regular file"
        case S_IFSOCK: return "a socket"
        case S_IFIFO: return "a FIFO"
        default: return "a special file"
        }
    }
}

extension Syscall {
    /// `lstat`: the status of `path` itself, never of what a symbolic link points to.
    /// - Returns: nil when nothing is at `path` (`ENOENT`).
    /// - Throws: RAIN_502 naming `lstat` and the path for any other failure.
    public static func linkStatus(_ path: String) throws(RainError) -> FileStatus? {
        var st = stat()
        switch retrying({ lstat(path, &st) }) {
        case .success: return FileStatus(st)
        case .failure(let e) where e.code == ENOENT: return nil
        case .failure(let e): throw error("lstat", path: path, e)
        }
    }

    /// `fstat` of an open descriptor.
    /// - Throws: RAIN_502 naming `fstat` (and `path`).
    public static func status(_ fd: Int32, path: String? = nil) throws(RainError) -> FileStatus {
        var st = stat()
        try call("fstat", path: path) { fstat(fd, &st) }
        return FileStatus(st)
    }
}

/// Checks and creation of the files and directories the daemon trusts: the state
/// directory, the socket directory, the config, the outbox. None of them may be a symbolic link,
/// owned by another uid, or writable by group or others: whoever can write them can steer the
/// daemon (its code sender, its allowed uids) or stand in for it.
public enum OwnedPath {
    /// Refuses a directory whose status `status` shows a symbolic link, something other than a
    /// directory, an owner outside `owners`, or write access for group or others.
    /// - Parameters:
    ///   - name: what messages call it (`"state directory"`).
    ///   - field: `details.field` of the error (`"state-dir"`).
    ///   - code: the error's code (RAIN_102 for the daemon, RAIN_101 for a client).
    /// - Throws: `code`, naming the path, what was found and the fix.
    public static func requireTrustedDirectory(
        _ status: FileStatus, path: String, owners: Set<uid_t>, name: String, field: String,
        code: RainError.Code = .invalidArgument
    ) throws(RainError) {
        func refuse(_ message: String) -> RainError {
            var e = RainError(code, message)
            e.details.field = field
            return e
        }
        if status.isSymbolicLink {
            throw refuse("\(name) \(path) is a symbolic link; refusing to follow it: remove it, or use the real directory")
        }
        guard status.isDirectory else {
            throw refuse("\(name) \(path) is \(status.typeName), not a directory; remove it or choose another path")
        }
        guard owners.contains(status.uid) else {
            throw refuse(
                "\(name) \(path) is owned by uid \(status.uid), not by uid \(ownerList(owners)); another user may control it: "
                    + "remove it (or run chown \(getuid()) \(path) if it is yours) or choose another path")
        }
        if status.isWritableByOthers {
            throw refuse(
                "\(name) \(path) has mode \(status.octalPermissions): other users can create, replace or remove "
                    + "entries in it; if it is your own directory run chmod go-w \(path), otherwise use a directory only "
                    + "you can write (mkdir -m 700 DIR)")
        }
    }

    /// The same checks for a file that may be read by others but written only by its owner (the
    /// config): a regular file owned by `owners`, not writable by group or others.
    /// - Throws: RAIN_102 (`details.field` `field`) naming the path, the owner or mode, and the fix.
    public static func requireTrustedFile(
        _ status: FileStatus, path: String, owners: Set<uid_t>, name: String, field: String
    ) throws(RainError) {
        guard status.type == S_IFREG else {
            throw RainError.invalid(
                "\(name) \(path) is \(status.typeName), not a regular file; replace it with a file", field: field)
        }
        guard owners.contains(status.uid) else {
            throw RainError.invalid(
                "\(name) \(path) is owned by uid \(status.uid), not by uid \(ownerList(owners)); another user could "
                    + "write it: check it, then run chown \(getuid()) \(path)", field: field)
        }
        if status.isWritableByOthers {
            throw RainError.invalid(
                "\(name) \(path) has mode \(status.octalPermissions), writable by other users; run chmod go-w \(path)",
                field: field)
        }
    }

    static func ownerList(_ owners: Set<uid_t>) -> String {
        owners.sorted().map(String.init).joined(separator: " or ")
    }

    /// Creates `path` with `mode` (missing parents 0700), or checks the one that is there.
    ///
    /// A directory made here gets exactly `mode`. One that was already there is checked with
    /// `lstat` (`requireTrustedDirectory`: owned by this uid, no symbolic link, not writable by
    /// others) and its mode is never changed.
    /// - Returns: true when this call created the directory.
    /// - Throws: RAIN_102 naming the path and the fix; RAIN_502 when a call fails.
    @discardableResult
    public static func makeOrCheckDirectory(
        _ path: String, mode: mode_t, name: String, field: String
    ) throws(RainError) -> Bool {
        // `lstat("link/")` follows the link: check the name without its trailing slashes.
        let path = trimmingTrailingSlashes(path)
        try makeParents(of: path)
        let isCreated: Bool
        switch Syscall.retrying({ mkdir(path, mode) }) {
        case .success: isCreated = true
        case .failure(let e) where e.code == EEXIST: isCreated = false
        case .failure(let e): throw Syscall.error("mkdir", path: path, e)
        }
        // Checked after mkdir, never before: between a check and a mkdir someone else could make it.
        guard let status = try Syscall.linkStatus(path) else {
            throw Syscall.error("lstat", path: path, ErrnoError(code: ENOENT))
        }
        try requireTrustedDirectory(status, path: path, owners: [getuid()], name: name, field: field)
        if isCreated, status.permissions != mode {
            try setDirectoryMode(path, mode)  // the umask narrowed it
        }
        return isCreated
    }

    /// Sets the mode of a directory this uid owns, through a descriptor opened without following a
    /// symbolic link.
    /// - Throws: RAIN_502 naming the failed call.
    public static func setDirectoryMode(_ path: String, _ mode: mode_t) throws(RainError) {
        let fd = try Syscall.open(path, .readOnly, options: [.directory, .noFollow])
        defer { Syscall.closeUnchecked(fd, because: .readOnly) }
        try Syscall.setMode(fd, mode, path: path)
    }

    /// Creates the missing parents of `path` with mode 0700 (an existing parent is left as it is).
    static func makeParents(of path: String) throws(RainError) {
        var parents: [String] = []
        var current = parent(of: path)
        while !current.isEmpty, current != "/", current != ".", (try Syscall.linkStatus(current)) == nil {
            parents.append(current)
            current = parent(of: current)
        }
        for dir in parents.reversed() {
            switch Syscall.retrying({ mkdir(dir, 0o700) }) {
            case .success: continue
            case .failure(let e) where e.code == EEXIST: continue
            case .failure(let e): throw Syscall.error("mkdir", path: dir, e)
            }
        }
    }

    /// `path` without trailing slashes (`"/"` stays).
    public static func trimmingTrailingSlashes(_ path: String) -> String {
        var trimmed = Substring(path)
        while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        return String(trimmed)
    }

    /// The directory part of `path` (`"."` for a bare name).
    public static func parent(of path: String) -> String {
        var trimmed = Substring(path)
        while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        guard let slash = trimmed.lastIndex(of: "/") else { return "." }
        let dir = trimmed[..<slash]
        return dir.isEmpty ? "/" : String(dir)
    }

    /// Opens an existing file without following a symbolic link and checks it with
    /// `requireTrustedFile`, then reads it whole.
    /// - Returns: nil when the file does not exist.
    /// - Throws: RAIN_102 for a symbolic link or an untrusted file; RAIN_502 when a call fails or
    ///   the file is larger than `limit`.
    public static func readTrustedFile(
        _ path: String, owners: Set<uid_t>, name: String, field: String, limit: Int
    ) throws(RainError) -> [UInt8]? {
        if let status = try Syscall.linkStatus(path), status.isSymbolicLink {
            throw RainError.invalid(
                "\(name) \(path) is a symbolic link; refusing to follow it: replace it with the file", field: field)
        }
        let fd: Int32
        do throws(RainError) {
            fd = try Syscall.open(path, .readOnly, options: [.noFollow, .nonBlocking, .noControllingTerminal])
        } catch {
            if error.errno == ENOENT { return nil }
            if error.errno == ELOOP {
                throw RainError.invalid("\(name) \(path) is a symbolic link; refusing to follow it", field: field)
            }
            throw error
        }
        defer { Syscall.closeUnchecked(fd, because: .readOnly) }
        try requireTrustedFile(try Syscall.status(fd, path: path), path: path, owners: owners, name: name, field: field)
        return try AtomicFile.readAll(fd: fd, path: path, limit: limit)
    }
}
