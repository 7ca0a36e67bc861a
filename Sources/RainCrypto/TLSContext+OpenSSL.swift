internal import COpenSSL
import RainCore

/// TLS 1.3 settings shared by many connections (an OpenSSL `SSL_CTX`): the server's certificate
/// chain and private key, or the client's trusted CAs. Only TLS 1.3 is ever negotiated: a peer
/// offering only TLS 1.2 or older is refused during the handshake.
///
/// Create one at start-up and make a `TLSSession` per connection:
/// ```swift
/// let server = try TLSContext.server(certificateChainFile: "cert.pem", privateKeyFile: "key.pem")
/// let client = try TLSContext.client(trustedCertificatesFile: "ca.pem")
/// let session = try client.makeClientSession(serverName: "authority.example.com")
/// ```
// @unchecked Sendable: the SSL_CTX is configured completely in the factory methods and never
// changed afterwards; OpenSSL allows creating SSL objects from one SSL_CTX on several threads.
public final class TLSContext: @unchecked Sendable {
    /// Which end of a connection the context serves.
    public enum Role: Sendable {
        case server
        case client
    }

    /// Which end of a connection the context serves.
    public let role: Role
    let pointer: OpaquePointer

    /// The largest private key file accepted (a PEM RSA-8192 key is about 6.5 KiB).
    static let maximumKeyFileBytes = 64 * 1024

    private init(role: Role) throws(RainError) {
        let method = role == .server ? TLS_server_method() : TLS_client_method()
        guard let ctx = SSL_CTX_new(method) else { throw RainError.openSSL("SSL_CTX_new") }
        self.role = role
        self.pointer = ctx
        // SSL_CTX_set_min_proto_version is a macro over SSL_CTX_ctrl.
        guard SSL_CTX_ctrl(ctx, SSL_CTRL_SET_MIN_PROTO_VERSION, Int(TLS1_3_VERSION), nil) == 1 else {
            throw RainError.openSSL("setting TLS 1.3 as the minimum version")
        }
    }

    deinit { SSL_CTX_free(pointer) }

    /// A server context: presents the certificate chain in `certificateChainFile` (PEM, the
    /// server's certificate first, then any intermediates) and proves it holds `privateKeyFile`.
    ///
    /// The private key file is checked like every key file of RainWallet: a regular file owned by
    /// the current user with mode 0600 (or stricter), else it is refused.
    /// - Throws: RAIN_102 naming the file and the fix: `details.field` `certificate` for a
    ///   certificate chain that is missing or not PEM, `privateKey` for a key file that is missing,
    ///   not PEM, readable by others (reason `key_file_mode`), owned by another user
    ///   (`key_file_owner`), or that does not match the certificate (`key_mismatch`). RAIN_502 when
    ///   OpenSSL fails otherwise.
    public static func server(certificateChainFile: String, privateKeyFile: String) throws(RainError) -> TLSContext {
        let context = try TLSContext(role: .server)
        let ctx = context.pointer
        guard SSL_CTX_use_certificate_chain_file(ctx, certificateChainFile) == 1 else {
            throw OpenSSLErrorQueue.refusedInput(reason: "certificate_unreadable", field: "certificate") { cause in
                "cannot load the TLS certificate chain from \(certificateChainFile) (\(cause.reasonText)); "
                    + "give a PEM file with the server's certificate first, then any intermediate CA certificates"
            }
        }
        let key: EVPKey
        do throws(RainError) {
            key = try KeyFile.withPrivateFile(at: privateKeyFile, maximumByteCount: maximumKeyFileBytes) {
                (pem) throws(RainError) -> EVPKey in
                guard let base = pem.baseAddress, let bio = BIO_new_mem_buf(base, Int32(pem.count)) else {
                    throw RainError.openSSL("BIO_new_mem_buf")
                }
                defer { BIO_free(bio) }
                guard let pkey = PEM_read_bio_PrivateKey(bio, nil, nil, nil) else {
                    throw OpenSSLErrorQueue.refusedInput(reason: "private_key_unreadable", field: "privateKey") { cause in
                        "cannot read a private key from \(privateKeyFile) (\(cause.reasonText)); "
                            + "give the unencrypted PEM private key of the certificate"
                    }
                }
                return EVPKey(takingOwnership: pkey)
            }
        } catch {
            var error = error
            if error.details.field == "path" { error.details.field = "privateKey" }
            throw error
        }
        guard SSL_CTX_use_PrivateKey(ctx, key.pointer) == 1, SSL_CTX_check_private_key(ctx) == 1 else {
            throw OpenSSLErrorQueue.refusedInput(reason: "key_mismatch", field: "privateKey") { cause in
                "the private key in \(privateKeyFile) does not belong to the certificate in \(certificateChainFile); "
                    + "give the key the certificate was issued for"
            }
        }
        // No session resumption: connections are long-lived, and it saves a message per handshake.
        guard SSL_CTX_set_num_tickets(ctx, 0) == 1 else { throw RainError.openSSL("SSL_CTX_set_num_tickets") }
        // An idle connection gives its record buffers back (thousands of
        // connections holding half frames must not hold the authority's memory).
        // SSL_CTX_set_mode is a macro over SSL_CTX_ctrl; it returns the new mode bits.
        _ = SSL_CTX_ctrl(ctx, SSL_CTRL_MODE, Int(SSL_MODE_RELEASE_BUFFERS), nil)
        return context
    }

    /// A client context that trusts only the CA certificates in `trustedCertificatesFile` (PEM, one
    /// or more certificates): the server's chain must lead to one of them, and its certificate must
    /// name the host the session is made for (`makeClientSession(serverName:)`).
    /// - Throws: RAIN_102 (`details.field` `trustedCertificates`) when the file is missing or holds
    ///   no PEM certificate; RAIN_502 when OpenSSL fails otherwise.
    public static func client(trustedCertificatesFile: String) throws(RainError) -> TLSContext {
        let context = try TLSContext(role: .client)
        guard SSL_CTX_load_verify_locations(context.pointer, trustedCertificatesFile, nil) == 1 else {
            throw OpenSSLErrorQueue.refusedInput(reason: "ca_unreadable", field: "trustedCertificates") { cause in
                "cannot load trusted CA certificates from \(trustedCertificatesFile) (\(cause.reasonText)); "
                    + "give a PEM file with the certificate of the CA that issued the server's certificate"
            }
        }
        SSL_CTX_set_verify(context.pointer, SSL_VERIFY_PEER, nil)
        return context
    }

    /// A client context that trusts only the CA certificates in `pem` (one or more PEM
    /// certificates, as a CA file holds them): the bytes the caller read and checked, never the
    /// file again.
    /// - Throws: RAIN_102 (`details.field` `trustedCertificates`) when `pem` holds no certificate;
    ///   RAIN_502 when OpenSSL fails otherwise.
    public static func client(trustedCertificatesPEM pem: [UInt8]) throws(RainError) -> TLSContext {
        let context = try TLSContext(role: .client)
        guard let store = SSL_CTX_get_cert_store(context.pointer) else { throw RainError.openSSL("SSL_CTX_get_cert_store") }
        // Counted, or nil when OpenSSL could not make a memory BIO or keep a certificate.
        let added: Int? = pem.withUnsafeBytes { raw -> Int? in
            guard let base = raw.baseAddress, let bio = BIO_new_mem_buf(base, Int32(clamping: raw.count)) else {
                return nil
            }
            defer { BIO_free(bio) }
            var count = 0
            while let certificate = PEM_read_bio_X509(bio, nil, nil, nil) {
                defer { X509_free(certificate) }
                guard X509_STORE_add_cert(store, certificate) == 1 else { return nil }
                count += 1
            }
            // The loop ends at the end of the input, which leaves a "no start line" error behind.
            ERR_clear_error()
            return count
        }
        guard let added else { throw RainError.openSSL("loading the trusted CA certificates") }
        guard added > 0 else {
            throw RainError.invalid(
                "the trusted CA file holds no PEM certificate; give the certificate of the CA that issued the server's "
                    + "certificate", field: "trustedCertificates", reason: "ca_unreadable")
        }
        SSL_CTX_set_verify(context.pointer, SSL_VERIFY_PEER, nil)
        return context
    }

    /// A new server-side session (one per accepted connection).
    /// - Throws: RAIN_102 when this is a client context; RAIN_502 when OpenSSL fails.
    public func makeServerSession() throws(RainError) -> TLSSession {
        guard role == .server else { throw RainError.invalid("a client TLS context cannot accept connections") }
        return try TLSSession(context: self, serverName: nil)
    }

    /// A new client-side session for a connection to `serverName`: an IP address (the certificate
    /// must list it as an IP subjectAltName) or a host name (sent as SNI; the certificate must list
    /// it as a DNS subjectAltName, wildcards allowed only as a whole left-most label).
    /// - Throws: RAIN_102 when this is a server context or `serverName` is empty; RAIN_502 when
    ///   OpenSSL fails.
    public func makeClientSession(serverName: String) throws(RainError) -> TLSSession {
        guard role == .client else { throw RainError.invalid("a server TLS context cannot make client connections") }
        guard !serverName.isEmpty else { throw RainError.invalid("the TLS server name is empty", field: "serverName") }
        return try TLSSession(context: self, serverName: serverName)
    }
}

extension OpenSSLErrorQueue {
    /// The reason part of the first entry (`error:0A000086:SSL routines::certificate verify failed`
    /// gives `certificate verify failed`), for messages.
    var reasonText: String {
        guard let first = entries.first else { return "no detail from OpenSSL" }
        return first.split(separator: ":", omittingEmptySubsequences: false).last.map(String.init) ?? first
    }

    /// RAIN_102 for a TLS input (a certificate or key file) that OpenSSL refused: drains the
    /// error queue into the error's cause, which `message` may quote.
    static func refusedInput(reason: String, field: String, _ message: (OpenSSLErrorQueue) -> String) -> RainError {
        let cause = drain()
        return RainError(
            .invalidArgument, message(cause), details: .init(reason: reason, field: field), underlying: cause)
    }
}
