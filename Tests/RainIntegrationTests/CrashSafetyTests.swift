import Foundation
import RainCore
import RainDevice
import RainStore
import RainTestSupport
import RainWallet
import Testing

/// Crash safety: a real `rainwalletd` (device and embedded authority in one process) is
/// killed with SIGKILL at random moments while a client runs login → refresh → refresh → logout
/// cycles. After every kill, before the restart, the test checks what is on disk:
/// - the session file, if any, decrypts to a whole session (the old or the new one, never a torn
///   or corrupt one) and nothing was moved aside as corrupt;
/// - the authority's database passes `consistencyViolations()` (SQLite integrity, every account has
///   its wallet and keys, no code both used and pending, one live session per account, …).
/// After the restart, a restored session either refreshes (the grace window covers a reply lost in
/// the kill) or is refused with RAIN_201 (its login was replaced); never anything else.
///
/// It runs as its own stage in `scripts/test` (`killloop`), not in the integration stage.
/// `RAIN_KILL_ROUNDS` sets the number of kills (default 30, as in CI; more on demand).
@Suite("Crash safety: SIGKILL at random points", .serialized)
struct CrashSafetyTests {
    struct Counts: Sendable {
        var logins = 0
        var refreshes = 0
        var logouts = 0
        var cycles = 0
    }

    @Test("every kill leaves a whole session and a consistent authority database")
    func killLoop() async throws {
        let rounds = Int(ProcessInfo.processInfo.environment["RAIN_KILL_ROUNDS"] ?? "") ?? 30
        // The harness relaxes the code send limits (hundreds of logins for one contact); every other
        // setting is the default.
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        var total = Counts()
        var restoredLive = 0
        var restoredReplaced = 0
        var sessionFilesChecked = 0
        let started = ContinuousClock.now

        var roundsWithLogin = 0
        for round in 1...rounds {
            let provider = h.provider()
            // A contact per round: the development outbox lists only the newest 200 codes, and the
            // login helper counts this contact's codes in it.
            let contact = RainWalletContact.email("kill-loop-\(round)@example.com")
            // What the restart restored.
            let restored = try await provider.currentSession()
            if restored.accountID != nil {
                let refused = await rainError { _ = try await provider.refreshSession() }
                if let refused {
                    #expect(refused == .sessionExpired, "round \(round): a restored session failed with \(refused)")
                    restoredReplaced += 1
                } else {
                    restoredLive += 1
                }
            }

            let killed = Recorder<Bool>()
            let worker = Task { () -> (Counts, String?) in
                var c = Counts()
                do {
                    while true {
                        try await h.logIn(provider, contact)
                        c.logins += 1
                        _ = try await provider.refreshSession()
                        c.refreshes += 1
                        _ = try await provider.refreshSession()
                        c.refreshes += 1
                        _ = try await provider.logout()
                        c.logouts += 1
                        c.cycles += 1
                    }
                } catch {
                    // Only failures after the kill are expected; anything earlier is a bug.
                    let beforeKill = killed.all.isEmpty
                    return (c, beforeKill ? "round \(round): \(error) while the daemon was alive" : nil)
                }
            }
            try await Task.sleep(for: .milliseconds(Int.random(in: 5...400)))
            killed.append(true)
            await h.kill()
            let (counts, failure) = await worker.value
            if let failure { Issue.record("\(failure); log:\n\(h.log)") }
            if counts.logins > 0 { roundsWithLogin += 1 }
            total.logins += counts.logins
            total.refreshes += counts.refreshes
            total.logouts += counts.logouts
            total.cycles += counts.cycles

            sessionFilesChecked += try checkSessionFiles(h, round: round)
            let store = try await SQLiteAuthorityStore.open(stateDirectory: "\(h.stateDirectory)/authority")
            let violations = try await store.consistencyViolations()
            await store.close()
            #expect(violations.isEmpty, "round \(round): authority database inconsistent: \(violations)")
            if !violations.isEmpty { return }

            try await h.start()
        }
        let took = ContinuousClock.now - started
        print(
            "kill loop: \(rounds) SIGKILLs in \(took); \(total.logins) logins, \(total.refreshes) refreshes, "
                + "\(total.logouts) logouts (\(total.cycles) whole cycles, \(roundsWithLogin) rounds with a login); "
                + "\(sessionFilesChecked) session files "
                + "opened whole after a kill; restored sessions: \(restoredLive) refreshed, \(restoredReplaced) "
                + "refused as replaced; corrupt files: 0; database violations: 0")
        // The loop must really have exercised every operation, or it proves nothing.
        // A round lasts 5–400 ms and a cycle a few ms: most rounds log in, many times in all.
        #expect(roundsWithLogin >= rounds / 2, "only \(roundsWithLogin) of \(rounds) rounds logged in")
        #expect(total.logins >= rounds)
        #expect(total.refreshes >= rounds)
        #expect(total.logouts >= rounds / 2)
        #expect(sessionFilesChecked > 0)
        #expect(restoredLive > 0)
    }

    /// Checks the device's session files after a kill: nothing moved aside as corrupt, and the
    /// session file, when there is one, decrypts to a whole session.
    /// - Returns: how many session files were opened.
    func checkSessionFiles(_ h: DaemonHarness, round: Int) throws -> Int {
        let directory = "\(h.stateDirectory)/sessions"
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        let corrupt = names.filter { $0.contains(".corrupt-") }
        #expect(corrupt.isEmpty, "round \(round): session file moved aside as corrupt: \(corrupt)")
        let storage = try EncryptedFileStorage(
            stateDirectory: h.stateDirectory, logger: Logger(label: "kill-loop", sink: CapturingLogSink()))
        let path = "\(directory)/\(ProfileName.defaultName).session"
        guard let data = FileManager.default.contents(atPath: path) else { return 0 }
        switch storage.open(Array(data), profile: ProfileName.defaultName) {
        case .success(let session):
            #expect(session.accountID.hasPrefix("acct_"), "round \(round): stored session has no account")
        case .failure(let error):
            Issue.record("round \(round): the session file does not open after a kill: \(error.message)")
        }
        return 1
    }
}
