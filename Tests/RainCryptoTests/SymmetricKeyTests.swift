import RainCore
import RainCrypto
import Testing

@Suite struct SymmetricKeyTests {
    @Test func keyIDIsTheFirstEightBytesOfSHA256() {
        let key = SymmetricKey(bytes: Array("abc".utf8))
        // SHA-256("abc") = ba7816bf8f01cfea…
        #expect(key.keyID == "ba7816bf8f01cfea")
        #expect(key.byteCount == 3)
    }

    @Test func randomKeysDiffer() throws {
        let a = try SymmetricKey.random()
        let b = try SymmetricKey.random(byteCount: 32)
        #expect(a.byteCount == 32)
        #expect(keyBytes(a) != keyBytes(b))
        #expect(a.keyID != b.keyID)
        #expect(try SymmetricKey.random(byteCount: 64).byteCount == 64)
        #expect(throws: RainError.invalidArgument) { try SymmetricKey.random(byteCount: 0) }
    }

    @Test func holdsACopyOfTheBytes() {
        var source: [UInt8] = [1, 2, 3, 4]
        let key = SymmetricKey(bytes: source)
        source[0] = 9
        #expect(keyBytes(key) == [1, 2, 3, 4])
        #expect(SymmetricKey(bytes: []).byteCount == 0)
    }

    @Test func descriptionIsRedacted() throws {
        let key = SymmetricKey(bytes: [UInt8](repeating: 0xAB, count: 32))
        let text = "\(key) \(String(reflecting: key))"
        #expect(text.contains("<redacted>"))
        #expect(!text.lowercased().contains("abab"))
        #expect(text.contains(key.keyID))
    }
}
