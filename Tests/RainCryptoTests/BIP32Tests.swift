import RainCore
@testable import RainCrypto
import Testing

@Suite struct BIP32Tests {
    struct Vector: Sendable, CustomTestStringConvertible {
        var name: String
        var seed: String
        var path: String
        var xprv: String
        var xpub: String
        var testDescription: String { "\(name) \(path)" }
    }

    static let seed1 = "000102030405060708090a0b0c0d0e0f"
    static let seed2 =
        "fffcf9f6f3f0edeae7e4e1dedbd8d5d2cfccc9c6c3c0bdbab7b4b1aeaba8a5a29f9c999693908d8a8784817e7b7875726f6c696663605d5a5754514e4b484542"
    static let seed3 =
        "4b381541583be4423346c643850da4b320e46a87ae3d2a4e6da11eba819cd4acba45d239319ac14f863b8d5ab5a0d0c64d2e8a1e7d1457df2e5a3c51c73235be"
    static let seed4 = "3ddd5602285899a946114506157c7997e5444528f3003f6134712147db19b678"

    // BIP-32 "Test vectors" 1 to 4 (3 and 4 check that leading zeros of private keys are kept).
    static let vectors: [Vector] = [
        Vector(
            name: "vector 1", seed: seed1, path: "m",
            xprv:
                "xprv9s21ZrQH143K3QTDL4LXw2F7HEK3wJUD2nW2nRk4stbPy6cq3jPPqjiChkVvvNKmPGJxWUtg6LnF5kejMRNNU3TGtRBeJgk33yuGBxrMPHi",
            xpub:
                "xpub661MyMwAqRbcFtXgS5sYJABqqG9YLmC4Q1Rdap9gSE8NqtwybGhePY2gZ29ESFjqJoCu1Rupje8YtGqsefD265TMg7usUDFdp6W1EGMcet8"),
        Vector(
            name: "vector 1", seed: seed1, path: "m/0H",
            xprv:
                "xprv9uHRZZhk6KAJC1avXpDAp4MDc3sQKNxDiPvvkX8Br5ngLNv1TxvUxt4cV1rGL5hj6KCesnDYUhd7oWgT11eZG7XnxHrnYeSvkzY7d2bhkJ7",
            xpub:
                "xpub68Gmy5EdvgibQVfPdqkBBCHxA5htiqg55crXYuXoQRKfDBFA1WEjWgP6LHhwBZeNK1VTsfTFUHCdrfp1bgwQ9xv5ski8PX9rL2dZXvgGDnw"),
        Vector(
            name: "vector 1", seed: seed1, path: "m/0H/1",
            xprv:
                "xprv9wTYmMFdV23N2TdNG573QoEsfRrWKQgWeibmLntzniatZvR9BmLnvSxqu53Kw1UmYPxLgboyZQaXwTCg8MSY3H2EU4pWcQDnRnrVA1xe8fs",
            xpub:
                "xpub6ASuArnXKPbfEwhqN6e3mwBcDTgzisQN1wXN9BJcM47sSikHjJf3UFHKkNAWbWMiGj7Wf5uMash7SyYq527Hqck2AxYysAA7xmALppuCkwQ"),
        Vector(
            name: "vector 1", seed: seed1, path: "m/0H/1/2H",
            xprv:
                "xprv9z4pot5VBttmtdRTWfWQmoH1taj2axGVzFqSb8C9xaxKymcFzXBDptWmT7FwuEzG3ryjH4ktypQSAewRiNMjANTtpgP4mLTj34bhnZX7UiM",
            xpub:
                "xpub6D4BDPcP2GT577Vvch3R8wDkScZWzQzMMUm3PWbmWvVJrZwQY4VUNgqFJPMM3No2dFDFGTsxxpG5uJh7n7epu4trkrX7x7DogT5Uv6fcLW5"),
        Vector(
            name: "vector 1", seed: seed1, path: "m/0H/1/2H/2",
            xprv:
                "xprvA2JDeKCSNNZky6uBCviVfJSKyQ1mDYahRjijr5idH2WwLsEd4Hsb2Tyh8RfQMuPh7f7RtyzTtdrbdqqsunu5Mm3wDvUAKRHSC34sJ7in334",
            xpub:
                "xpub6FHa3pjLCk84BayeJxFW2SP4XRrFd1JYnxeLeU8EqN3vDfZmbqBqaGJAyiLjTAwm6ZLRQUMv1ZACTj37sR62cfN7fe5JnJ7dh8zL4fiyLHV"),
        Vector(
            name: "vector 1", seed: seed1, path: "m/0H/1/2H/2/1000000000",
            xprv:
                "xprvA41z7zogVVwxVSgdKUHDy1SKmdb533PjDz7J6N6mV6uS3ze1ai8FHa8kmHScGpWmj4WggLyQjgPie1rFSruoUihUZREPSL39UNdE3BBDu76",
            xpub:
                "xpub6H1LXWLaKsWFhvm6RVpEL9P4KfRZSW7abD2ttkWP3SSQvnyA8FSVqNTEcYFgJS2UaFcxupHiYkro49S8yGasTvXEYBVPamhGW6cFJodrTHy"),
        Vector(
            name: "vector 2", seed: seed2, path: "m",
            xprv:
                "xprv9s21ZrQH143K31xYSDQpPDxsXRTUcvj2iNHm5NUtrGiGG5e2DtALGdso3pGz6ssrdK4PFmM8NSpSBHNqPqm55Qn3LqFtT2emdEXVYsCzC2U",
            xpub:
                "xpub661MyMwAqRbcFW31YEwpkMuc5THy2PSt5bDMsktWQcFF8syAmRUapSCGu8ED9W6oDMSgv6Zz8idoc4a6mr8BDzTJY47LJhkJ8UB7WEGuduB"),
        Vector(
            name: "vector 2", seed: seed2, path: "m/0",
            xprv:
                "xprv9vHkqa6EV4sPZHYqZznhT2NPtPCjKuDKGY38FBWLvgaDx45zo9WQRUT3dKYnjwih2yJD9mkrocEZXo1ex8G81dwSM1fwqWpWkeS3v86pgKt",
            xpub:
                "xpub69H7F5d8KSRgmmdJg2KhpAK8SR3DjMwAdkxj3ZuxV27CprR9LgpeyGmXUbC6wb7ERfvrnKZjXoUmmDznezpbZb7ap6r1D3tgFxHmwMkQTPH"),
        Vector(
            name: "vector 2", seed: seed2, path: "m/0/2147483647H",
            xprv:
                "xprv9wSp6B7kry3Vj9m1zSnLvN3xH8RdsPP1Mh7fAaR7aRLcQMKTR2vidYEeEg2mUCTAwCd6vnxVrcjfy2kRgVsFawNzmjuHc2YmYRmagcEPdU9",
            xpub:
                "xpub6ASAVgeehLbnwdqV6UKMHVzgqAG8Gr6riv3Fxxpj8ksbH9ebxaEyBLZ85ySDhKiLDBrQSARLq1uNRts8RuJiHjaDMBU4Zn9h8LZNnBC5y4a"),
        Vector(
            name: "vector 2", seed: seed2, path: "m/0/2147483647H/1",
            xprv:
                "xprv9zFnWC6h2cLgpmSA46vutJzBcfJ8yaJGg8cX1e5StJh45BBciYTRXSd25UEPVuesF9yog62tGAQtHjXajPPdbRCHuWS6T8XA2ECKADdw4Ef",
            xpub:
                "xpub6DF8uhdarytz3FWdA8TvFSvvAh8dP3283MY7p2V4SeE2wyWmG5mg5EwVvmdMVCQcoNJxGoWaU9DCWh89LojfZ537wTfunKau47EL2dhHKon"),
        Vector(
            name: "vector 2", seed: seed2, path: "m/0/2147483647H/1/2147483646H",
            xprv:
                "xprvA1RpRA33e1JQ7ifknakTFpgNXPmW2YvmhqLQYMmrj4xJXXWYpDPS3xz7iAxn8L39njGVyuoseXzU6rcxFLJ8HFsTjSyQbLYnMpCqE2VbFWc",
            xpub:
                "xpub6ERApfZwUNrhLCkDtcHTcxd75RbzS1ed54G1LkBUHQVHQKqhMkhgbmJbZRkrgZw4koxb5JaHWkY4ALHY2grBGRjaDMzQLcgJvLJuZZvRcEL"),
        Vector(
            name: "vector 2", seed: seed2, path: "m/0/2147483647H/1/2147483646H/2",
            xprv:
                "xprvA2nrNbFZABcdryreWet9Ea4LvTJcGsqrMzxHx98MMrotbir7yrKCEXw7nadnHM8Dq38EGfSh6dqA9QWTyefMLEcBYJUuekgW4BYPJcr9E7j",
            xpub:
                "xpub6FnCn6nSzZAw5Tw7cgR9bi15UV96gLZhjDstkXXxvCLsUXBGXPdSnLFbdpq8p9HmGsApME5hQTZ3emM2rnY5agb9rXpVGyy3bdW6EEgAtqt"),
        Vector(
            name: "vector 3", seed: seed3, path: "m",
            xprv:
                "xprv9s21ZrQH143K25QhxbucbDDuQ4naNntJRi4KUfWT7xo4EKsHt2QJDu7KXp1A3u7Bi1j8ph3EGsZ9Xvz9dGuVrtHHs7pXeTzjuxBrCmmhgC6",
            xpub:
                "xpub661MyMwAqRbcEZVB4dScxMAdx6d4nFc9nvyvH3v4gJL378CSRZiYmhRoP7mBy6gSPSCYk6SzXPTf3ND1cZAceL7SfJ1Z3GC8vBgp2epUt13"),
        Vector(
            name: "vector 3", seed: seed3, path: "m/0H",
            xprv:
                "xprv9uPDJpEQgRQfDcW7BkF7eTya6RPxXeJCqCJGHuCJ4GiRVLzkTXBAJMu2qaMWPrS7AANYqdq6vcBcBUdJCVVFceUvJFjaPdGZ2y9WACViL4L",
            xpub:
                "xpub68NZiKmJWnxxS6aaHmn81bvJeTESw724CRDs6HbuccFQN9Ku14VQrADWgqbhhTHBaohPX4CjNLf9fq9MYo6oDaPPLPxSb7gwQN3ih19Zm4Y"),
        Vector(
            name: "vector 4", seed: seed4, path: "m",
            xprv:
                "xprv9s21ZrQH143K48vGoLGRPxgo2JNkJ3J3fqkirQC2zVdk5Dgd5w14S7fRDyHH4dWNHUgkvsvNDCkvAwcSHNAQwhwgNMgZhLtQC63zxwhQmRv",
            xpub:
                "xpub661MyMwAqRbcGczjuMoRm6dXaLDEhW1u34gKenbeYqAix21mdUKJyuyu5F1rzYGVxyL6tmgBUAEPrEz92mBXjByMRiJdba9wpnN37RLLAXa"),
        Vector(
            name: "vector 4", seed: seed4, path: "m/0H",
            xprv:
                "xprv9vB7xEWwNp9kh1wQRfCCQMnZUEG21LpbR9NPCNN1dwhiZkjjeGRnaALmPXCX7SgjFTiCTT6bXes17boXtjq3xLpcDjzEuGLQBM5ohqkao9G",
            xpub:
                "xpub69AUMk3qDBi3uW1sXgjCmVjJ2G6WQoYSnNHyzkmdCHEhSZ4tBok37xfFEqHd2AddP56Tqp4o56AePAgCjYdvpW2PU2jbUPFKsav5ut6Ch1m"),
        Vector(
            name: "vector 4", seed: seed4, path: "m/0H/1H",
            xprv:
                "xprv9xJocDuwtYCMNAo3Zw76WENQeAS6WGXQ55RCy7tDJ8oALr4FWkuVoHJeHVAcAqiZLE7Je3vZJHxspZdFHfnBEjHqU5hG1Jaj32dVoS6XLT1",
            xpub:
                "xpub6BJA1jSqiukeaesWfxe6sNK9CCGaujFFSJLomWHprUL9DePQ4JDkM5d88n49sMGJxrhpjazuXYWdMf17C9T5XnxkopaeS7jGk1GyyVziaMt"),
    ]

    @Test(arguments: vectors)
    func publishedVectors(vector: Vector) throws {
        let key = try BIP32ExtendedKey.master(seed: try hexBytes(vector.seed)).derive(path: vector.path)
        #expect(key.serializedPrivate() == vector.xprv)
        #expect(try key.serializedPublic() == vector.xpub)
    }

    @Test(arguments: vectors)
    func fieldsMatchTheSerialization(vector: Vector) throws {
        let key = try BIP32ExtendedKey.master(seed: try hexBytes(vector.seed)).derive(path: vector.path)
        let payload = try #require(Base58.decodeChecked(vector.xprv))
        let publicPayload = try #require(Base58.decodeChecked(vector.xpub))
        #expect(payload.count == 78)
        #expect(key.depth == payload[4])
        #expect(key.parentFingerprint == Array(payload[5..<9]))
        #expect(key.childNumber == payload[9..<13].reduce(0) { $0 << 8 | UInt32($1) })
        #expect(key.chainCode == Array(payload[13..<45]))
        #expect(payload[45] == 0)
        #expect(key.privateKey == Array(payload[46..<78]))
        #expect(try key.compressedPublicKey == Array(publicPayload[45..<78]))
    }

    @Test func childStepsEqualThePath() throws {
        let master = try BIP32ExtendedKey.master(seed: try hexBytes(Self.seed1))
        let stepped = try master.child(0x8000_0000).child(1).child(0x8000_0002).child(2).child(1_000_000_000)
        #expect(stepped.serializedPrivate() == Self.vectors[5].xprv)
        #expect(stepped.depth == 5)
        #expect(stepped.childNumber == 1_000_000_000)
    }

    @Test func hardenedMarkersAreEquivalent() throws {
        let master = try BIP32ExtendedKey.master(seed: try hexBytes(Self.seed1))
        let expected = Self.vectors[3].xprv
        for path in ["m/0H/1/2H", "m/0h/1/2h", "m/0'/1/2'", "m/0'/1/2h"] {
            #expect(try master.derive(path: path).serializedPrivate() == expected)
        }
        #expect(try master.derive(path: "m").serializedPrivate() == Self.vectors[0].xprv)
    }

    @Test func uncompressedPublicKeyMatchesTheCompressedOne() throws {
        let key = try BIP32ExtendedKey.master(seed: try hexBytes(Self.seed1)).derive(path: "m/44'/60'/0'/0/0")
        let compressed = try key.compressedPublicKey
        let uncompressed = try key.uncompressedPublicKey
        #expect(compressed.count == 33)
        #expect(uncompressed.count == 65)
        #expect(uncompressed[0] == 0x04)
        #expect(Array(uncompressed[1..<33]) == Array(compressed[1...]))
        // The compressed prefix is 02 for an even y and 03 for an odd one.
        #expect(compressed[0] == 0x02 + (uncompressed[64] & 1))
    }

    @Test(arguments: [
        "", "0/1", "M/0", "m/", "m//1", "m/-1", "m/+1", "m/ 1", "m/1 ", "m/2147483648", "m/2147483648'",
        "m/99999999999", "m/1'/x", "m/1''", "m/0x10", "m/1/", "/m/1",
    ])
    func refusesMalformedPaths(path: String) throws {
        let master = try BIP32ExtendedKey.master(seed: try hexBytes(Self.seed1))
        let error = try #require(throws: RainError.self) { try master.derive(path: path) }
        #expect(error.code == .invalidArgument)
        #expect(error.details.field == "path")
    }

    @Test func acceptsTheLargestIndices() throws {
        let path = try DerivationPath(parsing: "m/2147483647/2147483647'")
        #expect(path.indices == [0x7FFF_FFFF, 0xFFFF_FFFF])
        #expect(throws: RainError.invalidArgument) {
            try DerivationPath(parsing: "m" + String(repeating: "/0", count: 256))
        }
        #expect(try DerivationPath(parsing: "m" + String(repeating: "/0", count: 255)).indices.count == 255)
    }

    @Test(arguments: [0, 15, 65, 100])
    func refusesSeedsOfOtherLengths(count: Int) {
        #expect(throws: RainError.invalidArgument) {
            try BIP32ExtendedKey.master(seed: [UInt8](repeating: 7, count: count))
        }
    }

    // The order n of secp256k1 (SEC 2 §2.4.1).
    static let order = "fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141"
    static let orderMinusOne = "fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364140"
    static let one = String(repeating: "0", count: 63) + "1"
    static let two = String(repeating: "0", count: 63) + "2"

    /// (IL + k) mod n through the function `child(_:)` uses, as hex.
    func addTweak(_ tweak: String, to key: String) throws -> String {
        let il = try hexBytes(tweak)
        let parent = try hexBytes(key)
        var output = [UInt8](repeating: 0, count: 32)
        let result = output.withUnsafeMutableBytes { out in
            il.withUnsafeBytes { ilBytes in
                parent.withUnsafeBytes { parentBytes in
                    Result { () throws(RainError) in try Secp256k1.addTweak(ilBytes, to: parentBytes, into: out) }
                }
            }
        }
        try result.get()
        return Hex.encode(output)
    }

    @Test func childKeyIsTheSumModuloTheOrder() throws {
        #expect(try addTweak(Self.one, to: Self.one) == Self.two)
        #expect(try addTweak(Self.orderMinusOne, to: Self.two) == Self.one)
    }

    @Test func refusesATweakOfAtLeastTheOrder() throws {
        // BIP-32: "In case parse256(IL) ≥ n … the resulting key is invalid".
        for tweak in [Self.order, String(repeating: "f", count: 64)] {
            let error = try #require(throws: RainError.self) { try addTweak(tweak, to: Self.one) }
            #expect(error.details.reason == "invalid_derived_key")
        }
    }

    @Test func refusesAZeroChildKey() throws {
        // BIP-32: "… or ki = 0, the resulting key is invalid".
        let error = try #require(throws: RainError.self) { try addTweak(Self.orderMinusOne, to: Self.one) }
        #expect(error.details.reason == "invalid_derived_key")
    }

    @Test func masterKeyMustBeBelowTheOrderAndNonZero() throws {
        func isValid(_ hex: String) throws -> Bool {
            let bytes = try hexBytes(hex)
            return try bytes.withUnsafeBytes { raw in
                Result { () throws(RainError) in try Secp256k1.isValidPrivateKey(raw) }
            }.get()
        }
        #expect(try isValid(Self.one))
        #expect(try isValid(Self.orderMinusOne))
        #expect(try !isValid(Self.order))
        #expect(try !isValid(String(repeating: "0", count: 64)))
        #expect(try !isValid(String(repeating: "f", count: 64)))
    }

    @Test func descriptionRedactsTheKey() throws {
        let key = try BIP32ExtendedKey.master(seed: try hexBytes(Self.seed1)).derive(path: "m/0H/1")
        let secrets = [Hex.encode(key.privateKey), Hex.encode(key.chainCode), key.serializedPrivate()]
        for text in ["\(key)", String(reflecting: key)] {
            #expect(text.contains("<redacted>"))
            for secret in secrets { #expect(!text.contains(secret)) }
        }
        var dumped = ""
        dump(key, to: &dumped)
        for secret in secrets { #expect(!dumped.contains(secret)) }
    }
}

@Suite struct HMACSHA512Tests {
    // RFC 4231 §4.2, §4.3 and §4.7 (a key longer than the block size).
    @Test(arguments: [
        (
            String(repeating: "0b", count: 20), Hex.encode(Array("Hi There".utf8)),
            "87aa7cdea5ef619d4ff0b4241a1d6cb02379f4e2ce4ec2787ad0b30545e17cdedaa833b7d6b8a702038b274eaea3f4e4be9d914eeb61f1702e696c203a126854"
        ),
        (
            Hex.encode(Array("Jefe".utf8)), Hex.encode(Array("what do ya want for nothing?".utf8)),
            "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea2505549758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737"
        ),
        (
            String(repeating: "aa", count: 131),
            Hex.encode(Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8)),
            "80b24263c7c1a3ebb71493c1dd7be8b49b46d1f41b4aeec1121b013783f8f3526b56d037e05f2598bd0fd2215d6a1e5295e64f73f63f0aec8b915a985d786598"
        ),
    ])
    func rfc4231(key: String, data: String, mac: String) throws {
        #expect(Hex.encode(try HMACSHA512.authenticate(try hexBytes(data), key: try hexBytes(key))) == mac)
    }
}

@Suite struct Hash160Tests {
    @Test func fingerprintOfTheVector1MasterKey() throws {
        // BIP-32 test vector 1: the master key's identifier, whose first 4 bytes (3442193e) are
        // the parent fingerprint in m/0H's serialization.
        let publicKey = try hexBytes("0339a36013301597daef41fbe593a02cc513d0b55527ec2df1050e2e8ff49c85c2")
        #expect(Hex.encode(try Hash160.hash(publicKey)) == "3442193e1bb70916e914552172cd4e2dbc9df811")
        let master = try BIP32ExtendedKey.master(seed: try hexBytes(BIP32Tests.seed1))
        #expect(try master.compressedPublicKey == publicKey)
        #expect(try master.child(0x8000_0000).parentFingerprint == [0x34, 0x42, 0x19, 0x3E])
    }
}
