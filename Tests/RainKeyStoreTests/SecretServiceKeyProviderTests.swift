import Foundation
import RainCore
import RainCrypto
import RainKeyStore
import RainTestSupport
import Testing

/// The tests share this process's keyring (`TestKeyring.shared()`: libsecret keeps one session bus
/// per process) and run one at a time; each uses its own state directory, so its items are its own.
@Suite(.serialized) struct SecretServiceKeyProviderTests {
    let keyring: TestKeyring
    let stateDirectory = "/home/test/.local/state/rainwallet-\(UUID().uuidString.prefix(8))"

    init() throws { keyring = try TestKeyring.shared() }

    func provider(stateDirectory: String? = nil, timeout: Duration = .seconds(2)) -> SecretServiceKeyProvider {
        SecretServiceKeyProvider(
            stateDirectory: stateDirectory ?? self.stateDirectory, environment: ProcessInfo.processInfo.environment,
            timeout: timeout)
    }

    @Test func keepsEachSecretInTheKeyringAndForgetsItOnDelete() throws {
        let provider = provider()
        #expect(provider.kind == .secretService)
        #expect(provider.location.contains("default collection"))
        try provider.checkAvailable()

        #expect(try provider.loadSecret(.storage) == nil)
        let storage = try provider.loadOrCreateSecret(.storage)
        let master = try provider.loadOrCreateSecret(.authorityMaster)
        #expect(storage.keyID != master.keyID)
        #expect(try provider.loadSecret(.storage)?.keyID == storage.keyID)
        #expect(try provider.loadSecret(.authorityMaster)?.keyID == master.keyID)
        // A fresh provider value (a restarted daemon) finds the same keys.
        #expect(try self.provider().loadSecret(.storage)?.keyID == storage.keyID)

        let replacement = try SymmetricKey.random()
        try provider.storeSecret(replacement, slot: .storage)
        #expect(try provider.loadSecret(.storage)?.keyID == replacement.keyID)
        #expect(try provider.loadSecret(.authorityMaster)?.keyID == master.keyID)

        try provider.deleteSecret(.storage)
        #expect(try provider.loadSecret(.storage) == nil)
        #expect(try provider.loadSecret(.authorityMaster)?.keyID == master.keyID)
        try provider.deleteSecret(.storage)
        try provider.deleteSecret(.authorityMaster)
        #expect(try provider.loadSecret(.authorityMaster) == nil)
    }

    @Test func anotherStateDirectoryHasItsOwnItems() throws {
        let mine = provider()
        let other = provider(stateDirectory: "/home/test/other-state")
        let key = try mine.loadOrCreateSecret(.storage)
        _ = try mine.loadOrCreateDeviceKey()
        #expect(try other.loadSecret(.storage) == nil)
        #expect(try other.loadDeviceKey() == nil)
        let otherKey = try other.loadOrCreateSecret(.storage)
        #expect(otherKey.keyID != key.keyID)
        try other.deleteSecret(.storage)
        try other.deleteDeviceKey()
        #expect(try mine.loadSecret(.storage)?.keyID == key.keyID)
        #expect(try mine.loadDeviceKey() != nil)
    }

    @Test func theDeviceKeySignsWhatItsPublicKeyVerifiesAndSurvivesAReload() throws {
        let provider = provider()
        #expect(try provider.loadDeviceKey() == nil)
        let signer = try provider.loadOrCreateDeviceKey()
        #expect(signer.publicKey.algorithm == "ed25519")
        let message = Array("rain.bind.v1 test".utf8)
        let signature = try signer.sign(message)
        #expect(signer.publicKey.isValidSignature(signature, for: message))
        #expect(!signer.publicKey.isValidSignature(signature, for: message + [0]))
        let reloaded = try #require(try self.provider().loadDeviceKey())
        #expect(reloaded.publicKey == signer.publicKey)
        #expect(reloaded.publicKey.isValidSignature(try reloaded.sign(message), for: message))
        // The device key is an item of its own, not one of the slots.
        #expect(try provider.loadSecret(.storage) == nil)
        let replaced = try provider.createDeviceKey()
        #expect(replaced.publicKey != signer.publicKey)
        #expect(try provider.loadDeviceKey()?.publicKey == replaced.publicKey)
        try provider.deleteDeviceKey()
        #expect(try provider.loadDeviceKey() == nil)
    }

    @Test func aLockedKeyringIsKeyringLockedUntilItIsUnlockedAgain() throws {
        let provider = provider()
        let key = try provider.loadOrCreateSecret(.storage)
        _ = try provider.loadOrCreateDeviceKey()
        try keyring.lock()

        let checks: [(String, () throws(RainError) -> Void)] = [
            ("checkAvailable", { () throws(RainError) in try provider.checkAvailable() }),
            ("loadSecret", { () throws(RainError) in _ = try provider.loadSecret(.storage) }),
            ("loadDeviceKey", { () throws(RainError) in _ = try provider.loadDeviceKey() }),
            ("storeSecret", { () throws(RainError) in try provider.storeSecret(try SymmetricKey.random(), slot: .storage) }),
            ("deleteSecret", { () throws(RainError) in try provider.deleteSecret(.storage) }),
        ]
        for (name, check) in checks {
            let error = #expect(throws: RainError.self, "\(name)") { try check() }
            #expect(error?.code == .provider, "\(name)")
            #expect(error?.details.reason == "keyring_locked", "\(name)")
            #expect(error?.message.contains("unlock") == true, "\(name)")
        }

        try keyring.restartUnlocked()
        try provider.checkAvailable()
        #expect(try provider.loadSecret(.storage)?.keyID == key.keyID)
        #expect(try provider.loadDeviceKey() != nil)
    }

    @Test(arguments: [
        ["DBUS_SESSION_BUS_ADDRESS": "unix:path=/tmp/rainkr-missing/bus"],
        ["XDG_RUNTIME_DIR": "/tmp/rainkr-missing"],
        [:],
    ])
    func noSessionBusIsNoSecretServiceAtOnce(environment: [String: String]) throws {
        let provider = SecretServiceKeyProvider(
            stateDirectory: stateDirectory, environment: environment, timeout: .seconds(30))
        let start = ContinuousClock.now
        let error = #expect(throws: RainError.self) { try provider.loadSecret(.storage) }
        #expect(error?.code == .provider)
        #expect(error?.details.reason == "no_secret_service")
        #expect(error?.message.contains("storage.provider") == true)
        let checkError = #expect(throws: RainError.self) { try provider.checkAvailable() }
        #expect(checkError?.details.reason == "no_secret_service")
        // At once, not after the 30 s timeout (the margin is for a loaded machine).
        #expect(ContinuousClock.now - start < .seconds(10))
    }

    @Test func aBusWithoutTheSecretServiceIsNoSecretService() throws {
        try keyring.stopKeyringOnly()
        let error = #expect(throws: RainError.self) { try provider().checkAvailable() }
        #expect(error?.code == .provider)
        #expect(error?.details.reason == "no_secret_service")
        try keyring.restartUnlocked()
        try provider().checkAvailable()
    }

    @Test func aSecretServiceThatDoesNotAnswerIsNoSecretServiceAfterTheTimeout() throws {
        let provider = provider(timeout: .milliseconds(500))
        try provider.checkAvailable()
        keyring.freeze()
        defer { keyring.thaw() }
        let start = ContinuousClock.now
        let error = #expect(throws: RainError.self) { try provider.loadSecret(.storage) }
        #expect(error?.code == .provider)
        #expect(error?.details.reason == "no_secret_service")
        // The 500 ms timeout, not D-Bus's own 25 s (the margin is for a loaded machine).
        #expect(ContinuousClock.now - start < .seconds(10))
    }

    @Test(arguments: ["not a key", "AAAAAAAAAAAAAAAAAAAAAA=="])
    func anItemThatIsNotAKeyIsRefusedNotUsed(secret: String) throws {
        let provider = provider()
        try keyring.storeItem(
            attributes: [
                "xdg:schema": SecretServiceKeyProvider.schemaName, "state-directory": stateDirectory,
                "key": "storage",
            ], secret: secret)
        let error = #expect(throws: RainError.self) { try provider.loadSecret(.storage) }
        #expect(error?.code == .invalidArgument)
        #expect(error?.details.reason == "damaged_key")
        try provider.deleteSecret(.storage)
        #expect(try provider.loadSecret(.storage) == nil)
    }
}
