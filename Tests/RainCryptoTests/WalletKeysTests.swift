import RainCore
@testable import RainCrypto
import Testing

@Suite struct WalletKeysTests {
    struct Vector: Sendable, CustomTestStringConvertible {
        var entropy: String
        var mnemonic: String
        var ethereumAddress: String
        var ethereumPrivateKeyHex: String
        var solanaAddress: String
        var solanaKeypairBase58: String
        var testDescription: String { mnemonic.split(separator: " ").prefix(2).joined(separator: " ") + " …" }
    }

    // The first: the check every BIP-39 wallet must pass (the Ethereum address of "abandon … about" is the
    // well-known 0x9858…Eda94). All values were cross-checked with the Python library bip-utils
    // 2.12.3 (Bip44 ETHEREUM and SOLANA, and raw BIP-32 / SLIP-10 paths) and python-mnemonic,
    // together with 100 random mnemonics (16 to 32 bytes of entropy) that all agreed.
    static let vectors: [Vector] = [
        Vector(
            entropy: "00000000000000000000000000000000",
            mnemonic: "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about",
            ethereumAddress: "0x9858EfFD232B4033E47d90003D41EC34EcaEda94",
            ethereumPrivateKeyHex: "0x1ab42cc412b618bdea3a599e3c9bae199ebf030895b039e9db1e30dafb12b727",
            solanaAddress: "HAgk14JpMQLgt6rVgv7cBQFJWFto5Dqxi472uT3DKpqk",
            solanaKeypairBase58: "27npWoNE4HfmLeQo1TyWcW7NEA28qnsnDK7kcttDQEWrCWnro83HMJ97rMmpvYYZRwDAvG4KRuB7hTBacvwD7bgi"),
        Vector(
            entropy: "9324e2cca9be62b867ddb106caf03b9f",
            mnemonic: "nasty check rebel fat tower found panda renew almost fiscal auction display",
            ethereumAddress: "0x8D35829Bf1dFf1f6DF50fC93c41809d791970397",
            ethereumPrivateKeyHex: "0xe878fb306340368eb57d531ca245c2e292b856cec6b0246092542bae9579ebe3",
            solanaAddress: "FErVBv7oYGtGUAP2psherBncGnnPeggg5UEMVVVFRBrn",
            solanaKeypairBase58: "4X7Vo8ayKgfGF6xgTbSpahLV5PyQkWx9KRhcVETALL5CF7vPn74RG7CQZAQCcwJpRyDWy13Ezp3rzfKftKJiscyt"),
        Vector(
            entropy: "433ecd3f0302210779c91a58c7a63fc5afb245df2a07a361",
            mnemonic:
                "drip wait exist alcohol capital lonely transfer cash flee diamond morning mercy will carry lake domain pet around",
            ethereumAddress: "0x3Ff6aBAE1b1c6659DCF2A4956cfAa9db5f1dE84f",
            ethereumPrivateKeyHex: "0xed64af47412f98614472c80acdcb72c3d0155eed6a4e973c5a41ce1a3718b7ed",
            solanaAddress: "8h7BCT3dbSg5AcSmA1Fouynhkz62mFtCCVH27P9BbeZ3",
            solanaKeypairBase58: "5BsG2N4mbjvT54c6vZsxwmqDD1qSsSaCCV9MPnKeoSknToUtVn2Pgu5Bdrdr6eknLHAnCWtT7i7NJjBQdRiKzF2D"),
        Vector(
            entropy: "e67d85704a41b537764161b3845a680d4d77efea72c320ac79a940bc6d07b4ce",
            mnemonic:
                "toy umbrella foster nest brave option suit club receive carpet old box student wave prefer flash camera glow heart lift short long spring strong",
            ethereumAddress: "0x025Ad911424cD9c219dCA7e25A5970877Ad1365F",
            ethereumPrivateKeyHex: "0x3b4bf97b288ae9759048da62b408c4f543e920712c3bf82f5f9fecd6e429e8e6",
            solanaAddress: "FAshbH7kkkb93w9RDQDv45rVKdbk3vZFFYCMjWnELjC4",
            solanaKeypairBase58: "ps4osNvM53nvk4fTMqCjYUVYcyedw9k57ewcckW6snA6R6f1tEPzTkVWV78UenLgjaViRM5D4NzMc58ijUVaWy6"),
    ]

    @Test func abandonAboutGivesTheWellKnownEthereumAddress() throws {
        let words = "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about"
            .split(separator: " ").map(String.init)
        let keys = try WalletKeys.derive(entropy: try BIP39.entropy(fromMnemonic: words))
        #expect(keys.mnemonic == words)
        #expect(keys.ethereumAddress == "0x9858EfFD232B4033E47d90003D41EC34EcaEda94")
    }

    @Test(arguments: vectors)
    func crossCheckedVectors(vector: Vector) throws {
        let keys = try WalletKeys.derive(entropy: try hexBytes(vector.entropy))
        #expect(keys.mnemonic.joined(separator: " ") == vector.mnemonic)
        #expect(keys.ethereumAddress == vector.ethereumAddress)
        #expect(keys.ethereumPrivateKeyHex == vector.ethereumPrivateKeyHex)
        #expect(keys.solanaAddress == vector.solanaAddress)
        #expect(keys.solanaKeypairBase58 == vector.solanaKeypairBase58)
    }

    @Test(arguments: vectors)
    func partsAgreeWithEachOther(vector: Vector) throws {
        let keys = try WalletKeys.derive(entropy: try hexBytes(vector.entropy))
        // Ethereum: "0x" + 64 lowercase hex digits, and the address is that key's.
        #expect(keys.ethereumPrivateKeyHex.hasPrefix("0x"))
        #expect(keys.ethereumPrivateKeyHex.count == 66)
        #expect(keys.ethereumPrivateKeyHex == keys.ethereumPrivateKeyHex.lowercased())
        #expect(EthereumAddress.checksummed(keys.ethereumAddress) == keys.ethereumAddress)
        let seed = try BIP39.seed(fromMnemonic: keys.mnemonic)
        let ethereum = try BIP32ExtendedKey.master(seed: seed).derive(path: WalletKeys.ethereumPath)
        #expect("0x" + Hex.encode(ethereum.privateKey) == keys.ethereumPrivateKeyHex)
        // Solana: the keypair is the SLIP-10 key followed by its Ed25519 public key, the address.
        let keypair = try #require(Base58.decode(keys.solanaKeypairBase58))
        #expect(keypair.count == 64)
        let privateKey = try Ed25519PrivateKey(rawRepresentation: Array(keypair.prefix(32)))
        #expect(privateKey.publicKey.rawRepresentation == Array(keypair.suffix(32)))
        #expect(Base58.encode(Array(keypair.suffix(32))) == keys.solanaAddress)
        #expect(try SLIP10Ed25519.derive(seed: seed, path: WalletKeys.solanaPath).privateKey == Array(keypair.prefix(32)))
    }

    @Test func randomWalletsAreDistinctAndReproducible() throws {
        let first = try WalletKeys.derive(entropy: try SecureRandom.bytes(count: 16))
        let second = try WalletKeys.derive(entropy: try SecureRandom.bytes(count: 16))
        #expect(first.mnemonic.count == 12)
        #expect(first.ethereumAddress != second.ethereumAddress)
        #expect(first.solanaAddress != second.solanaAddress)
        // The exported phrase re-derives both addresses.
        let again = try WalletKeys.derive(entropy: try BIP39.entropy(fromMnemonic: first.mnemonic))
        #expect(again.ethereumAddress == first.ethereumAddress)
        #expect(again.solanaAddress == first.solanaAddress)
        #expect(again.solanaKeypairBase58 == first.solanaKeypairBase58)
    }

    @Test(arguments: [0, 15, 17, 64])
    func refusesEntropyOfOtherLengths(count: Int) {
        #expect(throws: RainError.invalidArgument) { try WalletKeys.derive(entropy: [UInt8](repeating: 3, count: count)) }
    }

    @Test(arguments: vectors)
    func descriptionShowsNoSecret(vector: Vector) throws {
        let keys = try WalletKeys.derive(entropy: try hexBytes(vector.entropy))
        var dumped = ""
        dump(keys, to: &dumped)
        let texts = ["\(keys)", String(describing: keys), String(reflecting: keys), dumped]
        let privateKeyDigits = String(keys.ethereumPrivateKeyHex.dropFirst(2))
        for text in texts {
            for word in Set(keys.mnemonic) { #expect(!text.contains(word)) }
            #expect(!text.contains(privateKeyDigits))
            #expect(!text.contains(privateKeyDigits.prefix(16)))
            #expect(!text.contains(keys.solanaKeypairBase58))
            #expect(!text.contains(keys.solanaKeypairBase58.prefix(16)))
        }
        #expect("\(keys)".contains(keys.ethereumAddress))
        #expect("\(keys)".contains(keys.solanaAddress))
        #expect("\(keys)".contains("<redacted>"))
    }
}
