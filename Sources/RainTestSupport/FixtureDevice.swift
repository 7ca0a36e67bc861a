import RainAuthorityAPI
import RainCore
import RainCrypto
import RainWire

/// The device key the fixtures bind sessions to by default (every call with a token needs
/// a proof of the session's key), and the proof the calls below give.
package enum FixtureDevice {
    package static let key: Ed25519PrivateKey = {
        do {
            return try Ed25519PrivateKey(rawRepresentation: Array(repeating: 0x42, count: 32))
        } catch {
            preconditionFailure("32 bytes are an Ed25519 key: \(error)")
        }
    }()
    /// The fixture device's keys (the device id does not matter to the binding: the key does).
    package static let keys = TestDeviceKeys(deviceID: "device-a", keys: [key])
    /// An in-process proof of `key`.
    package static var proof: DeviceProof { keys.proof }
}

// The token calls as the tests written before the device binding make them: proven with the
// fixture device's key, which `AuthorityFixture` and `RemoteFixture` bind their logins to.
extension Authority {
    package func accountInfo(appID: String, accessToken: String) async throws(RainError) -> AccountInfo {
        try await accountInfo(appID: appID, accessToken: accessToken, proof: FixtureDevice.proof)
    }
    package func wallet(appID: String, accessToken: String) async throws(RainError) -> WalletInfo {
        try await wallet(appID: appID, accessToken: accessToken, proof: FixtureDevice.proof)
    }
    package func exportWallet(appID: String, accessToken: String) async throws(RainError) -> WalletSecrets {
        try await exportWallet(appID: appID, accessToken: accessToken, proof: FixtureDevice.proof)
    }
    package func revokeSession(appID: String, refreshToken: String) async throws(RainError) {
        try await revokeSession(appID: appID, refreshToken: refreshToken, proof: FixtureDevice.proof)
    }
    package func beginPasskeyRegistration(_ request: PasskeyBeginRequest) async throws(RainError) -> PasskeyCeremony {
        try await beginPasskeyRegistration(request, proof: FixtureDevice.proof)
    }
    package func sendContactVerificationCode(appID: String, deviceID: String, accessToken: String, contact: RainWalletContact)
        async throws(RainError) -> SendCodeResult
    {
        try await sendContactVerificationCode(
            appID: appID, deviceID: deviceID, accessToken: accessToken, contact: contact, proof: FixtureDevice.proof)
    }
    package func sendContactVerificationCode(
        appID: String, deviceID: String, accessToken: String, contact: RainWalletContact, source: SendSource
    ) async throws(RainError) -> SendCodeResult {
        try await sendContactVerificationCode(
            appID: appID, deviceID: deviceID, accessToken: accessToken, contact: contact, proof: FixtureDevice.proof,
            source: source)
    }
    package func confirmContactVerification(
        appID: String, deviceID: String, accessToken: String, challengeID: String, code: String,
        idempotencyKey: [UInt8] = []
    ) async throws(RainError) -> AccountInfo {
        try await confirmContactVerification(
            appID: appID, deviceID: deviceID, accessToken: accessToken, challengeID: challengeID, code: code,
            proof: FixtureDevice.proof, idempotencyKey: idempotencyKey)
    }
    package func refreshSession(_ request: RefreshRequest) async throws(RainError) -> SessionTokens {
        try await refreshSession(request, proof: FixtureDevice.proof)
    }
}
