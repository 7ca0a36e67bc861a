import RainAuthorityAPI
import RainCore
import RainCrypto
import RainSigning
import RainTransport
import RainWire

/// Signatures: the request decoded as the authority will decode it, shown to the user, then
/// signed by the authority with the wallet's key, which never comes here.
extension ProfileSession {
    /// The request as the signing code reads it, checked for what the device can check alone.
    /// - Throws: RAIN_102 for no chain, a payload over 64 KiB, an idempotency key of the wrong
    ///   length.
    static func signingRequest(_ kind: SigningRequest.Kind, _ request: SignRequest) throws(RainError) -> SigningRequest {
        let chain = try SigningRequest.named(request.chain)
        let key = request.idempotencyKey.count
        guard key == 0 || (16...64).contains(key) else {
            throw RainError.invalid(
                "an idempotency key is 16 to 64 random bytes (this one has \(key)), or none", field: "idempotencyKey")
        }
        return SigningRequest(
            kind: kind, chain: chain, chainID: request.chainID, claimedCluster: request.cluster, payload: request.payload,
            from: request.from)
    }

    /// The SHA-256 of the whole request (its kind and every field), which a repeat with the same
    /// idempotency key must match.
    static func requestHash(_ kind: SigningRequest.Kind, _ request: SignRequest) throws(RainError) -> [UInt8] {
        SHA256.hash(Array(kind.rawValue.utf8) + [0] + (try request.encode()))
    }

    /// The wallet's public side, as the authority reports it.
    func signingWallet() async throws(RainError) -> SigningWallet {
        let wallet = try await wallet()
        return try SigningWallet(ethereumAddress: wallet.ethereumAddress, solanaAddress: wallet.solanaAddress)
    }

    /// What the prompt shows for a signature request: its decoded lines and the SHA-256 of the
    /// bytes signed. A key this profile used with another request is refused here, before anyone
    /// is asked.
    /// - Throws: RAIN_102 `idempotency_key_reused`; the decoding's RAIN_102, RAIN_104 and
    ///   RAIN_406; RAIN_201 without a session; RAIN_301 when the wallet cannot be read.
    public func describeSignature(_ kind: SigningRequest.Kind, _ request: SignRequest) async throws(RainError)
        -> ConfirmationDetails
    {
        let signing = try Self.signingRequest(kind, request)
        if !request.idempotencyKey.isEmpty {
            try signingKeys.check(key: request.idempotencyKey, requestHash: try Self.requestHash(kind, request))
        }
        let prepared = try SigningPreparation.prepare(signing, wallet: try await signingWallet())
        let hash = Hex.encode(prepared.signedBytesHash)
        let chain = signing.chain == .solana ? "solana" : signing.chainID == 0 ? "ethereum" : "ethereum:\(signing.chainID)"
        return ConfirmationDetails(
            action: prepared.summary.title, lines: SigningPreparation.promptLines(prepared.summary),
            closing: "SHA-256 of what is signed: \(hash)", auditDetail: "\(kind.rawValue) \(chain) sha256:\(hash)",
            fingerprint: prepared.signedBytesHash)
    }

    /// Signs what the user confirmed: the authority decodes the request again and signs only when
    /// its bytes have the SHA-256 the prompt showed. A send: never retried; a request that left
    /// without an answer is RAIN_501 `outcome_unknown`, and sending it again with the same
    /// idempotency key answers the same signature.
    /// - Throws: RAIN_202 `no_prompt` when nothing was confirmed; RAIN_201 without a session; the
    ///   authority's refusals; RAIN_301, RAIN_501.
    public func sign(_ kind: SigningRequest.Kind, _ request: SignRequest, confirmed: ConfirmationDetails?)
        async throws(RainError) -> SignResponse
    {
        guard let confirmed else {
            throw RainError(
                .unauthorized,
                "a signature needs the user's confirmation on the daemon's prompt, and this daemon showed none: "
                    + "set access.pinentry, or register a terminal with `rainwallet prompt here`",
                details: RainError.Details(reason: "no_prompt"))
        }
        let response = try await withSession(what: "sign", transientRetries: 0) {
            (authority, appID, token, proof) async throws(RainError) in
            try await authority.signWithWallet(
                AuthoritySignRequest(
                    appID: appID, accessToken: token, kind: kind.rawValue, request: request,
                    confirmedSha256: confirmed.fingerprint),
                caller: AuthorityCaller(proof: proof))
        }
        guard constantTimeEquals(response.signedBytesSha256, confirmed.fingerprint) else {
            throw RainError(
                .internalError, "the authority signed other bytes than the ones the user confirmed; nothing is answered")
        }
        if !request.idempotencyKey.isEmpty {
            signingKeys.record(key: request.idempotencyKey, requestHash: try Self.requestHash(kind, request))
        }
        logger.info("wallet.signed", ["profile": runtime.name, "kind": kind.rawValue])
        return response
    }
}

/// A profile's recent signature idempotency keys (their SHA-256) and their requests' SHA-256.
struct SigningKeys: Sendable {
    /// The most keys remembered; the oldest goes first.
    static let limit = 1024
    private var hashes: [[UInt8]: [UInt8]] = [:]
    private var order: [[UInt8]] = []

    /// - Throws: RAIN_102 `idempotency_key_reused` when `key` came with another request.
    func check(key: [UInt8], requestHash: [UInt8]) throws(RainError) {
        if let known = hashes[SHA256.hash(key)], known != requestHash { throw Self.reused() }
    }

    mutating func record(key: [UInt8], requestHash: [UInt8]) {
        let hash = SHA256.hash(key)
        if hashes.updateValue(requestHash, forKey: hash) == nil { order.append(hash) }
        if order.count > Self.limit { hashes[order.removeFirst()] = nil }
    }

    /// RAIN_102 `idempotency_key_reused`.
    static func reused() -> RainError {
        RainError.invalid(
            "this idempotency key was used with another request; a new signature needs a new key",
            field: "idempotencyKey", reason: "idempotency_key_reused")
    }
}
