import FoundationEssentials
import Glibc
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainStore
import RainWire

// Wallet custody: each account's wallet entropy sealed under the authority's key, its public keys,
// its export, and the backfill of wallets created before they had keys.
extension EmbeddedAuthority {
    /// The bytes of 128-bit entropy a wallet is created from (12 words).
    static let walletEntropyByteCount = 16

    /// The associated data a wallet's entropy is sealed with: `rain.wallet.v1:<walletID>`, so a
    /// ciphertext moved to another wallet's row does not decrypt.
    static func walletAssociatedData(walletID: String) -> [UInt8] { Array("rain.wallet.v1:\(walletID)".utf8) }

    /// The wallet behind a live access token (see `Authority.getWallet`).
    /// - Throws: RAIN_201 like `getAccountInfo`; RAIN_404 when the account has no wallet; RAIN_502
    ///   when the store fails or the entropy does not decrypt.
    public func getWallet(_ request: AuthorityWalletRequest, caller: AuthorityCaller) async throws(RainError) -> WalletInfo {
        let (appID, accessToken, proof) = (request.appID, request.accessToken, caller.proof)
        // One trip to the store: the session and the wallet together.
        let (_, wallet) = try await liveAccess(appID: appID, accessToken: accessToken, proof: proof) {
            (hash) throws(RainError) -> (AccountAccess, WalletRecord?)? in
            try await store.accountAccessWithWallet(appID: appID, accessHash: hash)
        }
        guard let stored = wallet else { throw Self.noWallet() }
        return try Self.walletInfo(stored.hasAllKeys ? stored : try await completeKeys(stored))
    }

    /// What Wallet/Get shows of a wallet.
    /// - Throws: RAIN_502 when the wallet has no addresses.
    static func walletInfo(_ wallet: WalletRecord) throws(RainError) -> WalletInfo {
        guard let ethereum = wallet.ethereumAddress, let solana = wallet.solanaAddress else {
            throw RainError(.internalError, "the wallet's addresses are missing")
        }
        return WalletInfo(walletID: wallet.id, createdAt: wallet.createdAt, ethereumAddress: ethereum, solanaAddress: solana)
    }

    /// The wallet's recovery phrase and private keys (see `Authority.exportWallet`). Logs that an
    /// export happened, never what it returned.
    /// - Throws: RAIN_201 like `getAccountInfo`; RAIN_404 when the account has no wallet; RAIN_502
    ///   when the store fails or the entropy does not decrypt (another master key).
    public func exportWallet(_ request: AuthorityWalletRequest, caller: AuthorityCaller) async throws(RainError)
        -> WalletSecrets
    {
        let (appID, accessToken, proof) = (request.appID, request.accessToken, caller.proof)
        let access = try await liveAccess(appID: appID, accessToken: accessToken, proof: proof)
        let wallet = try await completedWallet(accountID: access.account.id)
        let derived = try WalletKeys.derive(entropy: try openEntropy(wallet))
        logger.info("wallet.exported", ["app": appID, "account": access.account.id, "wallet": wallet.id])
        return WalletSecrets(
            mnemonic: derived.mnemonic, ethereumPrivateKeyHex: derived.ethereumPrivateKeyHex,
            solanaKeypairBase58: derived.solanaKeypairBase58)
    }

    /// Gives every wallet that lacks its entropy or an address its keys: new entropy when it has
    /// none, else the missing addresses derived from its entropy. Each wallet is one store update.
    /// - Returns: how many wallets were completed.
    /// - Throws: RAIN_502 when the store fails or an entropy does not decrypt.
    @discardableResult
    public func backfillWallets() async throws(RainError) -> Int {
        var completed = 0
        for wallet in try await store.walletsMissingKeys() {
            _ = try await completeKeys(wallet)
            completed += 1
        }
        if completed > 0 { logger.info("wallet.backfill", ["wallets": String(completed)]) }
        return completed
    }

    /// The account's wallet with all its keys, completing it first when it lacks some.
    /// - Throws: RAIN_404 when the account has no wallet; RAIN_502 when the store fails.
    func completedWallet(accountID: String) async throws(RainError) -> WalletRecord {
        guard let wallet = try await store.wallet(accountID: accountID) else { throw Self.noWallet() }
        return wallet.hasAllKeys ? wallet : try await completeKeys(wallet)
    }

    /// Stores what `wallet` lacks. The update only applies while the wallet's ciphertext is still
    /// the one read, so a concurrent backfill wins cleanly and this one re-reads its result.
    private func completeKeys(_ wallet: WalletRecord) async throws(RainError) -> WalletRecord {
        var current = wallet
        for _ in 0..<3 {
            if current.hasAllKeys { return current }
            let material: WalletKeyMaterial
            if let ciphertext = current.entropyCiphertext {
                let derived = try WalletKeys.derive(entropy: try openEntropy(current))
                material = WalletKeyMaterial(
                    entropyCiphertext: ciphertext, entropyKeyID: current.entropyKeyID ?? keys.masterKeyID,
                    ethereumAddress: derived.ethereumAddress, solanaAddress: derived.solanaAddress)
            } else {
                material = try newWalletKeyMaterial(walletID: current.id)
            }
            if try await store.storeWalletKeys(
                walletID: current.id, keys: material, expectedCiphertext: current.entropyCiphertext)
            {
                logger.info(
                    "wallet.keys_completed",
                    ["wallet": current.id, "newEntropy": String(current.entropyCiphertext == nil)])
                current.entropyCiphertext = material.entropyCiphertext
                current.entropyKeyID = material.entropyKeyID
                current.ethereumAddress = material.ethereumAddress
                current.solanaAddress = material.solanaAddress
                return current
            }
            guard let reread = try await store.wallet(accountID: current.accountID) else { throw Self.noWallet() }
            current = reread
        }
        throw RainError(.internalError, "the wallet's keys could not be stored; try again")
    }

    /// New entropy for wallet `walletID`, sealed with the wallet-encryption key, and its addresses.
    func newWalletKeyMaterial(walletID: String) throws(RainError) -> WalletKeyMaterial {
        let entropy = try SecureRandom.bytes(count: Self.walletEntropyByteCount)
        let derived = try WalletKeys.derive(entropy: entropy)
        let sealed = try AESGCM.seal(
            entropy, using: keys.walletKey, authenticating: Self.walletAssociatedData(walletID: walletID))
        return WalletKeyMaterial(
            entropyCiphertext: sealed.combined, entropyKeyID: keys.masterKeyID,
            ethereumAddress: derived.ethereumAddress, solanaAddress: derived.solanaAddress)
    }

    /// Decrypts a wallet's entropy.
    /// - Throws: RAIN_502 when it has none, it was sealed under another master key, or it does not
    ///   authenticate.
    private func openEntropy(_ wallet: WalletRecord) throws(RainError) -> [UInt8] {
        let ciphertext = try sealedEntropy(wallet)
        do {
            return try AESGCM.open(
                AESGCM.SealedBox(combined: ciphertext), using: keys.walletKey,
                authenticating: Self.walletAssociatedData(walletID: wallet.id))
        } catch {
            throw RainError(
                .internalError, "wallet \(wallet.id): its entropy does not decrypt", underlying: SendableErrorDescription(error))
        }
    }

    /// A wallet's sealed entropy, once it is known to be sealed under this authority's key.
    /// - Throws: RAIN_502 when it has none, or it was sealed under another master key.
    func sealedEntropy(_ wallet: WalletRecord) throws(RainError) -> [UInt8] {
        guard let ciphertext = wallet.entropyCiphertext else {
            throw RainError(.internalError, "the wallet has no entropy")
        }
        let keyID = wallet.entropyKeyID ?? keys.masterKeyID
        guard keyID == keys.masterKeyID else {
            throw RainError(
                .internalError,
                "wallet \(wallet.id) is encrypted under master key \(keyID), not this authority's (\(keys.masterKeyID))")
        }
        return ciphertext
    }

    /// RAIN_404 for an account without a wallet.
    static func noWallet() -> RainError { RainError(.unavailable, "the account's wallet is unavailable") }
}
