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
        guard let mac = Self.bytes(hex: envelope.mac), constantTimeEquals(mac, HMACSHA256.authenticate(body, key: key)) else {
            throw tampered("was changed outside rainwalletd (its seal does not match)")
        }
        return body
    }

    /// Writes `body`, sealed.
    /// - Throws: RAIN_502 when the file cannot be written (nothing is half-written).
    public func write(_ body: [UInt8]) throws(RainError) {
        let envelope = Envelope(
            body: String(decoding: body, as: UTF8.self), mac: Self.hex(HMACSHA256.authenticate(body, key: key)))
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

    static func hex(_ bytes: [UInt8]) -> String { CallerIdentity.hex(bytes) }

    static func bytes(hex: String) -> [UInt8]? {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(digits.count / 2)
        var index = 0
        while index < digits.count {
            guard let high = nibble(digits[index]), let low = nibble(digits[index + 1]) else { return nil }
            out.append(high << 4 | low)
            index += 2
        }
        return out
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        default: nil
        }
    }
}
