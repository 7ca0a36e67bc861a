import Foundation
import RainTestSupport
import RainWallet
import RainWire
import Testing

/// Send limits as an attacker tries them: rotating app ids against a remote authority, profiles
/// through one device daemon and devices against one authority never gets more than 10 codes per
/// 15 minutes to one inbox, nor more than 20 per minute from one source; a remote authority given
/// `--apps` refuses every other app id; and the user's own send still goes while another source is
/// throttled. The real binaries, with the default limits.
@Suite("Send limit attacks (processes)")
struct SendLimitAttackTests {
    static let victim = "victim@example.com"

    /// Starts a device daemon that uses the authority at `port`.
    static func device(authorityPort: UInt16) async throws -> DaemonHarness {
        try await DaemonHarness.start(extraArguments: ["--authority", "127.0.0.1:\(authorityPort)"])
    }

    /// Checks a send-limit refusal: RAIN_302, `limit`, a retry time, and no contact in the message.
    static func expectLimited(
        _ error: RainError?, limit: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(error?.code == .refused, "\(String(describing: error))", sourceLocation: sourceLocation)
        #expect(error?.details.limit == limit, "\(String(describing: error))", sourceLocation: sourceLocation)
        #expect(error?.details.retryAfter != nil, sourceLocation: sourceLocation)
        #expect(error?.message.contains("try again after") == true, sourceLocation: sourceLocation)
        #expect(error?.message.contains("@example.com") == false, sourceLocation: sourceLocation)
    }

    @Test("rotating app ids against a remote authority: the 11th code to one inbox in 15 minutes is refused")
    func rotateAppIDsRemote() async throws {
        let setup = try DaemonHarness.prepare()
        defer { setup.shutdown() }
        try await AuthorityProcess.with(in: setup.directory, ["--listen", "127.0.0.1:0"]) { authority in
            // No --apps: every app id is served, with a warning; the limit across apps holds anyway.
            #expect(authority.log.contains("authority.all_apps"))
            let device = try await Self.device(authorityPort: authority.port)
            defer { device.shutdown() }
            for i in 0..<10 {
                try await device.provider(profile: "rotate-\(i)").sendLoginCode(to: .email(Self.victim))
            }
            let error = await rainError {
                try await device.provider(profile: "rotate-10").sendLoginCode(to: .email(Self.victim))
            }
            Self.expectLimited(error, limit: "contact_all_apps_window")
            #expect(error?.details.retryAfterMilliseconds.map { $0 > 800_000 && $0 <= 900_000 } == true)
            // Exactly 10 codes reached the inbox.
            var delivered = 0
            for i in 0...10 {
                delivered += try await device.outbox(profile: "rotate-\(i)").filter { $0.contact?.value == Self.victim }.count
            }
            #expect(delivered == 10)
            // The authority's log names the limit, never the victim's address.
            #expect(await eventually { authority.log.contains("limit=contact_all_apps_window") })
            #expect(!authority.log.contains(Self.victim))
        }
    }

    @Test("rotating profiles through one device daemon: 10 codes per inbox, then 20 per minute from the daemon")
    func rotateProfilesEmbedded() async throws {
        let h = try await DaemonHarness.start(sendLimits: .defaults)
        defer { h.shutdown() }
        for i in 0..<10 {
            try await h.provider(profile: "p\(i)").sendLoginCode(to: .email(Self.victim))
        }
        let toVictim = await rainError { try await h.provider(profile: "p10").sendLoginCode(to: .email(Self.victim)) }
        Self.expectLimited(toVictim, limit: "contact_all_apps_window")
        // Other inboxes: the daemon's uid is one source, 20 codes per minute in all.
        for i in 0..<10 {
            try await h.provider(profile: "q\(i)").sendLoginCode(to: .email("other\(i)@example.com"))
        }
        let fromDaemon = await rainError {
            try await h.provider(profile: "q10").sendLoginCode(to: .email("other10@example.com"))
        }
        Self.expectLimited(fromDaemon, limit: "source_window")
        #expect(fromDaemon?.details.retryAfterMilliseconds.map { $0 > 0 && $0 <= 60_000 } == true)
        // The CLI says the same: exit 8, RAIN_302, which limit.
        let cli = try await h.runCLI(["--profile", "q11", "code", "send", "--email", "other11@example.com"])
        #expect(cli.status == 8, "\(cli)")
        #expect(cli.stderr.contains("RAIN_302") && cli.stderr.contains("from this device or address"), "\(cli.stderr)")
        #expect(!h.log.contains(Self.victim))
    }

    @Test("rotating devices: two device daemons against one authority share the inbox's 10 codes")
    func rotateDevices() async throws {
        let setup = try DaemonHarness.prepare()
        defer { setup.shutdown() }
        try await AuthorityProcess.with(in: setup.directory, ["--listen", "127.0.0.1:0"]) { authority in
            let first = try await Self.device(authorityPort: authority.port)
            defer { first.shutdown() }
            let second = try await Self.device(authorityPort: authority.port)
            defer { second.shutdown() }
            for i in 0..<5 {
                try await first.provider(profile: "a\(i)").sendLoginCode(to: .email(Self.victim))
                try await second.provider(profile: "b\(i)").sendLoginCode(to: .email(Self.victim))
            }
            for (device, profile) in [(first, "a5"), (second, "b5")] {
                let error = await rainError {
                    try await device.provider(profile: profile).sendLoginCode(to: .email(Self.victim))
                }
                Self.expectLimited(error, limit: "contact_all_apps_window")
            }
        }
    }

    @Test("a remote authority given --apps refuses another app id with RAIN_102 and serves its own")
    func unknownAppRefused() async throws {
        let setup = try DaemonHarness.prepare()
        defer { setup.shutdown() }
        try await AuthorityProcess.with(in: setup.directory, ["--listen", "127.0.0.1:0", "--apps", "shop,bank"]) {
            authority in
            #expect(authority.log.contains("apps=bank,shop"))
            #expect(!authority.log.contains("authority.all_apps"))
            let device = try await Self.device(authorityPort: authority.port)
            defer { device.shutdown() }
            let error = await rainError {
                try await device.provider(profile: "evil").sendLoginCode(to: .email(Self.victim))
            }
            #expect(error?.code == .invalidArgument, "\(String(describing: error))")
            #expect(error?.details.reason == "app_not_served")
            #expect(error?.message.contains("--apps") == true)
            #expect(try await device.outbox(profile: "evil").isEmpty)
            // The served app works end to end.
            let login = try await device.logIn(device.provider(profile: "shop"), .email("shopper@example.com"))
            #expect(login.accountCreated)
        }
    }

    @Test("--apps must name app ids: an empty one is a usage error")
    func badAppsFlag() async throws {
        let setup = try DaemonHarness.prepare()
        defer { setup.shutdown() }
        let error = await rainCaught {
            try await AuthorityProcess.with(in: setup.directory, ["--listen", "127.0.0.1:0", "--apps", "shop,,bank"]) { _ in }
        }
        #expect(error?.contains("--apps") == true, "\(String(describing: error))")
    }

    @Test("an attacker throttled by the per-source limit from another address does not stop the user's own send")
    func otherSourceStillSends() async throws {
        let setup = try DaemonHarness.prepare()
        defer { setup.shutdown() }
        try await AuthorityProcess.with(in: setup.directory, ["--listen", "127.0.0.1:0", "--apps", "shop"]) { authority in
            let port = authority.port
            // The attacker speaks the authority protocol directly, from 127.0.0.2.
            let answers = try await onThread { () throws -> [WireStatus] in
                let attacker = try SourceBoundTCPConnection(source: "127.0.0.2", port: port)
                var statuses: [WireStatus] = []
                for i in 0..<22 {
                    let request = SendCodeRequest(
                        appID: i == 21 ? "evil" : "shop", deviceID: "attacker-\(i)",
                        contact: .email("spam\(i)@example.com"))
                    try attacker.write(
                        Envelope.requestFrame(
                            id: UInt64(i + 1), method: AuthorityMethod.sendLoginCode, payload: try request.encode()))
                    guard let response = try attacker.readEnvelope()?.response else {
                        throw HarnessError("the authority closed the attacker's connection")
                    }
                    statuses.append(response.status)
                }
                return statuses
            }
            let passed = answers.prefix(20).filter(\.isOK).count
            #expect(passed == 20, "\(answers.prefix(20).map(\.message))")
            #expect(answers[20].error?.code == .refused)
            #expect(answers[20].details.limit == "source_window")
            // Another app id is refused whatever the limits.
            #expect(answers[21].error?.code == .invalidArgument)
            #expect(answers[21].details.reason == "app_not_served")

            // The user's device daemon connects from 127.0.0.1: its source is not throttled.
            let device = try await Self.device(authorityPort: port)
            defer { device.shutdown() }
            let login = try await device.logIn(device.provider(profile: "shop"), .email("user@example.com"))
            #expect(login.accountCreated)
        }
    }
}

/// Runs `body` and returns the description of the error it threw, or nil when it succeeded.
private func rainCaught(_ body: () async throws -> Void) async -> String? {
    do {
        try await body()
        return nil
    } catch {
        return "\(error)"
    }
}

/// A blocking TCP client bound to a chosen loopback source address (any of 127.0.0.0/8), so a test
/// can be another source than the device daemons; frames as `RawConnection` does. Reads time out
/// after 10 s.
final class SourceBoundTCPConnection: Sendable {
    let fd: Int32

    init(source: String, port: UInt16) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("socket: \(String(cString: strerror(errno)))") }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        func address(_ text: String, port: UInt16) -> sockaddr_in {
            var a = sockaddr_in()
            a.sin_family = sa_family_t(AF_INET)
            a.sin_port = port.bigEndian
            inet_pton(AF_INET, text, &a.sin_addr)
            return a
        }
        var local = address(source, port: 0)
        var remote = address("127.0.0.1", port: port)
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        let connected =
            bound == 0
            ? withUnsafePointer(to: &remote) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            } : -1
        guard connected == 0 else {
            let e = errno
            close(fd)
            throw HarnessError("connect from \(source) to 127.0.0.1:\(port): \(String(cString: strerror(e)))")
        }
        self.fd = fd
    }

    deinit { close(fd) }

    func write(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { raw -> Int in
                guard let base = raw.baseAddress else { return 0 }
                return send(fd, base + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw HarnessError("send: \(String(cString: strerror(errno)))")
            }
            offset += n
        }
    }

    func read(count: Int) throws -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: count)
        var got = 0
        while got < count {
            let n = out.withUnsafeMutableBytes { raw -> Int in
                guard let base = raw.baseAddress else { return 0 }
                return Glibc.read(fd, base + got, count - got)
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw HarnessError("read: \(String(cString: strerror(errno)))")
            }
            if n == 0 {
                if got == 0 { return nil }
                throw HarnessError("end of stream inside a frame")
            }
            got += n
        }
        return out
    }

    func readEnvelope() throws -> Envelope? {
        guard let header = try read(count: 4) else { return nil }
        let n = Int(header[0]) << 24 | Int(header[1]) << 16 | Int(header[2]) << 8 | Int(header[3])
        guard n <= Frame.defaultMaximumLength else { throw HarnessError("a frame of \(n) bytes") }
        return try Envelope.decode(try read(count: n) ?? [])
    }
}
