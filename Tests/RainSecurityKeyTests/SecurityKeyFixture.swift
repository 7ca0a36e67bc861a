import Dispatch
import RainCore
import RainCrypto
import RainSecurityKey
import RainTestSupport
import RainWebAuthn
import Testing

/// A software CTAP2 key opened through real libfido2 (injected io), and our relying party to
/// judge what it returns.
struct SecurityKeyFixture {
    static let rpID = "example.com"
    static let origin = "https://example.com"
    static let queue = DispatchQueue(label: "rain.tests.security-key", attributes: .concurrent)

    let key: SoftCTAP2Authenticator
    let relyingParty = RelyingParty(rpID: rpID, rpName: "Example", allowedOrigins: [origin])

    init(touch: SoftCTAP2Authenticator.TouchPolicy = .immediately, pin: String? = nil, userPresenceTimeout: Double = 30) throws {
        key = try SoftCTAP2Authenticator(name: "test", touch: touch, pin: pin, userPresenceTimeout: userPresenceTimeout)
    }

    /// Lists the key through `fido_dev_info_set` and opens it (INIT, getInfo), off the Swift pool.
    func open() async throws -> SecurityKeyDevice {
        let listing = key.listing
        return try await Self.queue.runBlocking { () throws(RainError) in
            let listed = try SecurityKeys.injected([listing])
            guard let info = listed.first else { throw RainError(.internalError, "the injected key was not listed") }
            return try SecurityKeyDevice(info)
        }
    }

    /// Runs a blocking ceremony off the Swift pool.
    static func blocking<T: Sendable>(_ body: @escaping @Sendable () throws(RainError) -> T) async throws(RainError) -> T {
        try await queue.runBlocking(body)
    }

    /// Registers a credential through libfido2 and verifies it with our relying party.
    func register(
        on device: SecurityKeyDevice, userID: [UInt8], residentKey: Bool, pin: String? = nil
    ) async throws -> (VerifiedCredential, SecurityKeyRegistration) {
        let challenge = try RelyingParty.makeChallenge()
        let clientData = CollectedClientData(type: CollectedClientData.createType, challenge: challenge, origin: Self.origin)
            .serialized
        let user = SecurityKeyUser(id: userID, name: "ana@example.com", displayName: "Ana")
        let registration = try await Self.blocking { () throws(RainError) in
            try device.makeCredential(
                rpID: Self.rpID, rpName: "Example", clientDataHash: SHA256.hash(clientData), user: user, residentKey: residentKey,
                pin: pin)
        }
        let response = RegistrationResponseJSON(
            rawId: registration.credentialID,
            response: AuthenticatorAttestationResponseJSON(
                clientDataJSON: clientData, attestationObject: try registration.attestationObject(), transports: ["usb"]),
            authenticatorAttachment: "cross-platform")
        return (try relyingParty.verifyRegistration(response, expectedChallenge: challenge), registration)
    }

    /// Signs in through libfido2 and verifies the first assertion with our relying party.
    func signIn(
        on device: SecurityKeyDevice, credential: VerifiedCredential, userID: [UInt8], allowList: Bool, pin: String? = nil
    ) async throws -> VerifiedAssertion {
        let challenge = try RelyingParty.makeChallenge()
        let clientData = CollectedClientData(type: CollectedClientData.getType, challenge: challenge, origin: Self.origin)
            .serialized
        let allowed = allowList ? [credential.credentialID] : []
        let assertions = try await Self.blocking { () throws(RainError) in
            try device.getAssertion(
                rpID: Self.rpID, clientDataHash: SHA256.hash(clientData), allowCredentialIDs: allowed, pin: pin)
        }
        let assertion = try #require(assertions.first)
        let response = AuthenticationResponseJSON(
            rawId: assertion.credentialID,
            response: AuthenticatorAssertionResponseJSON(
                clientDataJSON: clientData, authenticatorData: assertion.authenticatorData, signature: assertion.signature,
                userHandle: assertion.userHandle),
            authenticatorAttachment: "cross-platform")
        let stored = StoredCredential(
            id: credential.credentialID, publicKey: credential.publicKey.encoded, signCount: credential.signCount,
            isBackupEligible: credential.isBackupEligible, userHandle: userID)
        return try relyingParty.verifyAuthentication(response, expectedChallenge: challenge, credential: stored)
    }
}

/// The thrown error as a RainError (libfido2's failures all come out as one).
func rainError(_ body: () async throws -> Void) async -> RainError? {
    do {
        try await body()
        return nil
    } catch let error as RainError {
        return error
    } catch {
        return RainError(.internalError, "not a RainError: \(error)")
    }
}
