import Foundation
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainKeyStore
import RainTestSupport
import RainWire
import Synchronization
import Testing

@testable import RainDevice

/// Keys in memory, kept across "restarts" (each `make` returns a provider over the same vault):
/// the target provider of the migration tests.
final class MemoryKeyVault: Sendable {
    struct Contents {
        var secrets: [KeySlot: [UInt8]] = [:]
        var device: Ed25519PrivateKey?
    }
    let contents = Mutex(Contents())

    func provider(_ kind: KeyProviderKind) -> MemoryKeyProvider { MemoryKeyProvider(kind: kind, vault: self) }
}

struct MemoryKeyProvider: KeyProvider {
    let kind: KeyProviderKind
    let vault: MemoryKeyVault
    var location: String { "memory (\(kind.rawValue), test)" }
    func checkAvailable() throws(RainError) {}
    func loadSecret(_ slot: KeySlot) throws(RainError) -> SymmetricKey? {
        vault.contents.withLock { $0.secrets[slot] }.map { SymmetricKey(bytes: $0) }
    }
    func storeSecret(_ key: SymmetricKey, slot: KeySlot) throws(RainError) {
        let bytes = key.withUnsafeBytes { Array($0) }
        vault.contents.withLock { $0.secrets[slot] = bytes }
    }
    func deleteSecret(_ slot: KeySlot) throws(RainError) { vault.contents.withLock { $0.secrets[slot] = nil } }
    func loadDeviceKey() throws(RainError) -> (any DeviceSigner)? {
        vault.contents.withLock { $0.device }.map { SoftwareDeviceSigner($0) }
    }
    func createDeviceKey() throws(RainError) -> any DeviceSigner {
        let key = try Ed25519PrivateKey()
        vault.contents.withLock { $0.device = key }
        return SoftwareDeviceSigner(key)
    }
    func deleteDeviceKey() throws(RainError) { vault.contents.withLock { $0.device = nil } }
}

/// An authority that only binds device keys: it keeps the keys it accepts for the device, as the
/// two-step rebind says (old and new after `rebindDevice`, the new one alone after `confirmDeviceKey`).
final class KeyBindingAuthority: ForwardingAuthority {
    struct State {
        var accepted: [DevicePublicKey] = []
        var calls: [String] = []
        var failNext = false
    }
    let state = Mutex(State())

    init(accepting key: DevicePublicKey) { state.withLock { $0.accepted = [key] } }

    var accepted: [DevicePublicKey] { state.withLock { $0.accepted } }
    var calls: [String] { state.withLock { $0.calls } }
    func failNextCall() { state.withLock { $0.failNext = true } }

    private func take(_ name: String) throws(RainError) {
        let fail = state.withLock { s -> Bool in
            s.calls.append(name)
            defer { s.failNext = false }
            return s.failNext
        }
        if fail { throw RainError(.network, "authority unreachable (test)") }
    }

    func rebindDevice(_ request: AuthorityRebindDeviceRequest, caller: AuthorityCaller) async throws(RainError)
        -> AuthorityRebindDeviceResponse
    {
        try take("rebind")
        let newKey = try DevicePublicKey(wireBytes: request.newPublicKey)
        let proof = caller.proof
        let ok = state.withLock { s -> Bool in
            guard proof.contains(newKey), s.accepted.contains(where: proof.contains) else { return false }
            if !s.accepted.contains(newKey) { s.accepted.append(newKey) }
            return true
        }
        if !ok { throw RainError(.provider, "proof lacks a key", details: RainError.Details(reason: "device_proof_required")) }
        return AuthorityRebindDeviceResponse()
    }

    func confirmDeviceKey(_ request: AuthorityConfirmDeviceKeyRequest, caller: AuthorityCaller) async throws(RainError)
        -> AuthorityConfirmDeviceKeyResponse
    {
        try take("confirm")
        let key = try DevicePublicKey(wireBytes: request.devicePublicKey)
        let proof = caller.proof
        let ok = state.withLock { s -> Bool in
            guard proof.contains(key), s.accepted.contains(key) else { return false }
            s.accepted = [key]
            return true
        }
        if !ok { throw RainError(.provider, "proof lacks the key", details: RainError.Details(reason: "device_proof_required")) }
        return AuthorityConfirmDeviceKeyResponse()
    }

    /// Never reached: every other call is refused in `intercept`.
    var forwarded: any Authority { self }

    func intercept<Response>(_ method: String, _ call: () async throws(RainError) -> Response) async throws(RainError)
        -> Response
    {
        throw RainError(.provider, "not used by these tests")
    }
}

@Suite struct StorageMigrationTests {
    let dir = TempDir()
    let vault = MemoryKeyVault()
    let logger = Logger(label: "test", minimumLevel: .error, sink: CapturingLogSink())
    static let profiles = ["default", "other-app"]

    var make: KeyProviderSelection.Factory {
        let (path, vault) = (dir.path, vault)
        return { (kind) throws(RainError) -> any KeyProvider in
            kind == .file ? FileKeyProvider(stateDirectory: path) : vault.provider(kind)
        }
    }

    func session(_ n: Int) -> StoredSession {
        StoredSession(
            accountID: "acct_\(n)", walletID: "wal_\(n)", accessToken: "rwa_a\(n)", refreshToken: "rwr_r\(n)",
            expiresAt: Date(unixMilliseconds: 1_900_000_000_000), lifetimeSeconds: 900, contact: .email("u\(n)@example.com"))
    }

    /// A `file` install with two sessions and a master key, and an authority accepting its device key.
    func install() async throws -> (master: SymmetricKey, oldStorage: SymmetricKey, authority: KeyBindingAuthority) {
        let files = FileKeyProvider(stateDirectory: dir.path)
        try KeyProviderRecord.write(.file, stateDirectory: dir.path)
        let storageKey = try files.loadOrCreateSecret(.storage)
        let master = try files.loadOrCreateSecret(.authorityMaster)
        let device = try DeviceIdentity.loadOrCreate(stateDirectory: dir.path, provider: files)
        let storage = try EncryptedFileStorage(stateDirectory: dir.path, key: storageKey, logger: logger)
        for (n, profile) in Self.profiles.enumerated() { try await storage.save(session(n), profile: profile) }
        return (master, storageKey, KeyBindingAuthority(accepting: device.signer.publicKey))
    }

    func migration(killingAfter killStep: StorageMigration.Step? = nil) -> StorageMigration {
        StorageMigration(
            stateDirectory: dir.path, make: make, logger: logger, progress: { _ in },
            afterStep: { (step) throws(RainError) in
                if step == killStep { throw RainError(.internalError, "killed after \(step.rawValue) (test)") }
            })
    }

    /// What a daemon started now would see: every session opens, and its device key is one the authority accepts.
    func expectEverySessionUsable(authority: KeyBindingAuthority) async throws {
        let m = migration()
        let storageKey: SymmetricKey
        let previous: [SymmetricKey]
        let signers: [DevicePublicKey]
        if let journal = try m.pendingJournal() {
            let keys = try m.startKeys(journal)
            (storageKey, previous, signers) = (keys.storageKey, keys.previousStorageKeys, keys.device.signers.map(\.publicKey))
        } else {
            let provider = try make(try #require(try KeyProviderRecord.read(stateDirectory: dir.path)))
            storageKey = try #require(try provider.loadSecret(.storage))
            previous = []
            signers = [try #require(try provider.loadDeviceKey()).publicKey]
        }
        let storage = try EncryptedFileStorage(stateDirectory: dir.path, key: storageKey, previousKeys: previous, logger: logger)
        for (n, profile) in Self.profiles.enumerated() {
            #expect(await storage.load(profile: profile) == session(n), "profile \(profile)")
        }
        // The key the daemon signs refreshes with (the current one) is accepted at the authority.
        #expect(authority.accepted.contains(signers[0]))
    }

    @Test func movesEveryKeyAndTheOldStorageKeyOpensNoNewFile() async throws {
        let (master, oldStorage, authority) = try await install()
        let lines = Mutex<[String]>([])
        let m = StorageMigration(
            stateDirectory: dir.path, make: make, logger: logger, progress: { line in lines.withLock { $0.append(line) } })
        try await m.migrate(to: .secretService, hasMasterKey: true, authority: authority)

        #expect(try KeyProviderRecord.read(stateDirectory: dir.path) == .secretService)
        #expect(try m.pendingJournal() == nil)
        #expect(authority.calls == ["rebind", "confirm"])
        let target = vault.provider(.secretService)
        // The master key moves unchanged (the database derives from it); the storage and device keys are new.
        #expect(try target.loadSecret(.authorityMaster)?.keyID == master.keyID)
        #expect(try target.loadSecret(.storage)?.keyID != oldStorage.keyID)
        #expect(authority.accepted == [try #require(try target.loadDeviceKey()).publicKey])
        // The old keys are gone from the files.
        let files = FileKeyProvider(stateDirectory: dir.path)
        #expect(try files.loadSecret(.storage) == nil)
        #expect(try files.loadSecret(.authorityMaster) == nil)
        #expect(try files.loadDeviceKey() == nil)
        // An old copy of storage.key opens none of the new files.
        let stale = try EncryptedFileStorage(stateDirectory: TempDir().path, key: oldStorage, logger: logger)
        for profile in Self.profiles {
            let bytes = try #require(FileManager.default.contents(atPath: "\(dir.path)/sessions/\(profile).session"))
            guard case .failure = stale.open(Array(bytes), profile: profile) else {
                Issue.record("the old storage key opened \(profile)")
                continue
            }
        }
        try await expectEverySessionUsable(authority: authority)
        #expect(lines.withLock { $0.count } >= 6)
    }

    @Test(arguments: StorageMigration.Step.allCases)
    func aKillAfterAnyStepLeavesEverySessionUsableAndTheNextRunFinishes(step: StorageMigration.Step) async throws {
        let (master, _, authority) = try await install()
        await #expect(throws: RainError.self) {
            try await migration(killingAfter: step).migrate(to: .tpm2, hasMasterKey: true, authority: authority)
        }
        #expect(try migration().pendingJournal()?.step == step)
        try await expectEverySessionUsable(authority: authority)

        try await migration().resume(authority: authority)
        #expect(try migration().pendingJournal() == nil)
        #expect(try KeyProviderRecord.read(stateDirectory: dir.path) == .tpm2)
        #expect(try vault.provider(.tpm2).loadSecret(.authorityMaster)?.keyID == master.keyID)
        try await expectEverySessionUsable(authority: authority)
    }

    @Test func anAuthorityThatCannotBeReachedLeavesTheMigrationResumable() async throws {
        let (_, _, authority) = try await install()
        authority.failNextCall()
        await #expect(throws: RainError.self) {
            try await migration().migrate(to: .tpm2, hasMasterKey: true, authority: authority)
        }
        #expect(try migration().pendingJournal()?.step == .keysCreated)
        try await expectEverySessionUsable(authority: authority)
        // Running the command again finishes it.
        try await migration().migrate(to: .tpm2, hasMasterKey: true, authority: authority)
        #expect(try KeyProviderRecord.read(stateDirectory: dir.path) == .tpm2)
        try await expectEverySessionUsable(authority: authority)
    }

    @Test func refusesTheSameProviderAndAnotherTargetWhileOneIsPending() async throws {
        let (_, _, authority) = try await install()
        let same = await #expect(throws: RainError.self) {
            try await migration().migrate(to: .file, hasMasterKey: true, authority: authority)
        }
        #expect(same?.code == .invalidArgument)
        await #expect(throws: RainError.self) {
            try await migration(killingAfter: .rebound).migrate(to: .tpm2, hasMasterKey: true, authority: authority)
        }
        let other = await #expect(throws: RainError.self) {
            try await migration().migrate(to: .secretService, hasMasterKey: true, authority: authority)
        }
        #expect(other?.code == .invalidArgument)
    }

    @Test func theRunningIdentitySwitchesKeysAsTheAuthorityAccepts() async throws {
        let (_, _, authority) = try await install()
        let device = try DeviceIdentity.loadOrCreate(
            stateDirectory: dir.path, provider: FileKeyProvider(stateDirectory: dir.path))
        let old = device.signer.publicKey
        await #expect(throws: RainError.self) {
            try await migration(killingAfter: .reencrypted).migrate(
                to: .tpm2, hasMasterKey: true, authority: authority, device: device)
        }
        #expect(device.signers.count == 2)
        #expect(device.signers[1].publicKey == old)
        try await migration().resume(authority: authority, device: device)
        #expect(device.signers.map(\.publicKey) == authority.accepted)
    }
}
