import Foundation
import RainTestSupport
import RainWallet
import RainWire
import Testing

@Suite("rainwalletd life cycle, files and permissions")
struct DaemonLifecycleTests {
    @Test("SIGTERM: the daemon exits 0 and removes its socket")
    func sigterm() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        #expect(fileMode(h.socketPath)?.type == S_IFSOCK)
        let status = try await h.stop()
        #expect(status == 0, "log:\n\(h.log)")
        #expect(fileMode(h.socketPath) == nil)
    }

    /// The stop signals are blocked in every thread and read from a signalfd that exists before
    /// the daemon prepares: one sent at any point of the start is acted on. Otherwise a SIGTERM
    /// during the start would end the daemon by the default action (status 143), and one sent
    /// right after `daemon.ready`, before a signal source was registered, would be discarded and
    /// the daemon would keep running.
    @Test(
        "SIGTERM while the daemon starts (after its first log line) or right at daemon.ready stops it cleanly (exit 0), never lost",
        arguments: [false, true])
    func sigtermWhileStarting(atReady: Bool) async throws {
        let h = try DaemonHarness.prepare()
        defer { h.shutdown() }
        try h.launch()
        if atReady {
            try await h.waitUntilReady()  // the moment a service manager may stop it
        } else {
            // Its first line: `main` has run and the daemon is preparing (storage, keys, socket).
            let preparing = await eventually(timeout: .seconds(15)) { !h.log.isEmpty }
            try #require(preparing, "no log line within 15 s")
        }
        let status = try await h.stop(timeout: .seconds(15))
        #expect(status == 0, "stopped \(atReady ? "at daemon.ready" : "while starting"); log:\n\(h.log)")
        #expect(fileMode(h.socketPath) == nil, "the socket is removed (or never made)")
    }

    @Test("a daemon on the SQLite store never loads libpq (nor its Kerberos, LDAP and GnuTLS)")
    func sqliteDaemonDoesNotMapLibPQ() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let pid = try #require(h.pid)
        // A login and the account and wallet reads: every store path has run.
        let p = h.provider()
        try await p.sendLoginCode(to: .email("maps@example.com"))
        try await p.confirmLoginCode(try #require(try await h.latestCode(for: "maps@example.com")))
        _ = try await p.account()
        _ = try await p.getWallet()
        #expect(processMaps(pid, library: "libsqlite3.so"), "the check reads the daemon's maps")
        #expect(!processMaps(pid, library: "libpq.so"))
        #expect(!processMaps(pid, library: "libgnutls.so"))
    }

    @Test(
        "the daemon keeps at most two malloc arenas; MALLOC_ARENA_MAX set by the user wins",
        arguments: [nil, "16"])
    func mallocArenas(userLimit: String?) async throws {
        let h = try await DaemonHarness.start(environment: ["MALLOC_ARENA_MAX": userLimit])
        defer { h.shutdown() }
        let pid = try #require(h.pid)
        // A login, then reads from eight connections at once: the loop, the store's threads and
        // the Swift pool's all allocate.
        let login = h.provider()
        try await h.logIn(login, .email("arenas@example.com"))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    let p = h.provider()
                    for _ in 0..<20 {
                        _ = try await p.account()
                        _ = try await p.getWallet()
                    }
                }
            }
            try await group.waitForAll()
        }
        let arenas = try #require(mallocArenasBesidesMain(pid))
        if userLimit == nil {
            #expect(arenas <= 1, "M_ARENA_MAX 2: the main arena and at most one more; \(arenas) more found")
        } else {
            // Without the cap each allocating thread had one: the check sees them.
            #expect(arenas >= 2, "with MALLOC_ARENA_MAX=16 the daemon's threads have arenas of their own")
        }
    }

    @Test("a stale socket file (its daemon was killed) is replaced on start")
    func staleSocketReplaced() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        await h.kill()
        #expect(fileMode(h.socketPath)?.type == S_IFSOCK, "SIGKILL leaves the socket file behind")
        #expect(await rainError { _ = try await h.provider().daemonInfo() }?.code == .notInitialized)

        try await h.start()
        #expect(try await h.provider().daemonInfo().protocolVersion > 0)
    }

    @Test("a second daemon on a live socket fails to start; the first keeps serving")
    func secondDaemonRefused() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let login = try await h.logIn(h.provider(), .email("first@example.com"))

        let second = try await h.runDaemon(arguments: h.daemonArguments)
        #expect(second.status != 0, "\(second.output)")

        #expect(h.isRunning)
        #expect(fileMode(h.socketPath)?.type == S_IFSOCK)
        let p = h.provider()
        #expect(try await p.daemonInfo().protocolVersion > 0)
        let s = try await p.currentSession()
        #expect(s.authState == .authenticated)
        #expect(s.accountID == login.session.accountID)
    }

    @Test("an invalid config file: the daemon exits non-zero and names the bad key")
    func invalidConfig() async throws {
        let h = try DaemonHarness.prepare(config: #"{"profiles": {"x": {"passkeyDomian": "a.com"}}}"#)
        defer { h.shutdown() }
        try h.launch()
        let status = try await h.waitForExit()
        #expect(status != 0)
        #expect(h.log.contains("profiles.x.passkeyDomian"), "log:\n\(h.log)")
        #expect(fileMode(h.socketPath) == nil)
    }

    @Test("socket 0600; a --socket directory keeps its mode (never changed); state files 0600")
    func permissions() async throws {
        let h = try DaemonHarness.prepare()
        defer { h.shutdown() }
        #expect(chmod(h.directory, 0o755) == 0)
        try await h.start()

        #expect(fileMode(h.socketPath)?.type == S_IFSOCK)
        #expect(fileMode(h.socketPath)?.permissions == 0o600)
        // rainwalletd never changes the mode of a directory it did not create (this one
        // is the harness's; 0755 lets no one else write it, so it is used as it is).
        #expect(fileMode(h.directory)?.permissions == 0o755)
        #expect(fileMode(h.stateDirectory)?.permissions == 0o700)

        try await h.logIn(h.provider(), .email("modes@example.com"))
        let key = "\(h.stateDirectory)/storage.key"
        #expect(fileMode(key)?.type == S_IFREG)
        #expect(fileMode(key)?.permissions == 0o600)
        let sessions = try FileManager.default.contentsOfDirectory(atPath: "\(h.stateDirectory)/sessions")
            .filter { $0.hasSuffix(".session") }
        #expect(!sessions.isEmpty)
        for name in sessions {
            #expect(fileMode("\(h.stateDirectory)/sessions/\(name)")?.permissions == 0o600, "\(name)")
        }
    }

    @Test("SIGTERM drains a call in flight: it is answered, then the daemon exits 0")
    func sigtermDrains() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let raw = try RawConnection(path: h.socketPath)

        // One connection is served in order: once GetInfo (sent second) is answered, the slow call
        // is certainly in flight.
        let slow = try SlowEchoRequest(delayMilliseconds: 700, data: Array("drain".utf8)).encode()
        try raw.write(
            try Envelope.requestFrame(id: 1, method: Method.testSlowEcho, payload: slow)
                + Envelope.requestFrame(id: 2, method: Method.daemonGetInfo, payload: GetInfoRequest().encode()))
        let infoRead = try await onThread { try raw.readEnvelope() }
        let info = try #require(infoRead)
        #expect(info.requestID == 2)

        async let stopped = h.stop()
        let answerRead = try await onThread { try raw.readEnvelope() }
        let answer = try #require(answerRead)
        #expect(answer.requestID == 1)
        let response = try #require(answer.response)
        #expect(response.status.isOK)
        #expect(try SlowEchoResponse.decode(response.payload).data == Array("drain".utf8))
        #expect(try await stopped == 0)
        #expect(fileMode(h.socketPath) == nil)
    }

    @Test("rainwalletd --help exits 0 with usage; an unknown flag exits 64")
    func daemonFlags() async throws {
        let h = try DaemonHarness.prepare()
        defer { h.shutdown() }
        let help = try await h.runDaemon(arguments: ["--help"])
        #expect(help.status == 0, "\(help.output)")
        #expect(help.output.contains("usage:"))
        let bad = try await h.runDaemon(arguments: ["--bogus"])
        #expect(bad.status == 64, "\(bad.output)")
    }
}

/// The malloc arenas of process `pid` besides the main one (nil when its maps cannot be read):
/// glibc makes each in a 64 MiB-aligned mapping of 64 MiB, its used part read-write and the rest
/// `---p`, both anonymous.
func mallocArenasBesidesMain(_ pid: Int32) -> Int? {
    guard let maps = ProcFiles.text("/proc/\(pid)/maps") else { return nil }
    let heapSize: UInt64 = 64 << 20
    let regions: [(low: UInt64, high: UInt64, writable: Bool, anonymous: Bool)] =
        maps
        .split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            let bounds = fields.first?.split(separator: "-") ?? []
            guard fields.count >= 5, bounds.count == 2, let low = UInt64(bounds[0], radix: 16),
                let high = UInt64(bounds[1], radix: 16)
            else { return nil }
            return (low, high, fields[1].hasPrefix("rw"), fields.count == 5)
        }
    var count = 0
    for (i, region) in regions.enumerated() where region.anonymous && region.writable && region.low % heapSize == 0 {
        var end = region.high
        var next = i + 1
        while next < regions.count, regions[next].low == end, regions[next].anonymous, end - region.low < heapSize {
            end = regions[next].high
            next += 1
        }
        if end - region.low == heapSize { count += 1 }
    }
    return count
}

/// Whether process `pid` has a file whose name contains `library` mapped (`/proc/PID/maps`).
func processMaps(_ pid: Int32, library: String) -> Bool {
    guard let maps = ProcFiles.text("/proc/\(pid)/maps") else { return false }
    return maps.split(separator: "\n").contains { $0.contains(library) }
}
