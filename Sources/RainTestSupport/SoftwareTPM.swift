import Foundation
import Synchronization

/// A software TPM 2.0 (`swtpm`, Debian `swtpm`) on a Unix socket, for tests of the `tpm2`
/// provider against a real TPM.
///
/// It runs `swtpm socket --tpm2 --tpmstate dir=DIR --server type=unixio,path=DIR/tpm
/// --ctrl type=unixio,path=DIR/tpm.ctrl --flags not-need-init,startup-clear` in a fresh 0700
/// directory, with a fresh state (its own seeds: a blob made on one instance does not load on
/// another). tpm2-tss reaches it through `tcti` (the swtpm TCTI finds the control socket at
/// `PATH.ctrl`). swtpm has no resource manager: transient objects a test leaks stay until `stop`.
///
/// A small shell watchdog owns swtpm: `stop` (or `deinit`) ends both and removes the directory,
/// and when the test process dies without stopping it, the watchdog notices (it polls the test's
/// pid) and does the same, so no swtpm outlives its tests.
public final class SoftwareTPM: Sendable {
    /// The directory holding the TPM's state and sockets.
    public let directory: String
    /// The tpm2-tss TCTI configuration that reaches this TPM: `swtpm:path=DIR/tpm`.
    public var tcti: String { "swtpm:path=\(directory)/tpm" }
    /// The watchdog shell's pid (swtpm is its child); nil once stopped and reaped.
    private let watchdog: Mutex<pid_t?>

    /// The TPM shared by the tests of this process, started on first use.
    /// - Throws: `HarnessError` when swtpm cannot be started.
    public static func shared() throws -> SoftwareTPM {
        try sharedInstance.withLock { instance in
            if let instance { return instance }
            let started = try SoftwareTPM()
            instance = started
            return started
        }
    }

    private static let sharedInstance = Mutex<SoftwareTPM?>(nil)

    /// Runs `body` while the tpm2-tss pcap TCTI (a TCTI of `pcap:<child>`) records every byte it
    /// exchanges with the TPM into `path`. The TCTI reads `TCTI_PCAP_FILE` each time it opens, and
    /// every test target runs in one process: the tests that record take turns here.
    public static func recordingTCTI<R>(into path: String, _ body: () throws -> R) rethrows -> R {
        try captureLock.withLock {
            setenv("TCTI_PCAP_FILE", path, 1)
            defer { unsetenv("TCTI_PCAP_FILE") }
            return try body()
        }
    }

    private static let captureLock = NSLock()

    /// Starts a TPM of its own and waits (at most 2 s) until both its sockets accept connections.
    /// - Throws: `HarnessError` naming what failed (swtpm missing, exited, never listened).
    public init() throws {
        let swtpm = "/usr/bin/swtpm"
        guard access(swtpm, X_OK) == 0 else {
            throw HarnessError("\(swtpm) is missing: install the Debian package swtpm (scripts/lib/deps.sh does)")
        }
        directory = "/tmp/rain-swtpm-\(UUID().uuidString.prefix(8).lowercased())"
        guard mkdir(directory, 0o700) == 0 else { throw HarnessError("mkdir \(directory): errno \(errno)") }
        let command = [
            swtpm, "socket", "--tpm2", "--tpmstate", "dir=\(directory)", "--server", "type=unixio,path=\(directory)/tpm",
            "--ctrl", "type=unixio,path=\(directory)/tpm.ctrl", "--flags", "not-need-init,startup-clear",
        ].map(Self.quoted).joined(separator: " ")
        let quotedDirectory = Self.quoted(directory)
        // The watchdog: swtpm in the background; on SIGTERM, or when the test process is gone,
        // stop it and remove the directory.
        let script = """
            \(command) >\(Self.quoted(directory + "/swtpm.log")) 2>&1 &
            tpm=$!
            finish() { kill $tpm 2>/dev/null; wait $tpm; rm -rf \(quotedDirectory); exit 0; }
            trap finish TERM INT
            while kill -0 \(getpid()) 2>/dev/null && kill -0 $tpm 2>/dev/null; do sleep 0.5 & wait $!; done
            finish
            """
        let pid: pid_t
        do {
            pid = try Self.spawnShell(script)
        } catch {
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
        watchdog = Mutex(pid)
        do {
            try waitUntilListening()
        } catch {
            stop()
            throw error
        }
    }

    deinit { stop() }

    /// Polls (every 2 ms, at most 2 s) until swtpm's control and server sockets accept connections.
    private func waitUntilListening() throws {
        let deadline = ContinuousClock.now + .seconds(2)
        while ContinuousClock.now < deadline {
            // A socket file exists from bind() on, before listen(): only a connect proves it listens.
            if Self.accepts("\(directory)/tpm.ctrl"), Self.accepts("\(directory)/tpm") { return }
            guard isWatchdogRunning else { break }
            usleep(2000)
        }
        let log = (try? String(contentsOfFile: "\(directory)/swtpm.log", encoding: .utf8)) ?? ""
        throw HarnessError("swtpm did not listen on \(directory)/tpm within 2 s: \(log)")
    }

    /// Stops swtpm (SIGTERM to the watchdog, which ends it) and removes the directory. Idempotent.
    public func stop() {
        if let pid = watchdog.withLock({ pid in
            defer { pid = nil }; return pid
        }) {
            kill(pid, SIGTERM)
            var status: Int32 = 0
            while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Whether the watchdog still runs (reaps it when it has exited).
    private var isWatchdogRunning: Bool {
        watchdog.withLock { pid in
            guard let running = pid else { return false }
            var status: Int32 = 0
            guard waitpid(running, &status, WNOHANG) == 0 else {
                pid = nil
                return false
            }
            return true
        }
    }

    /// Starts `/bin/sh -c script` with posix_spawn: signals unblocked and at their defaults (a test
    /// thread blocks most signals, and a child inherits that mask: SIGTERM would never reach it),
    /// stdio on /dev/null, every other descriptor closed, in a process group of its own.
    private static func spawnShell(_ script: String) throws -> pid_t {
        let null = open("/dev/null", O_RDWR | O_CLOEXEC)
        guard null >= 0 else { throw HarnessError("open /dev/null: errno \(errno)") }
        defer { close(null) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for fd in Int32(0)...2 { posix_spawn_file_actions_adddup2(&actions, null, fd) }
        let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd"))?.compactMap { Int32($0) } ?? []
        for fd in open where fd > 2 && fd != null { posix_spawn_file_actions_addclose(&actions, fd) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGCHLD, SIGPIPE, SIGHUP] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(
            &attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP))
        let words: [String] = ["/bin/sh", "-c", script]
        let argv = words.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = DaemonHarness.withProcessLaunchLock { posix_spawn(&pid, "/bin/sh", &actions, &attributes, argv, environ) }
        guard rc == 0 else { throw HarnessError("cannot start swtpm's watchdog: \(String(cString: strerror(rc)))") }
        return pid
    }

    /// Whether a Unix stream socket at `path` accepts a connection (closed at once).
    private static func accepts(_ path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0
            }
        }
    }

    private static func quoted(_ word: String) -> String {
        "'" + word.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }
}
