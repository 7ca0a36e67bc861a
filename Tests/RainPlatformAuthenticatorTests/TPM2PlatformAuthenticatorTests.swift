import Foundation
import RainCore
import RainCrypto
import RainKeyStore
import RainPlatformAuthenticator
import RainTestSupport
import RainWebAuthn
import Testing

/// The platform authenticator against real software TPMs (swtpm), one per test, judged by our
/// relying party. The tests that touch the dictionary-attack lockout set their own TPM's
/// parameters first (`PlatformFixture(lockout: true)`: 5 tries, one forgotten every 60 s).
@Suite struct TPM2PlatformAuthenticatorTests {
    let alice: [UInt8] = Array("alice-user-handle".utf8)
    let bob: [UInt8] = Array("bob-user-handle".utf8)

    @Test func createsAPasskeyInTheTPMAndAssertsAgainAfterARestart() async throws {
        let fixture = try PlatformFixture()
        fixture.user.willAnswerPINs(nil)  // no PIN chosen
        let authenticator = try fixture.authenticator()
        let credential = try await fixture.register(authenticator, userHandle: alice)
        #expect(credential.attestationFormat == "none")
        #expect(credential.publicKey.algorithm == .es256)
        #expect(!credential.isUserVerified)
        #expect(!credential.isBackupEligible && !credential.isBackedUp)
        #expect(credential.signCount == 0)
        #expect(
            fixture.user.presenceRequests == [.init(ceremony: .registration, rpID: "example.com", userName: "alice@example.com")])
        #expect(fixture.user.pinRequests == [.choose(rpID: "example.com")])

        let first = try await fixture.assertion(authenticator, credential: credential, userHandle: alice)
        #expect(!first.isUserVerified)
        #expect(first.userHandle == alice)
        #expect(first.signCount == 0)

        // A restart: a new instance, the same TPM and state; no PIN is asked for a passkey without one.
        let restarted = try fixture.authenticator()
        let again = try await fixture.assertion(restarted, credential: credential, userHandle: alice)
        #expect(again.credentialID == credential.credentialID)
        #expect(fixture.user.pinRequests.count == 1)
        #expect(fixture.user.presenceRequests.count == 3)
        let listed = try await restarted.credentials()
        #expect(listed.map(\.rpID) == ["example.com"])
        #expect(listed.first?.isPINProtected == false)
        #expect(listed.first?.userHandle == alice)

        // The file is sealed: neither the relying party nor the user is readable in it, and it is 0600.
        let file = try Data(contentsOf: URL(fileURLWithPath: restarted.credentialFile))
        #expect(file.range(of: Data("example.com".utf8)) == nil)
        #expect(file.range(of: Data(alice)) == nil)
        var info = stat()
        #expect(stat(restarted.credentialFile, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
    }

    @Test func upIsSetOnlyAfterThePresenceHookSucceeded() async throws {
        let fixture = try PlatformFixture()
        fixture.user.willAnswerPINs(nil)
        let authenticator = try fixture.authenticator()
        let credential = try await fixture.register(authenticator, userHandle: alice)
        fixture.user.refusePresence()
        await #expect(throws: RainError.self) {
            _ = try await fixture.assertion(authenticator, credential: credential, userHandle: alice)
        }
        let error = await #expect(throws: RainError.self) {
            _ = try await fixture.register(authenticator, userHandle: bob)
        }
        #expect(codeAndReason(error) == "RAIN_401 prompt_dismissed")
        #expect(try await authenticator.credentials().count == 1)
    }

    @Test func withAPINTheRightPINSetsUVAndAWrongOneCountsInTheTPM() async throws {
        let fixture = try PlatformFixture(lockout: true)
        fixture.user.willAnswerPINs("246810")
        let authenticator = try fixture.authenticator()
        let credential = try await fixture.register(authenticator, userHandle: alice)
        #expect(credential.isUserVerified)
        #expect(try await authenticator.hasPIN())
        #expect(try fixture.provider.dictionaryAttackStatus().failedTries == 0)

        fixture.user.willAnswerPINs("246810")
        let verified = try await fixture.assertion(authenticator, credential: credential, userHandle: alice)
        #expect(verified.isUserVerified)
        #expect(fixture.user.pinRequests.last == .enter(rpID: "example.com", triesLeft: 4))

        fixture.user.willAnswerPINs("111111")
        let wrong = await #expect(throws: RainError.self) {
            _ = try await fixture.assertion(authenticator, credential: credential, userHandle: alice)
        }
        #expect(codeAndReason(wrong) == "RAIN_202 platform_pin_invalid")
        #expect(wrong?.details.attemptsRemaining == 3)
        #expect(wrong?.message.contains("111111") == false)
        #expect(try fixture.provider.dictionaryAttackStatus().failedTries == 1)

        // A second passkey: the PIN is checked by the TPM before a key is made with it, and a wrong
        // one counts there too and makes nothing.
        fixture.user.willAnswerPINs("999999")
        let wrongAtRegistration = await #expect(throws: RainError.self) {
            _ = try await fixture.register(authenticator, userHandle: bob)
        }
        #expect(codeAndReason(wrongAtRegistration) == "RAIN_202 platform_pin_invalid")
        #expect(wrongAtRegistration?.details.attemptsRemaining == 2)
        #expect(try fixture.provider.dictionaryAttackStatus().failedTries == 2)
        #expect(try await authenticator.credentials().count == 1)

        fixture.user.willAnswerPINs("246810")
        let second = try await fixture.register(authenticator, userHandle: bob)
        #expect(second.isUserVerified)
        #expect(try await authenticator.credentials().allSatisfy(\.isPINProtected))
        #expect(fixture.user.pinRequests.filter { $0 == .choose(rpID: "example.com") }.count == 1)
    }

    @Test func stopsAskingOneTryShortOfTheLockoutAndTheLockoutHolds() async throws {
        let fixture = try PlatformFixture(lockout: true)
        fixture.user.willAnswerPINs("135791")
        let authenticator = try fixture.authenticator()
        let credential = try await fixture.register(authenticator, userHandle: alice)

        for left: UInt32 in [3, 2, 1, 0] {
            fixture.user.willAnswerPINs("000000")
            let error = await #expect(throws: RainError.self) {
                _ = try await fixture.assertion(authenticator, credential: credential, userHandle: alice)
            }
            #expect(codeAndReason(error) == "RAIN_202 platform_pin_invalid")
            #expect(error?.details.attemptsRemaining == left)
        }
        var status = try fixture.provider.dictionaryAttackStatus()
        #expect(status.failedTries == 4)
        #expect(status.maximumTries == 5)
        #expect(!status.isInLockout)  // the last try is left to the TPM's other users

        // No PIN is asked any more, by this instance or a restarted one, even the right one.
        let asked = fixture.user.pinRequests.count
        for instance in [authenticator, try fixture.authenticator()] {
            fixture.user.willAnswerPINs("135791")
            let refused = await #expect(throws: RainError.self) {
                _ = try await fixture.assertion(instance, credential: credential, userHandle: alice)
            }
            #expect(codeAndReason(refused) == "RAIN_302 platform_pin_tries_exhausted")
            #expect(refused?.details.retryAfterMilliseconds == 60_000)
        }
        #expect(fixture.user.pinRequests.count == asked)
        #expect(try fixture.provider.dictionaryAttackStatus().failedTries == 4)

        // Another program spends the last try: the TPM locks out, and then even the right PIN is
        // refused, by the TPM itself.
        let blob = try #require(try fixture.stolenKeyBlobs().last)
        let key = try TPM2PasskeyKey(blob: blob, path: "stolen")
        let digest = SHA256.hash(Array("anything".utf8))
        #expect(throws: RainError.self) {
            _ = try fixture.provider.signWithPasskeyKey(
                digest: digest, key: key, authorization: SymmetricKey(bytes: Array("000001".utf8)), path: "stolen")
        }
        status = try fixture.provider.dictionaryAttackStatus()
        #expect(status.isInLockout)
        let locked = #expect(throws: RainError.self) {
            _ = try fixture.provider.signWithPasskeyKey(
                digest: digest, key: key, authorization: SymmetricKey(bytes: Array("135791".utf8)), path: "stolen")
        }
        #expect(codeAndReason(locked) == "RAIN_501 tpm_lockout")
        fixture.user.willAnswerPINs("135791")
        let stillRefused = await #expect(throws: RainError.self) {
            _ = try await fixture.assertion(authenticator, credential: credential, userHandle: alice)
        }
        #expect(codeAndReason(stillRefused) == "RAIN_302 platform_pin_tries_exhausted")
        #expect(stillRefused?.details.retryAfterMilliseconds == 120_000)
    }

    @Test func aCopiedStateDirectoryCannotAssertOnAnotherTPM() async throws {
        let fixture = try PlatformFixture()
        fixture.user.willAnswerPINs(nil)
        let credential = try await fixture.register(try fixture.authenticator(), userHandle: alice)

        let other = try SoftwareTPM()
        defer { other.stop() }
        let copy = try PlatformTestDirectory()
        try FileManager.default.removeItem(atPath: copy.path)
        try FileManager.default.copyItem(atPath: fixture.state.path, toPath: copy.path)
        let elsewhere = TPM2KeyProvider(stateDirectory: copy.path, tcti: other.tcti)

        // The storage key that seals the credential file does not unseal there...
        let unseal = #expect(throws: RainError.self) { _ = try elsewhere.loadSecret(.storage) }
        #expect(codeAndReason(unseal) == "RAIN_501 tpm_key_lost")
        // ...and even with it (taken from the first machine), the keys do not load.
        let moved = try TPM2PlatformAuthenticator(
            provider: elsewhere, storageKey: fixture.storageKey, directory: "\(copy.path)/platform", hooks: fixture.user.hooks)
        let error = await #expect(throws: RainError.self) {
            _ = try await fixture.assertion(moved, credential: credential, userHandle: alice)
        }
        #expect(codeAndReason(error) == "RAIN_501 tpm_key_lost")

        // The original still signs.
        _ = try await fixture.assertion(try fixture.authenticator(), credential: credential, userHandle: alice)
    }

    /// The caveat docs/security.md states: without a PIN, a program of the same user that can open
    /// the TPM needs no authenticator to sign with a passkey key.
    @Test func withoutAPINAProgramWithTheBlobAndTheTPMSignsDirectly() async throws {
        let fixture = try PlatformFixture()
        fixture.user.willAnswerPINs(nil)
        let credential = try await fixture.register(try fixture.authenticator(), userHandle: alice)

        let blob = try #require(try fixture.stolenKeyBlobs().first)
        let key = try TPM2PasskeyKey(blob: blob, path: "stolen")
        #expect(!key.hasAuthorization)
        let message = Array("an assertion the user never confirmed".utf8)
        let signature = try fixture.provider.signWithPasskeyKey(
            digest: SHA256.hash(message), key: key, authorization: nil, path: "stolen")
        #expect(credential.publicKey.isValidSignature(signature, for: message))
    }

    /// The fix the docs give: with a PIN the same program cannot sign, and each try counts toward
    /// the TPM's lockout (so it cannot guess either).
    @Test func withAPINAProgramWithTheBlobAndTheTPMCannotSignWithoutIt() async throws {
        let fixture = try PlatformFixture(lockout: true)
        fixture.user.willAnswerPINs("864209")
        let credential = try await fixture.register(try fixture.authenticator(), userHandle: alice)

        let blob = try #require(try fixture.stolenKeyBlobs().first)
        let key = try TPM2PasskeyKey(blob: blob, path: "stolen")
        #expect(key.hasAuthorization)
        let message = Array("an assertion the user never confirmed".utf8)
        for guess in [nil, SymmetricKey(bytes: Array("123456".utf8))] {
            let error = #expect(throws: RainError.self) {
                _ = try fixture.provider.signWithPasskeyKey(
                    digest: SHA256.hash(message), key: key, authorization: guess, path: "stolen")
            }
            #expect(error?.code == .unauthorized)
        }
        #expect(try fixture.provider.dictionaryAttackStatus().failedTries == 2)
        // The PIN itself works (the key is the credential's).
        let signature = try fixture.provider.signWithPasskeyKey(
            digest: SHA256.hash(message), key: key, authorization: SymmetricKey(bytes: Array("864209".utf8)), path: "stolen")
        #expect(credential.publicKey.isValidSignature(signature, for: message))
    }

    /// PIN keys count toward the lockout; the daemon's own keys (no authorization value) stay
    /// `noDA`: with the TPM locked out by a passkey's PIN, the storage key still unseals and the
    /// device key still signs.
    @Test func aLockoutFromPINsLeavesTheDaemonsOwnKeysWorking() async throws {
        let fixture = try PlatformFixture(lockout: true)
        let deviceKey = try fixture.provider.loadOrCreateDeviceKey()
        fixture.user.willAnswerPINs("975310")
        _ = try await fixture.register(try fixture.authenticator(), userHandle: alice)
        let key = try TPM2PasskeyKey(blob: try #require(try fixture.stolenKeyBlobs().first), path: "stolen")
        for _ in 0..<5 {
            #expect(throws: RainError.self) {
                _ = try fixture.provider.signWithPasskeyKey(
                    digest: SHA256.hash([1]), key: key, authorization: SymmetricKey(bytes: Array("000000".utf8)),
                    path: "stolen")
            }
        }
        #expect(try fixture.provider.dictionaryAttackStatus().isInLockout)
        #expect(try fixture.provider.loadSecret(.storage)?.keyID == fixture.storageKey.keyID)
        let message = Array("device proof".utf8)
        #expect(deviceKey.publicKey.isValidSignature(try deviceKey.sign(message), for: message))
    }

    @Test func aCredentialIDOfAnotherRelyingPartyOrAccountIsRefused() async throws {
        let fixture = try PlatformFixture()
        fixture.user.willAnswerPINs(nil, nil)
        let authenticator = try fixture.authenticator()
        let ours = try await fixture.register(authenticator, userHandle: alice)
        let otherRP = RelyingParty(
            rpID: "other.com", rpName: "Other", allowedOrigins: RelyingParty.origins(domain: "other.com"))
        let theirs = try await fixture.register(authenticator, userHandle: bob, rp: otherRP, origin: "https://other.com")
        let presence = fixture.user.presenceRequests.count

        // example.com names other.com's credential: not a candidate, nothing is asked or signed.
        let error = await #expect(throws: RainError.self) {
            _ = try await fixture.assertion(authenticator, credential: theirs, userHandle: bob, allow: [theirs.credentialID])
        }
        #expect(codeAndReason(error) == "RAIN_401 platform_no_credentials")
        #expect(fixture.user.presenceRequests.count == presence)

        // The account the caller expects: bob has no passkey for example.com.
        let options = fixture.rp.requestOptions(challenge: try RelyingParty.makeChallenge())
        let otherAccount = await #expect(throws: RainError.self) {
            _ = try await authenticator.authenticate(options: options, origin: "https://example.com", userHandle: bob)
        }
        #expect(codeAndReason(otherAccount) == "RAIN_401 platform_no_credentials")
        _ = try await authenticator.authenticate(options: options, origin: "https://example.com", userHandle: alice)

        // An RP ID the origin may not use is refused before anything else.
        var forged = options
        forged.rpId = "other.com"
        let mismatch = await #expect(throws: RainError.self) {
            _ = try await authenticator.authenticate(options: forged, origin: "https://example.com")
        }
        #expect(codeAndReason(mismatch) == "RAIN_102 rp_id_not_allowed")
        _ = try await fixture.assertion(authenticator, credential: ours, userHandle: alice, allow: [ours.credentialID])
    }

    /// The PIN never crosses the TCTI in clear: the tpm2-tss pcap TCTI records every byte exchanged
    /// with the TPM while a PIN key is made, signs with the PIN and is refused a wrong one, and the
    /// digits are not among them (the authenticator hands the PIN to these calls and nothing else).
    @Test func thePINNeverCrossesTheTCTIInClear() throws {
        let fixture = try PlatformFixture(lockout: true)
        let capture = "\(fixture.state.path)/tcti.pcap"
        let recorded = TPM2KeyProvider(stateDirectory: fixture.state.path, tcti: "pcap:\(fixture.tpm.tcti)")
        let pin = SymmetricKey(bytes: Array("582047".utf8))
        let message = Array("recorded".utf8)
        let bytes = try SoftwareTPM.recordingTCTI(into: capture) { () throws -> Data in
            let key = try recorded.createPasskeyKey(authorization: pin)
            let signature = try recorded.signWithPasskeyKey(
                digest: SHA256.hash(message), key: key, authorization: pin, path: "recorded")
            #expect(key.publicKey.isValidSignature(derSignature: signature, for: message))
            #expect(throws: RainError.self) {
                _ = try recorded.signWithPasskeyKey(
                    digest: SHA256.hash(message), key: key, authorization: SymmetricKey(bytes: Array("316497".utf8)),
                    path: "recorded")
            }
            return try #require(FileManager.default.contents(atPath: capture))
        }
        #expect(bytes.count > 1000)
        #expect(bytes.range(of: Data("582047".utf8)) == nil)
        #expect(bytes.range(of: Data("316497".utf8)) == nil)
    }

    @Test func aRemovedPasskeyCanNeverSignAgain() async throws {
        let fixture = try PlatformFixture()
        fixture.user.willAnswerPINs(nil)
        let authenticator = try fixture.authenticator()
        let credential = try await fixture.register(authenticator, userHandle: alice)
        #expect(try await !authenticator.removeCredential(id: credential.credentialID, rpID: "other.com"))
        #expect(try await authenticator.removeCredential(id: credential.credentialID, rpID: "example.com"))
        #expect(try await authenticator.credentials().isEmpty)
        let error = await #expect(throws: RainError.self) {
            _ = try await fixture.assertion(authenticator, credential: credential, userHandle: alice)
        }
        #expect(codeAndReason(error) == "RAIN_401 platform_no_credentials")
    }

    @Test func userVerificationRequiredWithoutAPINIsRefused() async throws {
        let fixture = try PlatformFixture()
        fixture.user.willAnswerPINs(nil)
        let authenticator = try fixture.authenticator()
        var rp = fixture.rp
        rp.userVerification = .required
        let error = await #expect(throws: RainError.self) {
            _ = try await fixture.register(authenticator, userHandle: alice, rp: rp)
        }
        #expect(codeAndReason(error) == "RAIN_102 user_verification_unavailable")
        #expect(try await authenticator.credentials().isEmpty)
    }

    @Test func aChangedCredentialFileIsRefusedAsDamaged() async throws {
        let fixture = try PlatformFixture()
        fixture.user.willAnswerPINs(nil)
        let authenticator = try fixture.authenticator()
        _ = try await fixture.register(authenticator, userHandle: alice)
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: authenticator.credentialFile)))
        bytes[bytes.count - 40] ^= 0x01
        try Data(bytes).write(to: URL(fileURLWithPath: authenticator.credentialFile))
        let error = await #expect(throws: RainError.self) { _ = try await authenticator.credentials() }
        #expect(codeAndReason(error) == "RAIN_102 platform_store_damaged")
        // Sealed with another state's storage key: the same.
        let foreign = try TPM2PlatformAuthenticator(
            provider: fixture.provider, storageKey: try SymmetricKey.random(), directory: fixture.passkeyDirectory,
            hooks: fixture.user.hooks)
        let other = await #expect(throws: RainError.self) { _ = try await foreign.credentials() }
        #expect(codeAndReason(other) == "RAIN_102 platform_store_damaged")
    }
}

/// What needs no TPM: the provider check, the PIN's rules, the lockout arithmetic.
@Suite struct PlatformAuthenticatorRulesTests {
    @Test func withoutTheTPM2ProviderThereIsNoPlatformAuthenticator() throws {
        let directory = try PlatformTestDirectory()
        let provider = FileKeyProvider(stateDirectory: directory.path)
        let hooks = ScriptedUser().hooks
        let error = #expect(throws: RainError.self) {
            _ = try TPM2PlatformAuthenticator.make(
                provider: provider, storageKey: try SymmetricKey.random(), directory: directory.path, hooks: hooks)
        }
        #expect(codeAndReason(error) == "RAIN_404 platform_authenticator_unavailable")
        #expect(error?.message.contains("storage.provider: tpm2") == true)
        #expect(error?.message.contains("file") == true)
        let tpm2 = TPM2KeyProvider(stateDirectory: directory.path, tcti: "swtpm:path=/tmp/rain-no-such-tpm/tpm")
        _ = try TPM2PlatformAuthenticator.make(
            provider: tpm2, storageKey: try SymmetricKey.random(), directory: directory.path, hooks: hooks)
    }

    @Test(arguments: ["12345", "12345a", "１２３４５６", String(repeating: "1", count: 33), ""])
    func aPINOutsideTheRulesIsRefused(_ text: String) {
        var digits = Array(text.utf8)
        let error = #expect(throws: RainError.self) { _ = try PlatformPIN(digits: &digits) }
        #expect(codeAndReason(error) == "RAIN_102 platform_pin_policy")
        #expect(digits.allSatisfy { $0 == 0 })
    }

    @Test func aPINIsZeroedFromTheCallersBuffer() throws {
        var digits = Array("12345678".utf8)
        _ = try PlatformPIN(digits: &digits)
        #expect(digits == [UInt8](repeating: 0, count: 8))
    }

    /// (failed, maximum, interval, inLockout) → tries left, seconds to wait when none is left.
    @Test(
        arguments: [
            (0, 5, 10, false, 4, nil), (3, 5, 10, false, 1, nil), (4, 5, 10, false, 0, 10), (5, 5, 10, true, 0, 20),
            (0, 3, 1000, false, 2, nil), (2, 3, 1000, false, 0, 1000), (0, 1, 10, false, 0, nil),
        ] as [(UInt32, UInt32, UInt32, Bool, UInt32, UInt32?)])
    func theLockoutArithmeticKeepsOneTryBack(
        _ failed: UInt32, _ maximum: UInt32, _ interval: UInt32, _ inLockout: Bool, _ left: UInt32, _ wait: UInt32?
    ) {
        let status = TPM2DictionaryAttackStatus(
            failedTries: failed, maximumTries: maximum, recoveryInterval: interval, lockoutRecovery: 10,
            isInLockout: inLockout)
        #expect(status.triesLeft == left)
        var refusal: RainError?
        do { try TPM2PlatformAuthenticator.checkTriesLeft(status) } catch { refusal = error }
        if left > 0 {
            #expect(refusal == nil)
        } else {
            #expect(codeAndReason(refusal) == "RAIN_302 platform_pin_tries_exhausted")
            #expect(refusal?.details.retryAfterMilliseconds == wait.map { UInt64($0) * 1000 })
        }
    }

    @Test func aTPMThatDoesNotCountWrongTriesLeavesTheTriesOpen() throws {
        let status = TPM2DictionaryAttackStatus(
            failedTries: 0, maximumTries: 3, recoveryInterval: 0, lockoutRecovery: 0, isInLockout: false)
        try TPM2PlatformAuthenticator.checkTriesLeft(status)
        let error = TPM2PlatformAuthenticator.wrongPIN(status)
        #expect(codeAndReason(error) == "RAIN_202 platform_pin_invalid")
        #expect(error.details.attemptsRemaining == nil)
    }
}
