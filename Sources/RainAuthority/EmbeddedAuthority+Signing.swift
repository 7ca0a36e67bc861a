import Dispatch
import FoundationEssentials
import Glibc
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainSigning
import RainStore
import RainWire

// Signatures: the wallet's keys are derived from its sealed entropy inside locked memory for one
// signature and wiped after; nothing but the signature leaves.
extension EmbeddedAuthority {
    /// Where the keys are derived and used: PBKDF2's 2,048 rounds and the signature are a few
    /// milliseconds of CPU each, kept off the Swift pool (two threads here) that every call shares.
    static let signingQueue = DispatchQueue(label: "rain.authority.signing", attributes: .concurrent)

    /// How long a signature's idempotency key answers its first signature.
    static let signatureIdempotencyLifetime: Duration = .seconds(24 * 3600)

    /// Signs what the device's user confirmed (see `Authority.signWithWallet`). Logs that a
    /// signature happened, never what was signed.
    /// - Throws: RAIN_201 like `getAccountInfo`; RAIN_404 without a wallet; RAIN_102 for malformed
    ///   input, `confirmation_mismatch`, `idempotency_key_reused`; RAIN_104; RAIN_406; RAIN_502
    ///   when the store fails or the entropy does not decrypt.
    public func signWithWallet(_ request: AuthoritySignRequest, caller: AuthorityCaller) async throws(RainError)
        -> SignResponse
    {
        guard let kind = SigningRequest.Kind(rawValue: request.kind) else {
            throw RainError.invalid(
                "unknown signature kind \(request.kind): message, typed_data or transaction", field: "kind")
        }
        let access = try await liveAccess(appID: request.appID, accessToken: request.accessToken, proof: caller.proof)
        let wallet = try await completedWallet(accountID: access.account.id)
        let idempotency = try IdempotentCall(
            signature: request, deviceID: access.session.deviceID, walletID: wallet.id, keys: keys)
        // Checked before a repeat is answered too: a first signature goes only to a request whose
        // bytes the device's user confirmed.
        let prepared = try Self.prepare(kind, request, wallet: wallet)
        let now = clock.now
        if let idempotency, let first = try await store.idempotentOutcome(keyHash: idempotency.keyHash, now: now) {
            return try Self.repeated(first, idempotency)
        }
        let (sealed, walletKey) = (try sealedEntropy(wallet), keys.walletKey)
        let associatedData = Self.walletAssociatedData(walletID: wallet.id)
        let input = prepared.input
        let signature = try await Self.signingQueue.runBlocking { () throws(RainError) -> RecoverableSignature in
            try WalletSigningKeys.with(sealedEntropy: sealed, key: walletKey, associatedData: associatedData) {
                (signer) throws(RainError) -> RecoverableSignature in
                switch input {
                case .secp256k1Digest(let digest):
                    let signed = try signer.signEthereumDigest(digest)
                    return RecoverableSignature(r: signed.r, s: signed.s, recoveryID: signed.recoveryID)
                case .ed25519Message(let message):
                    let signed = try signer.signSolana(message)
                    return RecoverableSignature(r: Array(signed.prefix(32)), s: Array(signed.dropFirst(32)), recoveryID: 0)
                }
            }
        }
        if case .secp256k1Digest(let digest) = input {
            // The keys came from the sealed entropy; the address from the wallet's record. A
            // signature that does not recover to the address the app knows is never answered.
            let recovered = try Secp256k1Recovery.recoverAddress(
                digest: digest, r: signature.r, s: signature.s, recoveryID: signature.recoveryID)
            guard "0x" + Hex.encode(recovered) == wallet.ethereumAddress?.lowercased() else {
                throw RainError(
                    .internalError,
                    "wallet \(wallet.id): its keys do not match its recorded address; nothing was answered")
            }
        }
        let result = try prepared.finish(signature)
        let chain = request.request.chain ?? .ethereum
        let response = SignResponse(
            chain: chain, address: chain == .ethereum ? wallet.ethereumAddress ?? "" : wallet.solanaAddress ?? "",
            signature: result.signature, signedTransaction: result.signedTransaction,
            transactionHash: result.transactionHash, signedBytesSha256: prepared.signedBytesHash)
        if let idempotency {
            let stored = try await store.recordIdempotentOutcome(
                try idempotency.outcome(
                    sealing: response.encode(), expiresAt: now.adding(Self.signatureIdempotencyLifetime)),
                accountID: access.account.id, walletID: wallet.id, now: now)
            // Another request with the same key was recorded first: this signature is not answered.
            guard constantTimeEquals(stored.requestHash, idempotency.requestHash) else { throw IdempotentCall.reused }
        }
        logger.info(
            "wallet.signed",
            ["app": request.appID, "account": access.account.id, "wallet": wallet.id, "kind": kind.rawValue])
        return response
    }

    /// The request decoded as the device decoded it, and checked to sign the bytes its user saw.
    /// - Throws: the decoding's RAIN_102, RAIN_104, RAIN_406; RAIN_102 `confirmation_mismatch`
    ///   when the bytes differ from the confirmed ones (or none were confirmed).
    private static func prepare(_ kind: SigningRequest.Kind, _ request: AuthoritySignRequest, wallet: WalletRecord)
        throws(RainError) -> PreparedSigning
    {
        let app = request.request
        guard let ethereum = wallet.ethereumAddress, let solana = wallet.solanaAddress else {
            throw RainError(.internalError, "the wallet's addresses are missing")
        }
        let prepared = try SigningPreparation.prepare(
            SigningRequest(
                kind: kind, chain: try SigningRequest.named(app.chain), chainID: app.chainID, claimedCluster: app.cluster,
                payload: app.payload, from: app.from),
            wallet: try SigningWallet(ethereumAddress: ethereum, solanaAddress: solana))
        guard !request.confirmedSha256.isEmpty, constantTimeEquals(prepared.signedBytesHash, request.confirmedSha256)
        else {
            throw RainError.invalid(
                "the bytes to sign are not the ones the user confirmed on the device; nothing was signed (are the "
                    + "device and the authority the same version?)", field: "confirmedSha256",
                reason: "confirmation_mismatch")
        }
        return prepared
    }

    /// The first signature made with this key, for a repeat of the same request.
    /// - Throws: RAIN_102 `idempotency_key_reused` when the key came with another request.
    private static func repeated(_ first: IdempotentOutcome, _ call: IdempotentCall) throws(RainError) -> SignResponse {
        let answer = try call.open(first)
        guard let response = try? SignResponse.decode(answer) else { throw IdempotentCall.reused }
        return response
    }
}
