import RainCore
@testable import RainCrypto
import Testing

@Suite struct AESGCMTests {
    struct Vector: Sendable, CustomTestStringConvertible {
        var name: String
        var key: String
        var nonce: String
        var plaintext: String
        var aad: String
        var ciphertext: String
        var tag: String
        var testDescription: String { name }
    }

    static let gcmKey = "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308"

    // McGrew & Viega, "The Galois/Counter Mode of Operation", test cases 13 to 16 (AES-256, 96-bit
    // IV), the vectors NIST's GCM validation builds on.
    static let vectors: [Vector] = [
        Vector(
            name: "GCM test case 13", key: String(repeating: "0", count: 64), nonce: String(repeating: "0", count: 24),
            plaintext: "", aad: "", ciphertext: "", tag: "530f8afbc74536b9a963b4f1c4cb738b"),
        Vector(
            name: "GCM test case 14", key: String(repeating: "0", count: 64), nonce: String(repeating: "0", count: 24),
            plaintext: String(repeating: "0", count: 32), aad: "", ciphertext: "cea7403d4d606b6e074ec5d3baf39d18",
            tag: "d0d1c8a799996bf0265b98b5d48ab919"),
        Vector(
            name: "GCM test case 15", key: gcmKey, nonce: "cafebabefacedbaddecaf888",
            plaintext: "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
                + "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b391aafd255",
            aad: "",
            ciphertext: "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa"
                + "8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662898015ad",
            tag: "b094dac5d93471bdec1a502270e3cc6c"),
        Vector(
            name: "GCM test case 16", key: gcmKey, nonce: "cafebabefacedbaddecaf888",
            plaintext: "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
                + "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39",
            aad: "feedfacedeadbeeffeedfacedeadbeefabaddad2",
            ciphertext: "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa"
                + "8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662",
            tag: "76fc6ece0f4e1768cddf8853bb2d551b"),
    ]

    @Test(arguments: vectors)
    func knownAnswer(vector: Vector) throws {
        let key = SymmetricKey(bytes: try hexBytes(vector.key))
        let plaintext = try hexBytes(vector.plaintext)
        let aad = try hexBytes(vector.aad)
        let box = try AESGCM.seal(plaintext, using: key, nonce: try hexBytes(vector.nonce), authenticating: aad)
        #expect(Hex.encode(box.nonce) == vector.nonce)
        #expect(Hex.encode(box.ciphertext) == vector.ciphertext)
        #expect(Hex.encode(box.tag) == vector.tag)

        let expected = AESGCM.SealedBox(
            nonce: try hexBytes(vector.nonce), ciphertext: try hexBytes(vector.ciphertext),
            tag: try hexBytes(vector.tag))
        #expect(try AESGCM.open(expected, using: key, authenticating: aad) == plaintext)
    }

    @Test(arguments: [0, 1, 15, 16, 17, 1000, 65_537])
    func roundTrip(length: Int) throws {
        let key = try SymmetricKey.random()
        let plaintext = try SecureRandom.bytes(count: length)
        let aad = Array("record-42".utf8)
        let box = try AESGCM.seal(plaintext, using: key, authenticating: aad)
        #expect(box.nonce.count == 12)
        #expect(box.tag.count == 16)
        #expect(box.ciphertext.count == length)
        if length >= 16 { #expect(box.ciphertext != plaintext) }
        #expect(try AESGCM.open(box, using: key, authenticating: aad) == plaintext)

        let reparsed = try AESGCM.SealedBox(combined: box.combined)
        #expect(reparsed == box)
        #expect(box.combined.count == 12 + length + 16)
        #expect(try AESGCM.open(reparsed, using: key, authenticating: aad) == plaintext)
    }

    @Test func freshNonceEverySeal() throws {
        let key = try SymmetricKey.random()
        let first = try AESGCM.seal([1, 2, 3], using: key)
        let second = try AESGCM.seal([1, 2, 3], using: key)
        #expect(first.nonce != second.nonce)
        #expect(first.ciphertext != second.ciphertext)
    }

    /// Every single-bit change to nonce, ciphertext, tag or additional data must fail to open.
    @Test func everyBitFlipFailsToOpen() throws {
        let key = try SymmetricKey.random()
        let plaintext = Array("attack at dawn, bring snacks".utf8)
        let aad = Array("wallet:acct_1".utf8)
        let box = try AESGCM.seal(plaintext, using: key, authenticating: aad)

        var opened: [String] = []
        var wrongErrors: [String] = []
        func attempt(_ candidate: AESGCM.SealedBox, _ candidateAAD: [UInt8], _ label: String) {
            do {
                _ = try AESGCM.open(candidate, using: key, authenticating: candidateAAD)
                opened.append(label)
            } catch {
                if error.code != .internalError || error.details.reason != "authentication_failed" {
                    wrongErrors.append("\(label): \(error)")
                }
            }
        }

        var attempts = 0
        for bit in 0..<(box.nonce.count * 8) {
            var flipped = box
            flipped.nonce[bit / 8] ^= 1 << (bit % 8)
            attempt(flipped, aad, "nonce bit \(bit)")
            attempts += 1
        }
        for bit in 0..<(box.ciphertext.count * 8) {
            var flipped = box
            flipped.ciphertext[bit / 8] ^= 1 << (bit % 8)
            attempt(flipped, aad, "ciphertext bit \(bit)")
            attempts += 1
        }
        for bit in 0..<(box.tag.count * 8) {
            var flipped = box
            flipped.tag[bit / 8] ^= 1 << (bit % 8)
            attempt(flipped, aad, "tag bit \(bit)")
            attempts += 1
        }
        for bit in 0..<(aad.count * 8) {
            var flippedAAD = aad
            flippedAAD[bit / 8] ^= 1 << (bit % 8)
            attempt(box, flippedAAD, "aad bit \(bit)")
            attempts += 1
        }
        attempt(box, [], "aad missing")
        attempt(box, aad + [0], "aad extended")
        var truncated = box
        truncated.ciphertext.removeLast()
        attempt(truncated, aad, "ciphertext truncated")

        #expect(attempts == (12 + plaintext.count + 16 + aad.count) * 8)
        #expect(opened.isEmpty, "opened after tampering: \(opened)")
        #expect(wrongErrors.isEmpty, "unexpected errors: \(wrongErrors)")
        // The untouched box still opens, so the failures above are due to the flips.
        #expect(try AESGCM.open(box, using: key, authenticating: aad) == plaintext)
    }

    @Test func wrongKeyFailsToOpen() throws {
        let box = try AESGCM.seal(Array("secret".utf8), using: try SymmetricKey.random())
        let error = #expect(throws: RainError.self) {
            try AESGCM.open(box, using: try SymmetricKey.random())
        }
        #expect(error?.code == .internalError)
        #expect(error?.details.reason == "authentication_failed")
    }

    @Test(arguments: [0, 16, 31, 33, 64])
    func refusesKeyOfWrongSize(byteCount: Int) throws {
        let key = SymmetricKey(bytes: [UInt8](repeating: 1, count: byteCount))
        let sealError = #expect(throws: RainError.self) { try AESGCM.seal([1], using: key) }
        #expect(sealError?.code == .invalidArgument)
        let box = AESGCM.SealedBox(
            nonce: [UInt8](repeating: 0, count: 12), ciphertext: [1], tag: [UInt8](repeating: 0, count: 16))
        let openError = #expect(throws: RainError.self) { try AESGCM.open(box, using: key) }
        #expect(openError?.code == .invalidArgument)
    }

    @Test func malformedBoxFailsAuthentication() throws {
        let key = try SymmetricKey.random()
        let box = try AESGCM.seal([1, 2, 3], using: key)
        var shortNonce = box
        shortNonce.nonce.removeLast()
        var shortTag = box
        shortTag.tag.removeLast()
        for candidate in [shortNonce, shortTag] {
            let error = #expect(throws: RainError.self) { try AESGCM.open(candidate, using: key) }
            #expect(error?.details.reason == "authentication_failed")
        }
    }

    @Test(arguments: [0, 1, 27])
    func combinedTooShortIsRefused(length: Int) {
        let error = #expect(throws: RainError.self) {
            try AESGCM.SealedBox(combined: [UInt8](repeating: 0, count: length))
        }
        #expect(error?.code == .internalError)
    }

    @Test func combinedOfMinimumLengthHasEmptyCiphertext() throws {
        let combined = Array(0..<28).map { UInt8($0) }
        let box = try AESGCM.SealedBox(combined: combined)
        #expect(box.nonce == Array(combined[0..<12]))
        #expect(box.ciphertext.isEmpty)
        #expect(box.tag == Array(combined[12..<28]))
        #expect(box.combined == combined)
    }
}
