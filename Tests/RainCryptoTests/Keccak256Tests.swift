import RainCore
@testable import RainCrypto
import Testing

@Suite struct Keccak256Tests {
    // Ethereum's keccak256 (Keccak padding 0x01). SHA3-256 of the same inputs differs:
    // a7ffc6f8… for "" and 3a985da7… for "abc", so a 0x06 padding fails here.
    @Test(arguments: [
        ("", "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"),
        ("abc", "4e03657aea45a94fc7d47ba826c8d667c0d1e6e33a64a036ec44f58fa12d6c45"),
        (
            "The quick brown fox jumps over the lazy dog",
            "4d741b6f1eb29cb2a9b9911c82f56fa8d73b04959d3d9d222895df6c0b28aa15"
        ),
    ])
    func knownInputs(message: String, digest: String) {
        let result = Keccak256.hash(Array(message.utf8))
        #expect(result.count == 32)
        #expect(Hex.encode(result) == digest)
    }

    // Bytes i % 251 for i in 0..<length, around and across the 136-byte rate (one byte of room
    // for the padding, an exactly full block, one block and a byte, 200 bytes, two full blocks).
    // Expected values computed with pycryptodome's Crypto.Hash.keccak (digest_bits=256).
    @Test(arguments: [
        (135, "cbdfd9dee5faad3818d6b06f95a219fd290b0e1706f6a82e5a595b9ce9faca62"),
        (136, "7ce759f1ab7f9ce437719970c26b0a66ff11fe3e38e17df89cf5d29c7d7f807e"),
        (137, "ac73d4fae68b8453f764007c1a20ce95994187861f0c3227a3a8e99a73a3b1db"),
        (200, "bfb0aa97863e797943cf7c33bb7e880bb4543f3d2703c0923c6901c2af57b890"),
        (272, "8e2476e65823b24d96ebe239f2c1534cdf763e689e2410c3b1cb0c74e6177bfc"),
    ])
    func inputsAroundTheRate(length: Int, digest: String) {
        let message = (0..<length).map { UInt8($0 % 251) }
        #expect(Hex.encode(Keccak256.hash(message)) == digest)
    }

    @Test func flippingAnyBitOfTheLastBlockChangesTheDigest() {
        let message = (0..<200).map { UInt8($0 % 251) }
        let digest = Keccak256.hash(message)
        for byte in stride(from: 136, to: 200, by: 7) {
            for bit in 0..<8 {
                var flipped = message
                flipped[byte] ^= 1 << UInt8(bit)
                #expect(Keccak256.hash(flipped) != digest)
            }
        }
    }
}
