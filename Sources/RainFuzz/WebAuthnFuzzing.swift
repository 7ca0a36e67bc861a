import RainCore
import RainCrypto
import RainSoftAuthenticator
import RainWebAuthn

/// FuzzWebAuthn: the first input byte picks the parser (modulo 8), the rest is its input. Run with
/// `-malloc_limit_mb`: libcbor allocates what a header declares, which the bounded reader must
/// refuse before libcbor sees it (libcbor has no depth or size limit of its own).
enum WebAuthnFuzzing {
    enum Parser: UInt8, CaseIterable {
        case cbor, cborPrefix, authenticatorData, coseKey, attestationObject, clientData, responseJSON
        /// A registration JSON, a NUL byte, then an assertion JSON: register, then log in with it.
        case ceremony
    }

    static func run(_ input: [UInt8]) -> FuzzOutcome {
        guard let selector = input.first else { return .accepted }
        let bytes = Array(input.dropFirst())
        switch Parser(rawValue: selector % UInt8(Parser.allCases.count)) ?? .cbor {
        case .cbor: return cbor(bytes)
        case .cborPrefix: return cborPrefix(bytes)
        case .authenticatorData: return authenticatorData(bytes)
        case .coseKey: return coseKey(bytes)
        case .attestationObject: return attestationObject(bytes)
        case .clientData: return clientData(bytes)
        case .responseJSON: return responseJSON(bytes)
        case .ceremony: return ceremony(bytes)
        }
    }

    /// Accepted CBOR re-encodes canonically, and the canonical form is a fixed point.
    static func cbor(_ bytes: [UInt8]) -> FuzzOutcome {
        .decoded(by: { () throws(RainError) -> CBORValue in try CBORDecoder.decode(bytes) }) { value in
            let canonical = CBOREncoder.encode(value)
            do throws(RainError) {
                guard CBOREncoder.encode(try CBORDecoder.decode(canonical)) == canonical else {
                    return .broken("CBOR: the canonical encoding is not a fixed point")
                }
            } catch {
                return .broken("CBOR: the canonical encoding of an accepted item does not decode (\(error.message))")
            }
            return .accepted
        }
    }

    /// A prefix item is as long as it says and decodes alone to the same value.
    static func cborPrefix(_ bytes: [UInt8]) -> FuzzOutcome {
        .decoded(by: { () throws(RainError) -> (value: CBORValue, length: Int) in try CBORDecoder.decodePrefix(bytes, at: 0) }) {
            decoded in
            guard decoded.length > 0, decoded.length <= bytes.count else { return .broken("CBOR: prefix length out of range") }
            do throws(RainError) {
                guard try CBORDecoder.decode(Array(bytes[0..<decoded.length])) == decoded.value else {
                    return .broken("CBOR: the prefix decodes alone to another value")
                }
                guard try CBORDecoder.itemLength(of: bytes, at: 0) == decoded.length else {
                    return .broken("CBOR: itemLength disagrees with decodePrefix")
                }
            } catch {
                return .broken("CBOR: an accepted prefix does not decode alone (\(error.message))")
            }
            return .accepted
        }
    }

    /// Parsed authenticator data re-encodes to the same bytes; its key goes through the COSE parser
    /// as the relying party does.
    static func authenticatorData(_ bytes: [UInt8]) -> FuzzOutcome {
        .decoded(by: { () throws(RainError) -> AuthenticatorData in try AuthenticatorData(parsing: bytes) }) { data in
            guard data.encoded == bytes else { return .broken("AuthenticatorData: encoded != the parsed bytes") }
            if let key = data.attestedCredentialData?.publicKeyBytes { return coseKey(key) }
            return .accepted
        }
    }

    static func coseKey(_ bytes: [UInt8]) -> FuzzOutcome {
        do {
            let key = try COSEPublicKey(encoded: bytes)
            guard key.encoded == bytes else { return .broken("COSEPublicKey: encoded != the parsed bytes") }
            return .accepted
        } catch {
            return .rejected(error)
        }
    }

    static func attestationObject(_ bytes: [UInt8]) -> FuzzOutcome {
        .decoded(by: { () throws(RainError) -> AttestationObject in try AttestationObject(parsing: bytes) }) { object in
            guard let key = object.authenticatorData.attestedCredentialData?.publicKeyBytes else { return .accepted }
            return coseKey(key)
        }
    }

    static func clientData(_ bytes: [UInt8]) -> FuzzOutcome {
        do {
            _ = try CollectedClientData(parsing: bytes)
            return .accepted
        } catch {
            return .rejected(error)
        }
    }

    /// The W3C JSON forms a browser or an app hands back (a registration or an assertion);
    /// decoded responses re-serialize, and registrations go through the relying party.
    static func responseJSON(_ bytes: [UInt8]) -> FuzzOutcome {
        var outcomes: [FuzzOutcome] = []
        var refusal: RainError?
        // Decodes the bytes as `Form`, checks the form re-serializes to itself (else returns what
        // broke), then adds the outcomes of `parts`; the first refusal is kept.
        func decode<Form: WebAuthnJSONForm & Equatable>(_: Form.Type, _ parts: (Form) -> [FuzzOutcome]) -> String? {
            do {
                let form = try Form.decode(jsonBytes: bytes)
                guard try Form.decode(json: form.jsonString()) == form else { return "\(Form.self): decode(json(x)) != x" }
                outcomes += parts(form)
            } catch {
                refusal = refusal ?? error
            }
            return nil
        }
        let broken =
            decode(RegistrationResponseJSON.self) { registration in
                [
                    attestationObject(registration.response.attestationObject.bytes),
                    clientData(registration.response.clientDataJSON.bytes), verify(registration),
                ]
            }
            ?? decode(AuthenticationResponseJSON.self) { assertion in
                [
                    authenticatorData(assertion.response.authenticatorData.bytes),
                    clientData(assertion.response.clientDataJSON.bytes),
                ]
            }
        if let broken { return .broken(broken) }
        if outcomes.isEmpty, let refusal { return .rejected(refusal) }
        return combine(outcomes)
    }

    /// The relying party the seeds were made for: registrations use challenge 7…7, assertions 9…9.
    static let relyingParty = RelyingParty(
        rpID: "example.com", rpName: "Example", allowedOrigins: ["https://example.com"])
    static let registrationChallenge = [UInt8](repeating: 7, count: 32)
    static let assertionChallenge = [UInt8](repeating: 9, count: 32)

    /// Every check of WebAuthn §7.1 (client data, RP ID hash, flags, algorithm, attestation
    /// statement and its signature); a verified credential's key must load again from its stored
    /// COSE bytes, as the authority reloads it at every login.
    static func verify(_ registration: RegistrationResponseJSON) -> FuzzOutcome {
        .decoded(by: { () throws(RainError) -> VerifiedCredential in
            try relyingParty.verifyRegistration(registration, expectedChallenge: registrationChallenge)
        }) { credential in
            do throws(RainError) {
                _ = try COSEPublicKey(encoded: credential.publicKey.encoded)
            } catch {
                return .broken("RelyingParty: a verified credential's public key does not load again (\(error.message))")
            }
            return .accepted
        }
    }

    /// Verifies the registration, then the assertion against the credential it made (WebAuthn
    /// §7.2: client data, RP ID hash, flags, the signature over authenticator data and client data).
    static func ceremony(_ bytes: [UInt8]) -> FuzzOutcome {
        guard let split = bytes.firstIndex(of: 0) else {
            return .rejected(RainError(.invalidArgument, "no NUL between the registration and the assertion"))
        }
        let credential: VerifiedCredential
        let assertion: AuthenticationResponseJSON
        do {
            let registration = try RegistrationResponseJSON.decode(jsonBytes: Array(bytes[..<split]))
            credential = try relyingParty.verifyRegistration(registration, expectedChallenge: registrationChallenge)
            assertion = try AuthenticationResponseJSON.decode(jsonBytes: Array(bytes[(split + 1)...]))
        } catch {
            return .rejected(error)
        }
        let stored = StoredCredential(
            id: credential.credentialID, publicKey: credential.publicKey.encoded, signCount: credential.signCount,
            isBackupEligible: credential.isBackupEligible)
        do {
            _ = try relyingParty.verifyAuthentication(assertion, expectedChallenge: assertionChallenge, credential: stored)
            return .accepted
        } catch {
            return .rejected(error)
        }
    }

    /// The modulus (hex) of a real RSA-2048 key (`openssl genrsa 2048`, made once; e = 65537). It must be a
    /// product of two primes: OpenSSL's public-key check runs Miller-Rabin with random bases on the
    /// modulus, and refused the made-up odd number this seed held before in about one load in 800,
    /// so the seed decoded or not by chance (CI's replay test failed on it once).
    static let rsaModulusHex = """
        c194afcc7d17083d0cb1ac8d60b6c2f13cd448702381f51cd5826f7b6400987d4b68b69a0e702c9fd72a2eea3201fbbf
        94175cdf2eb6c8f66439764d03bcb249663c7e0e23729de53e3163584a74a988ad355c688ffdd3bbb420133c4927cc5a
        6d688c06cba5e0cbefab9482fb56df035344a10b8cfae40dd92b75db3d7c5f5211d582876b20232c8a08660fee496a82
        172149550c6332b31bcb4eae3c4eb2a6a08e52a334b4d2bb3e6ea0238f045c6f97743ccb221a220273cc41a78ec0c63c
        8e3988697b2c06bf8c20dd110270b9bb23a60c53c01a9f2abda4a2d1d447202dd2ea35c8f14cc56c72ec3ebc8a9b70a6
        8e93c2254447ce7fc3a293c424d07bb9
        """

    /// ``rsaModulusHex`` as bytes.
    static var rsaModulus: [UInt8]? { bytes(hexBlock: rsaModulusHex) }

    /// Hex written over several lines (whitespace ignored) as bytes, or nil when it is not hex.
    static func bytes(hexBlock: String) -> [UInt8]? { Hex.decode(String(hexBlock.filter { !$0.isWhitespace })) }

    static func seeds(scratch: FuzzScratch) throws(RainError) -> [(name: String, bytes: [UInt8])] {
        var seeds: [(name: String, bytes: [UInt8])] = []
        func add(_ name: String, _ parser: Parser, _ bytes: [UInt8]) {
            seeds.append((name: name, bytes: [parser.rawValue] + bytes))
        }
        let origin = "https://example.com"
        for attestation in SoftAuthenticator.Attestation.allCases {
            for algorithm in [COSEAlgorithm.es256, .edDSA] {
                let authenticator = SoftAuthenticator(
                    path: "\(scratch.directory)/authenticator-\(attestation.rawValue)-\(algorithm.rawValue).json",
                    configuration: .init(attestation: attestation, supportedAlgorithms: [algorithm]))
                let options = PublicKeyCredentialCreationOptionsJSON(
                    rp: .init(id: "example.com", name: "Example"),
                    user: .init(id: [1, 2, 3, 4], name: "user", displayName: "User"),
                    challenge: registrationChallenge, pubKeyCredParams: [.init(alg: algorithm)])
                let registration = try authenticator.register(options: options, origin: origin)
                let tag = "\(attestation.rawValue)-\(algorithm)"
                let attestationBytes = registration.response.attestationObject.bytes
                add("attestation-object-\(tag)", .attestationObject, attestationBytes)
                add("attestation-object-as-cbor-\(tag)", .cbor, attestationBytes)
                add("client-data-create-\(tag)", .clientData, registration.response.clientDataJSON.bytes)
                add("registration-json-\(tag)", .responseJSON, Array(try registration.jsonString().utf8))
                if let authData = registration.response.authenticatorData?.bytes {
                    add("authenticator-data-registration-\(tag)", .authenticatorData, authData)
                    if let key = try AuthenticatorData(parsing: authData).attestedCredentialData?.publicKeyBytes {
                        add("cose-key-\(tag)", .coseKey, key)
                        add("cose-key-as-cbor-prefix-\(tag)", .cborPrefix, key + [0xA0])
                    }
                }
                guard attestation == .none else { continue }
                let assertion = try authenticator.authenticate(
                    options: .init(challenge: assertionChallenge, rpId: "example.com"), origin: origin)
                add("authenticator-data-assertion-\(tag)", .authenticatorData, assertion.response.authenticatorData.bytes)
                add("client-data-get-\(tag)", .clientData, assertion.response.clientDataJSON.bytes)
                add("assertion-json-\(tag)", .responseJSON, Array(try assertion.jsonString().utf8))
                add(
                    "ceremony-\(tag)", .ceremony,
                    Array(try registration.jsonString().utf8) + [0] + Array(try assertion.jsonString().utf8))
            }
        }
        // An RSA key (not made by the software authenticator, which has none): kty 3, alg -257, n, e.
        guard let modulus = rsaModulus else { throw RainError(.internalError, "the seed RSA modulus is not hex") }
        let rsa = CBORValue.map([
            .init(.integer(1), .integer(3)), .init(.integer(3), .integer(-257)),
            .init(.integer(-1), .bytes(modulus)), .init(.integer(-2), .bytes([0x01, 0x00, 0x01])),
        ])
        add("cose-key-rs256", .coseKey, CBOREncoder.encode(rsa))
        let mixed = CBORValue.map([
            .init(.text("fmt"), .text("none")), .init(.integer(-3), .array([.bool(true), .bool(false), .null])),
            .init(.bytes([1, 2]), .integer(-70000)), .init(.integer(1 << 40), .map([])),
        ])
        add("cbor-mixed", .cbor, CBOREncoder.encode(mixed))
        add("cbor-prefix-then-extensions", .cborPrefix, CBOREncoder.encode(mixed) + [0xA1, 0x01, 0x02])
        add("invalid-cbor-huge-array-header", .cbor, [0x9A, 0x10, 0x00, 0x00, 0x00])
        return seeds
    }
}
