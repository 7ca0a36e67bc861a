import FoundationEssentials
import RainCore
import RainCrypto

/// The client data of a ceremony (`CollectedClientData`, WebAuthn §5.8.1): what the client
/// hashed into the signature.
public struct CollectedClientData: Sendable, Hashable {
    /// `webauthn.create` for registration.
    public static let createType = "webauthn.create"
    /// `webauthn.get` for authentication.
    public static let getType = "webauthn.get"

    /// `webauthn.create` or `webauthn.get`.
    public var type: String
    /// The challenge as base64url text, as the client wrote it.
    public var challenge: String
    /// The caller's origin: `https://<domain>` on the web, `android:apk-key-hash:<b64url sha256>` for
    /// an Android app.
    public var origin: String
    /// True when the caller ran in a frame not same-origin with its ancestors.
    public var crossOrigin: Bool?
    /// The top-level origin, present only for a cross-origin caller.
    public var topOrigin: String?

    /// Creates client data.
    public init(type: String, challenge: [UInt8], origin: String, crossOrigin: Bool? = false, topOrigin: String? = nil) {
        self.type = type
        self.challenge = Base64URL.encode(challenge)
        self.origin = origin
        self.crossOrigin = crossOrigin
        self.topOrigin = topOrigin
    }

    /// The decoded challenge, or nil when it is not base64url.
    public var challengeBytes: [UInt8]? { Base64URL.decode(challenge) }

    /// Parses `clientDataJSON`: UTF-8 (a leading byte-order mark is dropped), a JSON object with
    /// string `type`, `challenge` and `origin`, optional boolean `crossOrigin` and string
    /// `topOrigin`; other members are ignored.
    /// - Throws: RAIN_102 with `details.reason` `malformed_client_data`.
    public init(parsing bytes: [UInt8]) throws(RainError) {
        var text = bytes
        if text.starts(with: [0xEF, 0xBB, 0xBF]) { text.removeFirst(3) }
        guard String(validating: text, as: UTF8.self) != nil else {
            throw Self.malformed("it is not UTF-8")
        }
        let wire: Wire
        do {
            wire = try JSONDecoder().decode(Wire.self, from: Data(text))
        } catch {
            throw Self.malformed(RegistrationResponseJSON.describe(error))
        }
        type = wire.type
        challenge = wire.challenge
        origin = wire.origin
        crossOrigin = wire.crossOrigin
        topOrigin = wire.topOrigin
    }

    /// The members this module reads; the decoder ignores the others.
    private struct Wire: Decodable {
        var type: String
        var challenge: String
        var origin: String
        var crossOrigin: Bool?
        var topOrigin: String?
    }

    /// The JSON serialization of §5.8.1.1: `type`, `challenge`, `origin`, `crossOrigin`, then
    /// `topOrigin` when present, with no whitespace.
    public var serialized: [UInt8] {
        var json = "{\"type\":" + Self.quoted(type) + ",\"challenge\":" + Self.quoted(challenge)
        json += ",\"origin\":" + Self.quoted(origin)
        json += ",\"crossOrigin\":" + ((crossOrigin ?? false) ? "true" : "false")
        if let topOrigin { json += ",\"topOrigin\":" + Self.quoted(topOrigin) }
        json += "}"
        return Array(json.utf8)
    }

    /// A JSON string literal (§5.8.1.2's CCDToString).
    static func quoted(_ text: String) -> String {
        var output = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": output += "\\\""
            case "\\": output += "\\\\"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                output += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: output.unicodeScalars.append(scalar)
            }
        }
        return output + "\""
    }

    private static func malformed(_ problem: String) -> RainError {
        RainError.webAuthn(.malformedClientData, "malformed clientDataJSON: \(problem)")
    }
}
