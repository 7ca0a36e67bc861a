import RainCore
@testable import RainCrypto
import Testing

@Suite struct EthereumAddressTests {
    // EIP-55's examples: all caps, all lower, then "normal" mixed case.
    static let eip55Examples = [
        "0x52908400098527886E0F7030069857D2E4169EE7",
        "0x8617E340B3D01FA5F11F306F4090FD50E238070D",
        "0xde709f2102306220921060314715629080e2fb77",
        "0x27b1fdb04752bbc536007a920d24acb045561c26",
        "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
        "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
        "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB",
        "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb",
    ]

    @Test(arguments: eip55Examples)
    func checksumsEIP55Examples(address: String) {
        let digits = String(address.dropFirst(2))
        #expect(EthereumAddress.checksummed(address) == address)
        #expect(EthereumAddress.checksummed(digits.lowercased()) == address)
        #expect(EthereumAddress.checksummed("0x" + digits.uppercased()) == address)
    }

    @Test(arguments: eip55Examples.suffix(4))
    func refusesAMixedCaseAddressWithAWrongChecksum(address: String) throws {
        // Swap the case of the first letter: still mixed case, no longer the checksum.
        var characters = Array(address)
        let index = try #require(characters.indices.dropFirst(2).first { characters[$0].isLetter })
        characters[index] = Character(
            characters[index].isUppercase ? characters[index].lowercased() : characters[index].uppercased())
        #expect(EthereumAddress.checksummed(String(characters)) == nil)
    }

    @Test(arguments: [
        "", "0x", "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAe", "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed00",
        "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeg", "0x 5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAe",
    ])
    func refusesMalformedAddresses(text: String) {
        #expect(EthereumAddress.checksummed(text) == nil)
    }

    @Test func addressOfTheGenerator() throws {
        // Private key 1: its public key is the generator G, whose address is well known.
        let uncompressed = try hexBytes(
            "0479be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798483ada7726a3c4655da4fbfc0e1108a8fd17b448a68554199c47d08ffb10d4b8"
        )
        let one = [UInt8](repeating: 0, count: 31) + [1]
        let computed = try one.withUnsafeBytes { raw in
            Result { () throws(RainError) in try Secp256k1.publicKey(privateKey: raw, compressed: false) }
        }.get()
        #expect(computed == uncompressed)
        let address = "0x7E5F4552091A69125d5DfCb7b8C2659029395Bdf"
        #expect(try EthereumAddress.fromPublicKey(uncompressed: uncompressed) == address)
        #expect(try EthereumAddress.fromPublicKey(uncompressed: Array(uncompressed.dropFirst())) == address)
    }

    @Test(arguments: [0, 33, 63, 66])
    func refusesPublicKeysOfOtherLengths(count: Int) {
        #expect(throws: RainError.invalidArgument) {
            try EthereumAddress.fromPublicKey(uncompressed: [UInt8](repeating: 4, count: count))
        }
    }

    @Test func refusesA65ByteKeyWithoutThe04Prefix() {
        #expect(throws: RainError.invalidArgument) {
            try EthereumAddress.fromPublicKey(uncompressed: [0x02] + [UInt8](repeating: 1, count: 64))
        }
    }
}
