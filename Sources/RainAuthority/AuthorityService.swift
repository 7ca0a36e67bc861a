import Foundation
import RainCore
import RainTransport
import RainWire

/// Serves an `Authority` (normally the `EmbeddedAuthority`) over the framed protocol: the server
/// side of `rainwalletd authority --listen HOST:PORT`, answering `RemoteAuthority`.
///
/// Methods are `AuthorityMethod`. Payloads are decoded on the loop thread (an undecodable one is
/// answered at once with RAIN_102 `undecodable_payload`); each call then runs in a `Task` and is
/// answered when the authority returns, so answers come in any order. The authority's `RainError`
/// goes on the wire as it is, code and details included. `GetInfo` is answered inline. Requests
/// carry no profile: metadata is ignored. `Request.timeout_ms` is ignored too (the client keeps its
/// own deadline). Cancelling a call answers it at once (RAIN_102 `cancelled`) but does not undo
/// the work. Nothing from a payload (codes, tokens) is ever logged.
///
/// Running it (the daemon's `authority` subcommand):
/// ```swift
/// let address = try TCPAddress(parsing: listen, field: "listen")       // loopback only
/// let fd = try TCPSocket.listen(address)
/// var options = ServerOptions()
/// options.isTCP = true
/// let service = AuthorityService(authority: embedded, isDevOutboxEnabled: devOutbox, logger: logger)
/// let server = try EventLoopServer(listeningSocket: fd, options: options, handler: service, logger: logger)
/// server.run()   // on its own thread; server.stop(drainTimeout:) from the SIGTERM handler
/// ```
public final class AuthorityService: ServerHandler {
    private let authority: any Authority
    private let isDevOutboxEnabled: Bool
    private let version: String
    private let maximumFrameBytes: Int
    private let logger: Logger

    /// Creates the service.
    /// - Parameters:
    ///   - authority: the authority to serve.
    ///   - isDevOutboxEnabled: serve `ListOutbox` (`--dev-outbox`); otherwise it is RAIN_202. The
    ///     authority itself must also allow it (`AuthoritySettings.isDevOutboxEnabled`).
    ///   - version: the daemon version `GetInfo` reports.
    ///   - maximumFrameBytes: the frame limit `GetInfo` reports (the server's
    ///     `ServerOptions.maximumFrameLength`).
    ///   - logger: method names and error codes only, never payloads.
    public init(
        authority: any Authority, isDevOutboxEnabled: Bool = false, version: String = "unknown",
        maximumFrameBytes: Int = Frame.defaultMaximumLength, logger: Logger
    ) {
        self.authority = authority
        self.isDevOutboxEnabled = isDevOutboxEnabled
        self.version = version
        self.maximumFrameBytes = maximumFrameBytes
        self.logger = logger
    }

    /// The capabilities `GetInfo` reports.
    public var capabilities: [String] {
        ["login-code", "refresh", "account-info", "revoke", "wallet", "export", "passkeys", "contacts"] + (isDevOutboxEnabled ? ["dev-outbox"] : [])
    }

    /// Dispatches one request (loop thread; never blocks).
    public func handle(_ request: WireRequest, context: RequestContext) -> HandlerDecision {
        let authority = self.authority
        switch request.method {
        case AuthorityMethod.getInfo:
            let info = GetInfoResponse(
                daemonVersion: version, protocolVersion: protocolVersion, capabilities: capabilities,
                maxFrameBytes: UInt32(clamping: maximumFrameBytes))
            do {
                return .respond(.ok(try info.encode()))
            } catch {
                return .respond(.failure(error))
            }

        case AuthorityMethod.sendLoginCode:
            return serve(request, context, AuthoritySendLoginCodeRequest.self) { (wire) async throws(RainError) in
                guard let contact = wire.contact else {
                    throw RainError.invalid("the request names no contact", field: "contact")
                }
                let result = try await authority.sendLoginCode(
                    SendCodeRequest(appID: wire.appID, deviceID: wire.deviceID, contact: contact))
                return AuthoritySendLoginCodeResponse(
                    challengeID: result.challengeID, contact: result.contact, expiresAt: result.expiresAt)
            }

        case AuthorityMethod.confirmLoginCode:
            return serve(request, context, AuthorityConfirmLoginCodeRequest.self) { (wire) async throws(RainError) in
                let result = try await authority.confirmLoginCode(
                    ConfirmCodeRequest(
                        appID: wire.appID, deviceID: wire.deviceID, challengeID: wire.challengeID, code: wire.code,
                        devicePublicKey: wire.devicePublicKey))
                return AuthorityConfirmLoginCodeResponse(
                    accountID: result.accountID, walletID: result.walletID, accountCreated: result.accountCreated,
                    tokens: AuthoritySessionTokens(result.tokens))
            }

        case AuthorityMethod.refreshSession:
            return serve(request, context, AuthorityRefreshSessionRequest.self) { (wire) async throws(RainError) in
                let tokens = try await authority.refreshSession(
                    RefreshRequest(
                        appID: wire.appID, deviceID: wire.deviceID, refreshToken: wire.refreshToken,
                        timestamp: wire.timestamp, signature: wire.signature))
                return AuthorityRefreshSessionResponse(tokens: AuthoritySessionTokens(tokens))
            }

        case AuthorityMethod.accountInfo:
            return serve(request, context, AuthorityAccountInfoRequest.self) { (wire) async throws(RainError) in
                let info = try await authority.accountInfo(appID: wire.appID, accessToken: wire.accessToken)
                return AuthorityAccountInfoResponse(info)
            }

        case AuthorityMethod.sendContactVerificationCode:
            return serve(request, context, AuthoritySendContactVerificationRequest.self) {
                (wire) async throws(RainError) in
                guard let contact = wire.contact else {
                    throw RainError.invalid("the request names no contact", field: "contact")
                }
                let result = try await authority.sendContactVerificationCode(
                    appID: wire.appID, deviceID: wire.deviceID, accessToken: wire.accessToken, contact: contact)
                return AuthoritySendLoginCodeResponse(
                    challengeID: result.challengeID, contact: result.contact, expiresAt: result.expiresAt)
            }

        case AuthorityMethod.confirmContactVerification:
            return serve(request, context, AuthorityConfirmContactVerificationRequest.self) {
                (wire) async throws(RainError) in
                let info = try await authority.confirmContactVerification(
                    appID: wire.appID, deviceID: wire.deviceID, accessToken: wire.accessToken,
                    challengeID: wire.challengeID, code: wire.code)
                return AuthorityAccountInfoResponse(info)
            }

        case AuthorityMethod.beginPasskeyRegistration, AuthorityMethod.beginPasskeyAuthentication:
            let isRegistration = request.method == AuthorityMethod.beginPasskeyRegistration
            return serve(request, context, AuthorityPasskeyBeginRequest.self) { (wire) async throws(RainError) in
                let begin = PasskeyBeginRequest(
                    appID: wire.appID, deviceID: wire.deviceID, rpID: wire.rpID, origins: wire.origins,
                    accessToken: wire.accessToken.isEmpty ? nil : wire.accessToken)
                let ceremony =
                    isRegistration
                    ? try await authority.beginPasskeyRegistration(begin)
                    : try await authority.beginPasskeyAuthentication(begin)
                return AuthorityPasskeyBeginResponse(
                    ceremonyID: ceremony.ceremonyID, optionsJSON: ceremony.optionsJSON, expiresAt: ceremony.expiresAt)
            }

        case AuthorityMethod.finishPasskeyRegistration, AuthorityMethod.finishPasskeyAuthentication:
            let isRegistration = request.method == AuthorityMethod.finishPasskeyRegistration
            return serve(request, context, AuthorityPasskeyFinishRequest.self) { (wire) async throws(RainError) in
                let finish = PasskeyFinishRequest(
                    appID: wire.appID, deviceID: wire.deviceID, ceremonyID: wire.ceremonyID,
                    responseJSON: wire.responseJSON, devicePublicKey: wire.devicePublicKey)
                let result =
                    isRegistration
                    ? try await authority.finishPasskeyRegistration(finish)
                    : try await authority.finishPasskeyAuthentication(finish)
                guard let result else {
                    return AuthorityPasskeyFinishResponse(
                        isLoggedIn: false, accountID: "", walletID: "", accountCreated: false,
                        tokens: AuthoritySessionTokens(accessToken: "", refreshToken: "", accessLifetime: .zero))
                }
                return AuthorityPasskeyFinishResponse(
                    isLoggedIn: true, accountID: result.accountID, walletID: result.walletID,
                    accountCreated: result.accountCreated, tokens: AuthoritySessionTokens(result.tokens))
            }

        case AuthorityMethod.cancelPasskeyCeremony:
            return serve(request, context, AuthorityPasskeyCancelRequest.self) { (wire) async throws(RainError) in
                try await authority.cancelPasskeyCeremony(
                    appID: wire.appID, deviceID: wire.deviceID, ceremonyID: wire.ceremonyID)
                return AuthorityPasskeyCancelResponse()
            }

        case AuthorityMethod.getWallet:
            return serve(request, context, AuthorityWalletRequest.self) { (wire) async throws(RainError) in
                let info = try await authority.wallet(appID: wire.appID, accessToken: wire.accessToken)
                return AuthorityWalletResponse(
                    walletID: info.walletID, createdAt: info.createdAt, ethereumAddress: info.ethereumAddress,
                    solanaAddress: info.solanaAddress)
            }

        case AuthorityMethod.exportWallet:
            return serve(request, context, AuthorityWalletRequest.self) { (wire) async throws(RainError) in
                let secrets = try await authority.exportWallet(appID: wire.appID, accessToken: wire.accessToken)
                return AuthorityExportWalletResponse(
                    mnemonic: secrets.mnemonic, ethereumPrivateKey: secrets.ethereumPrivateKeyHex,
                    solanaKeypair: secrets.solanaKeypairBase58)
            }

        case AuthorityMethod.revokeSession:
            return serve(request, context, AuthorityRevokeSessionRequest.self) { (wire) async throws(RainError) in
                try await authority.revokeSession(appID: wire.appID, refreshToken: wire.refreshToken)
                return AuthorityRevokeSessionResponse()
            }

        case AuthorityMethod.listOutbox:
            guard isDevOutboxEnabled else {
                return .respond(
                    .failure(
                        RainError(
                            .unauthorized,
                            "the development outbox is disabled; start the authority with --dev-outbox to enable it")))
            }
            return serve(request, context, ListOutboxRequest.self) { _ async throws(RainError) in
                let deliveries = try await authority.listOutbox()
                return ListOutboxResponse(
                    entries: deliveries.map { d in
                        OutboxEntry(
                            contact: d.kind == "phone" ? .phone(d.contact) : .email(d.contact), code: d.code,
                            sentAt: d.sentAt, appID: d.appID)
                    })
            }

        default:
            return .respond(
                .failure(
                    RainError(
                        .invalidArgument,
                        "unknown method \(request.method); call \(AuthorityMethod.getInfo) to see what this authority supports",
                        details: .init(reason: "unknown_method"))))
        }
    }

    /// Nothing to stop: a cancelled call was already answered, and its work is not undone.
    public func cancel(connection: ConnectionID, requestID: UInt64) {}

    /// Nothing to drop: the authority hop has no streams.
    public func connectionClosed(_ connection: ConnectionID) {}

    /// Decodes the payload now, runs `body` in a task and answers with its result.
    private func serve<Request: WireMessage, Response: WireMessage>(
        _ request: WireRequest, _ context: RequestContext, _ type: Request.Type,
        _ body: @escaping @Sendable (Request) async throws(RainError) -> Response
    ) -> HandlerDecision {
        let decoded: Request
        do {
            decoded = try Request.decode(request.payload)
        } catch {
            return .respond(.failure(error))
        }
        let method = request.method
        let logger = self.logger
        Task {
            let response: WireResponse
            do throws(RainError) {
                response = .ok(try await body(decoded).encode())
            } catch {
                let level: LogLevel = error.code == .internalError ? .error : .info
                logger.log(
                    level, "call.failed",
                    ["method": method, "code": error.code.description, "reason": error.details.reason ?? "-"])
                response = .failure(error)
            }
            context.responder.respond(response)
        }
        return .deferred
    }
}

extension AuthoritySessionTokens {
    /// The wire form of a session's tokens.
    init(_ tokens: SessionTokens) {
        self.init(
            accessToken: tokens.accessToken, refreshToken: tokens.refreshToken, accessLifetime: tokens.accessLifetime)
    }
}

extension AuthorityAccountInfoResponse {
    /// The wire form of an `AccountInfo`.
    init(_ info: AccountInfo) {
        self.init(
            accountID: info.accountID, walletID: info.walletID, createdAt: info.createdAt, contacts: info.contacts,
            needsBackupEmail: info.needsBackupEmail, passkeys: info.passkeys)
    }
}
