import Foundation
import RainCore
import RainTestSupport
import RainWallet
import RainWire
import Testing

/// An HTTP/1.1 GET over a fresh connection (the server closes after each answer): the status line's
/// code and the body.
struct HTTPGet {
    let status: Int
    let headers: String
    let body: String

    /// GET `path` on 127.0.0.1:`port`.
    static func tcp(port: UInt16, _ path: String) throws -> HTTPGet {
        let fd = try connectTCP(port: port)
        return try exchange(fd, "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    }

    /// GET `path` on the Unix socket at `socketPath`.
    static func unix(_ socketPath: String, _ path: String) throws -> HTTPGet {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("socket: \(errno)") }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { buf in
            for (i, b) in socketPath.utf8.enumerated() where i < buf.count - 1 { buf[i] = b }
        }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else {
            close(fd)
            throw HarnessError("connect \(socketPath): errno \(errno)")
        }
        return try exchange(fd, "GET \(path) HTTP/1.1\r\nHost: localhost\r\n\r\n")
    }

    /// A connected TCP socket to 127.0.0.1:`port`, with 5 s receive and send timeouts.
    static func connectTCP(port: UInt16) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("socket: \(errno)") }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        addr.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else {
            close(fd)
            throw HarnessError("connect 127.0.0.1:\(port): errno \(errno)")
        }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        return fd
    }

    /// Sends `request`, reads to the end of the stream, closes.
    static func exchange(_ fd: Int32, _ request: String) throws -> HTTPGet {
        defer { close(fd) }
        let bytes = Array(request.utf8)
        guard bytes.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == bytes.count else {
            throw HarnessError("send: errno \(errno)")
        }
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16384)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 { throw HarnessError("recv: errno \(errno)") }
            if n == 0 { break }
            answer += buffer[0..<n]
        }
        let text = String(decoding: answer, as: UTF8.self)
        guard let split = text.range(of: "\r\n\r\n") else { throw HarnessError("no header end in \(text)") }
        let head = String(text[..<split.lowerBound])
        let parts = head.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, let status = Int(parts[1]) else { throw HarnessError("bad status line in \(head)") }
        return HTTPGet(status: status, headers: head, body: String(text[split.upperBound...]))
    }
}

/// Exposition text as prometheus-client's parser read it (`tests/judges/prometheus.py`).
struct ParsedMetrics {
    let families: [String: String]
    let samples: [(name: String, labels: [String: String], value: Double)]

    /// Parses `text` with the judge; fails the test when it does not parse.
    init(_ text: String) throws {
        let json = try Judge.json("prometheus.py", [], input: text)
        families = json["families"] as? [String: String] ?? [:]
        samples = (json["samples"] as? [[String: Any]] ?? []).compactMap { s in
            guard let name = s["name"] as? String, let labels = s["labels"] as? [String: String] else { return nil }
            let value = (s["value"] as? Double) ?? (s["value"] as? Int).map(Double.init) ?? .nan
            return (name, labels, value)
        }
    }

    /// The value of the sample `name` with exactly these `labels` (0 when absent: a series not
    /// counted yet).
    func value(_ name: String, _ labels: [String: String] = [:]) -> Double {
        samples.first { $0.name == name && $0.labels == labels }?.value ?? 0
    }
}

/// `/metrics` and `/healthz` of real `rainwalletd authority` and `rainwalletd` processes, the
/// exposition judged by prometheus-client's parser.
@Suite("Metrics and health (processes)")
struct MetricsTests {
    static func metricsPort(_ authority: AuthorityProcess) throws -> UInt16 {
        let log = authority.log
        let range = try #require(log.range(of: "metricsPort="), "no metricsPort in \(log)")
        return try #require(UInt16(log[range.upperBound...].prefix(while: \.isNumber)))
    }

    static func scrape(port: UInt16) throws -> ParsedMetrics {
        let answer = try HTTPGet.tcp(port: port, "/metrics")
        #expect(answer.status == 200)
        #expect(answer.headers.contains("Content-Type: text/plain; version=0.0.4"))
        return try ParsedMetrics(answer.body)
    }

    @Test(
        "a code sent through a device moves the authority's call, latency and delivery counters by one; a refused resend moves the refusal counters"
    )
    func authorityCountersMove() async throws {
        let setup = try DaemonHarness.prepare()
        defer { setup.shutdown() }
        try await AuthorityProcess.with(
            in: setup.directory, ["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--send-cooldown", "600"]
        ) { authority in
            let port = try Self.metricsPort(authority)
            let device = try await DaemonHarness.start(extraArguments: ["--authority", "127.0.0.1:\(authority.port)"])
            defer { device.shutdown() }
            let provider = device.provider()
            let send = ["method": AuthorityMethod.sendLoginCode, "code": "ok"]
            let refused = ["method": AuthorityMethod.sendLoginCode, "code": RainError.Code.refused.description]
            let latency = ["method": AuthorityMethod.sendLoginCode]

            let before = try Self.scrape(port: port)
            #expect(before.families["rainwallet_authority_calls"] == "counter")
            #expect(before.families["rainwallet_authority_call_duration_seconds"] == "histogram")
            try await provider.sendLoginCode(to: .email("metrics@example.com"))
            let after = try Self.scrape(port: port)
            #expect(
                after.value("rainwallet_authority_calls_total", send) - before.value("rainwallet_authority_calls_total", send)
                    == 1)
            #expect(
                after.value("rainwallet_authority_call_duration_seconds_count", latency)
                    - before.value("rainwallet_authority_call_duration_seconds_count", latency) == 1)
            #expect(
                after.value("rainwallet_authority_code_deliveries_total", ["outcome": "delivered"])
                    - before.value("rainwallet_authority_code_deliveries_total", ["outcome": "delivered"]) == 1)
            #expect(after.value("rainwallet_authority_store_errors_total") == 0)

            // The same contact at once: the cooldown refuses it (RAIN_302), nothing is delivered.
            let error = await rainError { try await provider.sendLoginCode(to: .email("metrics@example.com")) }
            #expect(error?.code == .refused)
            let refusedScrape = try Self.scrape(port: port)
            #expect(
                refusedScrape.value("rainwallet_authority_calls_total", refused)
                    - after.value("rainwallet_authority_calls_total", refused) == 1)
            #expect(
                refusedScrape.value("rainwallet_authority_send_limit_refusals_total", ["limit": "contact_cooldown"])
                    - after.value("rainwallet_authority_send_limit_refusals_total", ["limit": "contact_cooldown"]) == 1)
            #expect(
                refusedScrape.value("rainwallet_authority_code_deliveries_total", ["outcome": "delivered"])
                    == after.value("rainwallet_authority_code_deliveries_total", ["outcome": "delivered"]))
            // The device keeps its revocation stream open on the authority.
            let streamOpen = try await eventually {
                try Self.scrape(port: port).value("rainwallet_authority_revocation_streams_open") == 1
            }
            #expect(streamOpen)

            var health: HTTPGet?
            let healthOK = try await eventually {
                health = try HTTPGet.tcp(port: port, "/healthz")
                return health?.status == 200
            }
            #expect(healthOK, "\(String(describing: health))")
            #expect(health?.body.contains("\"status\":\"ok\"") == true)
            #expect(health?.body.contains("\"loop\":\"ok\"") == true)
            #expect(try HTTPGet.tcp(port: port, "/nothing").status == 404)
            let post = try HTTPGet.exchange(try HTTPGet.connectTCP(port: port), "POST /metrics HTTP/1.1\r\n\r\n")
            #expect(post.status == 405)
        }
    }

    @Test("a client that never finishes its request does not hold the metrics server: another scrape is answered meanwhile")
    func slowClientDoesNotBlock() async throws {
        let setup = try DaemonHarness.prepare()
        defer { setup.shutdown() }
        try await AuthorityProcess.with(in: setup.directory, ["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"]) {
            authority in
            let port = try Self.metricsPort(authority)
            let stalled = try HTTPGet.connectTCP(port: port)
            defer { close(stalled) }
            let partial = Array("GET /metr".utf8)
            #expect(partial.withUnsafeBytes { send(stalled, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == partial.count)
            let answer = try HTTPGet.tcp(port: port, "/metrics")
            #expect(answer.status == 200)
            _ = try ParsedMetrics(answer.body)
        }
    }

    @Test("--metrics-listen on a non-loopback address is refused with exit 78 before the state directory is made")
    func nonLoopbackRefused() async throws {
        let setup = try DaemonHarness.prepare()
        defer { setup.shutdown() }
        let binary = try DaemonHarness.binaryDirectory().appendingPathComponent("rainwalletd-test").path
        let state = "\(setup.directory)/refused-authority"
        for address in ["0.0.0.0:9420", "192.0.2.1:9420"] {
            let r = try await TestProcess.run(
                binary, ["authority", "--listen", "127.0.0.1:0", "--state-dir", state, "--metrics-listen", address],
                timeout: .seconds(30))
            #expect(r.status == 78, "\(address): \(r.stderr)")
            #expect(r.stderr.contains("RAIN_102") && r.stderr.contains("--metrics-listen"), "\(r.stderr)")
            #expect(!FileManager.default.fileExists(atPath: state))
        }
    }

    @Test("/healthz answers 200 on PostgreSQL, then 503 naming the store once PostgreSQL stops")
    func healthzFailsWhenPostgresStops() async throws {
        let setup = try DaemonHarness.prepare()
        defer { setup.shutdown() }
        // A cluster of the test's own: stopping the shared one would fail the other tests.
        let cluster = "/tmp/rain-pgm-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let started = try await TestProcess.run(
            "/bin/bash", [PostgresTestCluster.scriptPath, "start", cluster, String(getpid())], timeout: .seconds(300))
        try #require(started.status == 0, "pg-cluster start: \(started.stderr)")
        let url = try #require(started.stdout.split(separator: "\n").last { $0.hasPrefix("postgres://") }.map(String.init))
        var isStopped = false
        defer {
            if !isStopped { _ = try? TestProcess.runBlocking("/bin/bash", [PostgresTestCluster.scriptPath, "stop", cluster]) }
        }
        try await AuthorityProcess.with(
            in: setup.directory, ["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--store", url]
        ) { authority in
            let port = try Self.metricsPort(authority)
            var healthy: HTTPGet?
            let healthOK = try await eventually {
                healthy = try HTTPGet.tcp(port: port, "/healthz")
                return healthy?.status == 200
            }
            #expect(healthOK, "\(String(describing: healthy))")
            #expect(healthy?.body.contains("\"masterKey\":\"ok\"") == true)
            let stopped = try await TestProcess.run(
                "/bin/bash", [PostgresTestCluster.scriptPath, "stop", cluster], timeout: .seconds(60))
            isStopped = true
            #expect(stopped.status == 0, "pg-cluster stop: \(stopped.stderr)")
            var last: HTTPGet?
            let healthFailing = try await eventually {
                last = try HTTPGet.tcp(port: port, "/healthz")
                return last?.status == 503
            }
            #expect(healthFailing, "\(String(describing: last))")
            #expect(last?.body.contains("\"store\":\"unreachable") == true, "\(String(describing: last?.body))")
            #expect(last?.body.contains("\"status\":\"failing\"") == true)
            // The failed checks are counted as store errors.
            #expect(try Self.scrape(port: port).value("rainwallet_authority_store_errors_total") >= 1)
        }
    }

    @Test("under a service manager the authority sends READY=1, feeds the watchdog while healthy, and STOPPING=1 on SIGTERM")
    func authorityNotifiesAndFeedsWatchdog() async throws {
        let setup = try DaemonHarness.prepare()
        defer { setup.shutdown() }
        let notify = try NotifyReceiver(address: "\(setup.directory)/notify.sock")
        let binary = try DaemonHarness.binaryDirectory().appendingPathComponent("rainwalletd-test").path
        var environment = ProcessInfo.processInfo.environment
        environment["NOTIFY_SOCKET"] = notify.address
        environment["WATCHDOG_USEC"] = "400000"  // fed every 0.2 s
        let process = try TestProcess(
            binary, ["authority", "--listen", "127.0.0.1:0", "--state-dir", "\(setup.directory)/authority"],
            environment: environment, stderr: .file("\(setup.directory)/authority.log"))
        let ready = try #require(await notify.waitFor("READY=1"), "no READY=1")
        #expect(ready["MAINPID"] == "\(process.pid)")
        #expect(try await notify.waitFor("WATCHDOG=1") != nil, "the watchdog was not fed")
        process.signal(SIGTERM)
        #expect(try await notify.waitFor("STOPPING=1") != nil, "no STOPPING=1")
        await process.stop(grace: .seconds(20))
    }

    @Test(
        "rainwalletd --metrics serves metrics.sock (0600) beside its socket, counting its calls (quick lane too); without it there is no socket"
    )
    func deviceMetricsOnUnixSocket() async throws {
        let plain = try await DaemonHarness.start()
        defer { plain.shutdown() }
        let plainSocket = "\((plain.socketPath as NSString).deletingLastPathComponent)/metrics.sock"
        #expect(!FileManager.default.fileExists(atPath: plainSocket))

        let h = try await DaemonHarness.start(extraArguments: ["--metrics"])
        defer { h.shutdown() }
        let socket = "\((h.socketPath as NSString).deletingLastPathComponent)/metrics.sock"
        var st = stat()
        try #require(lstat(socket, &st) == 0, "no \(socket)")
        #expect(st.st_mode & S_IFMT == S_IFSOCK)
        #expect(st.st_mode & 0o777 == 0o600)
        let send = ["method": Method.authSendLoginCode, "code": "ok"]
        let before = try ParsedMetrics(try HTTPGet.unix(socket, "/metrics").body)
        #expect(before.families["rainwallet_device_calls"] == "counter")
        try await h.provider().sendLoginCode(to: .email("device-metrics@example.com"))
        let answer = try HTTPGet.unix(socket, "/metrics")
        #expect(answer.status == 200)
        let after = try ParsedMetrics(answer.body)
        #expect(after.value("rainwallet_device_calls_total", send) - before.value("rainwallet_device_calls_total", send) == 1)
        #expect(
            after.value("rainwallet_device_call_duration_seconds_count", ["method": Method.authSendLoginCode])
                - before.value("rainwallet_device_call_duration_seconds_count", ["method": Method.authSendLoginCode]) == 1)
        #expect(after.value("rainwallet_device_revocation_stream_up") == 1)
        // Session/GetState is counted whether the quick lane or the route table answers it.
        let state = ["method": Method.sessionGetState, "code": "ok"]
        let provider = h.provider()
        let beforeState = try ParsedMetrics(try HTTPGet.unix(socket, "/metrics").body)
        for _ in 0..<3 { _ = try await provider.currentSession() }
        let afterState = try ParsedMetrics(try HTTPGet.unix(socket, "/metrics").body)
        #expect(
            afterState.value("rainwallet_device_calls_total", state) - beforeState.value("rainwallet_device_calls_total", state)
                == 3)
        #expect(try HTTPGet.unix(socket, "/healthz").status == 200)
        await h.shutdownAsync()
        #expect(!FileManager.default.fileExists(atPath: socket))
    }
}
