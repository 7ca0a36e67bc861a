import RainCore
import Testing

@Suite struct SecretBytesTests {
    @Test func takingASecretZeroesTheArrayItCameFromAndKeepsItAsACString() throws {
        var typed = Array("4321".utf8)
        let secret = try #require(SecretBytes(taking: &typed))
        #expect(typed == [0, 0, 0, 0])
        #expect(secret.count == 4)
        #expect(secret.withCString { String(cString: $0) } == "4321")
    }

    @Test func aSecretPrintsAsRedacted() throws {
        var typed = Array("4321".utf8)
        let secret = try #require(SecretBytes(taking: &typed))
        #expect("\(secret)" == "<redacted>")
        #expect(String(describing: secret) == "<redacted>")
    }

    @Test func aSecretWithANULIsRefusedAndStillZeroed() {
        var typed: [UInt8] = [0x31, 0, 0x32]
        #expect(SecretBytes(taking: &typed) == nil)
        #expect(typed == [0, 0, 0])
    }
}
