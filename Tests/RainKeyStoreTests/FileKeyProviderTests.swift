import Foundation
import RainCore
import RainCrypto
import RainKeyStore
import Testing

/// A fresh 0700 directory under /tmp, removed when the test ends.
final class KeyStoreDirectory {
    let path: String

    init() throws {
        path = "/tmp/rainkeystore-test-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(
            atPath: path, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

@Suite struct FileKeyProviderTests {
    @Test func keepsEachSecretInItsOwnPrivateFileAndForgetsItOnDelete() throws {
        let directory = try KeyStoreDirectory()
        let provider = FileKeyProvider(stateDirectory: directory.path)
        #expect(try provider.loadSecret(.storage) == nil)
        let storage = try provider.loadOrCreateSecret(.storage)
        let master = try provider.loadOrCreateSecret(.authorityMaster)
        #expect(storage.keyID != master.keyID)
        #expect(try provider.loadSecret(.storage)?.keyID == storage.keyID)
        #expect(try provider.loadSecret(.authorityMaster)?.keyID == master.keyID)
        var info = stat()
        #expect(stat(provider.path(of: .authorityMaster), &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)

        let replacement = try SymmetricKey.random()
        try provider.storeSecret(replacement, slot: .storage)
        #expect(try provider.loadSecret(.storage)?.keyID == replacement.keyID)
        try provider.deleteSecret(.storage)
        #expect(try provider.loadSecret(.storage) == nil)
        try provider.deleteSecret(.storage)
    }

    @Test func theDeviceKeySignsWhatItsPublicKeyVerifiesAndSurvivesAReload() throws {
        let directory = try KeyStoreDirectory()
        let provider = FileKeyProvider(stateDirectory: directory.path)
        #expect(try provider.loadDeviceKey() == nil)
        let signer = try provider.loadOrCreateDeviceKey()
        #expect(signer.publicKey.algorithm == "ed25519")
        let message = Array("rain.bind.v1 test".utf8)
        let signature = try signer.sign(message)
        #expect(signer.publicKey.isValidSignature(signature, for: message))
        #expect(!signer.publicKey.isValidSignature(signature, for: message + [0]))
        let reloaded = try #require(try provider.loadDeviceKey())
        #expect(reloaded.publicKey == signer.publicKey)
        let replaced = try provider.createDeviceKey()
        #expect(replaced.publicKey != signer.publicKey)
        try provider.deleteDeviceKey()
        #expect(try provider.loadDeviceKey() == nil)
    }

    @Test func aLooseKeyFileIsRefusedWithTheFix() throws {
        let directory = try KeyStoreDirectory()
        let provider = FileKeyProvider(stateDirectory: directory.path)
        _ = try provider.loadOrCreateSecret(.storage)
        #expect(chmod(provider.path(of: .storage), 0o644) == 0)
        #expect {
            _ = try provider.loadSecret(.storage)
        } throws: { error in
            (error as? RainError)?.code == .invalidArgument && (error as? RainError)?.details.reason == "key_file_mode"
        }
    }

    @Test func devicePublicKeysRoundTripThroughTheirWireBytesAndRefuseOtherLengths() throws {
        let ed = try Ed25519PrivateKey()
        let p = try P256PrivateKey()
        for key in [DevicePublicKey.ed25519(ed.publicKey), .p256(p.publicKey)] {
            #expect(try DevicePublicKey(wireBytes: key.wireBytes) == key)
        }
        let message = Array("hello".utf8)
        #expect(DevicePublicKey.p256(p.publicKey).isValidSignature(try p.signature(for: message), for: message))
        #expect(throws: RainError.self) { try DevicePublicKey(wireBytes: [UInt8](repeating: 4, count: 33)) }
        #expect(throws: RainError.self) { try DevicePublicKey(wireBytes: [4] + [UInt8](repeating: 1, count: 64)) }
    }
}
