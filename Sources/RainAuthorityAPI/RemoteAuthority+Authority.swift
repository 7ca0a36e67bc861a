import Dispatch
import Foundation
import RainCore
import RainCrypto
import RainTransport
import RainWire
import Synchronization

// The `Authority` methods, one remote call each: the request as it is, the answer checked complete.
// The `proof` arguments are not sent: what counts is what the connection proved.
extension RemoteAuthority {
    /// What the authority is: its version, protocol version, capabilities and frame limit.
    /// - Throws: RAIN_301 when it cannot be reached.
    public func getInfo() async throws(RainError) -> GetInfoResponse {
        try await call(AuthorityMethod.getInfo, GetInfoRequest(), as: GetInfoResponse.self, kind: .read)
    }

    // Each call sends the authority's own value type and decodes the answer into one (RainWire's
    // authority messages); an answer missing what the type needs is refused as incomplete.

    /// Sends a login code (see `Authority.sendLoginCode`).
    /// - Throws: the authority's errors; RAIN_301 when it cannot be reached.
    public func sendLoginCode(_ request: SendCodeRequest) async throws(RainError) -> SendCodeResult {
        try await call(AuthorityMethod.sendLoginCode, request, as: SendCodeResult.self, kind: .send)
    }

    /// Confirms a code (see `Authority.confirmLoginCode`).
    /// - Throws: the authority's errors (RAIN_203 with its details, …); RAIN_301 when it cannot be
    ///   reached.
    public func confirmLoginCode(_ request: ConfirmCodeRequest) async throws(RainError) -> LoginResult {
        try await call(AuthorityMethod.confirmLoginCode, request, as: LoginResult.self, kind: .send)
    }

    /// Rotates a session's tokens (see `Authority.refreshSession`).
    /// - Throws: the authority's errors (RAIN_201 with its reason, …); RAIN_301 when it cannot be
    ///   reached or does not answer in time (safe to retry within the refresh grace window).
    public func refreshSession(_ request: RefreshRequest, proof: DeviceProof) async throws(RainError) -> SessionTokens {
        try await call(
            AuthorityMethod.refreshSession, request, as: AuthorityRefreshSessionResponse.self, kind: .refresh, isProven: true
        ).tokens
    }

    /// The account behind an access token (see `Authority.accountInfo`).
    /// - Throws: the authority's errors (RAIN_201 with its reason, …); RAIN_301 when it cannot be
    ///   reached.
    public func accountInfo(appID: String, accessToken: String, proof: DeviceProof) async throws(RainError)
        -> AccountInfo
    {
        try await call(
            AuthorityMethod.getAccountInfo, AuthorityAccountInfoRequest(appID: appID, accessToken: accessToken),
            as: AccountInfo.self, kind: .read, isProven: true)
    }

    /// Sends a contact verification code (see `Authority.sendContactVerificationCode`). Never
    /// retried here.
    /// - Throws: the authority's errors (RAIN_201, RAIN_302 for a send limit, …); RAIN_301 when it
    ///   cannot be reached.
    public func sendContactVerificationCode(
        appID: String, deviceID: String, accessToken: String, contact: RainWalletContact, proof: DeviceProof
    ) async throws(RainError) -> SendCodeResult {
        try await call(
            AuthorityMethod.sendContactVerificationCode,
            AuthoritySendContactVerificationRequest(
                appID: appID, deviceID: deviceID, accessToken: accessToken, contact: contact),
            as: SendCodeResult.self, kind: .send, isProven: true)
    }

    /// Confirms a contact verification (see `Authority.confirmContactVerification`).
    /// - Throws: the authority's errors (RAIN_203 with its details, RAIN_302, …); RAIN_301 when it
    ///   cannot be reached.
    public func confirmContactVerification(
        appID: String, deviceID: String, accessToken: String, challengeID: String, code: String, proof: DeviceProof,
        idempotencyKey: [UInt8] = []
    ) async throws(RainError) -> AccountInfo {
        try await call(
            AuthorityMethod.confirmContactVerification,
            AuthorityConfirmContactVerificationRequest(
                appID: appID, deviceID: deviceID, accessToken: accessToken, challengeID: challengeID, code: code,
                idempotencyKey: idempotencyKey),
            as: AccountInfo.self, kind: .send, isProven: true)
    }

    /// The wallet behind an access token (see `Authority.wallet`).
    /// - Throws: the authority's errors (RAIN_201 with its reason, RAIN_404 without a wallet, …);
    ///   RAIN_301 when it cannot be reached.
    public func wallet(appID: String, accessToken: String, proof: DeviceProof) async throws(RainError) -> WalletInfo {
        try await call(
            AuthorityMethod.getWallet, AuthorityWalletRequest(appID: appID, accessToken: accessToken),
            as: WalletInfo.self, kind: .read, isProven: true)
    }

    /// The wallet's secrets (see `Authority.exportWallet`). Never logged.
    /// - Throws: the authority's errors (RAIN_201 with its reason, RAIN_404 without a wallet, …);
    ///   RAIN_301 when it cannot be reached.
    public func exportWallet(appID: String, accessToken: String, proof: DeviceProof) async throws(RainError)
        -> WalletSecrets
    {
        try await call(
            AuthorityMethod.exportWallet, AuthorityWalletRequest(appID: appID, accessToken: accessToken),
            as: WalletSecrets.self, kind: .read, isProven: true)
    }

    /// Revokes a session (see `Authority.revokeSession`).
    /// - Throws: the authority's errors; RAIN_301 when it cannot be reached.
    public func revokeSession(appID: String, refreshToken: String, proof: DeviceProof) async throws(RainError) {
        _ = try await call(
            AuthorityMethod.revokeSession, AuthorityRevokeSessionRequest(appID: appID, refreshToken: refreshToken),
            as: AuthorityRevokeSessionResponse.self, kind: .send, isProven: true)
    }

    /// Step 1 of a device key move (see `Authority.rebindDevice`): the connection proves the
    /// holder's keys (the current one and `newKey`) first.
    /// - Throws: the authority's errors (RAIN_501 `device_proof_required` when the holder lacks a
    ///   key); RAIN_301 when it cannot be reached.
    public func rebindDevice(deviceID: String, newKey: DevicePublicKey, proof: DeviceProof) async throws(RainError) {
        _ = try await call(
            AuthorityMethod.rebindDevice, AuthorityRebindDeviceRequest(deviceID: deviceID, newPublicKey: newKey.wireBytes),
            as: AuthorityRebindDeviceResponse.self, kind: .send, isProven: true)
    }

    /// Step 2 (see `Authority.confirmDeviceKey`).
    /// - Throws: the authority's errors; RAIN_301 when it cannot be reached.
    public func confirmDeviceKey(deviceID: String, key: DevicePublicKey, proof: DeviceProof) async throws(RainError) {
        _ = try await call(
            AuthorityMethod.confirmDeviceKey,
            AuthorityConfirmDeviceKeyRequest(deviceID: deviceID, devicePublicKey: key.wireBytes),
            as: AuthorityConfirmDeviceKeyResponse.self, kind: .send, isProven: true)
    }

    /// The development outbox (see `Authority.listOutbox`).
    /// - Throws: RAIN_202 unless the authority runs with `--dev-outbox`; RAIN_301 when it cannot be
    ///   reached.
    public func listOutbox() async throws(RainError) -> [OutboxDelivery] {
        try await call(AuthorityMethod.listOutbox, ListOutboxRequest(), as: ListOutboxResponse.self, kind: .read).deliveries
    }

    /// Starts a registration (see `Authority.beginPasskeyRegistration`).
    /// - Throws: the authority's errors; RAIN_301 when it cannot be reached.
    public func beginPasskeyRegistration(_ request: PasskeyBeginRequest, proof: DeviceProof) async throws(RainError)
        -> PasskeyCeremony
    {
        try await call(
            AuthorityMethod.beginPasskeyRegistration, request, as: PasskeyCeremony.self, kind: .send,
            isProven: !request.accessToken.isEmpty)
    }

    /// Finishes a registration (see `Authority.finishPasskeyRegistration`).
    /// - Throws: the authority's errors; RAIN_301 when it cannot be reached.
    public func finishPasskeyRegistration(_ request: PasskeyFinishRequest) async throws(RainError) -> LoginResult? {
        try await call(AuthorityMethod.finishPasskeyRegistration, request, as: PasskeyFinishResult.self, kind: .send).login
    }

    /// Starts a login (see `Authority.beginPasskeyAuthentication`).
    /// - Throws: the authority's errors; RAIN_301 when it cannot be reached.
    public func beginPasskeyAuthentication(_ request: PasskeyBeginRequest) async throws(RainError) -> PasskeyCeremony {
        try await call(AuthorityMethod.beginPasskeyAuthentication, request, as: PasskeyCeremony.self, kind: .send)
    }

    /// Finishes a login (see `Authority.finishPasskeyAuthentication`).
    /// - Throws: the authority's errors; RAIN_301 when it cannot be reached.
    public func finishPasskeyAuthentication(_ request: PasskeyFinishRequest) async throws(RainError) -> LoginResult {
        let method = AuthorityMethod.finishPasskeyAuthentication
        guard let login = try await call(method, request, as: PasskeyFinishResult.self, kind: .send).login else {
            throw incompleteAnswer(method)
        }
        return login
    }

    /// Cancels a ceremony (see `Authority.cancelPasskeyCeremony`).
    /// - Throws: RAIN_301 when the authority cannot be reached.
    public func cancelPasskeyCeremony(appID: String, deviceID: String, ceremonyID: String) async throws(RainError) {
        _ = try await call(
            AuthorityMethod.cancelPasskeyCeremony,
            AuthorityPasskeyCancelRequest(appID: appID, deviceID: deviceID, ceremonyID: ceremonyID),
            as: AuthorityPasskeyCancelResponse.self, kind: .send)
    }
}
