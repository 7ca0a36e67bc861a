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
            return serve(request, context, SendCodeRequest.self) { (r) async throws(RainError) in
                try await authority.sendLoginCode(r)
            }

        case AuthorityMethod.confirmLoginCode:
            return serve(request, context, ConfirmCodeRequest.self) { (r) async throws(RainError) in
                try await authority.confirmLoginCode(r)
            }

        case AuthorityMethod.refreshSession:
            return serve(request, context, RefreshRequest.self) { (r) async throws(RainError) in
                AuthorityRefreshSessionResponse(tokens: try await authority.refreshSession(r))
            }

        case AuthorityMethod.accountInfo:
            return serve(request, context, AuthorityAccountInfoRequest.self) { (r) async throws(RainError) in
                try await authority.accountInfo(appID: r.appID, accessToken: r.accessToken)
            }

        case AuthorityMethod.sendContactVerificationCode:
            return serve(request, context, AuthoritySendContactVerificationRequest.self) {
                (r) async throws(RainError) in
                guard let contact = r.contact else {
                    throw RainError.invalid("the request names no contact", field: "contact")
                }
                return try await authority.sendContactVerificationCode(
                    appID: r.appID, deviceID: r.deviceID, accessToken: r.accessToken, contact: contact)
            }

        case AuthorityMethod.confirmContactVerification:
            return serve(request, context, AuthorityConfirmContactVerificationRequest.self) {
                (r) async throws(RainError) in
                try await authority.confirmContactVerification(
                    appID: r.appID, deviceID: r.deviceID, accessToken: r.accessToken, challengeID: r.challengeID,
                    code: r.code)
            }

        case AuthorityMethod.beginPasskeyRegistration:
            return serve(request, context, PasskeyBeginRequest.self) { (r) async throws(RainError) in
                try await authority.beginPasskeyRegistration(r)
            }

        case AuthorityMethod.beginPasskeyAuthentication:
            return serve(request, context, PasskeyBeginRequest.self) { (r) async throws(RainError) in
                try await authority.beginPasskeyAuthentication(r)
            }

        case AuthorityMethod.finishPasskeyRegistration:
            return serve(request, context, PasskeyFinishRequest.self) { (r) async throws(RainError) in
                PasskeyFinishResult(login: try await authority.finishPasskeyRegistration(r))
            }

        case AuthorityMethod.finishPasskeyAuthentication:
            return serve(request, context, PasskeyFinishRequest.self) { (r) async throws(RainError) in
                PasskeyFinishResult(login: try await authority.finishPasskeyAuthentication(r))
            }

        case AuthorityMethod.cancelPasskeyCeremony:
            return serve(request, context, AuthorityPasskeyCancelRequest.self) { (r) async throws(RainError) in
                try await authority.cancelPasskeyCeremony(appID: r.appID, deviceID: r.deviceID, ceremonyID: r.ceremonyID)
                return AuthorityPasskeyCancelResponse()
            }

        case AuthorityMethod.getWallet:
            return serve(request, context, AuthorityWalletRequest.self) { (r) async throws(RainError) in
                try await authority.wallet(appID: r.appID, accessToken: r.accessToken)
            }

        case AuthorityMethod.exportWallet:
            return serve(request, context, AuthorityWalletRequest.self) { (r) async throws(RainError) in
                try await authority.exportWallet(appID: r.appID, accessToken: r.accessToken)
            }

        case AuthorityMethod.revokeSession:
            return serve(request, context, AuthorityRevokeSessionRequest.self) { (r) async throws(RainError) in
                try await authority.revokeSession(appID: r.appID, refreshToken: r.refreshToken)
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
                ListOutboxResponse(deliveries: try await authority.listOutbox())
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
