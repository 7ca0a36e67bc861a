import Foundation
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainTestSupport
import Testing

@testable import RainAuthority

@Suite("Authority keys")
struct AuthorityKeysTests {
    @Test("the derived keys are distinct, deterministic, and match HKDF with their labels")
    func derivation() throws {
        let master = SymmetricKey(bytes: Array(0..<32))
        let keys = try AuthorityKeys(masterKey: master)
        let again = try AuthorityKeys(masterKey: SymmetricKey(bytes: Array(0..<32)))
        func bytes(_ key: SymmetricKey) -> [UInt8] { key.withUnsafeBytes { Array($0) } }
        let derived = [bytes(keys.codeHashKey), bytes(keys.tokenHashKey), bytes(keys.walletKey)]
        #expect(Set(derived).count == 3)
        #expect(derived.allSatisfy { $0.count == 32 && $0 != Array(0..<32) })
        #expect(derived == [bytes(again.codeHashKey), bytes(again.tokenHashKey), bytes(again.walletKey)])
        #expect(
            bytes(keys.codeHashKey)
                == bytes(
                    try HKDFSHA256.deriveKey(
                        from: master, salt: AuthorityKeys.salt, info: "rain.authority.code-hash.v1")))
        #expect(keys.masterKeyID == master.keyID)
        #expect(keys.masterKeyID.count == 16)

        let other = try AuthorityKeys(masterKey: SymmetricKey(bytes: Array(repeating: 1, count: 32)))
        #expect(bytes(other.codeHashKey) != bytes(keys.codeHashKey))
        #expect(other.masterKeyID != keys.masterKeyID)
    }

    @Test("code hashes are bound to the challenge, and token hashes differ from code hashes")
    func hashes() throws {
        let keys = try AuthorityKeys(masterKey: SymmetricKey(bytes: Array(repeating: 9, count: 32)))
        #expect(
            keys.codeHash(challengeID: "chl_a", code: "123456") != keys.codeHash(challengeID: "chl_b", code: "123456"))
        // The separator keeps "chl_a1" + "23456" apart from "chl_a" + "123456".
        #expect(
            keys.codeHash(challengeID: "chl_a1", code: "23456") != keys.codeHash(challengeID: "chl_a", code: "123456"))
        #expect(keys.tokenHash("rwr_x") != keys.codeHash(challengeID: "", code: "rwr_x"))
        #expect(keys.tokenHash("rwr_x").count == 32)
    }

    @Test("authority.key is created 0600 in the state directory and loads back the same key")
    func keyFile() async throws {
        let directory = try makeTemporaryDirectory() + "/nested"
        defer { try? FileManager.default.removeItem(atPath: (directory as NSString).deletingLastPathComponent) }
        let first = try await AuthorityKeys.load(stateDirectory: directory)
        var info = stat()
        #expect(stat(directory + "/authority.key", &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
        let second = try await AuthorityKeys.load(keyFile: directory + "/authority.key")
        #expect(first.masterKeyID == second.masterKeyID)
        chmod(directory + "/authority.key", 0o644)
        let error = try #require(await rainError { _ = try await AuthorityKeys.load(stateDirectory: directory) })
        #expect(error.code == .invalidArgument)
        #expect(error.details.reason == "key_file_mode")
    }
}
