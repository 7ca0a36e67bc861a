import Foundation
import RainAuthorityAPI
import RainCore
import RainTestSupport
import RainWallet
import RainWire
import Testing

/// The daemon's SMS sender counts its hourly budget in the authority's store: a restart
/// does not refill it.
@Suite("SMS budget in the daemon")
struct SMSBudgetDaemonTests {
    /// A new private (0700) directory under /tmp.
    static func makeDirectory(_ prefix: String) throws -> String {
        let dir = "/tmp/\(prefix)-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(
            atPath: dir, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        return dir
    }

    /// A test CA, the webhook secret (`dir/sms-secret`) and an HTTPS gateway that checks it.
    static func gateway(in dir: String) async throws -> (TestCertificates, GatewayTestServer) {
        let certificates = try await TestCertificates.make(in: dir)
        try CodeSenderTests.writeSecret("hook-secret\n", to: "\(dir)/sms-secret")
        try FileManager.default.createDirectory(atPath: "\(dir)/https", withIntermediateDirectories: false)
        let https = try await GatewayTestServer.https(
            in: "\(dir)/https", certificates: certificates, secretFile: "\(dir)/sms-secret")
        return (certificates, https)
    }

    @Test("the embedded authority's SMS budget survives a restart: RAIN_302 smsBudget, nothing sent")
    func budgetSurvivesRestart() async throws {
        let dir = try Self.makeDirectory("rwsb")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (certificates, https) = try await Self.gateway(in: dir)
        let config = """
            {"codeSender": {"type": "sms",
              "sms": {"url": "https://localhost:\(https.port)/sms", "api": "webhook", "secretFile": "\(dir)/sms-secret",
                      "caFile": "\(certificates.caPath)", "allowedCountryCodes": ["1"], "hourlyBudget": 1}}}
            """
        let h: DaemonHarness
        do {
            h = try await DaemonHarness.start(config: config)
        } catch {
            await https.stop()
            throw error
        }
        defer { h.shutdown() }
        try await h.provider().sendLoginCode(to: .phone("+1 555 123 4567"))
        #expect(try https.requests().count == 1)
        try await h.restart()
        let error = await rainError { try await h.provider().sendLoginCode(to: .phone("+1 555 987 6543")) }
        #expect(error?.code == .refused)
        #expect(error?.details.reason == "sms_budget")
        #expect(error?.details.retryAfter != nil)
        #expect(try https.requests().count == 1)
        await https.stop()
    }

    @Test("rainwalletd authority --code-sender: the SMS budget is the store's, kept across a restart")
    func authorityBudgetSurvivesRestart() async throws {
        let dir = try Self.makeDirectory("rwsa")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (certificates, https) = try await Self.gateway(in: dir)
        defer { Task { await https.stop() } }
        try CodeSenderTests.writeSecret(
            """
            {"type": "sms",
             "sms": {"url": "https://localhost:\(https.port)/sms", "api": "webhook", "secretFile": "\(dir)/sms-secret",
                     "caFile": "\(certificates.caPath)", "allowedCountryCodes": ["1"], "hourlyBudget": 1}}
            """, to: "\(dir)/sender.json")
        let binary = try DaemonHarness.binaryDirectory().appendingPathComponent("rainwalletd-test").path

        /// Starts the authority on the same state directory (its SQLite store) and sends one SMS code.
        func sendThroughNewAuthority(_ run: Int, to number: String) async throws -> RainError? {
            let logPath = "\(dir)/authority\(run).log"
            let process = try TestProcess(
                binary,
                [
                    "authority", "--listen", "127.0.0.1:0", "--state-dir", "\(dir)/authority", "--code-sender",
                    "\(dir)/sender.json",
                ], stderr: .file(logPath))
            defer {
                process.signal(SIGTERM)
                _ = process.waitForExitBlocking(timeout: .seconds(10))
            }
            let deadline = ContinuousClock.now + .seconds(20)
            var log = ""
            while !log.contains("authority.ready") {
                guard process.isRunning, ContinuousClock.now < deadline else {
                    throw HarnessError("the authority did not start:\n\(log)")
                }
                try await Task.sleep(for: .milliseconds(50))
                log = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
            }
            guard let r = log.range(of: "port=", options: .backwards),
                let port = Int(log[r.upperBound...].prefix(while: \.isNumber))
            else { throw HarnessError("no port in the log:\n\(log)") }
            let remote = try RemoteAuthority(
                address: "127.0.0.1:\(port)", device: nil, deadlines: .forTests,
                logger: Logger(label: "test.remote", minimumLevel: .error))
            defer { remote.close() }
            return await rainError {
                _ = try await remote.sendLoginCode(
                    SendCodeRequest(appID: "default", deviceID: "device-\(run)", contact: .phone(number)))
            }
        }

        #expect(try await sendThroughNewAuthority(0, to: "+15551234567") == nil)
        #expect(try https.requests().count == 1)
        let error = try await sendThroughNewAuthority(1, to: "+15559876543")
        #expect(error?.code == .refused)
        #expect(error?.details.reason == "sms_budget")
        #expect(try https.requests().count == 1)
    }
}
