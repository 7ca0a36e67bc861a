import Foundation
import RainCore
import RainCrypto
import RainSystem

/// A small JSON record in the state directory that a program of the same user must not be able to
/// rewrite unnoticed: the app approvals and the last confirmed security settings.
///
/// The file is `{"body": "<JSON text>", "mac": "<hex>"}`, the MAC an HMAC-SHA256 of the body under
/// a key derived (HKDF, one `purpose` per record) from the storage key, which the key provider
/// holds. With the `tpm2` and `secret-service` providers another program of the user cannot get
/// that key, so it cannot forge a record; with `file` it can (the README's threat model says so).
/// Written atomically (temp file, fsync, rename), mode 0600.
public struct SealedRecord: Sendable {
    /// The file.
    public let path: String
    private let key: SymmetricKey
    /// What the record is, in messages (`app approvals`).
    public let name: String

    /// The largest record read.
    public static let maximumByteCount = 1 << 20

    /// A record at `path`, sealed with a key derived from `storageKey` for `purpose`.
    /// - Throws: RAIN_502 when the key cannot be derived.
    public init(path: String, storageKey: SymmetricKey, purpose: String, name: String) throws(RainError) {
        self.path = path
        self.name = name
        key = try HKDFSHA256.deriveKey(from: storageKey, salt: [], info: "rainwallet/sealed-record/\(purpose)/v1")
    }

    private struct Envelope: Codable {
        var body: String
        var mac: String
    }

    /// The body, checked; nil when there is no file.
    /// - Throws: RAIN_102 (reason `record_tampered`) when the MAC does not match (edited by hand or
    ///   by another program) or the file is not a record, naming the file and what to do.
    public func read() throws(RainError) -> [UInt8]? {
        guard
            let bytes = try OwnedPath.readTrustedFile(
                path, owners: [getuid()], name: name, field: path, limit: Self.maximumByteCount)
        else { return nil }
        let envelope: Envelope
        do {
            envelope = try JSONDecoder().decode(Envelope.self, from: Data(bytes))
        } catch {
            throw tampered("is not a sealed record")
        }
        let body = Array(envelope.body.utf8)
        guard let mac = Hex.decode(envelope.mac), constantTimeEquals(mac, HMACSHA256.authenticate(body, key: key)) else {
            throw tampered("was changed outside rainwalletd (its seal does not match)")
        }
        return body
    }

    /// Writes `body`, sealed.
    /// - Throws: RAIN_502 when the file cannot be written (nothing is half-written).
    public func write(_ body: [UInt8]) throws(RainError) {
        let envelope = Envelope(
            body: String(decoding: body, as: UTF8.self), mac: Hex.encode(HMACSHA256.authenticate(body, key: key)))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data: Data
        do {
            data = try encoder.encode(envelope)
        } catch {
            throw RainError(.internalError, "could not encode the \(name)")
        }
        try AtomicFile.write(Array(data) + [0x0a], to: path, mode: 0o600)
    }

    private func tampered(_ what: String) -> RainError {
        RainError.invalid(
            """
            the \(name) file \(path) \(what): rainwalletd does not use it. If you did not change it, another \
            program did; remove it to start over (every approval is asked again)
            """, field: path, reason: "record_tampered")
    }
}
