import RainAuthorityAPI
import RainCore
import RainCrypto
import RainWire

// The `Authority` calls as the tests make them: named arguments and the proof given, over the
// protocol's one-request-one-response requirements, answered with what the test looks at. A test
// of a new rpc calls its requirement directly.
extension Authority {
    package func sendLoginCode(_ request: SendCodeRequest, source: SendSource? = nil) async throws(RainError)
        -> SendCodeResult
    {
        try await sendLoginCode(request, caller: AuthorityCaller(source: source))
    }

    package func confirmLoginCode(_ request: ConfirmCodeRequest, source: SendSource? = nil) async throws(RainError)
        -> LoginResult
    {
        try await confirmLoginCode(request, caller: AuthorityCaller(source: source))
    }

    package func refreshSession(_ request: RefreshRequest, proof: DeviceProof) async throws(RainError) -> SessionTokens {
        try await refreshSession(request, caller: AuthorityCaller(proof: proof)).tokens
    }

    package func accountInfo(appID: String, accessToken: String, proof: DeviceProof) async throws(RainError)
        -> AccountInfo
    {
        try await getAccountInfo(
            AuthorityAccountInfoRequest(appID: appID, accessToken: accessToken), caller: AuthorityCaller(proof: proof))
    }

    package func wallet(appID: String, accessToken: String, proof: DeviceProof) async throws(RainError) -> WalletInfo {
        try await getWallet(AuthorityWalletRequest(appID: appID, accessToken: accessToken), caller: AuthorityCaller(proof: proof))
    }

    package func exportWallet(appID: String, accessToken: String, proof: DeviceProof) async throws(RainError)
        -> WalletSecrets
    {
        try await exportWallet(
            AuthorityWalletRequest(appID: appID, accessToken: accessToken), caller: AuthorityCaller(proof: proof))
    }

    package func revokeSession(appID: String, refreshToken: String, proof: DeviceProof) async throws(RainError) {
        _ = try await revokeSession(
            AuthorityRevokeSessionRequest(appID: appID, refreshToken: refreshToken), caller: AuthorityCaller(proof: proof))
    }

    package func listOutbox() async throws(RainError) -> [OutboxDelivery] {
        try await listOutbox(ListOutboxRequest(), caller: .anonymous).deliveries
    }

    package func beginPasskeyRegistration(_ request: PasskeyBeginRequest, proof: DeviceProof) async throws(RainError)
        -> PasskeyCeremony
    {
        try await beginPasskeyRegistration(request, caller: AuthorityCaller(proof: proof))
    }

    package func finishPasskeyRegistration(_ request: PasskeyFinishRequest) async throws(RainError) -> LoginResult? {
        try await finishPasskeyRegistration(request, caller: .anonymous).login
    }

    package func beginPasskeyAuthentication(_ request: PasskeyBeginRequest) async throws(RainError) -> PasskeyCeremony {
        try await beginPasskeyAuthentication(request, caller: .anonymous)
    }

    /// The login a passkey login answers; RAIN_501 when the answer carries none.
    package func finishPasskeyAuthentication(_ request: PasskeyFinishRequest) async throws(RainError) -> LoginResult {
        guard let login = try await finishPasskeyAuthentication(request, caller: .anonymous).login else {
            throw RainError(.provider, "the authority answered the passkey login without a session")
        }
        return login
    }

    package func cancelPasskeyCeremony(appID: String, deviceID: String, ceremonyID: String) async throws(RainError) {
        _ = try await cancelPasskeyCeremony(
            AuthorityPasskeyCancelRequest(appID: appID, deviceID: deviceID, ceremonyID: ceremonyID), caller: .anonymous)
    }

    package func sendContactVerificationCode(
        appID: String, deviceID: String, accessToken: String, contact: RainWalletContact, proof: DeviceProof,
        source: SendSource? = nil
    ) async throws(RainError) -> SendCodeResult {
        try await sendContactVerificationCode(
            AuthoritySendContactVerificationRequest(appID: appID, deviceID: deviceID, accessToken: accessToken, contact: contact),
            caller: AuthorityCaller(proof: proof, source: source))
    }

    package func confirmContactVerification(
        appID: String, deviceID: String, accessToken: String, challengeID: String, code: String, proof: DeviceProof,
        idempotencyKey: [UInt8] = [], source: SendSource? = nil
    ) async throws(RainError) -> AccountInfo {
        try await confirmContactVerification(
            AuthorityConfirmContactVerificationRequest(
                appID: appID, deviceID: deviceID, accessToken: accessToken, challengeID: challengeID, code: code,
                idempotencyKey: idempotencyKey),
            caller: AuthorityCaller(proof: proof, source: source))
    }

    package func rebindDevice(deviceID: String, newKey: DevicePublicKey, proof: DeviceProof) async throws(RainError) {
        _ = try await rebindDevice(
            AuthorityRebindDeviceRequest(deviceID: deviceID, newPublicKey: newKey.wireBytes),
            caller: AuthorityCaller(proof: proof))
    }

    package func confirmDeviceKey(deviceID: String, key: DevicePublicKey, proof: DeviceProof) async throws(RainError) {
        _ = try await confirmDeviceKey(
            AuthorityConfirmDeviceKeyRequest(deviceID: deviceID, devicePublicKey: key.wireBytes),
            caller: AuthorityCaller(proof: proof))
    }
}
