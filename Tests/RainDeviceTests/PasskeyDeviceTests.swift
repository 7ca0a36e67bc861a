import Foundation
import RainConfig
import RainCore
import Testing

@testable import RainDevice

@Suite("Passkeys on the device: config and stored sessions")
struct PasskeyDeviceTests {
    static let fingerprint = (0..<32).map { String(format: "%02X", $0 * 7 % 256) }.joined(separator: ":")

    func parse(_ json: String) throws -> DaemonConfig { try DaemonConfig.parse(Data(json.utf8), source: "test.json") }

    @Test("Android fingerprints parse, normalize to upper case and add their origins")
    func fingerprints() throws {
        let c = try parse(
            #"{"profiles": {"app": {"passkeyDomain": "example.com", "androidCertificateFingerprints": ["\#(Self.fingerprint.lowercased())"]}}}"#
        )
        let settings = c.settings(for: "app")
        #expect(settings.androidCertificateFingerprints == [Self.fingerprint])
        let origins = settings.passkeyOrigins(domain: "example.com")
        #expect(origins.count == 2)
        #expect(origins[0] == "https://example.com")
        let bytes = try #require(ProfileSettings.certificateSHA256(fingerprint: Self.fingerprint))
        #expect(bytes.count == 32)
        #expect(origins[1].hasPrefix("android:apk-key-hash:"))
        #expect(!origins[1].contains("=") && !origins[1].contains("+") && !origins[1].contains("/"))
    }

    @Test(
        "a malformed fingerprint is RAIN_102 naming the entry",
        arguments: [
            "AB:CD", "not hex", String(repeating: "AB", count: 32),
            (0..<32).map { _ in "ZZ" }.joined(separator: ":"), (0..<33).map { _ in "AB" }.joined(separator: ":"),
            (0..<32).map { _ in "ABC" }.joined(separator: ":"),
        ])
    func badFingerprint(_ value: String) throws {
        do {
            _ = try parse(#"{"profiles": {"app": {"androidCertificateFingerprints": ["\#(value)"]}}}"#)
            Issue.record("accepted \(value)")
        } catch let error as RainError {
            #expect(error.code == .invalidArgument)
            #expect(error.message.contains("androidCertificateFingerprints[0]"))
        }
    }

    @Test("the ceremony lifetime is an authority setting (5 minutes by default)")
    func ceremonyLifetime() throws {
        #expect(try parse("{}").authority.passkeyCeremonyLifetime == .seconds(300))
        #expect(
            try parse(#"{"authority": {"passkeyCeremonyLifetimeSeconds": 60}}"#).authority.passkeyCeremonyLifetime == .seconds(60)
        )
        #expect(throws: RainError.self) { try parse(#"{"authority": {"passkeyCeremonyLifetimeSeconds": 1}}"#) }
    }

    @Test("a stored session written before passkeys reads as a code session; the method round-trips")
    func storedSessionMethod() throws {
        let old = #"""
            {"accountID": "acct_1", "walletID": "wal_1", "accessToken": "a", "refreshToken": "r",
             "expiresAt": 0, "lifetimeSeconds": 900, "contactKind": "email", "contactValue": "a@b.co"}
            """#
        let decoded = try JSONDecoder().decode(StoredSession.self, from: Data(old.utf8))
        #expect(decoded.loginMethod == StoredSession.codeMethod)
        let passkey = StoredSession(
            accountID: "acct_1", walletID: "wal_1", accessToken: "a", refreshToken: "r", expiresAt: Date(),
            lifetimeSeconds: 900, contact: nil, method: StoredSession.passkeyMethod)
        let again = try JSONDecoder().decode(StoredSession.self, from: try JSONEncoder().encode(passkey))
        #expect(again.loginMethod == StoredSession.passkeyMethod)
    }
}
