import RainCore
import RainCrypto
import RainSecurityKey
import RainTestSupport
import RainWebAuthn
import Testing

/// Real libfido2 against the software CTAP2 key, judged by our relying party.
@Suite(.serialized) struct SecurityKeyCeremonyTests {
    @Test func libfido2ListsTheInjectedKeyOpensItAndReadsItsInfo() async throws {
        let fixture = try SecurityKeyFixture()
        defer { fixture.key.detach() }
        let listed = try SecurityKeys.injected([fixture.key.listing])
        #expect(listed.map(\.path) == [fixture.key.path])
        #expect(listed.first?.manufacturer == fixture.key.manufacturer)
        #expect(listed.first?.product == fixture.key.product)

        let device = try await fixture.open()
        #expect(device.isFIDO2)
        let capabilities = try await SecurityKeyFixture.blocking { () throws(RainError) in try device.capabilities() }
        #expect(capabilities.versions == ["FIDO_2_0", "FIDO_2_1"])
        #expect(capabilities.options["rk"] == true)
        #expect(capabilities.options["up"] == true)
        #expect(capabilities.hasPIN == false)
        #expect(capabilities.pinProtocols == [2])
        #expect(capabilities.aaguid.count == 16)
        #expect(capabilities.maximumMessageSize == 1200)
    }

    /// hidraw enumeration itself needs a real key; this only shows the manifest call and its
    /// list are used and freed without error on a machine with or without keys.
    @Test func listingTheSystemsKeysSucceedsWithOrWithoutKeys() async throws {
        let listed = try await SecurityKeyFixture.blocking { () throws(RainError) in try SecurityKeys.list() }
        #expect(listed.allSatisfy { !$0.path.hasPrefix(InjectedSecurityKeys.pathPrefix) })
    }

    @Test(arguments: [false, true])
    func aCredentialMadeWithoutAPINRegistersAndSignsIn(residentKey: Bool) async throws {
        let fixture = try SecurityKeyFixture()
        defer { fixture.key.detach() }
        let device = try await fixture.open()
        let userID = try SecureRandom.bytes(count: 16)

        let (credential, registration) = try await fixture.register(on: device, userID: userID, residentKey: residentKey)
        #expect(registration.attestationFormat == "packed")
        #expect(credential.attestationFormat == "packed")
        #expect(credential.isUserVerified == false)
        #expect(credential.credentialID == registration.credentialID)

        let assertion = try await fixture.signIn(on: device, credential: credential, userID: userID, allowList: !residentKey)
        #expect(assertion.credentialID == credential.credentialID)
        #expect(assertion.signCount == 1)
        #expect(assertion.isUserVerified == false)
        // A discoverable credential names its user; the relying party finds the account by it.
        #expect(assertion.userHandle == (residentKey ? userID : nil))
    }

    @Test(arguments: [false, true])
    func withThePINBothCeremoniesAreUserVerified(residentKey: Bool) async throws {
        let fixture = try SecurityKeyFixture()
        defer { fixture.key.detach() }
        let device = try await fixture.open()
        // setPIN through libfido2: key agreement, then the PIN encrypted and authenticated (protocol 2).
        try await SecurityKeyFixture.blocking { () throws(RainError) in try device.setPIN("4321") }
        let reopened = try await fixture.open()
        let reopenedCapabilities = try await SecurityKeyFixture.blocking { () throws(RainError) in try reopened.capabilities() }
        #expect(reopenedCapabilities.hasPIN)
        let userID = try SecureRandom.bytes(count: 16)

        let (credential, _) = try await fixture.register(on: reopened, userID: userID, residentKey: residentKey, pin: "4321")
        #expect(credential.isUserVerified)
        let assertion = try await fixture.signIn(
            on: reopened, credential: credential, userID: userID, allowList: !residentKey, pin: "4321")
        #expect(assertion.isUserVerified)
        // Without the PIN an assertion is still possible, but not user-verified.
        let unverified = try await fixture.signIn(on: reopened, credential: credential, userID: userID, allowList: !residentKey)
        #expect(unverified.isUserVerified == false)
        #expect(unverified.signCount == 2)
    }

    @Test func changingThePINMakesTheOldOneWrong() async throws {
        let fixture = try SecurityKeyFixture(pin: "1234")
        defer { fixture.key.detach() }
        let device = try await fixture.open()
        try await SecurityKeyFixture.blocking { () throws(RainError) in try device.setPIN("98765", currentPIN: "1234") }
        let error = await rainError {
            _ = try await fixture.register(on: device, userID: [1], residentKey: false, pin: "1234")
        }
        #expect(error?.details.reason == SecurityKeyFailure.pinInvalid.rawValue)
        let (credential, _) = try await fixture.register(on: device, userID: [1], residentKey: false, pin: "98765")
        #expect(credential.isUserVerified)
    }

    @Test func aKeyWithAPINWillNotMakeACredentialWithoutIt() async throws {
        let fixture = try SecurityKeyFixture(pin: "1234")
        defer { fixture.key.detach() }
        let device = try await fixture.open()
        let error = await rainError { _ = try await fixture.register(on: device, userID: [1], residentKey: true) }
        #expect(error?.code == .unauthorized)
        #expect(error?.details.reason == SecurityKeyFailure.pinRequired.rawValue)
    }

    @Test func aWrongPINSaysHowManyTriesAreLeftAndTheRightOneResetsThem() async throws {
        let fixture = try SecurityKeyFixture(pin: "1234")
        defer { fixture.key.detach() }
        let device = try await fixture.open()
        let error = await rainError { _ = try await fixture.register(on: device, userID: [1], residentKey: false, pin: "0000") }
        #expect(error?.code == .unauthorized)
        #expect(error?.details.reason == SecurityKeyFailure.pinInvalid.rawValue)
        #expect(error?.details.attemptsRemaining == 7)
        let retriesAfterWrongPIN = try await SecurityKeyFixture.blocking { () throws(RainError) in try device.pinRetries() }
        #expect(retriesAfterWrongPIN == 7)

        _ = try await fixture.register(on: device, userID: [1], residentKey: false, pin: "1234")
        let retriesAfterRightPIN = try await SecurityKeyFixture.blocking { () throws(RainError) in try device.pinRetries() }
        #expect(retriesAfterRightPIN == 8)
    }

    @Test func eightWrongPINsBlockThePINWithAPowerCycleAfterEveryThree() async throws {
        let fixture = try SecurityKeyFixture(pin: "1234")
        defer { fixture.key.detach() }
        let pinInvalid = SecurityKeyFailure.pinInvalid.rawValue
        let authBlocked = SecurityKeyFailure.pinAuthBlocked.rawValue
        let blocked = SecurityKeyFailure.pinBlocked.rawValue
        let expected = [[pinInvalid, pinInvalid, authBlocked], [pinInvalid, pinInvalid, authBlocked], [pinInvalid, blocked]]
        for round in expected {
            let device = try await fixture.open()
            var reasons: [String?] = []
            for _ in round {
                let error = await rainError {
                    _ = try await fixture.register(on: device, userID: [1], residentKey: false, pin: "0000")
                }
                reasons.append(error?.details.reason)
            }
            #expect(reasons == round)
            // Three wrong in a row: the key wants to be unplugged before the next try, even a right one.
            if round.last == authBlocked {
                let error = await rainError {
                    _ = try await fixture.register(on: device, userID: [1], residentKey: false, pin: "1234")
                }
                #expect(error?.details.reason == authBlocked)
            }
            try fixture.key.powerCycle()
        }
        let device = try await fixture.open()
        let error = await rainError { _ = try await fixture.register(on: device, userID: [1], residentKey: false, pin: "1234") }
        #expect(error?.details.reason == blocked)
        #expect(fixture.key.pinRetries == 0)
    }

    @Test func aCredentialOfAnotherRelyingPartyIsNotFound() async throws {
        let fixture = try SecurityKeyFixture()
        defer { fixture.key.detach() }
        let device = try await fixture.open()
        let credential = try await SecurityKeyFixture.blocking { () throws(RainError) in
            try device.makeCredential(
                rpID: "other.example", rpName: "Other", clientDataHash: SHA256.hash([1]),
                user: SecurityKeyUser(id: [7], name: "a", displayName: "A"), residentKey: true)
        }
        #expect(credential.credentialID.isEmpty == false)
        for allowList in [[credential.credentialID], []] {
            let error = await rainError {
                _ = try await SecurityKeyFixture.blocking { () throws(RainError) in
                    try device.getAssertion(rpID: "example.com", clientDataHash: SHA256.hash([1]), allowCredentialIDs: allowList)
                }
            }
            #expect(error?.code == .unavailable)
            #expect(error?.details.reason == SecurityKeyFailure.noCredentials.rawValue)
        }
    }

    @Test func aDiscoverableLoginReturnsEveryAccountOfTheSite() async throws {
        let fixture = try SecurityKeyFixture()
        defer { fixture.key.detach() }
        let device = try await fixture.open()
        _ = try await fixture.register(on: device, userID: [1], residentKey: true)
        _ = try await fixture.register(on: device, userID: [2], residentKey: true)
        _ = try await fixture.register(on: device, userID: [3], residentKey: false)
        let assertions = try await SecurityKeyFixture.blocking { () throws(RainError) in
            try device.getAssertion(rpID: SecurityKeyFixture.rpID, clientDataHash: SHA256.hash([1]))
        }
        #expect(Set(assertions.compactMap(\.userHandle)) == [[1], [2]])
    }

    @Test func aKeyThatHoldsAnExcludedCredentialRefusesAnother() async throws {
        let fixture = try SecurityKeyFixture()
        defer { fixture.key.detach() }
        let device = try await fixture.open()
        let (credential, _) = try await fixture.register(on: device, userID: [1], residentKey: false)
        let error = await rainError {
            _ = try await SecurityKeyFixture.blocking { () throws(RainError) in
                try device.makeCredential(
                    rpID: SecurityKeyFixture.rpID, rpName: "Example", clientDataHash: SHA256.hash([1]),
                    user: SecurityKeyUser(id: [1], name: "a", displayName: "A"), residentKey: false,
                    excludeCredentialIDs: [credential.credentialID])
            }
        }
        #expect(error?.details.reason == SecurityKeyFailure.credentialExcluded.rawValue)
        #expect(fixture.key.credentialCount == 1)
    }
}
