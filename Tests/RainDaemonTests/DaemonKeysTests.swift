import Foundation
import RainCore
import RainCrypto
import RainDevice
import RainKeyStore
import Testing

@testable import RainDaemon

@Suite struct DaemonKeysTests {
    final class Directory {
        let path = "/tmp/rwdk-\(UInt32.random(in: 0...UInt32.max))"
        init() throws {
            try FileManager.default.createDirectory(
                atPath: path, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        }
        deinit { try? FileManager.default.removeItem(atPath: path) }
    }

    let logger = Logger(label: "test", minimumLevel: .error, sink: CapturingLogSink())
    /// The `file` provider named: `auto` would take a keyring or TPM the machine has.
    static let file: StorageSettings = {
        var settings = StorageSettings()
        settings.provider = .provider(.file)
        return settings
    }()

    @Test func aFirstStartRecordsTheProviderAndLaterStartsFindTheSameKeys() throws {
        let dir = try Directory()
        let first = try DaemonKeys.open(stateDirectory: dir.path, storage: Self.file, isEmbedded: true, logger: logger)
        #expect(first.provider.kind == .file)
        #expect(try KeyProviderRecord.read(stateDirectory: dir.path) == .file)
        let again = try DaemonKeys.open(stateDirectory: dir.path, storage: Self.file, isEmbedded: true, logger: logger)
        #expect(again.storageKey.keyID == first.storageKey.keyID)
        #expect(again.masterKey?.keyID == first.masterKey?.keyID)
        #expect(again.device.signer.publicKey == first.device.signer.publicKey)
    }

    @Test func aRemoteAuthorityDeviceMakesNoMasterKey() throws {
        let dir = try Directory()
        let keys = try DaemonKeys.open(stateDirectory: dir.path, storage: Self.file, isEmbedded: false, logger: logger)
        #expect(keys.masterKey == nil)
        #expect(try FileKeyProvider(stateDirectory: dir.path).loadSecret(.authorityMaster) == nil)
    }

    @Test func aMissingMasterKeyBesideTheDatabaseIsRefusedNotReplaced() throws {
        let dir = try Directory()
        _ = try DaemonKeys.open(stateDirectory: dir.path, storage: Self.file, isEmbedded: true, logger: logger)
        _ = FileManager.default.createFile(atPath: DaemonKeys.authorityDatabase(stateDirectory: dir.path), contents: Data())
        try FileKeyProvider(stateDirectory: dir.path).deleteSecret(.authorityMaster)
        let error = #expect(throws: RainError.self) {
            try DaemonKeys.open(stateDirectory: dir.path, storage: Self.file, isEmbedded: true, logger: logger)
        }
        #expect(error?.details.reason == "master_key_missing")
        #expect(try FileKeyProvider(stateDirectory: dir.path).loadSecret(.authorityMaster) == nil)
    }

    @Test func aConfigNamingAProviderThisBuildLacksIsAClearError() throws {
        let dir = try Directory()
        var settings = StorageSettings()
        settings.provider = .provider(.tpm2)
        let error = #expect(throws: RainError.self) {
            try DaemonKeys.open(stateDirectory: dir.path, storage: settings, isEmbedded: true, logger: logger)
        }
        #expect(error?.code == .provider)
    }

    @Test func storageSubcommandsParse() throws {
        let parsed = try Daemon.parseCommandLine(["storage", "migrate", "--to", "tpm2", "--state-dir", "/d"])
        #expect(parsed.commandNames == ["storage", "migrate"])
        #expect(parsed.value("--to") == "tpm2")
        #expect(throws: RainError.self) { try Daemon.parseCommandLine(["storage", "migrate", "--to", "kernel"]) }
        #expect(throws: RainError.self) { try Daemon.parseCommandLine(["storage", "backup"]) }
    }
}
