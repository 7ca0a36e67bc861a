import RainCore
@testable import RainCrypto
import Testing

@Suite struct BIP39Tests {
    struct Vector: Sendable, CustomTestStringConvertible {
        var entropy: String
        var mnemonic: String
        var seed: String
        var testDescription: String { "\(entropy.count / 2) bytes \(entropy.prefix(8))…" }
    }

    // trezor/python-mnemonic vectors.json, "english", passphrase "TREZOR".
    static let trezorVectors: [Vector] = [
        Vector(
            entropy: "00000000000000000000000000000000",
            mnemonic: "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about",
            seed:
                "c55257c360c07c72029aebc1b53c05ed0362ada38ead3e3e9efa3708e53495531f09a6987599d18264c1e1c92f2cf141630c7a3c4ab7c81b2f001698e7463b04"
        ),
        Vector(
            entropy: "7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f",
            mnemonic: "legal winner thank year wave sausage worth useful legal winner thank yellow",
            seed:
                "2e8905819b8723fe2c1d161860e5ee1830318dbf49a83bd451cfb8440c28bd6fa457fe1296106559a3c80937a1c1069be3a3a5bd381ee6260e8d9739fce1f607"
        ),
        Vector(
            entropy: "80808080808080808080808080808080",
            mnemonic: "letter advice cage absurd amount doctor acoustic avoid letter advice cage above",
            seed:
                "d71de856f81a8acc65e6fc851a38d4d7ec216fd0796d0a6827a3ad6ed5511a30fa280f12eb2e47ed2ac03b5c462a0358d18d69fe4f985ec81778c1b370b652a8"
        ),
        Vector(
            entropy: "ffffffffffffffffffffffffffffffff",
            mnemonic: "zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo wrong",
            seed:
                "ac27495480225222079d7be181583751e86f571027b0497b5b5d11218e0a8a13332572917f0f8e5a589620c6f15b11c61dee327651a14c34e18231052e48c069"
        ),
        Vector(
            entropy: "000000000000000000000000000000000000000000000000",
            mnemonic:
                "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon agent",
            seed:
                "035895f2f481b1b0f01fcf8c289c794660b289981a78f8106447707fdd9666ca06da5a9a565181599b79f53b844d8a71dd9f439c52a3d7b3e8a79c906ac845fa"
        ),
        Vector(
            entropy: "7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f",
            mnemonic:
                "legal winner thank year wave sausage worth useful legal winner thank year wave sausage worth useful legal will",
            seed:
                "f2b94508732bcbacbcc020faefecfc89feafa6649a5491b8c952cede496c214a0c7b3c392d168748f2d4a612bada0753b52a1c7ac53c1e93abd5c6320b9e95dd"
        ),
        Vector(
            entropy: "0000000000000000000000000000000000000000000000000000000000000000",
            mnemonic:
                "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon art",
            seed:
                "bda85446c68413707090a52022edd26a1c9462295029f2e60cd7c4f2bbd3097170af7a4d73245cafa9c3cca8d561a7c3de6f5d4a10be8ed2a5e608d68f92fcc8"
        ),
        Vector(
            entropy: "7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f",
            mnemonic:
                "legal winner thank year wave sausage worth useful legal winner thank year wave sausage worth useful legal winner thank year wave sausage worth title",
            seed:
                "bc09fca1804f7e69da93c2f2028eb238c227f2e9dda30cd63699232578480a4021b146ad717fbb7e451ce9eb835f43620bf5c514db0f8add49f5d121449d3e87"
        ),
        Vector(
            entropy: "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
            mnemonic: "zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo vote",
            seed:
                "dd48c104698c30cfe2b6142103248622fb7bb0ff692eebb00089b32d22484e1613912f0a5b694407be899ffd31ed3992c456cdf60f5d4564b8ba3f05a69890ad"
        ),
        Vector(
            entropy: "9e885d952ad362caeb4efe34a8e91bd2",
            mnemonic: "ozone drill grab fiber curtain grace pudding thank cruise elder eight picnic",
            seed:
                "274ddc525802f7c828d8ef7ddbcdc5304e87ac3535913611fbbfa986d0c9e5476c91689f9c8a54fd55bd38606aa6a8595ad213d4c9c9f9aca3fb217069a41028"
        ),
        Vector(
            entropy: "6610b25967cdcca9d59875f5cb50b0ea75433311869e930b",
            mnemonic:
                "gravity machine north sort system female filter attitude volume fold club stay feature office ecology stable narrow fog",
            seed:
                "628c3827a8823298ee685db84f55caa34b5cc195a778e52d45f59bcf75aba68e4d7590e101dc414bc1bbd5737666fbbef35d1f1903953b66624f910feef245ac"
        ),
        Vector(
            entropy: "68a79eaca2324873eacc50cb9c6eca8cc68ea5d936f98787c60c7ebc74e6ce7c",
            mnemonic:
                "hamster diagram private dutch cause delay private meat slide toddler razor book happy fancy gospel tennis maple dilemma loan word shrug inflict delay length",
            seed:
                "64c87cde7e12ecf6704ab95bb1408bef047c22db4cc7491c4271d170a1b213d20b385bc1588d9c7b38f1b39d415665b8a9030c9ec653d75e65f847d8fc1fc440"
        ),
    ]

    static let abandonAbout =
        "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about"
        .split(separator: " ").map(String.init)

    @Test(arguments: trezorVectors)
    func entropyToMnemonic(vector: Vector) throws {
        let words = try BIP39.mnemonic(fromEntropy: try hexBytes(vector.entropy))
        #expect(words.joined(separator: " ") == vector.mnemonic)
    }

    @Test(arguments: trezorVectors)
    func mnemonicToEntropy(vector: Vector) throws {
        let words = vector.mnemonic.split(separator: " ").map(String.init)
        #expect(Hex.encode(try BIP39.entropy(fromMnemonic: words)) == vector.entropy)
    }

    @Test(arguments: trezorVectors)
    func mnemonicToSeedWithPassphrase(vector: Vector) throws {
        let words = vector.mnemonic.split(separator: " ").map(String.init)
        let seed = try BIP39.seed(fromMnemonic: words, passphrase: "TREZOR")
        #expect(seed.count == 64)
        #expect(Hex.encode(seed) == vector.seed)
    }

    @Test func seedWithoutPassphrase() throws {
        // The well-known seed of "abandon … about" with an empty passphrase (python-mnemonic).
        let seed = try BIP39.seed(fromMnemonic: Self.abandonAbout)
        #expect(
            Hex.encode(seed)
                == "5eb00bbddcf069084889a8ab9155568165f5c453ccb85e70811aaed6f6da5fc19a5ac40b389cd370d086206dec8aa6c43daea6690f20ad3d8d48b2d2ce9e38e4"
        )
    }

    @Test func passphraseIsNormalizedToNFKD() throws {
        // Fullwidth letters, the "fi" ligature and a precomposed é: NFKD gives "Pass fi e\u{301}".
        // Expected value from python-mnemonic's to_seed, which applies NFKD.
        let expected =
            "5f8895793de4e946a933bd9babb3c30f25e7a889ae7b3ce1bcf8b7602d9d32ec922c4b42ac08b5faf05aacd4213a1e5581fff636697049e0939f724a4bc0005b"
        let compatibility = try BIP39.seed(
            fromMnemonic: Self.abandonAbout, passphrase: "\u{FF30}\u{FF41}\u{FF53}\u{FF53} \u{FB01} \u{E9}")
        let decomposed = try BIP39.seed(fromMnemonic: Self.abandonAbout, passphrase: "Pass fi e\u{301}")
        #expect(Hex.encode(compatibility) == expected)
        #expect(Hex.encode(decomposed) == expected)
    }

    @Test func wordlistIsThePinnedEnglishList() {
        let list = BIP39.englishWordlist
        #expect(list.count == 2048)
        #expect(list.first == "abandon")
        #expect(list.last == "zoo")
        #expect(Set(list).count == 2048)
        // The file scripts/gen-wordlist pins: the words, one per line.
        let file = Array((list.joined(separator: "\n") + "\n").utf8)
        #expect(Hex.encode(SHA256.hash(file)) == "2f5eed53a4727b4bf8880d8f3f199efc90e58503646d9ff8eff3a2ed3b24dbda")
    }

    @Test(arguments: [0, 1, 12, 15, 17, 31, 33, 64])
    func refusesEntropyOfOtherLengths(count: Int) {
        #expect(throws: RainError.invalidArgument) {
            try BIP39.mnemonic(fromEntropy: [UInt8](repeating: 1, count: count))
        }
    }

    @Test func randomEntropyRoundTrips() throws {
        for count in [16, 20, 24, 28, 32] {
            for _ in 0..<20 {
                let entropy = try SecureRandom.bytes(count: count)
                let words = try BIP39.mnemonic(fromEntropy: entropy)
                #expect(words.count == count * 3 / 4)
                #expect(try BIP39.entropy(fromMnemonic: words) == entropy)
            }
        }
    }

    @Test func refusesAWrongChecksum() throws {
        // Twelve "abandon": all-zero entropy, but its checksum word is "about", not "abandon".
        let words = [String](repeating: "abandon", count: 12)
        let error = try #require(throws: RainError.self) { try BIP39.entropy(fromMnemonic: words) }
        #expect(error.code == .invalidArgument)
        #expect(error.details.reason == "checksum")
        #expect(!error.message.contains("abandon"))
        #expect(throws: RainError.invalidArgument) { try BIP39.seed(fromMnemonic: words) }
    }

    @Test func refusesEveryOtherLastWordOfAVector() throws {
        // Only one last word in sixteen can carry the right 4-bit checksum of a 12-word phrase;
        // "about" is the one for all-zero entropy.
        var accepted: [String] = []
        for word in BIP39.englishWordlist {
            let words = Array(Self.abandonAbout.dropLast()) + [word]
            if (try? BIP39.entropy(fromMnemonic: words)) != nil { accepted.append(word) }
        }
        #expect(accepted.count == 128)
        #expect(accepted.contains("about"))
        #expect(!accepted.contains("abandon"))
    }

    @Test(arguments: ["abandonn", "Abandon", "ABANDON", " abandon", "abandon ", "", "aband"])
    func refusesAnUnknownWord(word: String) throws {
        var words = Self.abandonAbout
        words[3] = word
        let error = try #require(throws: RainError.self) { try BIP39.entropy(fromMnemonic: words) }
        #expect(error.code == .invalidArgument)
        #expect(error.details.reason == "unknown_word")
        #expect(throws: RainError.invalidArgument) { try BIP39.seed(fromMnemonic: words) }
    }

    @Test(arguments: [0, 1, 11, 13, 23, 25])
    func refusesOtherWordCounts(count: Int) throws {
        let words = [String](repeating: "abandon", count: count)
        let error = try #require(throws: RainError.self) { try BIP39.entropy(fromMnemonic: words) }
        #expect(error.details.reason == "word_count")
    }
}

@Suite struct PBKDF2HMACSHA512Tests {
    // The PBKDF2-HMAC-SHA512 values commonly published alongside RFC 6070's SHA-1 inputs;
    // checked with Python's hashlib.pbkdf2_hmac.
    @Test(arguments: [
        (
            "password", "salt", 1,
            "867f70cf1ade02cff3752599a3a53dc4af34c7a669815ae5d513554e1c8cf252c02d470a285a0501bad999bfe943c08f050235d7d68b1da55e63f73b60a57fce"
        ),
        (
            "password", "salt", 2,
            "e1d9c16aa681708a45f5c7c4e215ceb66e011a2e9f0040713f18aefdb866d53cf76cab2868a39b9f7840edce4fef5a82be67335c77a6068e04112754f27ccf4e"
        ),
        (
            "password", "salt", 4096,
            "d197b1b33db0143e018b12f3d1d1479e6cdebdcc97c5c0f87f6902e072f457b5143f30602641b3d55cd335988cb36b84376060ecd532e039b742a239434af2d5"
        ),
        (
            "passwordPASSWORDpassword", "saltSALTsaltSALTsaltSALTsaltSALTsalt", 4096,
            "8c0511f4c6e597c6ac6315d8f0362e225f3c501495ba23b868c005174dc4ee71115b59f9e60cd9532fa33e0f75aefe30225c583a186cd82bd4daea9724a3d3b8"
        ),
    ])
    func knownValues(password: String, salt: String, iterations: Int, key: String) throws {
        let derived = try PBKDF2HMACSHA512.deriveKey(
            password: Array(password.utf8), salt: Array(salt.utf8), iterations: iterations, outputByteCount: 64)
        #expect(Hex.encode(derived) == key)
    }

    @Test func refusesZeroIterations() {
        #expect(throws: RainError.invalidArgument) {
            try PBKDF2HMACSHA512.deriveKey(password: [1], salt: [2], iterations: 0, outputByteCount: 64)
        }
    }
}
