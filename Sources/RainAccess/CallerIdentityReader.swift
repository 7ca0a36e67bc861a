import Glibc
import RainCore
import RainCrypto
import RainSystem
import Synchronization

/// Reads a `CallerIdentity` through a caller's pidfd (`ProcessDescriptor`, taken when its
/// connection was accepted), and reads it again before a sensitive call (`recheck`).
///
/// Everything is read from one open `/proc/PID` directory, which stays bound to the process it
/// was opened for: once the pidfd shows that process alive after the directory was opened, no
/// reused pid can slip in. For a descriptor taken with `pidfd_open` (kernels without
/// `SO_PEERPIDFD`) the start time recorded then is compared before and after reading too.
///
/// What makes a caller unapprovable (`CallerIdentity.unapprovable`): `LD_PRELOAD` or `LD_AUDIT`
/// in its environment; a tracer on any of its threads (`TracerPid`); for an interpreter, a
/// variable that makes it load other code (`PYTHONPATH`, `NODE_OPTIONS`, …), or a command line
/// that names no script file; an environment, status or command line that cannot be read or is
/// larger than the limits.
///
/// Every read is bounded (`Limits`). Reading hashes files and may take a while for a large
/// executable met for the first time: call it on a queue that may block, never on the event loop
/// or the Swift concurrency pool.
public final class CallerIdentityReader: Sendable {
    /// How much is read.
    public struct Limits: Sendable {
        /// The environment scanned for `LD_PRELOAD` and the like; a larger one makes the caller
        /// unapprovable (what lies past the limit is not known).
        public var maximumEnvironmentBytes = 8 << 20
        /// The command line read to find an interpreter's script.
        public var maximumCommandLineBytes = 64 << 10
        /// `status`, `stat`, `cgroup`, `.flatpak-info`.
        public var maximumSmallFileBytes = 64 << 10
        /// The largest executable or script hashed.
        public var maximumHashedBytes: Int64 = 1 << 30
        /// Threads whose `TracerPid` is checked; a process with more is unapprovable.
        public var maximumThreads = 4096
        /// `/proc/PID/maps` read for executable mappings; a larger one makes the caller unapprovable.
        public var maximumMapsBytes = 16 << 20

        public init() {}
    }

    /// The hashes of executables and scripts, by `FileKey`.
    public let hashes: ExecutableHashCache
    /// The processes read lately, for their next connections.
    let recent = RecentIdentities(capacity: 256)
    /// How much is read.
    public let limits: Limits
    /// The apps (`CallerIdentity.appPath`) allowed code their user can write (a JIT, a library
    /// of their own): `access.apps` entries with `allowWritableCode`, a guarded setting.
    let allowsWritableCode: Set<String>

    /// A reader.
    /// - Parameters:
    ///   - limits: how much is read.
    ///   - cacheCapacity: executables and scripts whose hash is kept.
    ///   - allowsWritableCode: the app paths whose writable code (`WritableCodeScan`) is allowed.
    public init(limits: Limits = Limits(), cacheCapacity: Int = 256, allowsWritableCode: Set<String> = []) {
        self.limits = limits
        self.hashes = ExecutableHashCache(capacity: cacheCapacity)
        self.allowsWritableCode = allowsWritableCode
    }

    /// Reads who the process behind `process` is.
    /// - Parameters:
    ///   - process: the caller's pidfd (`RequestContext.peerProcess`).
    ///   - uid: the caller's uid, from its socket's peer credentials.
    /// - Returns: its identity; `unapprovable` lists what forbids approving it.
    /// - Throws: RAIN_202 with reason `caller_gone` when the process has exited (or its pid was
    ///   reused), or `caller_unidentified` when its executable cannot be read (a process that is
    ///   not dumpable, or of another uid, when the daemon is not root); RAIN_502 when a call fails.
    public func read(_ process: ProcessDescriptor, uid: UInt32) throws(RainError) -> CallerIdentity {
        try read(process, uid: uid, usesRecent: true)
    }

    private func read(_ process: ProcessDescriptor, uid: UInt32, usesRecent: Bool) throws(RainError) -> CallerIdentity {
        try process.withDescriptor { pidfd throws(RainError) in
            try read(process, pidfd: pidfd, uid: uid, usesRecent: usesRecent)
        }
    }

    /// Reads the identity again before a sensitive call and checks that it is the same caller: the
    /// same process, still running the same executable (and script), with nothing that makes it
    /// unapprovable since (a tracer attached after it connected).
    /// - Returns: the identity read now.
    /// - Throws: RAIN_202 with reason `caller_changed` when it differs or can no longer be read
    ///   (`caller_unidentified` from `read` is a change here), or as `read`.
    public func recheck(_ identity: CallerIdentity, process: ProcessDescriptor) throws(RainError) -> CallerIdentity {
        // Read in full, never from `recent`: a tracer attached since is seen.
        let now: CallerIdentity
        do {
            now = try read(process, uid: identity.uid, usesRecent: false)
        } catch {
            guard error.details.reason == "caller_unidentified" else { throw error }
            // It was identified when it connected and cannot be now: it ran another program since
            // (one that is not dumpable, or caught in the middle of exec). That is a change.
            throw RainError(
                .unauthorized,
                "the calling process \(identity.pid) (\(identity.appPath)) changed since it connected: it can no longer "
                    + "be identified (it runs another program); reconnect, and approve it again if asked",
                details: .init(reason: "caller_changed"))
        }
        guard now.pid == identity.pid, now.appPath == identity.appPath, now.contentHash == identity.contentHash,
            now.unapprovable == identity.unapprovable
        else {
            var changes: [String] = []
            if now.appPath != identity.appPath || now.contentHash != identity.contentHash {
                changes.append("it now runs \(now.appPath) (\(now.hashPrefix))")
            }
            if now.unapprovable != identity.unapprovable {
                changes.append("unapprovable: \(now.unapprovable.isEmpty ? "none" : now.unapprovable.joined(separator: ", "))")
            }
            throw RainError(
                .unauthorized,
                "the calling process \(identity.pid) (\(identity.appPath)) changed since it connected: "
                    + changes.joined(separator: "; ") + "; reconnect, and approve it again if asked",
                details: .init(reason: "caller_changed"))
        }
        return now
    }

    // MARK: reading

    private func read(
        _ process: ProcessDescriptor, pidfd: Int32, uid: UInt32, usesRecent: Bool
    ) throws(RainError) -> CallerIdentity {
        let pid = process.pid
        let base = "/proc/\(pid)"
        try requireRunning(process, pidfd: pidfd)
        let directory: Int32
        do throws(RainError) {
            directory = try Syscall.open(base, .readOnly, options: [.directory, .noFollow])
        } catch  where error.errno == ENOENT || error.errno == ESRCH {
            throw Self.gone(pid)
        }
        defer { Syscall.closeUnchecked(directory, because: .readOnly) }
        // Alive after the directory was opened: the directory is this process's, and stays so.
        let stat = try readStat(directory, base: base, pid: pid)
        try requireRunning(process, pidfd: pidfd)
        try requireSameStart(process, stat)
        try requireExecutableAtAccept(process, directory, base: base)

        // The same process read a moment ago (a client opening many connections), still running the
        // same file with the same environment and command line: that identity, without reading the
        // rest again.
        let key = RecentIdentities.Key(pid: pid, startTime: stat.startTime, uid: uid)
        let fingerprint = try? self.fingerprint(directory, base: base)
        if usesRecent, let fingerprint, let known = recent.identity(key, fingerprint: fingerprint) {
            try requireRunning(process, pidfd: pidfd)
            return known
        }
        let identity = try readInFull(directory, base: base, process: process, pidfd: pidfd, stat: stat, uid: uid)
        // An interpreter's identity holds its script's hash, which the fingerprint does not: read
        // in full each time.
        if let fingerprint, InterpreterRule.matching(executablePath: identity.executablePath) == nil {
            recent.store(key, fingerprint: fingerprint, identity: identity)
        }
        return identity
    }

    private func readInFull(
        _ directory: Int32, base: String, process: ProcessDescriptor, pidfd: Int32, stat: ProcessStat, uid: UInt32
    ) throws(RainError) -> CallerIdentity {
        let pid = process.pid
        var unapprovable: [String] = []
        let (executablePath, executableSHA256) = try readExecutable(directory, base: base, pid: pid)
        let rule = InterpreterRule.matching(executablePath: executablePath)

        unapprovable += scanEnvironment(directory, base: base, isInterpreter: rule != nil)
        unapprovable += checkTracers(directory, base: base)

        var script: CallerIdentity.Script?
        if let rule {
            switch readScript(directory, base: base, rule: rule) {
            case .success(let found): script = found
            case .failure(let reason): unapprovable.append("interpreter \(executablePath): \(reason.text)")
            }
        }
        let appPath = script.map { "\(executablePath) \($0.path)" } ?? executablePath
        if !allowsWritableCode.contains(appPath) {
            unapprovable += scanMaps(directory, base: base, executablePath: executablePath, uid: uid)
        }
        let systemdUnit =
            (try? Syscall.readPrefix(
                at: directory, "cgroup", path: base + "/cgroup", limit: limits.maximumSmallFileBytes))
            .flatMap { ProcfsParsing.systemdUnit(cgroup: $0.bytes) }
        let flatpakAppID =
            (try? Syscall.readPrefix(
                at: directory, "root/.flatpak-info", path: base + "/root/.flatpak-info", limit: limits.maximumSmallFileBytes))
            .flatMap { ProcfsParsing.flatpakAppID(info: $0.bytes) }

        // Still the same process at the end: nothing above was read from a successor.
        try requireRunning(process, pidfd: pidfd)
        let last = try readStat(directory, base: base, pid: pid)
        try requireSameStart(process, last)
        // And the same program: an exec between the two reads (or in progress at the first) moves
        // the environment, and would mix the new program's file with the old one's variables, or
        // show an empty environment while the new one is being set up.
        if let end = stat.environmentEnd, end == 0 || last.environmentEnd != end {
            throw Self.unidentified("process \(pid) was starting another program while it was read; call again")
        }
        return CallerIdentity(
            pid: pid, uid: uid, executablePath: executablePath, executableSHA256: executableSHA256, script: script,
            systemdUnit: systemdUnit, flatpakAppID: flatpakAppID, unapprovable: unapprovable,
            controllingTerminal: stat.controllingTerminal, sessionID: stat.sessionID)
    }

    /// What can change in a process while its pid and start time stay: the file it runs, its
    /// environment and its command line (an `exec`), and its tracers.
    private func fingerprint(_ directory: Int32, base: String) throws(RainError) -> RecentIdentities.Fingerprint {
        let exe = try Syscall.open(at: directory, "exe", .readOnly, options: [.noControllingTerminal], path: base + "/exe")
        defer { Syscall.closeUnchecked(exe, because: .readOnly) }
        let file = try FileKey(of: exe, path: base + "/exe")
        let environment = try Syscall.readPrefix(
            at: directory, "environ", path: base + "/environ", limit: limits.maximumEnvironmentBytes)
        let commandLine = try Syscall.readPrefix(
            at: directory, "cmdline", path: base + "/cmdline", limit: limits.maximumCommandLineBytes)
        guard !environment.isTruncated, !commandLine.isTruncated else {
            throw RainError(.internalError, "too large to fingerprint")
        }
        return RecentIdentities.Fingerprint(
            executable: file, environment: SHA256.hash(environment.bytes), commandLine: SHA256.hash(commandLine.bytes),
            tracers: checkTracers(directory, base: base))
    }

    /// The process still runs the file it ran when its connection was accepted: a program that
    /// connects and then execs an approved one (or wrote its request first) is not that program.
    /// - Throws: RAIN_202 `caller_changed` when the file differs; `caller_unidentified` when it
    ///   could not be read at accept (not dumpable then, or gone).
    private func requireExecutableAtAccept(_ process: ProcessDescriptor, _ directory: Int32, base: String)
        throws(RainError)
    {
        switch process.executableAtAccept {
        case .notRecorded:
            return
        case .unreadable:
            throw Self.unidentified(
                "process \(process.pid) could not be read when it connected (not dumpable, or starting another "
                    + "program): reconnect from a process that can be identified")
        case .file(let device, let inode):
            let exe: Int32
            do throws(RainError) {
                exe = try Syscall.open(at: directory, "exe", .readOnly, options: [.noControllingTerminal], path: base + "/exe")
            } catch  where error.errno == ESRCH || error.errno == ENOENT {
                throw Self.gone(process.pid)
            } catch  where error.errno == EACCES || error.errno == EPERM {
                throw Self.unidentified("cannot read \(base)/exe (\(error.message))", underlying: error)
            }
            defer { Syscall.closeUnchecked(exe, because: .readOnly) }
            let now = try FileKey(of: exe, path: base + "/exe")
            guard now.device == device, now.inode == inode else {
                throw RainError(
                    .unauthorized,
                    "the calling process \(process.pid) runs another program than when it connected: "
                        + "reconnect from the program itself, and approve it if asked",
                    details: .init(reason: "caller_changed"))
            }
        }
    }

    private func requireRunning(_ process: ProcessDescriptor, pidfd: Int32) throws(RainError) {
        if try Syscall.hasExited(processDescriptor: pidfd) { throw Self.gone(process.pid) }
    }

    private func requireSameStart(_ process: ProcessDescriptor, _ stat: ProcessStat) throws(RainError) {
        if let expected = process.startTime, expected != stat.startTime { throw Self.gone(process.pid) }
    }

    private func readStat(_ directory: Int32, base: String, pid: Int32) throws(RainError) -> ProcessStat {
        do throws(RainError) {
            return try ProcessStat(
                parsing: try Syscall.readPrefix(at: directory, "stat", path: base + "/stat", limit: 4096).bytes)
        } catch  where error.errno == ESRCH || error.errno == ENOENT {
            throw Self.gone(pid)
        }
    }

    /// `/proc/PID/exe`: its path, and the SHA-256 of the file the process runs (opened through the
    /// link, so a file replaced on disk since the start is not the one hashed).
    private func readExecutable(_ directory: Int32, base: String, pid: Int32) throws(RainError) -> (String, [UInt8]) {
        let exePath = base + "/exe"
        let fd: Int32
        var path: String
        do throws(RainError) {
            path = try Syscall.readLink(at: directory, "exe", path: exePath)
            fd = try Syscall.open(at: directory, "exe", .readOnly, options: [.noControllingTerminal], path: exePath)
        } catch  where error.errno == ESRCH || error.errno == ENOENT {
            throw Self.gone(pid)
        } catch  where error.errno == EACCES || error.errno == EPERM {
            throw Self.unidentified(
                "cannot read \(exePath) (\(error.message)): a process that is not dumpable or runs as another user "
                    + "cannot be identified", underlying: error)
        }
        defer { Syscall.closeUnchecked(fd, because: .readOnly) }
        // A file unlinked or replaced since the process started shows as "PATH (deleted)": the
        // process still runs what was at PATH, and that is what is hashed.
        if try FileKey.linkCount(of: fd, path: exePath) == 0, path.hasSuffix(" (deleted)") {
            path.removeLast(" (deleted)".count)
        }
        return (path, try hashes.sha256(of: fd, path: exePath, limit: limits.maximumHashedBytes))
    }

    /// The variables of `ProcfsParsing` found in `/proc/PID/environ`, read a block at a time.
    private func scanEnvironment(_ directory: Int32, base: String, isInterpreter: Bool) -> [String] {
        let path = base + "/environ"
        var names = ProcfsParsing.injectingVariables
        if isInterpreter { names += ProcfsParsing.interpreterInjectingVariables }
        var scanner = EnvironmentScanner(names: names)
        do throws(RainError) {
            let fd = try Syscall.open(at: directory, "environ", .readOnly, path: path)
            defer { Syscall.closeUnchecked(fd, because: .readOnly) }
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 16 << 10, alignment: 16)
            defer { buffer.deallocate() }
            var total = 0
            while true {
                let n = try Syscall.read(fd, into: buffer, path: path)
                if n == 0 { break }
                total += n
                if total > limits.maximumEnvironmentBytes {
                    return ["environment larger than \(limits.maximumEnvironmentBytes) bytes: not checked to its end"]
                }
                scanner.feed(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            }
            scanner.finish()
        } catch {
            return ["environment unreadable (\(error.message))"]
        }
        return names.filter { scanner.found.contains($0) }
    }

    /// `TracerPid` of every thread (`/proc/PID/task/TID/status`): a tracer on any thread can run
    /// code in the process.
    /// The executable mappings its user could have written (`WritableCodeScan`).
    private func scanMaps(_ directory: Int32, base: String, executablePath: String, uid: UInt32) -> [String] {
        guard uid != 0 else { return [] }
        guard let maps = try? Syscall.readPrefix(at: directory, "maps", path: base + "/maps", limit: limits.maximumMapsBytes)
        else { return ["a memory map that cannot be read"] }
        return WritableCodeScan.findings(
            maps: maps.bytes, isTruncated: maps.isTruncated, executablePath: executablePath, uid: uid)
    }

    private func checkTracers(_ directory: Int32, base: String) -> [String] {
        let threads: [String]
        do throws(RainError) {
            threads = try Syscall.directoryEntries(at: directory, "task", path: base + "/task", limit: limits.maximumThreads)
        } catch {
            return ["threads unreadable (\(error.message))"]
        }
        guard threads.count < limits.maximumThreads else { return ["more than \(limits.maximumThreads) threads: not checked"] }
        var tracers: Set<Int32> = []
        for thread in threads where thread.allSatisfy(\.isNumber) {
            let name = "task/\(thread)/status"
            guard
                let status = try? Syscall.readPrefix(
                    at: directory, name, path: base + "/" + name, limit: limits.maximumSmallFileBytes)
            else { continue }  // the thread ended meanwhile
            guard let tracer = ProcfsParsing.tracerPID(status: status.bytes) else {
                return ["TracerPid missing from \(base)/\(name)"]
            }
            if tracer != 0 { tracers.insert(tracer) }
        }
        return tracers.sorted().map { "traced by pid \($0)" }
    }

    struct ScriptFailure: Error { var text: String }

    /// An interpreter's script: found on its command line, opened through the process's own
    /// root (absolute path) or working directory (relative path), hashed.
    private func readScript(
        _ directory: Int32, base: String, rule: InterpreterRule
    ) -> Result<CallerIdentity.Script, ScriptFailure> {
        let commandLine: (bytes: [UInt8], isTruncated: Bool)
        do throws(RainError) {
            commandLine = try Syscall.readPrefix(
                at: directory, "cmdline", path: base + "/cmdline", limit: limits.maximumCommandLineBytes)
        } catch {
            return .failure(ScriptFailure(text: "command line unreadable (\(error.message))"))
        }
        var arguments = ProcfsParsing.arguments(cmdline: commandLine.bytes)
        // The last argument may be cut at the limit: never take it for a path.
        if commandLine.isTruncated, !arguments.isEmpty { arguments.removeLast() }
        let argument: String
        switch rule.script(in: arguments) {
        case .script(let found): argument = found
        case .unknown(let reason):
            return .failure(ScriptFailure(text: commandLine.isTruncated ? "command line too long; \(reason)" : reason))
        }
        let relative: String
        let shown: String
        if argument.hasPrefix("/") {
            relative = "root" + argument
            shown = argument
        } else {
            guard let cwd = try? Syscall.readLink(at: directory, "cwd", path: base + "/cwd") else {
                return .failure(ScriptFailure(text: "working directory unreadable"))
            }
            relative = "cwd/" + argument
            shown = Self.normalize(cwd + "/" + argument)
        }
        do throws(RainError) {
            let fd = try Syscall.open(
                at: directory, relative, .readOnly, options: [.noControllingTerminal, .nonBlocking], path: shown)
            defer { Syscall.closeUnchecked(fd, because: .readOnly) }
            return .success(.init(path: shown, sha256: try hashes.sha256(of: fd, path: shown, limit: limits.maximumHashedBytes)))
        } catch {
            return .failure(ScriptFailure(text: "script \(shown) unreadable (\(error.message))"))
        }
    }

    /// `a/./b/../c` → `a/c`, lexically (for display: the file is opened through the process's cwd).
    static func normalize(_ path: String) -> String {
        var parts: [Substring] = []
        for part in path.split(separator: "/") {
            switch part {
            case ".": continue
            case "..": if !parts.isEmpty { parts.removeLast() }
            default: parts.append(part)
            }
        }
        return "/" + parts.joined(separator: "/")
    }

    // MARK: errors

    static func gone(_ pid: Int32) -> RainError {
        RainError(
            .unauthorized, "the calling process \(pid) has exited; it cannot be identified: call again from a running process",
            details: .init(reason: "caller_gone"))
    }

    static func unidentified(_ why: String, underlying: (any Error & Sendable)? = nil) -> RainError {
        RainError(
            .unauthorized, "cannot identify the calling app: \(why)", details: .init(reason: "caller_unidentified"),
            underlying: underlying)
    }
}

extension FileKey {
    /// The link count of an open file (0 once it was unlinked).
    static func linkCount(of fd: Int32, path: String) throws(RainError) -> UInt64 {
        var st = stat()
        try Syscall.call("fstat", path: path) { fstat(fd, &st) }
        return UInt64(st.st_nlink)
    }
}

/// The identities of processes read lately, by pid, start time and uid, each with what it was read
/// from (`Fingerprint`): a process that opens many connections is read in full once, and again
/// only when it runs another file, with another environment or command line, or has a tracer.
/// Interpreters are not kept (their script may change under the same command line); the systemd
/// unit and the Flatpak app id are as first read. `recheck` never uses it. Bounded: past
/// `capacity` entries the oldest goes.
final class RecentIdentities: Sendable {
    struct Key: Hashable {
        var pid: Int32
        var startTime: UInt64
        var uid: UInt32
    }

    struct Fingerprint: Equatable {
        var executable: FileKey
        var environment: [UInt8]
        var commandLine: [UInt8]
        var tracers: [String]
    }

    private struct State {
        var entries: [Key: (Fingerprint, CallerIdentity)] = [:]
        var order: [Key] = []
    }

    private let capacity: Int
    private let state = Mutex(State())

    init(capacity: Int) { self.capacity = max(1, capacity) }

    func identity(_ key: Key, fingerprint: Fingerprint) -> CallerIdentity? {
        state.withLock { s in
            guard let (known, identity) = s.entries[key], known == fingerprint else { return nil }
            return identity
        }
    }

    func store(_ key: Key, fingerprint: Fingerprint, identity: CallerIdentity) {
        state.withLock { s in
            if s.entries.updateValue((fingerprint, identity), forKey: key) == nil { s.order.append(key) }
            if s.order.count > capacity { s.entries[s.order.removeFirst()] = nil }
        }
    }
}
