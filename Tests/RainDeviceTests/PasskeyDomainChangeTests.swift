import RainAccess
import RainConfig
import RainCore
import RainTestSupport
import RainWire
import Testing

@testable import RainDevice

/// The profile's side of a passkey domain move (`ProfileSession+PasskeyDomain`): checked first,
/// recorded second, against the domain the check saw.
@Suite struct PasskeyDomainChangeUnitTests {
    @Test func aFirstDomainIsNotAMoveAndAnotherDomainLaterIs() async throws {
        let f = try await Fixture()
        let session = f.service.session(profile: "default")
        let first = try await session.passkeyDomainChange(to: "example.com")
        #expect(first == .init(from: nil, to: "example.com") && !first.isMove)
        #expect(try await session.changePasskeyDomain(first).previousDomain == "")
        #expect(try await !session.passkeyDomainChange(to: "example.com").isMove, "the same domain again is no move")
        let move = try await session.passkeyDomainChange(to: "other.com")
        #expect(move.isMove && move.from == "example.com")
        let response = try await session.changePasskeyDomain(move)
        #expect(response.passkeyDomain == "other.com" && response.previousDomain == "example.com")
        #expect(try await session.requirePasskeyDomain() == "other.com")
    }

    @Test func aMoveCheckedBeforeAnotherOneIsRefusedAndChangesNothing() async throws {
        let f = try await Fixture()
        let session = f.service.session(profile: "default")
        _ = try await session.configure(passkeyDomain: "example.com")
        let toOther = try await session.passkeyDomainChange(to: "other.com")
        let toThird = try await session.passkeyDomainChange(to: "third.org")
        _ = try await session.changePasskeyDomain(toThird)
        do throws(RainError) {
            _ = try await session.changePasskeyDomain(toOther)
            Issue.record("a move checked against example.com was recorded over third.org")
        } catch {
            #expect(error.details.reason == "passkey_domain_mismatch")
        }
        #expect(try await session.requirePasskeyDomain() == "third.org")
    }

    @Test func configureNeverMovesTheDomainAndSaysHow() async throws {
        let f = try await Fixture()
        let session = f.service.session(profile: "default")
        _ = try await session.configure(passkeyDomain: "example.com")
        do throws(RainError) {
            _ = try await session.configure(passkeyDomain: "other.com")
            Issue.record("configure moved the domain")
        } catch {
            #expect(error.details.reason == "passkey_domain_mismatch")
        }
        #expect(try await session.requirePasskeyDomain() == "example.com")
    }

    @Test func aDomainFromTheConfigIsNotMovedByACall() async throws {
        var config = DaemonConfig()
        config.profiles["default"] = ProfileSettings(appID: "default", passkeyDomain: "example.com")
        let f = try await Fixture(config: config)
        let session = f.service.session(profile: "default")
        do throws(RainError) {
            _ = try await session.passkeyDomainChange(to: "other.com")
            Issue.record("a config domain was offered for a move")
        } catch {
            #expect(error.details.reason == "passkey_domain_from_config")
        }
        #expect(try await !session.passkeyDomainChange(to: "example.com").isMove)
    }

    @Test func aMoveDropsACeremonyBegunForTheOldDomain() async throws {
        let f = try await Fixture()
        let session = f.service.session(profile: "default")
        _ = try await session.configure(passkeyDomain: "example.com")
        let begun = try await session.beginPasskeyLogin()
        #expect(await session.pendingPasskeyKind(begun.ceremonyID) != nil)
        _ = try await session.changePasskeyDomain(try await session.passkeyDomainChange(to: "other.com"))
        #expect(await session.pendingPasskeyKind(begun.ceremonyID) == nil)
    }

    @Test func onlyTheOwnerMayMoveTheDomainAndTheRefusalNamesIt() async throws {
        let w = try AppAccessTests.world()
        let owner = AppAccessTests.app("/usr/bin/wallet", hash: 1)
        let other = AppAccessTests.app("/usr/bin/other", hash: 2)
        w.prompt.script([nil, nil])
        try await w.access.authorize(profile: "default", context: AppAccessTests.connect(w, 1, owner))
        try await w.access.approve(app: other, profile: "default", context: AppAccessTests.connect(w, 3, owner))
        func refusal(_ caller: CallerIdentity) -> RainError? {
            do throws(RainError) {
                try DeviceService.requireProfileOwner(
                    w.access, profile: "default", caller: caller, field: "passkeyDomain", what: "move its passkey domain")
                return nil
            } catch {
                return error
            }
        }
        #expect(refusal(owner)?.code == nil)
        let refused = refusal(other)
        #expect(refused?.code == .unauthorized && refused?.details.reason == "not_profile_owner")
        #expect(refused?.details.field == "passkeyDomain")
    }

    @Test func thePromptNamesTheProfileBothDomainsAndWhatStays() {
        let text = DeviceService.confirmPasskeyDomainMove(profile: "shop", from: "example.com", to: "other.com")
        #expect(text.contains("profile shop") && text.contains("from passkey domain example.com to other.com"))
        #expect(text.contains("no longer log in") && text.contains("the session stays"))
    }
}
