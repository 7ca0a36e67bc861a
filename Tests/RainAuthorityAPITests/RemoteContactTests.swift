import Foundation
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainSoftAuthenticator
import RainTestSupport
import RainWire
import Testing

@Suite("Backup contacts over the authority hop")
struct RemoteContactTests {
    static let origin = "https://example.com"
    static let backup = RainWalletContact.email("backup@example.com")

    @Test("a passkey account verifies a backup email across the wire; needsBackupEmail and passkeys travel")
    func roundTrip() async throws {
        try await RemoteFixture.with { f in
            let anchor = SoftAuthenticator(path: f.directory + "/authenticator.json")
            let key = FixtureDevice.key
            let begin = try await f.remote.beginPasskeyRegistration(RemoteFixture.passkeyBegin())
            let created = try #require(
                try await f.remote.finishPasskeyRegistration(
                    RemoteFixture.passkeyFinish(
                        begin, try await anchor.createCredential(optionsJSON: begin.optionsJSON, origin: Self.origin),
                        key: key)))
            let token = created.tokens.accessToken
            let before = try await f.remote.accountInfo(appID: RemoteFixture.app, accessToken: token)
            #expect(before.needsBackupEmail)
            #expect(before.passkeys.count == 1)
            #expect(before.passkeys.first?.rpID == "example.com")
            #expect(before.passkeys.first?.credentialID.isEmpty == false)

            let sent = try await f.remote.sendContactVerificationCode(
                appID: RemoteFixture.app, deviceID: RemoteFixture.device, accessToken: token, contact: Self.backup)
            #expect(sent.contact == Self.backup)
            #expect(sent.challengeID.hasPrefix("chl_"))
            let code = try f.sender.lastCode(to: Self.backup)

            // A wrong code keeps its RAIN_203 details across the hop.
            let wrong = await rainError {
                _ = try await f.remote.confirmContactVerification(
                    appID: RemoteFixture.app, deviceID: RemoteFixture.device, accessToken: token,
                    challengeID: sent.challengeID, code: code == "000000" ? "111111" : "000000")
            }
            #expect(wrong?.code == .invalidLoginCode)
            #expect(wrong?.details.attemptsRemaining == 2)

            let after = try await f.remote.confirmContactVerification(
                appID: RemoteFixture.app, deviceID: RemoteFixture.device, accessToken: token,
                challengeID: sent.challengeID, code: code)
            #expect(!after.needsBackupEmail)
            #expect(after.contacts == [Self.backup])
            #expect(after.passkeys == before.passkeys)
            #expect(after.accountID == created.accountID)

            // Another account asking for the same contact is sent a code like any other; only the
            // right code gets RAIN_302 with the reason, across the wire.
            let other = try await f.login(.email("other@example.com"), device: "device-b")
            let probe = try await f.remote.sendContactVerificationCode(
                appID: RemoteFixture.app, deviceID: "device-b", accessToken: other.tokens.accessToken,
                contact: Self.backup)
            #expect(probe.contact == Self.backup)
            let probeCode = try f.sender.lastCode(to: Self.backup)
            let refused = await rainError {
                _ = try await f.remote.confirmContactVerification(
                    appID: RemoteFixture.app, deviceID: "device-b", accessToken: other.tokens.accessToken,
                    challengeID: probe.challengeID, code: probeCode)
            }
            #expect(refused?.code == .refused)
            #expect(refused?.details.reason == "contact_owned_by_another_account")
        }
    }

    @Test("over TCP, wrong codes count against the connection's address, whatever the device key; the refusal travels")
    func guessBudgetCountsTheAddress() async throws {
        var limits = CodeSendLimits.unlimited
        limits.guessWindow = .seconds(3600)
        limits.sourceMaxWrongGuesses = 2
        try await RemoteFixture.with(sendLimits: limits) { f in
            for n in 0..<3 {
                let contact = RainWalletContact.email("guess\(n)@example.com")
                let (challenge, code) = try await f.send(contact)
                let key = try Ed25519PrivateKey(rawRepresentation: Array(repeating: UInt8(n + 1), count: 32))
                let error = await rainError {
                    _ = try await f.remote.confirmLoginCode(
                        ConfirmCodeRequest(
                            appID: RemoteFixture.app, deviceID: RemoteFixture.device, challengeID: challenge.challengeID,
                            code: code == "000000" ? "111111" : "000000", devicePublicKey: key.publicKey.rawRepresentation))
                }
                if n < 2 {
                    #expect(error?.code == .invalidLoginCode)
                } else {
                    #expect(error?.code == .refused)
                    #expect(error?.details.reason == "source_guess_window")
                    #expect(error?.details.retryAfterMilliseconds == 3_600_000)
                }
            }
            // The loopback address is spent; the authority's own uid is another source.
            let (challenge, code) = try await f.send(.email("guess9@example.com"))
            let login = try await f.embedded.confirmLoginCode(
                ConfirmCodeRequest(
                    appID: RemoteFixture.app, deviceID: RemoteFixture.device, challengeID: challenge.challengeID,
                    code: code, devicePublicKey: FixtureDevice.key.publicKey.rawRepresentation))
            #expect(login.accountCreated)
        }
    }
}
