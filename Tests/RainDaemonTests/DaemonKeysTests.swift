import Dispatch
import Foundation
import RainAuthority
import RainConfig
import RainCore
import RainCrypto
import RainKeyStore
import RainTestSupport
import Testing

@testable import RainDaemon
@testable import RainDevice

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

    /// A migration killed after any of its steps, with the config naming the
    /// old provider (never edited) or the new one (edited before migrating) explicitly. The next
    /// start is never refused: it opens the journal's keys, finishes the migration and runs on the
    /// new provider; a config naming the old one gets a warning saying to change it, and only a
    /// later start with it still there is refused (the record rule, exit 78).
    @Test(arguments: StorageMigration.Step.allCases, [KeyProviderKind.file, .tpm2])
    func aStartAfterAKillAtAnyStepWithEitherProviderConfiguredFinishesTheMigration(
        step: StorageMigration.Step, configured: KeyProviderKind
    ) async throws {
        let dir = try Directory()
        let tpm = try SoftwareTPM()
        defer { tpm.stop() }
        var settings = Self.file
        settings.tcti = tpm.tcti
        let first = try DaemonKeys.open(stateDirectory: dir.path, storage: settings, isEmbedded: true, logger: logger)
        let master = try #require(first.masterKey)
        let authority = try await EmbeddedAuthority(
            stateDirectory: "\(dir.path)/authority", masterKey: master, logger: logger)
        let killed = StorageMigration(
            stateDirectory: dir.path, make: DaemonKeys.factory(stateDirectory: dir.path, storage: settings), logger: logger,
            progress: { _ in },
            afterStep: { (done) throws(RainError) in
                if done == step { throw RainError(.internalError, "killed after \(done.rawValue) (test)") }
            })
        await #expect(throws: RainError.self) {
            try await killed.migrate(to: .tpm2, hasMasterKey: true, authority: authority)
        }

        // The next start, with the config naming `configured`.
        var start = settings
        start.provider = .provider(configured)
        let sink = CapturingLogSink()
        let startLogger = Logger(label: "start", minimumLevel: .info, sink: sink)
        _ = try DaemonKeys.selectProvider(stateDirectory: dir.path, storage: start, logger: startLogger, isStart: true)
        #expect(
            sink.captured.contains { $0.contains("storage.provider_migrating") } == ((step < .recorded) == (configured == .tpm2)))
        let keys = try DaemonKeys.open(stateDirectory: dir.path, storage: start, isEmbedded: true, logger: startLogger)
        #expect(keys.pendingMigration?.step == step)
        let (path, configuredStart) = (dir.path, start)
        let finished = try await DispatchQueue(label: "test.finish").runBlocking { () throws(RainError) in
            try DaemonKeys.finishMigration(
                keys, stateDirectory: path, storage: configuredStart, isEmbedded: true, authority: authority,
                logger: startLogger)
        }
        #expect(finished.provider.kind == .tpm2)
        #expect(finished.pendingMigration == nil)
        #expect(finished.masterKey?.keyID == master.keyID)
        #expect(try KeyProviderRecord.read(stateDirectory: dir.path) == .tpm2)
        #expect(sink.captured.contains { $0.contains("storage.provider_outdated") } == (configured == .file))

        // Later starts: the new provider's name (or auto) opens the same keys; the old one is the record rule.
        let later = try DaemonKeys.open(
            stateDirectory: dir.path, storage: settingsNaming(.tpm2, tpm), isEmbedded: true, logger: logger)
        #expect(later.storageKey.keyID == finished.storageKey.keyID)
        let refused = #expect(throws: RainError.self) {
            try DaemonKeys.open(stateDirectory: dir.path, storage: settingsNaming(.file, tpm), isEmbedded: true, logger: logger)
        }
        #expect(refused?.code == .invalidArgument)
        await authority.store.close()
    }

    /// A migration's journal that does not name the configured provider changes nothing: the record rule applies.
    @Test func aConfigNamingNeitherEndOfTheMigrationIsStillRefused() async throws {
        let dir = try Directory()
        _ = try DaemonKeys.open(stateDirectory: dir.path, storage: Self.file, isEmbedded: false, logger: logger)
        let journal = StorageMigration.Journal(from: .file, to: .tpm2, step: .started, hasMasterKey: false)
        try StorageMigration(
            stateDirectory: dir.path, make: DaemonKeys.factory(stateDirectory: dir.path, storage: Self.file), logger: logger
        ).write(journal)
        var settings = StorageSettings()
        settings.provider = .provider(.secretService)
        let error = #expect(throws: RainError.self) {
            try DaemonKeys.selectProvider(stateDirectory: dir.path, storage: settings, logger: logger)
        }
        #expect(error?.code == .invalidArgument)
        #expect(error?.details.field == "storage.provider")
    }

    func settingsNaming(_ kind: KeyProviderKind, _ tpm: SoftwareTPM) -> StorageSettings {
        var settings = StorageSettings()
        settings.provider = .provider(kind)
        settings.tcti = tpm.tcti
        return settings
    }
}
