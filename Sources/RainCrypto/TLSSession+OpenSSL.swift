internal import COpenSSL
#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif
import RainCore

/// One TLS 1.3 connection's state (an OpenSSL `SSL` between two memory BIOs). It never touches a
/// socket: the owner feeds it the bytes read from the network (`receive`), drives the handshake,
/// reads plaintext out, writes plaintext in, and sends whatever `takeOutput()` returns. So a
/// non-blocking event loop can run many handshakes at once and never wait on one.
///
/// Not thread-safe: one owner (a loop thread, or callers holding one lock) uses it at a time.
public final class TLSSession {
    /// What `readPlaintext(into:)` found.
    public enum ReadResult: Equatable, Sendable {
        /// This many plaintext bytes were written to the buffer.
        case bytes(Int)
        /// No complete record is buffered: receive more bytes first.
        case needsMoreInput
        /// The peer sent close_notify: no more plaintext will come.
        case closed
    }

    /// `RainError.details.reason` values of TLS failures.
    public enum FailureReason {
        /// The peer's certificate chain does not lead to a trusted CA.
        public static let unknownCA = "tls_unknown_ca"
        /// The certificate does not name the host (or IP address) that was dialled.
        public static let hostMismatch = "tls_host_mismatch"
        /// The certificate (or one in its chain) has expired.
        public static let certificateExpired = "tls_certificate_expired"
        /// The certificate (or one in its chain) is not valid yet.
        public static let certificateNotYetValid = "tls_certificate_not_yet_valid"
        /// The certificate failed verification for another reason (named in the message).
        public static let certificateInvalid = "tls_certificate_invalid"
        /// The peer does not speak TLS 1.3.
        public static let protocolVersion = "tls_protocol_version"
        /// The peer sent something that is not TLS (a plain-TCP peer, for example).
        public static let notTLS = "tls_not_tls"
        /// Any other handshake or record failure.
        public static let handshakeFailed = "tls_handshake_failed"
    }

    private let ssl: OpaquePointer
    private let input: OpaquePointer
    private let output: OpaquePointer
    private let context: TLSContext
    /// The name the client dialled (nil on the server side).
    public let serverName: String?
    /// True once the handshake has finished successfully.
    public private(set) var isHandshakeComplete = false

    init(context: TLSContext, serverName: String?) throws(RainError) {
        guard let ssl = SSL_new(context.pointer) else { throw RainError.openSSL("SSL_new") }
        guard let input = BIO_new(BIO_s_mem()) else {
            SSL_free(ssl)
            throw RainError.openSSL("BIO_new")
        }
        guard let output = BIO_new(BIO_s_mem()) else {
            BIO_free(input)
            SSL_free(ssl)
            throw RainError.openSSL("BIO_new")
        }
        // The SSL takes ownership of both BIOs (freed by SSL_free).
        SSL_set_bio(ssl, input, output)
        self.ssl = ssl
        self.input = input
        self.output = output
        self.context = context
        self.serverName = serverName
        guard let serverName else {
            SSL_set_accept_state(ssl)
            return
        }
        SSL_set_connect_state(ssl)
        if Self.isIPAddress(serverName) {
            // An IP address is matched against IP subjectAltNames and never sent as SNI (RFC 6066).
            guard X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), serverName) == 1 else {
                throw RainError.openSSL("X509_VERIFY_PARAM_set1_ip_asc")
            }
        } else {
            SSL_set_hostflags(ssl, UInt32(X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS))
            guard SSL_set1_host(ssl, serverName) == 1 else { throw RainError.openSSL("SSL_set1_host") }
            // SSL_set_tlsext_host_name is a macro over SSL_ctrl.
            let sni = serverName.withCString { name in
                SSL_ctrl(
                    ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, Int(TLSEXT_NAMETYPE_host_name), UnsafeMutableRawPointer(mutating: name))
            }
            guard sni == 1 else { throw RainError.openSSL("setting the TLS server name") }
        }
    }

    deinit { SSL_free(ssl) }

    /// Buffers bytes read from the network.
    public func receive(_ ciphertext: UnsafeRawBufferPointer) {
        guard let base = ciphertext.baseAddress, ciphertext.count > 0 else { return }
        var offset = 0
        while offset < ciphertext.count {
            // A memory BIO grows as needed: BIO_write only fails when memory runs out.
            let n = BIO_write(input, base + offset, Int32(clamping: ciphertext.count - offset))
            if n <= 0 { return }
            offset += Int(n)
        }
    }

    /// Buffers bytes read from the network.
    public func receive(_ ciphertext: [UInt8]) {
        ciphertext.withUnsafeBytes { receive($0) }
    }

    /// Advances the handshake with the bytes received so far. Send `takeOutput()` afterwards, also
    /// after a failure (it may hold an alert for the peer).
    /// - Returns: true when the handshake is complete, false when it needs more input.
    /// - Throws: RAIN_501 whose reason is one of `FailureReason` and whose message names the cause.
    public func handshake() throws(RainError) -> Bool {
        if isHandshakeComplete { return true }
        let rc = SSL_do_handshake(ssl)
        if rc == 1 {
            isHandshakeComplete = true
            return true
        }
        let code = SSL_get_error(ssl, rc)
        if code == SSL_ERROR_WANT_READ || code == SSL_ERROR_WANT_WRITE {
            return false
        }
        throw handshakeFailure(code)
    }

    /// The connection's channel binding (RFC 9266, `tls-exporter`): 32 bytes exported with the label
    /// `EXPORTER-Channel-Binding` and no context. Both ends of one TLS 1.3 connection get the same
    /// value; any other connection (a relay's included) gets another.
    /// - Throws: RAIN_502 before the handshake is complete or when the export fails.
    public func channelBinding() throws(RainError) -> [UInt8] {
        guard isHandshakeComplete else {
            throw RainError(.internalError, "the TLS channel binding is only defined after the handshake")
        }
        let label = Array("EXPORTER-Channel-Binding".utf8)
        var out = [UInt8](repeating: 0, count: 32)
        let rc = out.withUnsafeMutableBufferPointer { buffer in
            label.withUnsafeBufferPointer { l in
                l.withMemoryRebound(to: CChar.self) { chars in
                    SSL_export_keying_material(ssl, buffer.baseAddress, buffer.count, chars.baseAddress, chars.count, nil, 0, 0)
                }
            }
        }
        guard rc == 1 else { throw RainError.openSSL("SSL_export_keying_material") }
        return out
    }

    /// Decrypts the next plaintext bytes into `buffer`.
    /// - Throws: RAIN_501 (reason `tls_handshake_failed`) when a record does not decrypt or the peer
    ///   broke the protocol.
    public func readPlaintext(into buffer: UnsafeMutableRawBufferPointer) throws(RainError) -> ReadResult {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return .needsMoreInput }
        let n = SSL_read(ssl, base, Int32(clamping: buffer.count))
        if n > 0 { return .bytes(Int(n)) }
        let code = SSL_get_error(ssl, n)
        switch code {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE: return .needsMoreInput
        case SSL_ERROR_ZERO_RETURN: return .closed
        default:
            let cause = OpenSSLErrorQueue.drain()
            throw RainError(
                .provider, "the TLS connection broke (\(cause.reasonText))",
                details: .init(reason: FailureReason.handshakeFailed), underlying: cause)
        }
    }

    /// Encrypts `plaintext`; the records are then in `takeOutput()`. Call only after the handshake.
    /// - Throws: RAIN_502 when the handshake is not complete or OpenSSL fails.
    public func write(_ plaintext: UnsafeRawBufferPointer) throws(RainError) {
        guard isHandshakeComplete else { throw RainError(.internalError, "TLS write before the handshake completed") }
        guard let base = plaintext.baseAddress, plaintext.count > 0 else { return }
        var offset = 0
        while offset < plaintext.count {
            // Into a memory BIO, SSL_write writes everything it is given (no partial writes).
            let n = SSL_write(ssl, base + offset, Int32(clamping: plaintext.count - offset))
            guard n > 0 else { throw RainError.openSSL("SSL_write") }
            offset += Int(n)
        }
    }

    /// Encrypts `plaintext` (see `write(_:)`).
    public func write(_ plaintext: [UInt8]) throws(RainError) {
        try plaintext.withTypedUnsafeBytes { (bytes) throws(RainError) in try write(bytes) }
    }

    /// True when received bytes wait in the session for the rest of their record (after
    /// `readPlaintext` answered `.needsMoreInput`): the TLS form of a partial frame, which a server
    /// gives a deadline.
    public var hasPartialRecord: Bool { SSL_has_pending(ssl) == 1 || BIO_ctrl_pending(input) > 0 }

    /// Number of bytes waiting to be sent.
    public var pendingOutputCount: Int { Int(BIO_ctrl_pending(output)) }

    /// Takes the bytes to send to the peer (handshake messages, alerts, records), in order.
    public func takeOutput() -> [UInt8] {
        let count = pendingOutputCount
        guard count > 0 else { return [] }
        var bytes = [UInt8](repeating: 0, count: count)
        let n = bytes.withUnsafeMutableBytes { BIO_read(output, $0.baseAddress, Int32(clamping: count)) }
        return n > 0 ? Array(bytes.prefix(Int(n))) : []
    }

    /// Appends the bytes to send to `buffer` (see `takeOutput()`), without an intermediate array.
    public func appendOutput(to buffer: inout [UInt8]) {
        let count = pendingOutputCount
        guard count > 0 else { return }
        let start = buffer.count
        buffer.append(contentsOf: repeatElement(0, count: count))
        let n = buffer.withUnsafeMutableBytes { BIO_read(output, $0.baseAddress.map { $0 + start }, Int32(clamping: count)) }
        buffer.removeLast(count - max(0, Int(n)))
    }

    // MARK: failures

    private func handshakeFailure(_ code: Int32) -> RainError {
        let cause = OpenSSLErrorQueue.drain()
        if serverName != nil {
            let verify = SSL_get_verify_result(ssl)
            if verify != Int(X509_V_OK) {
                return certificateFailure(verify, cause: cause)
            }
        }
        if code == SSL_ERROR_SYSCALL || code == SSL_ERROR_ZERO_RETURN {
            return RainError(
                .provider, "the peer ended the TLS handshake", details: .init(reason: FailureReason.handshakeFailed),
                underlying: cause)
        }
        let reasons = cause.reasonCodes
        if reasons.contains(where: { $0 == SSL_R_UNSUPPORTED_PROTOCOL || $0 == SSL_R_TLSV1_ALERT_PROTOCOL_VERSION }) {
            return RainError(
                .provider, "the peer does not speak TLS 1.3 (\(cause.reasonText))",
                details: .init(reason: FailureReason.protocolVersion), underlying: cause)
        }
        if reasons.contains(where: {
            $0 == SSL_R_WRONG_VERSION_NUMBER || $0 == SSL_R_PACKET_LENGTH_TOO_LONG || $0 == SSL_R_HTTP_REQUEST
        }) {
            return RainError(
                .provider, "the peer does not speak TLS (\(cause.reasonText))", details: .init(reason: FailureReason.notTLS),
                underlying: cause)
        }
        if reasons.contains(where: { $0 == SSL_R_TLSV1_ALERT_UNKNOWN_CA }) {
            return RainError(
                .provider, "the peer does not trust this certificate (\(cause.reasonText))",
                details: .init(reason: FailureReason.unknownCA), underlying: cause)
        }
        return RainError(
            .provider, "the TLS handshake failed (\(cause.reasonText))", details: .init(reason: FailureReason.handshakeFailed),
            underlying: cause)
    }

    private func certificateFailure(_ verify: Int, cause: OpenSSLErrorQueue) -> RainError {
        let text = X509_verify_cert_error_string(verify).map { String(cString: $0) } ?? "error \(verify)"
        let reason: String
        switch Int32(verify) {
        case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT,
            X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN, X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT,
            X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE, X509_V_ERR_CERT_UNTRUSTED:
            reason = FailureReason.unknownCA
        case X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH:
            reason = FailureReason.hostMismatch
        case X509_V_ERR_CERT_HAS_EXPIRED:
            reason = FailureReason.certificateExpired
        case X509_V_ERR_CERT_NOT_YET_VALID:
            reason = FailureReason.certificateNotYetValid
        default:
            reason = FailureReason.certificateInvalid
        }
        return RainError(
            .provider, "the server's certificate did not verify: \(text)", details: .init(reason: reason), underlying: cause)
    }

    private static func isIPAddress(_ text: String) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 16)
        return buffer.withUnsafeMutableBytes { buf in
            inet_pton(AF_INET, text, buf.baseAddress) == 1 || inet_pton(AF_INET6, text, buf.baseAddress) == 1
        }
    }
}

extension OpenSSLErrorQueue {
    /// The reason numbers of the entries (`ERR_GET_REASON`), parsed back from their text form
    /// (`error:0A000086:…`): the queue has been drained by then.
    var reasonCodes: [Int32] {
        entries.compactMap { entry in
            let parts = entry.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count > 1, let packed = UInt(parts[1], radix: 16) else { return nil }
            return ERR_GET_REASON(packed)
        }
    }
}
