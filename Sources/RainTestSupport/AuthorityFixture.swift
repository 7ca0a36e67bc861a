import Foundation
import RainAuthority
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainStore
import RainWire
import Synchronization

/// One authority on a real SQLite file in its own temp directory, a manual clock, a capturing
/// sender and a capturing log sink.
package struct AuthorityFixture {
    package let directory: String
    package let clock: ManualClock
    package let sender: CapturingCodeSender
    package let store: SQLiteAuthorityStore
    package let keys: AuthorityKeys
    package let logSink: CapturingLogSink
    package let authority: EmbeddedAuthority

    package static let app = "app-one"
    package static let email = RainWalletContact.email("user@example.com")
    package static let phone = RainWalletContact.phone("+15551234567")

    /// Runs `body` with a fresh fixture and removes its directory afterwards. The send limits are
    /// off unless `settings` turns them on: these tests send codes back to back on a stopped clock
    /// (the limits have their own tests, `SendLimitTests`).
    package static func with(
        settings: AuthoritySettings = AuthoritySettings(sendLimits: .unlimited), outbox: OutboxCodeSender? = nil,
        _ body: (AuthorityFixture) async throws -> Void
    ) async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let clock = ManualClock()
        let sender = CapturingCodeSender()
        let store = try await SQLiteAuthorityStore.open(stateDirectory: directory)
        let keys = try AuthorityKeys(masterKey: SymmetricKey(bytes: Array(repeating: 7, count: 32)))
        let sink = CapturingLogSink()
        let logger = Logger(label: "test.authority", minimumLevel: .debug, sink: sink)
        let authority = EmbeddedAuthority(
            store: store, keys: keys, settings: settings, clock: clock, sender: outbox ?? sender, outbox: outbox,
            logger: logger)
        let fixture = AuthorityFixture(
            directory: directory, clock: clock, sender: sender, store: store, keys: keys, logSink: sink,
            authority: authority)
        try await body(fixture)
        await store.close()
    }

    /// Sends a code and returns the challenge with the code that was delivered.
    package func send(
        _ contact: RainWalletContact = AuthorityFixture.email, device: String = "device-a",
        app: String = AuthorityFixture.app
    ) async throws -> (challenge: SendCodeResult, code: String) {
        let result = try await authority.sendLoginCode(SendCodeRequest(appID: app, deviceID: device, contact: contact))
        return (result, try sender.lastCode(to: contact))
    }

    /// Confirms a code; the session is bound to `deviceKey` (the fixture device's by default; nil:
    /// unbound).
    package func confirm(
        _ challenge: SendCodeResult, code: String, device: String = "device-a", app: String = AuthorityFixture.app,
        deviceKey: Ed25519PrivateKey? = FixtureDevice.key
    ) async throws -> LoginResult {
        try await authority.confirmLoginCode(
            ConfirmCodeRequest(
                appID: app, deviceID: device, challengeID: challenge.challengeID, code: code,
                devicePublicKey: deviceKey?.publicKey.rawRepresentation ?? []))
    }

    /// Sends and confirms; the session is bound to `deviceKey` (the fixture device's by default).
    package func login(
        _ contact: RainWalletContact = AuthorityFixture.email, device: String = "device-a",
        app: String = AuthorityFixture.app, deviceKey: Ed25519PrivateKey? = FixtureDevice.key
    ) async throws -> LoginResult {
        let (challenge, code) = try await send(contact, device: device, app: app)
        return try await confirm(challenge, code: code, device: device, app: app, deviceKey: deviceKey)
    }

    /// Refreshes `refreshToken` as `device` would, having proven `key`.
    package func refresh(
        _ refreshToken: String, key: Ed25519PrivateKey, device: String = "device-a", app: String = AuthorityFixture.app
    ) async throws -> SessionTokens {
        try await authority.refreshSession(
            RefreshRequest(appID: app, deviceID: device, refreshToken: refreshToken),
            proof: TestDeviceKeys(deviceID: device, keys: [key]).proof)
    }

    /// The one session of `accountID` in the fixture's app whose device is `device`, newest first.
    package func session(_ accountID: String, device: String = "device-a") async throws -> SessionRecord {
        guard
            let session = try await store.sessions(appID: AuthorityFixture.app, accountID: accountID).last(where: {
                $0.deviceID == device
            })
        else { throw HarnessError("no session of \(accountID) on \(device)") }
        return session
    }
}

/// A new 0700 directory under /tmp (short, unique per test).
package func makeTemporaryDirectory() throws -> String {
    let path = "/tmp/rain-authority-" + UUID().uuidString.lowercased().prefix(13)
    try FileManager.default.createDirectory(
        atPath: path, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
    return path
}

/// A 6-digit code that differs from `code` in every digit.
package func wrongCode(for code: String) -> String {
    String(code.map { Character(String(((Int(String($0)) ?? 0) + 1) % 10)) })
}
