import RainCore
@testable import RainCrypto
import Testing

@Suite struct SLIP10Ed25519Tests {
    struct Vector: Sendable, CustomTestStringConvertible {
        var seed: String
        var path: String
        var chainCode: String
        var privateKey: String
        /// SLIP-10 writes Ed25519 public keys with a 00 prefix.
        var publicKey: String
        var testDescription: String { "\(seed.prefix(6))… \(path)" }
    }

    static let seed1 = "000102030405060708090a0b0c0d0e0f"
    static let seed2 =
        "fffcf9f6f3f0edeae7e4e1dedbd8d5d2cfccc9c6c3c0bdbab7b4b1aeaba8a5a29f9c999693908d8a8784817e7b7875726f6c696663605d5a5754514e4b484542"

    // SLIP-0010 "Test vector 1 for ed25519" (all of it) and "Test vector 2 for ed25519".
    static let vectors: [Vector] = [
        Vector(
            seed: seed1, path: "m", chainCode: "90046a93de5380a72b5e45010748567d5ea02bbf6522f979e05c0d8d8ca9fffb",
            privateKey: "2b4be7f19ee27bbf30c667b642d5f4aa69fd169872f8fc3059c08ebae2eb19e7",
            publicKey: "00a4b2856bfec510abab89753fac1ac0e1112364e7d250545963f135f2a33188ed"),
        Vector(
            seed: seed1, path: "m/0H", chainCode: "8b59aa11380b624e81507a27fedda59fea6d0b779a778918a2fd3590e16e9c69",
            privateKey: "68e0fe46dfb67e368c75379acec591dad19df3cde26e63b93a8e704f1dade7a3",
            publicKey: "008c8a13df77a28f3445213a0f432fde644acaa215fc72dcdf300d5efaa85d350c"),
        Vector(
            seed: seed1, path: "m/0H/1H", chainCode: "a320425f77d1b5c2505a6b1b27382b37368ee640e3557c315416801243552f14",
            privateKey: "b1d0bad404bf35da785a64ca1ac54b2617211d2777696fbffaf208f746ae84f2",
            publicKey: "001932a5270f335bed617d5b935c80aedb1a35bd9fc1e31acafd5372c30f5c1187"),
        Vector(
            seed: seed1, path: "m/0H/1H/2H", chainCode: "2e69929e00b5ab250f49c3fb1c12f252de4fed2c1db88387094a0f8c4c9ccd6c",
            privateKey: "92a5b23c0b8a99e37d07df3fb9966917f5d06e02ddbd909c7e184371463e9fc9",
            publicKey: "00ae98736566d30ed0e9d2f4486a64bc95740d89c7db33f52121f8ea8f76ff0fc1"),
        Vector(
            seed: seed1, path: "m/0H/1H/2H/2H", chainCode: "8f6d87f93d750e0efccda017d662a1b31a266e4a6f5993b15f5c1f07f74dd5cc",
            privateKey: "30d1dc7e5fc04c31219ab25a27ae00b50f6fd66622f6e9c913253d6511d1e662",
            publicKey: "008abae2d66361c879b900d204ad2cc4984fa2aa344dd7ddc46007329ac76c429c"),
        Vector(
            seed: seed1, path: "m/0H/1H/2H/2H/1000000000H",
            chainCode: "68789923a0cac2cd5a29172a475fe9e0fb14cd6adb5ad98a3fa70333e7afa230",
            privateKey: "8f94d394a8e8fd6b1bc2f3f49f5c47e385281d5c17e65324b0f62483e37e8793",
            publicKey: "003c24da049451555d51a7014a37337aa4e12d41e485abccfa46b47dfb2af54b7a"),
        Vector(
            seed: seed2, path: "m", chainCode: "ef70a74db9c3a5af931b5fe73ed8e1a53464133654fd55e7a66f8570b8e33c3b",
            privateKey: "171cb88b1b3c1db25add599712e36245d75bc65a1a5c9e18d76f9f2b1eab4012",
            publicKey: "008fe9693f8fa62a4305a140b9764c5ee01e455963744fe18204b4fb948249308a"),
        Vector(
            seed: seed2, path: "m/0H", chainCode: "0b78a3226f915c082bf118f83618a618ab6dec793752624cbeb622acb562862d",
            privateKey: "1559eb2bbec5790b0c65d8693e4d0875b1747f4970ae8b650486ed7470845635",
            publicKey: "0086fab68dcb57aa196c77c5f264f215a112c22a912c10d123b0d03c3c28ef1037"),
        Vector(
            seed: seed2, path: "m/0H/2147483647H",
            chainCode: "138f0b2551bcafeca6ff2aa88ba8ed0ed8de070841f0c4ef0165df8181eaad7f",
            privateKey: "ea4f5bfe8694d8bb74b7b59404632fd5968b774ed545e810de9c32a4fb4192f4",
            publicKey: "005ba3b9ac6e90e83effcd25ac4e58a1365a9e35a3d3ae5eb07b9e4d90bcf7506d"),
        Vector(
            seed: seed2, path: "m/0H/2147483647H/1H/2147483646H/2H",
            chainCode: "5d70af781f3a37b829f0d060924d5e960bdc02e85423494afc0b1a41bbe196d4",
            privateKey: "551d333177df541ad876a60ea71f00447931c0a9da16f227c11ea080d7391b8d",
            publicKey: "0047150c75db263559a70d5778bf36abbab30fb061ad69f69ece61a72b0cfa4fc0"),
    ]

    @Test(arguments: vectors)
    func publishedVectors(vector: Vector) throws {
        let derived = try SLIP10Ed25519.derive(seed: try hexBytes(vector.seed), path: vector.path)
        #expect(Hex.encode(derived.privateKey) == vector.privateKey)
        #expect(Hex.encode(derived.chainCode) == vector.chainCode)
        let publicKey = try Ed25519PrivateKey(rawRepresentation: derived.privateKey).publicKey
        #expect("00" + Hex.encode(publicKey.rawRepresentation) == vector.publicKey)
    }

    @Test(arguments: ["m/0", "m/0H/1", "m/44'/501'/0'/0"])
    func refusesNonHardenedIndices(path: String) throws {
        let error = try #require(throws: RainError.self) {
            try SLIP10Ed25519.derive(seed: try hexBytes(Self.seed1), path: path)
        }
        #expect(error.code == .invalidArgument)
        #expect(error.details.field == "path")
    }

    @Test(arguments: ["", "44'/501'", "m/", "m/x'"])
    func refusesMalformedPaths(path: String) {
        #expect(throws: RainError.invalidArgument) {
            try SLIP10Ed25519.derive(seed: [UInt8](repeating: 1, count: 16), path: path)
        }
    }

    @Test(arguments: [0, 15, 65])
    func refusesSeedsOfOtherLengths(count: Int) {
        #expect(throws: RainError.invalidArgument) {
            try SLIP10Ed25519.derive(seed: [UInt8](repeating: 1, count: count), path: "m/0'")
        }
    }
}
