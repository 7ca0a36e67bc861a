import Foundation
import RainTestSupport
import Testing

/// The scanner the secret-scanning tests rely on must fail when a secret leaks, in any encoding.
@Suite("SecretScanner finds leaked secrets")
struct SecretScannerTests {
    static let token = "rwa_q0Zt3L9xWmB2fKp7Yc4VnR8sJd1Gh6TuE5aI0oPzXyQ"
    static let key: [UInt8] = (0..<32).map { UInt8(($0 * 37 + 11) % 256) }
    static let words = [
        "legal", "winner", "thank", "year", "wave", "sausage", "worth", "useful", "legal", "winner", "thank", "yellow",
    ]

    static var scanner: SecretScanner {
        var s = SecretScanner()
        s.addCode("482913")
        s.addToken(token, label: "access token")
        s.addKey(key, label: "device key")
        s.addPhrase(words)
        return s
    }

    /// The 32 bytes the token's base64url body encodes.
    static let tokenBytes = Array(Data(base64Encoded: "q0Zt3L9xWmB2fKp7Yc4VnR8sJd1Gh6TuE5aI0oPzXyQ=") ?? Data())

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
    static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static let clean = """
        2026-11-29T22:00:00.000Z info rainwalletd.authority code.sent purpose=login app=default kind=email \
        contact=u***@example.com challenge=chl_4829130a9b8c7d6e5f40312233445566 device=dev_00aa
        2026-11-29T22:00:01.000Z info rainwalletd.authority login app=default account=acct_1 created=true
        error: RAIN_302: a code was just sent to this contact; try again after 2026-11-29T22:00:30Z (in 30 s)
        the legal team said thank you; winner of the year
        """

    @Test("a clean log has no findings (six digits inside an id are not a code)")
    func cleanLog() {
        #expect(Self.scanner.findings(in: [Self.clean]).isEmpty)
    }

    @Test(
        "each leak is found",
        arguments: [
            ("code", "code=482913"),
            ("code", "your code is 482913."),
            ("access token", "token=" + SecretScannerTests.token),
            ("access token body", "Bearer " + String(SecretScannerTests.token.dropFirst(4))),
            ("access token", "hex " + SecretScannerTests.hex(Array(SecretScannerTests.token.utf8))),
            ("access token", "b64 " + Data(SecretScannerTests.token.utf8).base64EncodedString()),
            ("access token bytes", "raw " + SecretScannerTests.hex(SecretScannerTests.tokenBytes)),
            ("device key", "key=" + SecretScannerTests.hex(SecretScannerTests.key)),
            ("device key", "KEY=" + SecretScannerTests.hex(SecretScannerTests.key).uppercased()),
            ("device key", "key=" + Data(SecretScannerTests.key).base64EncodedString()),
            ("device key", "key=" + SecretScannerTests.base64URL(SecretScannerTests.key)),
            ("recovery phrase", "words: wave sausage worth"),
            ("recovery phrase", #"{"words":["year","wave","sausage"]}"#),
        ])
    func leakIsFound(label: String, leak: String) {
        let findings = Self.scanner.findings(in: [Self.clean, Self.clean + "\n" + leak])
        #expect(findings.contains { $0.label == label && $0.textIndex == 1 }, "\(findings)")
        #expect(!findings.contains { $0.textIndex == 0 })
        // A finding never prints the secret it found.
        for finding in findings { #expect(!finding.description.contains(Self.token)) }
    }
}
