import Foundation
import RainCore
import RainCrypto
import RainKeyStore
import RainTestSupport
import Synchronization
import Testing

/// A provider whose availability a test sets: stands for tpm2 and secret-service, which this
/// branch does not build.
struct StubProvider: KeyProvider {
    let kind: KeyProviderKind
    let unavailableReason: String?
    var location: String { "stub \(kind.rawValue)" }
    func checkAvailable() throws(RainError) {
        if let unavailableReason {
            throw RainError(.provider, "unavailable (test)", details: RainError.Details(reason: unavailableReason))
        }
    }
    func loadSecret(_ slot: KeySlot) throws(RainError) -> SymmetricKey? { nil }
    func storeSecret(_ key: SymmetricKey, slot: KeySlot) throws(RainError) {}
    func deleteSecret(_ slot: KeySlot) throws(RainError) {}
    func loadDeviceKey() throws(RainError) -> (any DeviceSigner)? { nil }
    func createDeviceKey() throws(RainError) -> any DeviceSigner { SoftwareDeviceSigner(try Ed25519PrivateKey()) }
    func deleteDeviceKey() throws(RainError) {}
}

@Suite struct KeyProviderSelectionTests {
    /// A factory whose tpm2 and secret-service answer with the given reasons (nil: available).
    static func factory(tpm: String?, keyring: String?, directory: String) -> KeyProviderSelection.Factory {
        { (kind) throws(RainError) -> any KeyProvider in
            switch kind {
            case .tpm2: StubProvider(kind: .tpm2, unavailableReason: tpm)
            case .secretService: StubProvider(kind: .secretService, unavailableReason: keyring)
            case .file: FileKeyProvider(stateDirectory: directory)
            }
        }
    }

    @Test(arguments: [
        (String?.none, String?.none, KeyProviderKind.tpm2),
        ("tpm_unavailable", nil, .secretService),
        ("tpm_unavailable", "keyring_locked", .secretService),
        ("tpm_unavailable", "no_secret_service", .file),
        ("provider_not_built", "provider_not_built", .file),
    ])
    func autoPicksTheStrongestAvailableAndRecordsIt(tpm: String?, keyring: String?, expected: KeyProviderKind) throws {
        let directory = try KeyStoreDirectory()
        let make = Self.factory(tpm: tpm, keyring: keyring, directory: directory.path)
        let selection = try KeyProviderSelection.resolve(choice: .auto, stateDirectory: directory.path, make: make)
        #expect(selection.kind == expected)
        #expect(selection.isNewlyRecorded)
        #expect(try KeyProviderRecord.read(stateDirectory: directory.path) == expected)
    }

    @Test func laterStartsUseTheRecordWhateverIsAvailableNow() throws {
        let directory = try KeyStoreDirectory()
        _ = try KeyProviderSelection.resolve(
            choice: .auto, stateDirectory: directory.path, make: Self.factory(tpm: nil, keyring: nil, directory: directory.path))
        // The TPM went away: the record still says tpm2 (never a silent fallback to a weaker provider).
        let later = try KeyProviderSelection.resolve(
            choice: .auto, stateDirectory: directory.path,
            make: Self.factory(tpm: "tpm_unavailable", keyring: nil, directory: directory.path))
        #expect(later.kind == .tpm2)
        #expect(!later.isNewlyRecorded)
    }

    @Test func aConfigNamingAnotherProviderThanTheRecordIsRefusedNamingTheKey() throws {
        let directory = try KeyStoreDirectory()
        try KeyProviderRecord.write(.file, stateDirectory: directory.path)
        let error = #expect(throws: RainError.self) {
            try KeyProviderSelection.resolve(
                choice: .provider(.tpm2), stateDirectory: directory.path,
                make: Self.factory(tpm: nil, keyring: nil, directory: directory.path))
        }
        #expect(error?.code == .invalidArgument)
        #expect(error?.details.field == "storage.provider")
        #expect(error?.message.contains("storage migrate --to tpm2") == true)
        // The same provider as the record is fine.
        #expect(
            try KeyProviderSelection.resolve(
                choice: .provider(.file), stateDirectory: directory.path,
                make: Self.factory(tpm: nil, keyring: nil, directory: directory.path)
            ).kind == .file)
    }

    @Test func anInstallFromBeforeProvidersRecordsFileEvenWithATPMThere() throws {
        let directory = try KeyStoreDirectory()
        _ = try FileKeyProvider(stateDirectory: directory.path).loadOrCreateSecret(.storage)
        let selection = try KeyProviderSelection.resolve(
            choice: .auto, stateDirectory: directory.path, make: Self.factory(tpm: nil, keyring: nil, directory: directory.path))
        #expect(selection.kind == .file)
        #expect(selection.isLegacyInstall)
        #expect(try KeyProviderRecord.read(stateDirectory: directory.path) == .file)
        // Naming tpm2 for it is refused until a migration moved the keys.
        try FileManager.default.removeItem(atPath: KeyProviderRecord.path(stateDirectory: directory.path))
        #expect(throws: RainError.self) {
            try KeyProviderSelection.resolve(
                choice: .provider(.tpm2), stateDirectory: directory.path,
                make: Self.factory(tpm: nil, keyring: nil, directory: directory.path))
        }
    }

    @Test func aDamagedRecordIsRefused() throws {
        let directory = try KeyStoreDirectory()
        try Data("tpm3\n".utf8).write(to: URL(fileURLWithPath: KeyProviderRecord.path(stateDirectory: directory.path)))
        let error = #expect(throws: RainError.self) { try KeyProviderRecord.read(stateDirectory: directory.path) }
        #expect(error?.code == .invalidArgument)
    }

    @Test func theFactoryMakesEveryProviderWithItsSettings() throws {
        for kind in KeyProviderKind.allCases {
            #expect(try KeyProviders.make(kind: kind, stateDirectory: "/tmp", tcti: "swtpm:path=/x").kind == kind)
        }
    }
}

@Suite struct MasterKeyBackupTests {
    let passphrase = Array("correct horse battery".utf8)

    @Test func roundTripsAndNamesTheKey() throws {
        let master = try SymmetricKey.random()
        let bytes = try MasterKeyBackup.seal(master, passphrase: passphrase, iterations: 100_000)
        #expect(MasterKeyBackup.keyID(of: bytes) == master.keyID)
        #expect(try MasterKeyBackup.open(bytes, passphrase: passphrase).keyID == master.keyID)
        // The key's bytes are not in the file.
        let raw = master.withUnsafeBytes { Array($0) }
        #expect(!bytes.indices.dropLast(31).contains { Array(bytes[$0..<$0 + 32]) == raw })
    }

    @Test func aWrongPassphraseOrAnyChangedByteDoesNotOpen() throws {
        let bytes = try MasterKeyBackup.seal(try SymmetricKey.random(), passphrase: passphrase, iterations: 100_000)
        let wrong = #expect(throws: RainError.self) { try MasterKeyBackup.open(bytes, passphrase: Array("not the one!".utf8)) }
        #expect(wrong?.details.reason == "wrong_passphrase")
        // A header byte (the key id), the salt and the ciphertext are all authenticated.
        for index in [30, 12, bytes.count - 1] {
            var changed = bytes
            changed[index] ^= 1
            #expect(throws: RainError.self) { try MasterKeyBackup.open(changed, passphrase: passphrase) }
        }
    }

    @Test func weakSettingsAreRefused() throws {
        let master = try SymmetricKey.random()
        #expect(throws: RainError.self) { try MasterKeyBackup.seal(master, passphrase: Array("short".utf8)) }
        #expect(throws: RainError.self) { try MasterKeyBackup.seal(master, passphrase: passphrase, iterations: 1000) }
        // A file naming few iterations (crafted to make guessing cheap) is refused before any guess.
        var bytes = try MasterKeyBackup.seal(master, passphrase: passphrase, iterations: 100_000)
        bytes[5...8] = [0, 0, 0, 1]
        let error = #expect(throws: RainError.self) { try MasterKeyBackup.open(bytes, passphrase: passphrase) }
        #expect(error?.details.reason == nil)
    }

    /// A TPM whose owner hierarchy has a password answers GetRandom, but no key
    /// can be sealed under it: `auto` must not record it (the daemon would stay loading with
    /// `tpm_owner_auth` for good) and takes the next provider instead. The same TPM without the
    /// password is taken (the control).
    @Test(arguments: [false, true])
    func autoSkipsATPMWhoseOwnerHierarchyHasAPassword(hasOwnerPassword: Bool) throws {
        let tpm = try SoftwareTPM()
        defer { tpm.stop() }
        if hasOwnerPassword {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/tpm2_changeauth")
            process.arguments = ["-T", tpm.tcti, "-c", "owner", "rain-owner-password"]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try DaemonHarness.withProcessLaunchLock { try process.run() }
            process.waitUntilExit()
            try #require(process.terminationStatus == 0, "tpm2_changeauth failed (Debian package tpm2-tools)")
        }
        let directory = try KeyStoreDirectory()
        let (path, tcti) = (directory.path, tpm.tcti)
        let make: KeyProviderSelection.Factory = { (kind) throws(RainError) -> any KeyProvider in
            switch kind {
            case .tpm2: TPM2KeyProvider(stateDirectory: path, tcti: tcti)
            case .secretService: StubProvider(kind: .secretService, unavailableReason: "no_secret_service")
            case .file: FileKeyProvider(stateDirectory: path)
            }
        }
        // It answers either way.
        try TPM2KeyProvider(stateDirectory: path, tcti: tcti).checkAvailable()
        let selection = try KeyProviderSelection.resolve(choice: .auto, stateDirectory: path, make: make)
        #expect(selection.kind == (hasOwnerPassword ? .file : .tpm2))
        #expect(try KeyProviderRecord.read(stateDirectory: path) == selection.kind)
    }
}
