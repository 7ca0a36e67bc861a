import Foundation
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainTestSupport
import RainWire
import Testing

@testable import RainAuthority
@testable import RainStore

@Suite("Session refresh")
struct SessionRefreshTests {
    // MARK: - Binding and rotation

    @Test("a login with a device key binds the session; refresh rotates both tokens to the derived pair")
    func bindAndRotate() async throws {
        try await AuthorityFixture.with { f in
            let key = FixtureDevice.key
            let login = try await f.login(deviceKey: key)
            var record = try await f.session(login.accountID)
            #expect(record.devicePublicKey == key.publicKey.rawRepresentation)
            #expect(record.refreshGeneration == 0)
            #expect(record.previousRefreshHash == nil)
            #expect(record.rotatedAt == nil)

            f.clock.advance(by: .seconds(600))
            let next = try await f.refresh(login.tokens.refreshToken, key: key)
            #expect(next.accessToken != login.tokens.accessToken)
            #expect(next.refreshToken != login.tokens.refreshToken)
            #expect(next.accessToken.hasPrefix("rwa_"))
            #expect(next.refreshToken.hasPrefix("rwr_"))
            #expect(next.accessLifetime == .seconds(900))

            // The documented derivation, under the rotation key.
            let old = Array(login.tokens.refreshToken.utf8)
            let access = HMACSHA256.authenticate(
                Array("rain.rotate.access.v1".utf8) + [0] + old, key: f.keys.tokenRotationKey)
            let refresh = HMACSHA256.authenticate(
                Array("rain.rotate.refresh.v1".utf8) + [0] + old, key: f.keys.tokenRotationKey)
            #expect(next.accessToken == "rwa_" + Base64URL.encode(access))
            #expect(next.refreshToken == "rwr_" + Base64URL.encode(refresh))

            record = try await f.session(login.accountID)
            #expect(record.refreshHash == f.keys.tokenHash(next.refreshToken))
            #expect(record.accessHash == f.keys.tokenHash(next.accessToken))
            #expect(record.previousRefreshHash == f.keys.tokenHash(login.tokens.refreshToken))
            #expect(record.rotatedAt == f.clock.now)
            #expect(record.accessExpiresAt == f.clock.now.adding(.seconds(900)))
            #expect(record.refreshGeneration == 1)
            #expect(record.revokedAt == nil)
        }
    }

    @Test("rotation invalidates the old access token at once; the new one reads the account")
    func oldAccessTokenInvalidated() async throws {
        try await AuthorityFixture.with { f in
            let key = FixtureDevice.key
            let login = try await f.login(deviceKey: key)
            let before = try await f.authority.accountInfo(appID: AuthorityFixture.app, accessToken: login.tokens.accessToken)
            #expect(before.accountID == login.accountID)

            let next = try await f.refresh(login.tokens.refreshToken, key: key)
            let reason = await sessionRefusal {
                _ = try await f.authority.accountInfo(appID: AuthorityFixture.app, accessToken: login.tokens.accessToken)
            }
            #expect(reason == "invalid_token")
            let after = try await f.authority.accountInfo(appID: AuthorityFixture.app, accessToken: next.accessToken)
            #expect(after == before)
        }
    }

    @Test("chained refreshes keep a session alive across ten access lifetimes")
    func chainedRefreshes() async throws {
        try await AuthorityFixture.with { f in
            let key = FixtureDevice.key
            let login = try await f.login(deviceKey: key)
            var tokens = login.tokens
            var seen: Set<String> = [tokens.refreshToken]
            for _ in 0..<10 {
                f.clock.advance(by: .seconds(901))
                let reason = await sessionRefusal {
                    _ = try await f.authority.accountInfo(appID: AuthorityFixture.app, accessToken: tokens.accessToken)
                }
                #expect(reason == "access_expired")
                tokens = try await f.refresh(tokens.refreshToken, key: key)
                #expect(seen.insert(tokens.refreshToken).inserted)
                let info = try await f.authority.accountInfo(appID: AuthorityFixture.app, accessToken: tokens.accessToken)
                #expect(info.accountID == login.accountID)
            }
            #expect(try await f.session(login.accountID).refreshGeneration == 10)
        }
    }

    @Test("the refresh-token lifetime counts from the last rotation, then the session ends")
    func refreshLifetime() async throws {
        let settings = AuthoritySettings(refreshTokenLifetime: .seconds(3600), sendLimits: .unlimited)
        try await AuthorityFixture.with(settings: settings) { f in
            let key = FixtureDevice.key
            let login = try await f.login(deviceKey: key)
            f.clock.advance(by: .seconds(3000))
            let first = try await f.refresh(login.tokens.refreshToken, key: key)
            // 100 minutes after the login, 50 after the last rotation: still alive.
            f.clock.advance(by: .seconds(3000))
            let second = try await f.refresh(first.refreshToken, key: key)
            f.clock.advance(by: .seconds(3600))
            let reason = await sessionRefusal { _ = try await f.refresh(second.refreshToken, key: key) }
            #expect(reason == "refresh_expired")
            let record = try await f.session(login.accountID)
            #expect(record.revokeReason == SessionRevokeReason.refreshExpired)
            let again = await sessionRefusal { _ = try await f.refresh(second.refreshToken, key: key) }
            #expect(again == "refresh_expired")
        }
    }

    // MARK: - Reuse and the grace window

    @Test(
        "reusing a rotated token after the grace window, once the new pair was used, revokes the family, newest tokens included")
    func reuseAfterGraceWindow() async throws {
        try await AuthorityFixture.with { f in
            let key = FixtureDevice.key
            let login = try await f.login(deviceKey: key)
            let next = try await f.refresh(login.tokens.refreshToken, key: key)
            // Only a used pair makes the repeat reuse (an unused one is handed back).
            _ = try await f.authority.accountInfo(appID: AuthorityFixture.app, accessToken: next.accessToken)
            f.clock.advance(by: .seconds(11))
            let reason = await sessionRefusal { _ = try await f.refresh(login.tokens.refreshToken, key: key) }
            #expect(reason == "refresh_token_reused")

            let record = try await f.session(login.accountID)
            #expect(record.revokeReason == SessionRevokeReason.reused)
            #expect(record.revokedAt == f.clock.now)
            let newest = await sessionRefusal { _ = try await f.refresh(next.refreshToken, key: key) }
            #expect(newest == "refresh_token_reused")
            let access = await sessionRefusal {
                _ = try await f.authority.accountInfo(appID: AuthorityFixture.app, accessToken: next.accessToken)
            }
            #expect(access == "revoked")
        }
    }

    @Test("a generation older than the previous one is reuse even inside the grace window")
    func olderGenerationIsReuse() async throws {
        try await AuthorityFixture.with { f in
            let key = FixtureDevice.key
            let login = try await f.login(deviceKey: key)
            let first = try await f.refresh(login.tokens.refreshToken, key: key)
            let second = try await f.refresh(first.refreshToken, key: key)
            let reason = await sessionRefusal { _ = try await f.refresh(login.tokens.refreshToken, key: key) }
            #expect(reason == "refresh_token_reused")
            #expect(try await f.session(login.accountID).revokeReason == SessionRevokeReason.reused)
            let newest = await sessionRefusal { _ = try await f.refresh(second.refreshToken, key: key) }
            #expect(newest == "refresh_token_reused")
        }
    }

    @Test("a repeat within the grace window gets the identical pair and rotates nothing")
    func repeatWithinGraceWindow() async throws {
        try await AuthorityFixture.with { f in
            let key = FixtureDevice.key
            let login = try await f.login(deviceKey: key)
            let first = try await f.refresh(login.tokens.refreshToken, key: key)
            let rotatedAt = f.clock.now
            f.clock.advance(by: .seconds(5))
            let repeated = try await f.refresh(login.tokens.refreshToken, key: key)
            #expect(repeated.accessToken == first.accessToken)
            #expect(repeated.refreshToken == first.refreshToken)
            // What is left of the access token issued 5 s ago.
            #expect(repeated.accessLifetime == .seconds(895))

            var record = try await f.session(login.accountID)
            #expect(record.refreshGeneration == 1)
            #expect(record.rotatedAt == rotatedAt)
            #expect(record.refreshHash == f.keys.tokenHash(first.refreshToken))
            #expect(record.revokedAt == nil)
            _ = try await f.authority.accountInfo(appID: AuthorityFixture.app, accessToken: first.accessToken)

            // The returned refresh token still works, once.
            let next = try await f.refresh(first.refreshToken, key: key)
            #expect(next.refreshToken != first.refreshToken)
            record = try await f.session(login.accountID)
            #expect(record.refreshGeneration == 2)
            _ = try await f.authority.accountInfo(appID: AuthorityFixture.app, accessToken: next.accessToken)
            f.clock.advance(by: .seconds(11))
            let reason = await sessionRefusal { _ = try await f.refresh(first.refreshToken, key: key) }
            #expect(reason == "refresh_token_reused")
        }
    }

    @Test("the default grace window is 10 s, inclusive", arguments: [(10_000, true), (10_001, false)])
    func graceWindowEdge(milliseconds: Int, isRepeat: Bool) async throws {
        try await AuthorityFixture.with { f in
            #expect(f.authority.settings.refreshGraceWindow == .seconds(10))
            let key = FixtureDevice.key
            let login = try await f.login(deviceKey: key)
            let first = try await f.refresh(login.tokens.refreshToken, key: key)
            // Used, so that past the window the repeat is reuse.
            _ = try await f.authority.accountInfo(appID: AuthorityFixture.app, accessToken: first.accessToken)
            f.clock.advance(by: .milliseconds(milliseconds))
            if isRepeat {
                let repeated = try await f.refresh(login.tokens.refreshToken, key: key)
                #expect(repeated.refreshToken == first.refreshToken)
            } else {
                let reason = await sessionRefusal { _ = try await f.refresh(login.tokens.refreshToken, key: key) }
                #expect(reason == "refresh_token_reused")
            }
        }
    }

    @Test("20 concurrent refreshes of one token, through two authorities on one database, get one pair")
    func concurrentRefreshes() async throws {
        try await AuthorityFixture.with { f in
            // A second authority process sharing the database: its own connection and queue.
            let otherStore = try await SQLiteAuthorityStore.open(stateDirectory: f.directory)
            let other = EmbeddedAuthority(
                store: otherStore, keys: f.keys, clock: f.clock, sender: f.sender, outbox: nil,
                logger: Logger(label: "test.other", sink: f.logSink))
            let key = FixtureDevice.key
            let login = try await f.login(deviceKey: key)
            let request = RefreshRequest(
                appID: AuthorityFixture.app, deviceID: "device-a", refreshToken: login.tokens.refreshToken)
            let proof = TestDeviceKeys(deviceID: "device-a", keys: [key]).proof
            let authorities: [EmbeddedAuthority] = [f.authority, other]
            let results = try await withThrowingTaskGroup(of: SessionTokens.self) { group in
                for index in 0..<20 {
                    let authority = authorities[index % 2]
                    group.addTask { try await authority.refreshSession(request, proof: proof) }
                }
                var all: [SessionTokens] = []
                for try await tokens in group { all.append(tokens) }
                return all
            }
            await otherStore.close()
            #expect(results.count == 20)
            let first = try #require(results.first)
            #expect(results.allSatisfy { $0.accessToken == first.accessToken && $0.refreshToken == first.refreshToken })
            #expect(first.refreshToken != login.tokens.refreshToken)
            let record = try await f.session(login.accountID)
            #expect(record.refreshGeneration == 1)
            #expect(record.revokedAt == nil)
            _ = try await f.refresh(first.refreshToken, key: key)
        }
    }

    // MARK: - Proof of possession (the caller's proven keys, no device clock)

    @Test("a refresh proven by another key (Ed25519 or P-256) is refused and revokes the family", arguments: [false, true])
    func otherKeyRevokes(isP256: Bool) async throws {
        try await AuthorityFixture.with { f in
            let key = FixtureDevice.key
            let login = try await f.login(deviceKey: key)
            let thief: any DeviceSigner =
                isP256 ? TestP256DeviceSigner(try P256PrivateKey()) : SoftwareDeviceSigner(try Ed25519PrivateKey())
            let reason = await sessionRefusal {
                _ = try await f.authority.refreshSession(
                    RefreshRequest(appID: AuthorityFixture.app, deviceID: "device-a", refreshToken: login.tokens.refreshToken),
                    proof: TestDeviceKeys(deviceID: "device-a", signers: [thief]).proof)
            }
            #expect(reason == "refresh_rejected")
            let record = try await f.session(login.accountID)
            #expect(record.revokeReason == SessionRevokeReason.stolenToken)
            #expect(record.refreshGeneration == 0)

            // The legitimate device is locked out too: the copied token burned the session.
            let legit = await sessionRefusal { _ = try await f.refresh(login.tokens.refreshToken, key: key) }
            #expect(legit == "refresh_rejected")
            let access = await sessionRefusal {
                _ = try await f.authority.accountInfo(
                    appID: AuthorityFixture.app, accessToken: login.tokens.accessToken,
                    proof: TestDeviceKeys(deviceID: "device-a", keys: [key]).proof)
            }
            #expect(access == "revoked")
        }
    }

    @Test("a refresh without any proof is RAIN_501 device_proof_required and revokes nothing")
    func unprovenRefresh() async throws {
        try await AuthorityFixture.with { f in
            let key = FixtureDevice.key
            let login = try await f.login(deviceKey: key)
            let error = await rainError {
                _ = try await f.authority.refreshSession(
                    RefreshRequest(appID: AuthorityFixture.app, deviceID: "device-a", refreshToken: login.tokens.refreshToken),
                    proof: .none(deviceID: "device-a"))
            }
            #expect(error?.code == .provider)
            #expect(error?.details.reason == "device_proof_required")
            let record = try await f.session(login.accountID)
            #expect(record.revokedAt == nil)
            #expect(record.refreshGeneration == 0)
            _ = try await f.refresh(login.tokens.refreshToken, key: key)
        }
    }

    @Test("the right key under another device id is refused without a revocation")
    func wrongDeviceID() async throws {
        try await AuthorityFixture.with { f in
            let key = FixtureDevice.key
            let login = try await f.login(deviceKey: key)
            let reason = await sessionRefusal {
                _ = try await f.refresh(login.tokens.refreshToken, key: key, device: "device-x")
            }
            #expect(reason == "refresh_rejected")
            #expect(try await f.session(login.accountID).revokedAt == nil)
            _ = try await f.refresh(login.tokens.refreshToken, key: key)
        }
    }

    @Test("a previous token repeated by another key inside the grace window also revokes")
    func badProofOnRepeat() async throws {
        try await AuthorityFixture.with { f in
            let key = FixtureDevice.key
            let login = try await f.login(deviceKey: key)
            let next = try await f.refresh(login.tokens.refreshToken, key: key)
            let reason = await sessionRefusal {
                _ = try await f.refresh(login.tokens.refreshToken, key: Ed25519PrivateKey())
            }
            #expect(reason == "refresh_rejected")
            let newest = await sessionRefusal { _ = try await f.refresh(next.refreshToken, key: key) }
            #expect(newest == "refresh_rejected")
        }
    }

    @Test("an unknown refresh token, or one of another app, is refused and revokes nothing")
    func unknownToken() async throws {
        try await AuthorityFixture.with { f in
            let key = FixtureDevice.key
            let login = try await f.login(deviceKey: key)
            let unknown = await sessionRefusal { _ = try await f.refresh("rwr_unknown", key: key) }
            #expect(unknown == "refresh_rejected")
            let otherApp = await sessionRefusal {
                _ = try await f.refresh(login.tokens.refreshToken, key: key, app: "app-two")
            }
            #expect(otherApp == "refresh_rejected")
            #expect(try await f.session(login.accountID).revokedAt == nil)
            _ = try await f.refresh(login.tokens.refreshToken, key: key)
        }
    }

    // MARK: - Unbound sessions and login input

    @Test("a login without a device key makes an unbound session that is never refreshed nor revoked by trying")
    func unboundSession() async throws {
        try await AuthorityFixture.with { f in
            let key = FixtureDevice.key
            let login = try await f.login(deviceKey: nil)
            #expect(try await f.session(login.accountID).devicePublicKey == nil)
            let reason = await sessionRefusal { _ = try await f.refresh(login.tokens.refreshToken, key: key) }
            #expect(reason == "device_unbound")
            #expect(try await f.session(login.accountID).revokedAt == nil)
            // Nor used: its tokens alone prove no device.
            let read = await sessionRefusal {
                _ = try await f.authority.accountInfo(appID: AuthorityFixture.app, accessToken: login.tokens.accessToken)
            }
            #expect(read == "device_unbound")
            #expect(try await f.session(login.accountID).revokedAt == nil)
        }
    }

    @Test("a malformed device key at login is RAIN_102 devicePublicKey and leaves the challenge usable", arguments: [31, 33, 64])
    func malformedDeviceKey(length: Int) async throws {
        try await AuthorityFixture.with { f in
            let (challenge, code) = try await f.send()
            let error = try #require(
                await rainError {
                    _ = try await f.authority.confirmLoginCode(
                        ConfirmCodeRequest(
                            appID: AuthorityFixture.app, deviceID: "device-a", challengeID: challenge.challengeID,
                            code: code, devicePublicKey: Array(repeating: 9, count: length)))
                })
            #expect(error.code == .invalidArgument)
            #expect(error.details.field == "devicePublicKey")
            let record = try #require(try await f.store.challenge(id: challenge.challengeID))
            #expect(record.state == .pending)
            #expect(record.wrongAttempts == 0)
            let key = FixtureDevice.key
            let login = try await f.confirm(challenge, code: code, deviceKey: key)
            #expect(try await f.session(login.accountID).devicePublicKey == key.publicKey.rawRepresentation)
        }
    }

    // MARK: - Other devices, logout, account reads

    @Test("a login on device B revokes device A: A's refresh and reads say revoked_elsewhere")
    func loginElsewhere() async throws {
        try await AuthorityFixture.with { f in
            let keyA = try Ed25519PrivateKey()
            let keyB = try Ed25519PrivateKey()
            let onA = try await f.login(device: "device-a", deviceKey: keyA)
            let onB = try await f.login(device: "device-b", deviceKey: keyB)
            let refresh = await sessionRefusal { _ = try await f.refresh(onA.tokens.refreshToken, key: keyA) }
            #expect(refresh == "revoked_elsewhere")
            let read = await sessionRefusal {
                _ = try await f.authority.accountInfo(appID: AuthorityFixture.app, accessToken: onA.tokens.accessToken)
            }
            #expect(read == "revoked_elsewhere")
            // Still so after A's access token would have expired.
            f.clock.advance(by: .seconds(1000))
            let later = await sessionRefusal {
                _ = try await f.authority.accountInfo(appID: AuthorityFixture.app, accessToken: onA.tokens.accessToken)
            }
            #expect(later == "revoked_elsewhere")
            let onBNext = try await f.refresh(onB.tokens.refreshToken, key: keyB, device: "device-b")
            _ = try await f.authority.accountInfo(
                appID: AuthorityFixture.app, accessToken: onBNext.accessToken,
                proof: TestDeviceKeys(deviceID: "device-b", keys: [keyB]).proof)
        }
    }

    @Test("after logout, refresh and reads are RAIN_201 revoked; logout works with the previous token too")
    func logoutThenRefresh() async throws {
        try await AuthorityFixture.with { f in
            let key = FixtureDevice.key
            let login = try await f.login(deviceKey: key)
            let next = try await f.refresh(login.tokens.refreshToken, key: key)
            try await f.authority.revokeSession(appID: AuthorityFixture.app, refreshToken: next.refreshToken)
            let refresh = await sessionRefusal { _ = try await f.refresh(next.refreshToken, key: key) }
            #expect(refresh == "revoked")
            let read = await sessionRefusal {
                _ = try await f.authority.accountInfo(appID: AuthorityFixture.app, accessToken: next.accessToken)
            }
            #expect(read == "revoked")

            // A device that lost the reply of its last refresh logs out with the token it still has.
            let again = try await f.login(deviceKey: key)
            _ = try await f.refresh(again.tokens.refreshToken, key: key)
            try await f.authority.revokeSession(appID: AuthorityFixture.app, refreshToken: again.tokens.refreshToken)
            #expect(try await f.session(again.accountID).revokeReason == SessionRevokeReason.logout)
        }
    }

    @Test("accountInfo: the account with its contacts; unknown token, other app, expired token")
    func accountInfo() async throws {
        try await AuthorityFixture.with { f in
            let key = FixtureDevice.key
            let createdAt = f.clock.now
            let login = try await f.login(deviceKey: key)
            let info = try await f.authority.accountInfo(appID: AuthorityFixture.app, accessToken: login.tokens.accessToken)
            #expect(
                info
                    == AccountInfo(
                        accountID: login.accountID, walletID: login.walletID, createdAt: createdAt,
                        contacts: [AuthorityFixture.email]))

            for (app, token) in [(AuthorityFixture.app, "rwa_unknown"), ("app-two", login.tokens.accessToken)] {
                let reason = await sessionRefusal { _ = try await f.authority.accountInfo(appID: app, accessToken: token) }
                #expect(reason == "invalid_token")
            }
            // The refresh token is not an access token.
            let swapped = await sessionRefusal {
                _ = try await f.authority.accountInfo(appID: AuthorityFixture.app, accessToken: login.tokens.refreshToken)
            }
            #expect(swapped == "invalid_token")

            f.clock.advance(by: .milliseconds(899_999))
            _ = try await f.authority.accountInfo(appID: AuthorityFixture.app, accessToken: login.tokens.accessToken)
            f.clock.advance(by: .milliseconds(1))
            let expired = await sessionRefusal {
                _ = try await f.authority.accountInfo(appID: AuthorityFixture.app, accessToken: login.tokens.accessToken)
            }
            #expect(expired == "access_expired")
        }
    }

    // MARK: - Maintenance, wire format, logs

    @Test("pruning drops refresh hashes rotated out longer ago than the refresh lifetime; such a token is then unknown")
    func pruneRetiredTokens() async throws {
        let settings = AuthoritySettings(refreshTokenLifetime: .seconds(3600), sendLimits: .unlimited)
        try await AuthorityFixture.with(settings: settings) { f in
            let key = FixtureDevice.key
            let login = try await f.login(deviceKey: key)
            var chain = [login.tokens.refreshToken]
            for _ in 0..<6 {
                f.clock.advance(by: .seconds(1200))
                chain.append(try await f.refresh(try #require(chain.last), key: key).refreshToken)
            }
            // chain[6] is current, chain[5] previous, chain[0…4] older; chain[0] and chain[1] were
            // rotated out more than an hour ago (at 20 and 40 minutes; it is now 120).
            #expect(try await f.store.dumpAllRows()["retired_refresh_tokens"]?.count == 5)
            let result = try await f.authority.pruneExpired()
            #expect(result.retiredRefreshTokensDeleted == 2)
            #expect(try await f.store.dumpAllRows()["retired_refresh_tokens"]?.count == 3)

            let pruned = await sessionRefusal { _ = try await f.refresh(chain[0], key: key) }
            #expect(pruned == "refresh_rejected")
            #expect(try await f.session(login.accountID).revokedAt == nil)
            let kept = await sessionRefusal { _ = try await f.refresh(chain[2], key: key) }
            #expect(kept == "refresh_token_reused")
        }
    }

    @Test("a refresh request carries no signature and no timestamp, and its description hides the token")
    func refreshRequestHasNoClock() throws {
        let request = RefreshRequest(appID: "app", deviceID: "dev-1", refreshToken: "rwr_secret")
        #expect(try RefreshRequest.decode(try request.encode()) == request)
        #expect(!String(describing: request).contains("rwr_secret"))
    }

    @Test("no token ever reaches the log, while refresh events do")
    func logHasNoTokens() async throws {
        try await AuthorityFixture.with { f in
            let key = FixtureDevice.key
            let login = try await f.login(deviceKey: key)
            let first = try await f.refresh(login.tokens.refreshToken, key: key)
            let repeated = try await f.refresh(login.tokens.refreshToken, key: key)
            _ = try await f.authority.accountInfo(appID: AuthorityFixture.app, accessToken: first.accessToken)
            _ = await rainError { _ = try await f.refresh("rwr_unknown-token-value", key: key) }
            f.clock.advance(by: .seconds(30))
            _ = await rainError { _ = try await f.refresh(login.tokens.refreshToken, key: key) }
            let other = try await f.login(device: "device-b", deviceKey: key)
            _ = await rainError {
                _ = try await f.refresh(other.tokens.refreshToken, key: Ed25519PrivateKey(), device: "device-b")
            }

            let log = f.logSink.captured.joined(separator: "\n")
            for event in ["session.refreshed", "session.refresh_repeated", "session.refresh_refused", "session.family_revoked"] {
                #expect(log.contains(event), "\(event) is logged")
            }
            for token in [
                login.tokens.accessToken, login.tokens.refreshToken, first.accessToken, first.refreshToken,
                repeated.accessToken, other.tokens.accessToken, other.tokens.refreshToken, "rwr_unknown-token-value",
            ] {
                #expect(!log.contains(token))
                // Nor the token without its prefix, nor its hash in the signed message's form.
                #expect(!log.contains(String(token.dropFirst(4))))
                #expect(!log.contains(Base64URL.encode(SHA256.hash(Array(token.utf8)))))
            }
        }
    }
}
