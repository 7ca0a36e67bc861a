import Foundation
import RainTestSupport
import RainWallet
import Testing

/// The daemon's SMS sender counts its hourly budget in the authority's store (issue 19): a restart
/// does not refill it.
@Suite("SMS budget in the daemon")
struct SMSBudgetDaemonTests {
    @Test("the embedded authority's SMS budget survives a restart: RAIN_302 smsBudget, nothing sent")
    func budgetSurvivesRestart() async throws {
        let dir = "/tmp/rwsb-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(
            atPath: dir, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let certificates = try await TestCertificates.make(in: dir)
        try CodeSenderTests.writeSecret("hook-secret\n", to: "\(dir)/sms-secret")
        try FileManager.default.createDirectory(atPath: "\(dir)/https", withIntermediateDirectories: false)
        let https = try await GatewayTestServer.https(
            in: "\(dir)/https", certificates: certificates, secretFile: "\(dir)/sms-secret")
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
        #expect(error?.details.reason == "smsBudget")
        #expect(error?.details.retryAfter != nil)
        #expect(try https.requests().count == 1)
        await https.stop()
    }
}
