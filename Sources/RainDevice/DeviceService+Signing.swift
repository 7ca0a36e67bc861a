import RainAccess
import RainCore
import RainSigning
import RainTransport
import RainWire

extension DeviceService {
    /// `Wallet/SignMessage`, `Wallet/SignTypedData`, `Wallet/SignTransaction`: sends the user
    /// confirms on pages that show what is signed (`describe`), audited with the SHA-256 of the
    /// signed bytes, the app and the answer. Nobody is asked about a request that does not decode.
    static func signingRoutes(audit: (any AuditRecorder)?, auditLogger: Logger) -> [AnyRoute<DeviceCall>] {
        [
            (Method.walletSignMessage, SigningRequest.Kind.message, "sign a message with the wallet"),
            (Method.walletSignTypedData, .typedData, "sign typed data with the wallet"),
            (Method.walletSignTransaction, .transaction, "sign a transaction with the wallet"),
        ].map { method, kind, confirms in
            AnyRoute(
                Route(
                    method, SignRequest.self, SignResponse.self,
                    policy: .send(needsSession: true, isSensitive: true, userConfirms: confirms),
                    validate: { (r, _) throws(RainError) in _ = try ProfileSession.signingRequest(kind, r) },
                    describe: { (r, call) throws(RainError) in try await call.session.describeSignature(kind, r) },
                    .actor { (r, call) throws(RainError) in
                        try await Self.audited(
                            audit, auditLogger, call, .signature, detail: call.confirmation?.auditDetail ?? kind.rawValue,
                            isEntryRequired: true
                        ) { () async throws(RainError) in
                            try await call.session.sign(kind, r, confirmed: call.confirmation)
                        }
                    }))
        }
    }
}

extension AuditEvent {
    /// A signature by the wallet (`detail`: the kind, the chain and the SHA-256 of the signed
    /// bytes; never the bytes or the signature).
    public static let signature = AuditEvent("signature")
}
