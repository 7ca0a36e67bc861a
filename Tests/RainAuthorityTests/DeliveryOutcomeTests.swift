import Foundation
import RainAuthorityAPI
import RainCore
import RainTestSupport
import RainWire
import Testing

@testable import RainAuthority
@testable import RainStore

/// Honest delivery: the send-limit slot is reserved before the hand-off and given back
/// only when the provider refused before accepting; a failure after the hand-off counts; a new
/// code replaces the pending one only once it was accepted. Run on SQLite and PostgreSQL, since
/// the store's use cases are written once for both.
@Suite("Code delivery outcomes")
struct DeliveryOutcomeTests {
    /// Two sends per contact per hour, nothing else in the way.
    static let twoPerContact = AuthoritySettings(
        sendLimits: CodeSendLimits(
            contactCooldown: .zero, contactWindow: .seconds(3600), contactMaxSends: 2, accountWindow: .zero,
            accountMaxSends: .max, contactAllAppsWindow: .zero, contactAllAppsMaxSends: .max, sourceWindow: .zero,
            sourceMaxSends: .max))

    static func send(_ f: StoreFixture, device: String = "device-a") async throws -> SendCodeResult {
        try await f.authority.sendLoginCode(
            SendCodeRequest(appID: StoreFixture.app, deviceID: device, contact: StoreFixture.email))
    }

    static func confirm(_ f: StoreFixture, _ challenge: SendCodeResult, code: String) async throws {
        _ = try await f.authority.confirmLoginCode(
            ConfirmCodeRequest(
                appID: StoreFixture.app, deviceID: "device-a", challengeID: challenge.challengeID, code: code,
                devicePublicKey: FixtureDevice.key.publicKey.rawRepresentation))
    }

    @Test(
        "a refusal before acceptance (RAIN_301 temporary, RAIN_501 permanent, RAIN_102) gives the slot back",
        arguments: StoreKind.allCases)
    func refusalGivesSlotBack(_ kind: StoreKind) async throws {
        try await StoreFixture.with(kind, settings: Self.twoPerContact) { f in
            _ = try await Self.send(f)
            f.sender.fail(with: CodeDeliveryFailure.refusedTemporarily("the server said 450"))
            let temporary = try #require(await rainError { _ = try await Self.send(f) })
            #expect(temporary.code == .network)
            #expect(temporary.details.reason == CodeDeliveryFailure.unavailableReason)
            f.sender.fail(with: CodeDeliveryFailure.refusedPermanently("the server said 550"))
            let permanent = try #require(await rainError { _ = try await Self.send(f) })
            #expect(permanent.code == .provider)
            #expect(permanent.details.reason == CodeDeliveryFailure.refusedReason)
            f.sender.fail(with: RainError.invalid("a line break in the contact", field: "contact"))
            #expect(await rainError { _ = try await Self.send(f) }?.code == .invalidArgument)
            // Three refusals cost nothing: the second of two sends still goes, the third is limited.
            f.sender.fail(with: nil)
            _ = try await Self.send(f)
            let limited = try #require(await rainError { _ = try await Self.send(f) })
            #expect(limited.code == .refused)
            #expect(limited.details.limit == CodeSendLimit.contactWindow.rawValue)
        }
    }

    @Test(
        "a failure after the hand-off is RAIN_501 saying it may have arrived, and counts against the limits",
        arguments: StoreKind.allCases)
    func uncertainCounts(_ kind: StoreKind) async throws {
        try await StoreFixture.with(kind, settings: Self.twoPerContact) { f in
            _ = try await Self.send(f)
            f.sender.fail(with: CodeDeliveryFailure.uncertain("the server did not answer"))
            let error = try #require(await rainError { _ = try await Self.send(f) })
            #expect(error.code == .provider)
            #expect(error.details.reason == CodeDeliveryFailure.uncertainReason)
            #expect(error.message.contains("may have arrived"))
            f.sender.fail(with: nil)
            #expect(await rainError { _ = try await Self.send(f) }?.code == .refused)
            // A sender's unclassified failure counts the same way.
        }
        try await StoreFixture.with(kind, settings: Self.twoPerContact) { f in
            _ = try await Self.send(f)
            f.sender.fail(with: RainError(.internalError, "disk full"))
            let error = try #require(await rainError { _ = try await Self.send(f) })
            #expect(error.code == .provider)
            #expect(error.details.reason == CodeDeliveryFailure.uncertainReason)
            f.sender.fail(with: nil)
            #expect(await rainError { _ = try await Self.send(f) }?.code == .refused)
        }
    }

    @Test(
        "a failed resend (refused or uncertain) leaves the code already delivered usable",
        arguments: StoreKind.allCases)
    func failedResendKeepsPendingCode(_ kind: StoreKind) async throws {
        for failure in [
            CodeDeliveryFailure.refusedTemporarily("450"), CodeDeliveryFailure.uncertain("no answer"),
        ] {
            try await StoreFixture.with(kind, settings: AuthoritySettings(sendLimits: .unlimited)) { f in
                let first = try await Self.send(f)
                let code = try f.sender.lastCode(to: StoreFixture.email)
                f.sender.fail(with: failure)
                _ = await rainError { _ = try await Self.send(f) }
                // Nothing reserved by the failed send is confirmable, and the first code still is.
                let rows = try await f.store.challenge(id: first.challengeID)
                #expect(rows?.state == .pending)
                f.sender.fail(with: nil)
                try await Self.confirm(f, first, code: code)
            }
        }
    }

    @Test("an accepted resend replaces the pending code (only then)", arguments: StoreKind.allCases)
    func acceptedResendReplaces(_ kind: StoreKind) async throws {
        try await StoreFixture.with(kind, settings: AuthoritySettings(sendLimits: .unlimited)) { f in
            let first = try await Self.send(f)
            let firstCode = try f.sender.lastCode(to: StoreFixture.email)
            let second = try await Self.send(f)
            let secondCode = try f.sender.lastCode(to: StoreFixture.email)
            #expect(try await f.store.challenge(id: first.challengeID)?.state == .retired)
            #expect(try await f.store.challenge(id: second.challengeID)?.state == .pending)
            #expect(await rainError { try await Self.confirm(f, first, code: firstCode) } != nil)
            try await Self.confirm(f, second, code: secondCode)
        }
    }
}
