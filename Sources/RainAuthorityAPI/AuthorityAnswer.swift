import RainCore
import RainWire

/// An answer with a rule for when it is complete: `RemoteAuthority` refuses an answer that decodes
/// but lacks what the caller needs (an id, tokens, …) with RAIN_501. An answer of any other type
/// is complete once it decodes, so a new rpc's response needs nothing here unless it has such a
/// rule.
protocol AuthorityAnswer: WireMessage {
    /// Whether the answer carries every field the caller relies on.
    var isComplete: Bool { get }
}

extension AuthorityBeginDeviceProofResponse: AuthorityAnswer {
    var isComplete: Bool { challenge.count == DeviceBinding.challengeByteCount }
}

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
