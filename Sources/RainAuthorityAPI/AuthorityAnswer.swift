import RainCore
import RainWire

/// An answer `RemoteAuthority` accepts: it decodes, and `isComplete` says whether it carries what
/// the caller needs (an id, tokens, …); an incomplete one is refused with RAIN_501.
protocol AuthorityAnswer: WireMessage {
    /// Whether the answer carries every field the caller relies on.
    var isComplete: Bool { get }
}

extension AuthorityAnswer {
    /// Complete unless the type says otherwise.
    var isComplete: Bool { true }
}

extension GetInfoResponse: AuthorityAnswer {}
extension AuthorityBeginDeviceProofResponse: AuthorityAnswer {
    var isComplete: Bool { challenge.count == DeviceBinding.challengeByteCount }
}
extension AuthorityProveDeviceResponse: AuthorityAnswer {}
extension AuthorityRebindDeviceResponse: AuthorityAnswer {}
extension AuthorityConfirmDeviceKeyResponse: AuthorityAnswer {}
extension AuthorityRevokeSessionResponse: AuthorityAnswer {}
extension AuthorityPasskeyCancelResponse: AuthorityAnswer {}
extension ListOutboxResponse: AuthorityAnswer {}

extension SendCodeResult: AuthorityAnswer {
    var isComplete: Bool { !challengeID.isEmpty }
}

extension LoginResult: AuthorityAnswer {
    var isComplete: Bool { !accountID.isEmpty && !walletID.isEmpty && tokens.isComplete }
}

extension AuthorityRefreshSessionResponse: AuthorityAnswer {
    var isComplete: Bool { tokens.isComplete }
}

extension AccountInfo: AuthorityAnswer {
    var isComplete: Bool { !accountID.isEmpty }
}

extension WalletInfo: AuthorityAnswer {
    var isComplete: Bool { !walletID.isEmpty && !ethereumAddress.isEmpty && !solanaAddress.isEmpty }
}

extension WalletSecrets: AuthorityAnswer {
    var isComplete: Bool { !mnemonic.isEmpty && !ethereumPrivateKeyHex.isEmpty && !solanaKeypairBase58.isEmpty }
}

extension PasskeyCeremony: AuthorityAnswer {
    var isComplete: Bool { !ceremonyID.isEmpty && !optionsJSON.isEmpty }
}

extension PasskeyFinishResult: AuthorityAnswer {
    /// No login (a passkey added) is complete; a login must be.
    var isComplete: Bool { login?.isComplete ?? true }
}
