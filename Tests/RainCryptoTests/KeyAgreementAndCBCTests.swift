import RainCore
import RainCrypto
import Testing

/// ECDH on P-256 and AES-256-CBC, the two primitives CTAP2's PIN/UV auth protocol 2 adds.
@Suite struct KeyAgreementAndCBCTests {
    /// NIST CAVP KAS ECC CDH primitive test vectors (SP 800-56A), P-256, COUNT = 0.
    @Test func p256SharedSecretMatchesTheNISTCDHVector() throws {
        let peer = try P256PublicKey(
            x: hexBytes("700c48f77f56584c5cc632ca65640db91b6bacce3a4df6b42ce7cc838833d287"),
            y: hexBytes("db71e509e3fd9b060ddb20ba5c51dcc5948d46fbf640dfe0441782cab85fa4ac"))
        let own = try P256PrivateKey(
            rawRepresentation: hexBytes("7d7dc5f71eb29ddaf80d6214632eeae03d9058af1fb6d22ed80badb62bc1a534"))
        #expect(own.publicKey.x == (try hexBytes("ead218590119e8876b29146ff89ca61770c4edbbf97d38ce385ed281d8a6b230")))
        #expect(own.publicKey.y == (try hexBytes("28af61281fd35e2fa7002523acc85a429cb06ee6648325389f59edfce1405141")))
        let secret = try own.sharedSecret(with: peer)
        #expect(keyBytes(secret) == (try hexBytes("46fc62106420ff012e54a434fbdd2d25ccc5852060561e68040dd7778997bd7b")))
    }

    @Test func bothSidesOfAKeyAgreementDeriveTheSameSecret() throws {
        let alice = try P256PrivateKey()
        let bob = try P256PrivateKey()
        #expect(keyBytes(try alice.sharedSecret(with: bob.publicKey)) == keyBytes(try bob.sharedSecret(with: alice.publicKey)))
    }

    /// NIST SP 800-38A, F.2.5 and F.2.6 (CBC-AES256).
    @Test func aes256CBCMatchesSP80038A() throws {
        let key = SymmetricKey(bytes: try hexBytes("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4"))
        let iv = try hexBytes("000102030405060708090a0b0c0d0e0f")
        let plaintext = try hexBytes(
            "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51"
                + "30c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710")
        let ciphertext = try hexBytes(
            "f58c4c04d6e5f1ba779eabfb5f7bfbd69cfc4e967edb808d679f777bc6702c7d"
                + "39f23369a9d9bacfa530e26304231461b2eb05e2c39be9fcda6c19078c6a9d1b")
        #expect(try AES256CBC.encrypt(plaintext, key: key, iv: iv) == ciphertext)
        #expect(try AES256CBC.decrypt(ciphertext, key: key, iv: iv) == plaintext)
    }

    @Test func aes256CBCRefusesPartialBlocksAndWrongLengths() throws {
        let key = try SymmetricKey.random()
        let iv = [UInt8](repeating: 0, count: 16)
        #expect(throws: RainError.self) { try AES256CBC.encrypt([1, 2, 3], key: key, iv: iv) }
        #expect(throws: RainError.self) { try AES256CBC.encrypt([UInt8](repeating: 0, count: 16), key: key, iv: [0]) }
        #expect(throws: RainError.self) {
            try AES256CBC.encrypt([UInt8](repeating: 0, count: 16), key: try SymmetricKey.random(byteCount: 16), iv: iv)
        }
    }
}
