import RainCore

/// An attestation object (WebAuthn §6.5.4): the CBOR map `{fmt, attStmt, authData}` that
/// registration returns.
public struct AttestationObject: Sendable, Equatable {
    /// The attestation statement format, for example `none` or `packed`.
    public var format: String
    /// The attestation statement (a CBOR map).
    public var statement: CBORValue
    /// The authenticator data exactly as it appears in the object (signatures cover these bytes).
    public var authenticatorDataBytes: [UInt8]
    /// The parsed authenticator data.
    public var authenticatorData: AuthenticatorData

    /// Builds an object to encode (the software authenticator's side).
    public init(format: String, statement: CBORValue = .map([]), authenticatorData: AuthenticatorData) {
        self.format = format
        self.statement = statement
        self.authenticatorData = authenticatorData
        self.authenticatorDataBytes = authenticatorData.encoded
    }

    /// Parses an attestation object from untrusted bytes (bounded CBOR, see ``CBORDecoder``).
    /// Members other than `fmt`, `attStmt` and `authData` are ignored.
    /// - Throws: RAIN_102 with `details.reason` `malformed_attestation_object` (bad CBOR, trailing
    ///   bytes, a missing or mistyped member) or `malformed_authenticator_data`.
    public init(parsing bytes: [UInt8]) throws(RainError) {
        let value: CBORValue
        do {
            value = try CBORDecoder.decode(bytes)
        } catch {
            throw Self.malformed(error.message)
        }
        guard value.mapEntries != nil else { throw Self.malformed("it is not a CBOR map") }
        guard let format = value["fmt"]?.textValue else { throw Self.malformed("fmt is missing or not text") }
        guard let statement = value["attStmt"], statement.mapEntries != nil else {
            throw Self.malformed("attStmt is missing or not a map")
        }
        guard let authData = value["authData"]?.bytesValue else {
            throw Self.malformed("authData is missing or not a byte string")
        }
        self.format = format
        self.statement = statement
        self.authenticatorDataBytes = authData
        self.authenticatorData = try AuthenticatorData(parsing: authData)
    }

    /// The canonical CBOR encoding.
    public var encoded: [UInt8] {
        CBOREncoder.encode(
            .map([
                .init(.text("fmt"), .text(format)), .init(.text("attStmt"), statement),
                .init(.text("authData"), .bytes(authenticatorDataBytes)),
            ]))
    }

    private static func malformed(_ problem: String) -> RainError {
        RainError.webAuthn(.malformedAttestationObject, "malformed attestationObject: \(problem)")
    }
}
