import Foundation
import RainCore
import RainTestSupport
import RainWire
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Codes as a program of the daemon's own user attacks them through the socket: guessing across
/// accounts until the budget is spent, probing which addresses other accounts own, and repeating
/// a confirm's idempotency key with another code. The daemon (or the authority), the apps and
/// the attacker all run as one unprivileged uid (`OtherUser`), the attacker a script the daemon
/// cannot vouch for; for the embedded authority the source of the guesses is that uid.
@Suite(
    "Same user: codes through the socket",
    .enabled(if: OtherUser.unavailableReason == nil, "needs a second uid: root and /usr/bin/setpriv (CI runs as root)"))
struct SameUserCodeTests {
    /// A raw client of the daemon's uid on `profile`, its first call made (the user confirms the
    /// script on the auto prompt, once for the connection); the caller closes it.
    static func attacker(_ d: UserDaemon, profile: String) async throws -> UserRawClient {
        let client = try UserRawClient.connect(d.bin, to: d.socket, directory: d.home)
        do {
            let state = try await client.call(Method.sessionGetState, try GetSessionStateRequest().encode(), profile: profile)
            try #require(state.status.isOK, "\(state.status)\n\(d.log)")
            return client
        } catch {
            client.close()
            throw error
        }
    }

    /// Sends a login code to `contact` on `client`'s profile and returns it, as read from the outbox.
    static func sendLoginCode(
        _ d: UserDaemon, _ client: UserRawClient, profile: String, to contact: String, count: Int = 1
    ) async throws -> String {
        let sent = try await client.call(
            Method.authSendLoginCode, try SendLoginCodeRequest(contact: .email(contact)).encode(), profile: profile)
        try #require(sent.status.isOK, "\(sent.status)")
        return try await d.code(for: contact, count: count)
    }

    static func confirmLoginCode(_ client: UserRawClient, profile: String, _ code: String) async throws -> WireStatus {
        try await client.call(Method.authConfirmLoginCode, try ConfirmLoginCodeRequest(code: code).encode(), profile: profile)
            .status
    }

    @Test(
        "a program of the user spends the device key's 20 wrong guesses through the socket, across accounts; then even the right code is RAIN_302 device_key_guess_window with when to retry, and nobody is logged in"
    )
    func guessBudgetIsSpentThroughTheSocket() async throws {
        let d = try await UserDaemon.start()
        defer { d.stop() }
        let profile = "guesser"
        let client = try await Self.attacker(d, profile: profile)
        defer { client.close() }

        // Three wrong codes lock a challenge: a new account's code each time, 20 wrong in all.
        var (wrong, sends) = (0, 0)
        var code = ""
        while wrong < 20 {
            sends += 1
            code = try await Self.sendLoginCode(d, client, profile: profile, to: "guess\(sends)@example.com")
            for _ in 0..<min(3, 20 - wrong) {
                let status = try await Self.confirmLoginCode(client, profile: profile, wrongCode(for: code))
                #expect(status.code == RainError.Code.invalidLoginCode.rawValue, "guess \(wrong + 1): \(status)")
                wrong += 1
            }
        }
        // The last code has an attempt left, and it is right: no code is checked any more.
        let spent = try await Self.confirmLoginCode(client, profile: profile, code)
        #expect(spent.code == RainError.Code.refused.rawValue, "\(spent)")
        #expect(spent.details.limit == "device_key_guess_window" && spent.details.reason == "device_key_guess_window", "\(spent)")
        #expect(spent.details.retryAfterMilliseconds.map { $0 > 0 && $0 <= 3_600_000 } == true, "\(spent)")
        let state = try await client.call(Method.sessionGetState, try GetSessionStateRequest().encode(), profile: profile)
        #expect(try SessionSnapshot.decode(state.payload).authState != .authenticated, "\(state)")
        #expect(d.log.contains("code.guesses_limited") && d.log.contains("limit=device_key_guess_window"), "\(d.log)")
        #expect(d.log.contains("source=uid:\(OtherUser.uid)"), "\(d.log)")
    }

    @Test(
        "a program of the user probing for an address another account owns gets what any address gets: sent, a code in the outbox; only the right code, which only the owner reads, says whose it is"
    )
    func ownedContactAnswersLikeAnyOther() async throws {
        // Relaxed send limits: the owner's login and the probe send to one address back to back.
        let d = try await UserDaemon.start(config: UserDaemon.relaxedSendLimits)
        defer { d.stop() }
        // Another account of the app owns owner@example.com: it logged in with it, then out.
        let profile = "prober"
        let client = try await Self.attacker(d, profile: profile)
        defer { client.close() }
        let ownerCode = try await Self.sendLoginCode(d, client, profile: profile, to: "owner@example.com")
        let owner = try await Self.confirmLoginCode(client, profile: profile, ownerCode)
        #expect(owner.isOK, "\(owner)")
        let logout = try await client.call(Method.authLogout, try LogoutRequest().encode(), profile: profile)
        #expect(logout.status.isOK, "\(logout.status)")

        // The prober logs in to an account of its own, then asks to verify addresses.
        let code = try await Self.sendLoginCode(d, client, profile: profile, to: "prober@example.com")
        let loggedIn = try await Self.confirmLoginCode(client, profile: profile, code)
        #expect(loggedIn.isOK, "\(loggedIn)")
        func verify(_ contact: String) async throws -> WireResponse {
            try await client.call(
                Method.contactSendVerificationCode, try SendLoginCodeRequest(contact: .email(contact)).encode(),
                profile: profile)
        }
        let free = try await verify("free@example.com")
        let owned = try await verify("owner@example.com")
        #expect(free.status.isOK && owned.status.isOK, "free: \(free.status); owned: \(owned.status)")
        let freeSent = try SendLoginCodeResponse.decode(free.payload)
        let ownedSent = try SendLoginCodeResponse.decode(owned.payload)
        #expect(ownedSent.contact == .email("owner@example.com"), "\(ownedSent)")
        #expect(abs(ownedSent.expiresAtMilliseconds - freeSent.expiresAtMilliseconds) < 60_000, "\(freeSent) \(ownedSent)")
        // Each got its code, as any verification does: the owner's inbox its second.
        _ = try await d.code(for: "free@example.com")
        let verification = try await d.code(for: "owner@example.com", count: 2)
        // The user confirmed each verification; the script's connection was asked about once.
        let asked = d.prompts.split(separator: "\n")
        #expect(asked.filter { $0.contains("add a backup contact") }.count == 2, "\(d.prompts)")
        #expect(asked.filter { $0.contains("on this connection") }.count == 1, "\(d.prompts)")

        // A wrong code is wrong as for any contact; only the right one says whose the contact is.
        let wrong = try await client.call(
            Method.contactConfirmVerification, try ConfirmContactVerificationRequest(code: wrongCode(for: verification)).encode(),
            profile: profile)
        #expect(wrong.status.code == RainError.Code.invalidLoginCode.rawValue, "\(wrong.status)")
        let right = try await client.call(
            Method.contactConfirmVerification, try ConfirmContactVerificationRequest(code: verification).encode(),
            profile: profile)
        #expect(right.status.code == RainError.Code.refused.rawValue, "\(right.status)")
        #expect(right.status.details.reason == "contact_owned_by_another_account", "\(right.status)")
    }

    @Test(
        "against a remote authority run by the user, a confirm repeated with its idempotency key and a wrong code is RAIN_102 idempotency_key_reused without tokens; with the right code it gets the first tokens"
    )
    func idempotencyKeyIsBoundToItsRequest() async throws {
        let bin = try await AccessibleBinaries.make()
        defer { bin.remove() }
        let home = "\(bin.directory)/home"
        try OtherUser.makeDirectory(home, mode: 0o700)
        let log = "\(home)/authority.log"
        let authority = try bin.launch(
            as: OtherUser.uid, "rainwalletd-test",
            ["authority", "--listen", "127.0.0.1:0", "--state-dir", "\(home)/authority", "--dev-outbox"], home: home, log: log)
        defer {
            authority.signal(SIGKILL)
            _ = authority.waitForExitBlocking(timeout: .seconds(5))
        }
        var port: UInt16?
        let ready = await eventually(timeout: .seconds(20)) {
            let text = DaemonHarness.readFile(log)
            port = text.range(of: " port=").flatMap { UInt16(text[$0.upperBound...].prefix(while: \.isNumber)) }
            return port != nil || !authority.isRunning
        }
        let listening = try #require(ready ? port : nil, "\(DaemonHarness.readFile(log))")
        let client = try UserRawClient.connect(bin, to: "127.0.0.1:\(listening)", directory: home)
        defer { client.close() }

        let (app, device) = ("idempotency-app", "device-1")
        let sent = try await client.call(
            AuthorityMethod.sendLoginCode,
            try SendCodeRequest(appID: app, deviceID: device, contact: .email("k@example.com")).encode())
        try #require(sent.status.isOK, "\(sent.status)")
        let challenge = try SendCodeResult.decode(sent.payload)
        let outbox = "\(home)/authority/outbox.jsonl"
        var code: String?
        #expect(
            await eventually(timeout: .seconds(20)) {
                code =
                    DaemonHarness.readFile(outbox).split(separator: "\n").compactMap {
                        (try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])?["code"] as? String
                    }.last
                return code != nil
            })
        let right = try #require(code)
        let key = Array("one logical confirm".utf8)
        func confirm(_ code: String) async throws -> WireResponse {
            try await client.call(
                AuthorityMethod.confirmLoginCode,
                try ConfirmCodeRequest(
                    appID: app, deviceID: device, challengeID: challenge.challengeID, code: code, idempotencyKey: key
                ).encode())
        }

        let first = try await confirm(right)
        try #require(first.status.isOK, "\(first.status)")
        let tokens = try LoginResult.decode(first.payload).tokens
        let reused = try await confirm(wrongCode(for: right))
        #expect(reused.status.code == RainError.Code.invalidArgument.rawValue, "\(reused.status)")
        #expect(reused.status.details.reason == "idempotency_key_reused", "\(reused.status)")
        #expect(reused.payload.isEmpty)
        let repeated = try await confirm(right)
        #expect(repeated.status.isOK, "\(repeated.status)")
        let again = try LoginResult.decode(repeated.payload).tokens
        #expect(again.accessToken == tokens.accessToken && again.refreshToken == tokens.refreshToken)
    }
}
