import Foundation
import RainCore
import RainCrypto
import RainSoftAuthenticator
import RainTestSupport
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

            // Another account asking for the same contact gets RAIN_302 with the reason, across the wire.
            let other = try await f.login(.email("other@example.com"), device: "device-b")
            let refused = await rainError {
                _ = try await f.remote.sendContactVerificationCode(
                    appID: RemoteFixture.app, deviceID: "device-b", accessToken: other.tokens.accessToken,
                    contact: Self.backup)
            }
            #expect(refused?.code == .refused)
            #expect(refused?.details.reason == "contact_owned_by_another_account")
        }
    }
}
