import Foundation
import RainCore
import RainCrypto
import RainWebAuthn
import Testing

@Suite struct JSONFormsTests {
    /// The members of a JSON object, for checking what goes on the wire.
    static func object(_ json: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
    }

    @Test func creationOptionsHaveTheW3CShape() throws {
        let challenge = Array(repeating: UInt8(0xFB), count: 32)
        let options = TestRP.relyingParty.creationOptions(
            challenge: challenge, user: TestRP.user, excludeCredentialIDs: [[0xFF, 0xEE]])
        let json = try options.jsonString()
        #expect(!json.contains("="))
        let members = try Self.object(json)
        #expect(members["challenge"] as? String == Base64URL.encode(challenge))
        #expect((members["rp"] as? [String: Any])?["id"] as? String == "example.com")
        #expect((members["rp"] as? [String: Any])?["name"] as? String == "Example")
        let user = try #require(members["user"] as? [String: Any])
        #expect(user["id"] as? String == Base64URL.encode(TestRP.user.id.bytes))
        #expect(user["name"] as? String == "alice")
        #expect(user["displayName"] as? String == "Alice")
        let params = try #require(members["pubKeyCredParams"] as? [[String: Any]])
        #expect(params.map { $0["alg"] as? Int } == [-7, -8, -257])
        #expect(params.allSatisfy { $0["type"] as? String == "public-key" })
        #expect(members["attestation"] as? String == "none")
        #expect(members["timeout"] as? Int == 300_000)
        let exclude = try #require(members["excludeCredentials"] as? [[String: Any]])
        #expect(exclude.first?["id"] as? String == "_-4")
        #expect(exclude.first?["type"] as? String == "public-key")
        let selection = try #require(members["authenticatorSelection"] as? [String: Any])
        #expect(selection["residentKey"] as? String == "required")
        #expect(selection["userVerification"] as? String == "preferred")
        #expect(try PublicKeyCredentialCreationOptionsJSON.decode(json: json) == options)
    }

    @Test func requestOptionsHaveTheW3CShape() throws {
        let options = TestRP.relyingParty.requestOptions(challenge: [1, 2, 3, 4], allowCredentialIDs: [[9, 9, 9]])
        let json = try options.jsonString()
        let members = try Self.object(json)
        #expect(members["challenge"] as? String == "AQIDBA")
        #expect(members["rpId"] as? String == "example.com")
        #expect(members["userVerification"] as? String == "preferred")
        #expect((members["allowCredentials"] as? [[String: Any]])?.first?["id"] as? String == "CQkJ")
        #expect(try PublicKeyCredentialRequestOptionsJSON.decode(json: json) == options)
    }

    @Test func responsesRoundTrip() throws {
        let registration = try RegistrationForge(key: try TestKey.make(.es256), packed: true).build()
        let registrationJSON = try registration.jsonString()
        #expect(!registrationJSON.contains("="))
        #expect(try RegistrationResponseJSON.decode(json: registrationJSON) == registration)
        let members = try Self.object(registrationJSON)
        #expect(members["id"] as? String == members["rawId"] as? String)
        #expect(members["type"] as? String == "public-key")
        #expect((members["clientExtensionResults"] as? [String: Any])?.isEmpty == true)
        let response = try #require(members["response"] as? [String: Any])
        #expect(
            Set(response.keys) == [
                "clientDataJSON", "attestationObject", "authenticatorData", "transports", "publicKeyAlgorithm",
            ])

        let assertion = try AssertionForge(key: try TestKey.make(.edDSA)).build()
        let assertionJSON = try assertion.jsonString()
        #expect(try AuthenticationResponseJSON.decode(json: assertionJSON) == assertion)
        let assertionResponse = try #require(try Self.object(assertionJSON)["response"] as? [String: Any])
        #expect(Set(assertionResponse.keys) == ["clientDataJSON", "authenticatorData", "signature", "userHandle"])
    }

    @Test func browserStyleResponseDecodes() throws {
        // As a browser's toJSON() writes it: padding-free base64url, extra members, extension outputs.
        let json = """
            {"id":"AAECAw","rawId":"AAECAw","type":"public-key","authenticatorAttachment":"cross-platform",
             "clientExtensionResults":{"credProps":{"rk":true}},
             "response":{"clientDataJSON":"e30","authenticatorData":"AAAA","signature":"AQ","userHandle":"Bw",
                         "somethingNew":42}}
            """
        let response = try AuthenticationResponseJSON.decode(json: json)
        #expect(response.rawId.bytes == [0, 1, 2, 3])
        #expect(response.response.clientDataJSON.bytes == Array("{}".utf8))
        #expect(response.response.userHandle?.bytes == [7])
        #expect(response.clientExtensionResults == .object(["credProps": .object(["rk": .bool(true)])]))
        // Padded base64url is accepted as well.
        let padded = try AuthenticationResponseJSON.decode(json: json.replacingOccurrences(of: "\"AQ\"", with: "\"AQ==\""))
        #expect(padded.response.signature.bytes == [1])
    }

    struct Malformed: Sendable, CustomTestStringConvertible {
        var name: String
        var json: String
        var testDescription: String { name }
    }

    static let malformed: [Malformed] = [
        Malformed(name: "empty", json: ""),
        Malformed(name: "not JSON", json: "{\"id\":"),
        Malformed(name: "an array", json: "[]"),
        Malformed(
            name: "missing rawId",
            json:
                #"{"id":"AA","type":"public-key","response":{"clientDataJSON":"e30","authenticatorData":"AA","signature":"AA"}}"#),
        Malformed(name: "missing response", json: #"{"id":"AA","rawId":"AA","type":"public-key"}"#),
        Malformed(
            name: "missing signature",
            json: #"{"id":"AA","rawId":"AA","type":"public-key","response":{"clientDataJSON":"e30","authenticatorData":"AA"}}"#),
        Malformed(
            name: "standard base64",
            json:
                #"{"id":"AA","rawId":"+/8","type":"public-key","response":{"clientDataJSON":"e30","authenticatorData":"AA","signature":"AA"}}"#
        ),
        Malformed(
            name: "base64url with whitespace",
            json:
                #"{"id":"AA","rawId":"A A","type":"public-key","response":{"clientDataJSON":"e30","authenticatorData":"AA","signature":"AA"}}"#
        ),
        Malformed(
            name: "rawId is a number",
            json:
                #"{"id":"AA","rawId":0,"type":"public-key","response":{"clientDataJSON":"e30","authenticatorData":"AA","signature":"AA"}}"#
        ),
        Malformed(name: "too long", json: "{\"id\":\"" + String(repeating: "A", count: 300_000) + "\"}"),
    ]

    @Test(arguments: malformed)
    func malformedResponseJSONIsRefused(input: Malformed) {
        expectFailure(.malformedResponse) { () throws(RainError) in _ = try AuthenticationResponseJSON.decode(json: input.json) }
    }

    @Test func decodingErrorsNameTheMember() {
        let error = expectRainError(.invalidArgument) { () throws(RainError) in
            _ = try AuthenticationResponseJSON.decode(json: Self.malformed[5].json)
        }
        #expect(error?.message.contains("signature") == true)
    }

    @Test func clientDataSerializationFollowsTheSpec() throws {
        let data = CollectedClientData(
            type: CollectedClientData.getType, challenge: [0xFB, 0xFF], origin: "https://exa\"mple.com\u{1}")
        #expect(
            String(decoding: data.serialized, as: UTF8.self)
                == #"{"type":"webauthn.get","challenge":"-_8","origin":"https://exa\"mple.com\u0001","crossOrigin":false}"#)
        #expect(try CollectedClientData(parsing: data.serialized) == data)
        var framed = data
        framed.crossOrigin = true
        framed.topOrigin = "https://top.example"
        #expect(
            String(decoding: framed.serialized, as: UTF8.self).hasSuffix(
                #","crossOrigin":true,"topOrigin":"https://top.example"}"#))
        #expect(try CollectedClientData(parsing: framed.serialized) == framed)
    }

    @Test func originsAndFingerprints() {
        let fingerprint = String(repeating: "AB:", count: 31) + "AB"
        #expect(RelyingParty.certificateSHA256(fingerprint: fingerprint) == Array(repeating: 0xAB, count: 32))
        #expect(
            RelyingParty.certificateSHA256(fingerprint: String(repeating: "ab", count: 32)) == Array(repeating: 0xAB, count: 32))
        #expect(RelyingParty.certificateSHA256(fingerprint: String(repeating: "AB:", count: 30) + "AB") == nil)
        #expect(RelyingParty.certificateSHA256(fingerprint: String(repeating: "ABC:", count: 31) + "AB") == nil)
        #expect(RelyingParty.certificateSHA256(fingerprint: "zz") == nil)
        #expect(
            RelyingParty.origins(domain: "example.com", androidCertificateSHA256: [Array(repeating: 0xAB, count: 32)])
                == ["https://example.com", "android:apk-key-hash:q6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6s"])
    }

    @Test func challengesAreRandomAndLongEnough() throws {
        let a = try RelyingParty.makeChallenge()
        let b = try RelyingParty.makeChallenge()
        #expect(a.count == 32 && a != b)
        #expect(try RelyingParty.makeChallenge(byteCount: 16).count == 16)
        expectRainError(.invalidArgument) { () throws(RainError) in _ = try RelyingParty.makeChallenge(byteCount: 15) }
        #expect(try RelyingParty.makeUserHandle().count == 32)
    }

    @Test func errorsCarryTheirFailure() {
        let error = RainError.webAuthn(.challengeMismatch, "x")
        #expect(error.code == .invalidArgument)
        #expect(error.webAuthnFailure == .challengeMismatch)
        #expect(RainError.invalid("y").webAuthnFailure == nil)
        #expect(Set(WebAuthnFailure.allCases.map(\.rawValue)).count == WebAuthnFailure.allCases.count)
    }
}
