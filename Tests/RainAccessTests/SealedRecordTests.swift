import Foundation
import Glibc
import RainCore
import RainCrypto
import RainSystem
import RainTestSupport
import Testing

@testable import RainAccess

@Suite("Sealed records: app approvals and confirmed settings")
struct SealedRecordTests {
    static func directory() throws -> String {
        let path = NSTemporaryDirectory() + "rain-access-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    static func caller(_ path: String, hash: UInt8, pid: Int32 = 100) -> CallerIdentity {
        CallerIdentity(pid: pid, uid: getuid(), executablePath: path, executableSHA256: [UInt8](repeating: hash, count: 32))
    }

    @Test("the first app owns the profile; another app is not approved; an update is asked about once")
    func decisions() {
        var approvals = AppApprovals()
        let wallet = Self.caller("/usr/bin/wallet", hash: 1)
        let other = Self.caller("/usr/bin/other", hash: 2)
        #expect(approvals.decide(profile: "default", caller: wallet) == .unowned)
        approvals.approve(profile: "default", caller: wallet, source: .prompt, at: Date(timeIntervalSince1970: 0))
        #expect(approvals.decide(profile: "default", caller: wallet) == .approved(.prompt))
        #expect(approvals.decide(profile: "default", caller: other) == .notApproved(owner: "/usr/bin/wallet"))
        #expect(approvals.decide(profile: "work", caller: other) == .unowned)

        let updated = Self.caller("/usr/bin/wallet", hash: 3)
        #expect(approvals.decide(profile: "default", caller: updated) == .changedBinary)
        approvals.refuseChangedBinary(profile: "default", caller: updated)
        #expect(approvals.decide(profile: "default", caller: updated) == .changedBinaryRefused)
        #expect(approvals.decide(profile: "default", caller: wallet) == .approved(.prompt), "the old binary still is")
        approvals.approve(profile: "default", caller: updated, source: .prompt, at: Date())
        #expect(approvals.decide(profile: "default", caller: updated) == .approved(.prompt))
        #expect(approvals.decide(profile: "default", caller: wallet) == .changedBinary, "the approval moved to the new hash")

        let revoked = approvals.revoke(profile: "default", appPath: "/usr/bin/wallet")
        let revokedAgain = approvals.revoke(profile: "default", appPath: "/usr/bin/wallet")
        #expect(revoked)
        #expect(!revokedAgain)
        #expect(approvals.decide(profile: "default", caller: updated) == .unowned)
    }

    @Test("a Flatpak app id narrows an approval: the same program outside the sandbox, or in another one, is another app")
    func flatpakNarrows() throws {
        var approvals = AppApprovals()
        func app(_ flatpak: String?) -> CallerIdentity {
            CallerIdentity(
                pid: 7, uid: getuid(), executablePath: "/app/bin/wallet", executableSHA256: [UInt8](repeating: 4, count: 32),
                flatpakAppID: flatpak)
        }
        approvals.approve(profile: "default", caller: app("org.example.Wallet"), source: .prompt, at: Date())
        #expect(approvals.decide(profile: "default", caller: app("org.example.Wallet")) == .approved(.prompt))
        #expect(approvals.decide(profile: "default", caller: app(nil)) == .notApproved(owner: "/app/bin/wallet"))
        #expect(approvals.decide(profile: "default", caller: app("org.evil.Clone")) == .notApproved(owner: "/app/bin/wallet"))
        // It never grants: a policy entry for the path (no Flatpak id) does not let a sandboxed copy in.
        let policy = [AppApprovals.Approval(appPath: "/app/bin/wallet", contentHash: nil, approvedAt: "", source: .policy)]
        #expect(AppApprovals().decide(profile: "x", caller: app("org.other.App"), policy: policy) != .approved(.policy))
        // Kept across a save and load.
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try AppApprovalStore(stateDirectory: directory, storageKey: try SymmetricKey.random())
        try store.save(approvals)
        #expect(try store.load()?.profiles["default"]?.first?.flatpakAppID == "org.example.Wallet")
    }

    @Test("LD_PRELOAD or a tracer is never approved, not even an approved app; policy apps are approved")
    func unapprovableAndPolicy() {
        var approvals = AppApprovals()
        var wallet = Self.caller("/usr/bin/wallet", hash: 1)
        approvals.approve(profile: "default", caller: wallet, source: .prompt, at: Date())
        wallet.unapprovable = ["LD_PRELOAD"]
        #expect(approvals.decide(profile: "default", caller: wallet) == .unapprovable(["LD_PRELOAD"]))
        let managed = Self.caller("/opt/managed/app", hash: 9)
        let policy = [AppApprovals.Approval(appPath: "/opt/managed/app", contentHash: nil, approvedAt: "", source: .policy)]
        #expect(approvals.decide(profile: "default", caller: managed, policy: policy) == .approved(.policy))
        #expect(
            AppApprovals().decide(profile: "x", caller: wallet.with(unapprovable: []), policy: policy)
                == .notApproved(owner: "/opt/managed/app"))
    }

    @Test("approvals survive a save and load; an edit by another program is refused as tampered")
    func storeRoundTripAndTamper() throws {
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let key = try SymmetricKey.random()
        let store = try AppApprovalStore(stateDirectory: directory, storageKey: key)
        #expect(try store.load() == nil)
        var approvals = AppApprovals()
        approvals.approve(profile: "default", caller: Self.caller("/usr/bin/wallet", hash: 1), source: .prompt, at: Date())
        try store.save(approvals)
        #expect(try store.load() == approvals)
        var status = stat()
        let statResult = stat(store.path, &status)
        #expect(statResult == 0 && status.st_mode & 0o777 == 0o600)

        // Another program adds itself: the seal no longer matches.
        let text = try String(contentsOfFile: store.path, encoding: .utf8)
        #expect(text.contains("wallet"))
        try text.replacingOccurrences(of: "wallet", with: "evil").write(
            toFile: store.path, atomically: true, encoding: .utf8)
        #expect(throws: RainError.self) { try store.load() }
        do throws(RainError) {
            _ = try store.load()
        } catch {
            #expect(error.details.reason == "record_tampered")
            #expect(error.message.contains("another program"), "\(error.message)")
        }

        // A record sealed under another storage key is refused too.
        try AppApprovalStore(stateDirectory: directory, storageKey: try SymmetricKey.random()).save(approvals)
        #expect(throws: RainError.self) { try store.load() }
    }

    @Test("a record sealed under the storage key of before a migration is read once and sealed again under the new key")
    func resealAfterMigration() throws {
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let old = try SymmetricKey.random()
        let new = try SymmetricKey.random()
        var approvals = AppApprovals()
        approvals.approve(profile: "default", caller: Self.caller("/usr/bin/wallet", hash: 1), source: .prompt, at: Date())
        try AppApprovalStore(stateDirectory: directory, storageKey: old).save(approvals)
        try ConfirmedSettingsStore(stateDirectory: directory, storageKey: old).save(GuardedSettings(["a": "1"]))
        let place = PromptPlace(
            path: "/dev/pts/7", term: "xterm", device: 34823, changedSeconds: 1_700_000_000, changedNanoseconds: 5)
        try PromptPlaceStore(stateDirectory: directory, storageKey: old).save(place)
        // Under the new key alone the records do not open: they were sealed under the old one.
        #expect(throws: RainError.self) { try AppApprovalStore(stateDirectory: directory, storageKey: new).load() }
        #expect(throws: RainError.self) { try PromptPlaceStore(stateDirectory: directory, storageKey: new).load() }
        #expect(
            try SealedRecords.reseal(stateDirectory: directory, storageKey: new, previousStorageKeys: [old]) == 3)
        // Sealed again: the new key alone opens them, with the same content.
        #expect(try AppApprovalStore(stateDirectory: directory, storageKey: new).load() == approvals)
        #expect(try ConfirmedSettingsStore(stateDirectory: directory, storageKey: new).load()?.values == ["a": "1"])
        #expect(try PromptPlaceStore(stateDirectory: directory, storageKey: new).load() == place)
        // A key that sealed neither is no way in.
        #expect(throws: RainError.self) {
            try SealedRecords.reseal(
                stateDirectory: directory, storageKey: try SymmetricKey.random(), previousStorageKeys: [try SymmetricKey.random()]
            )
        }
    }

    @Test("the prompt place names one terminal device: once closed, it is not open; an edited record is refused")
    func promptPlaceNamesOneTerminal() throws {
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let first = try Syscall.openPseudoTerminal()
        var firstOpen = true
        defer { if firstOpen { close(first.master) } }
        let place = try #require(PromptPlace.current(path: first.path, term: "xterm-256color"))
        #expect(place.isOpen)
        let store = try PromptPlaceStore(stateDirectory: directory, storageKey: try SymmetricKey.random())
        #expect(try store.load() == nil)
        try store.save(place)
        #expect(try store.load() == place)
        #expect(try store.load()?.terminal == RegisteredTerminal(path: first.path, term: "xterm-256color"))
        // Closed: its node is gone; the kernel gives the number to the next terminal, made anew.
        close(first.master)
        firstOpen = false
        // Other tests of this process start programs meanwhile, and a child between its fork and
        // its exec holds a copy of every descriptor, the master too: the terminal goes once it
        // execs. Up to 2 s.
        var closed = !place.isOpen
        for _ in 0..<200 where !closed {
            usleep(10_000)
            closed = !place.isOpen
        }
        #expect(closed)
        // (A new terminal given the same number within the kernel's clock tick carries the same
        // stamp: what tells them apart is the session, below.)
        // Not a terminal, or nothing there.
        #expect(PromptPlace.current(path: "\(directory)/none", term: "xterm") == nil)
        #expect(PromptPlace.current(path: directory, term: "xterm") == nil)
        // Edited by another program: refused.
        let text = try String(contentsOfFile: store.path, encoding: .utf8)
        #expect(text.contains("256color"))
        try text.replacingOccurrences(of: "256color", with: "evil").write(
            toFile: store.path, atomically: true, encoding: .utf8)
        #expect(throws: RainError.self) { try store.load() }
    }

    @Test("a place registered from inside its terminal's session outlives a restart only while that session runs")
    func promptPlaceFollowsTheTerminalsSession() async throws {
        let pty = try Syscall.openPseudoTerminal()
        defer { close(pty.master) }
        // The terminal's shell: a new session whose controlling terminal it is (`setsid -c`).
        let slave = open(pty.path, O_RDWR | O_NOCTTY | O_CLOEXEC)
        #expect(slave >= 0)
        let shell = Process()
        shell.executableURL = URL(fileURLWithPath: "/usr/bin/setsid")
        // The shell says "ready" once `setsid -c` has made the terminal its own: the test waits for
        // that line, not for a time (no fixed wait is enough at the start of a loaded run).
        // It then lives until the test kills it (at most 2 minutes): a short sleep can end before
        // the session is read when the parallel unit stage is loaded, and with its leader gone the
        // terminal would have no session.
        shell.arguments = ["-c", "-w", "sh", "-c", "echo ready; exec sleep 120"]
        shell.standardInput = FileHandle(fileDescriptor: slave, closeOnDealloc: true)
        let ready = Pipe()
        shell.standardOutput = ready
        shell.standardError = FileHandle.nullDevice
        // Under the harness's launch lock: no other test's pipe end may leak into this child.
        try DaemonHarness.withProcessLaunchLock { try shell.run() }
        defer { if shell.isRunning { shell.terminate() } }
        // The line (or end of file, should the shell fail), read on a thread of its own: a blocking
        // read would hold one of the concurrency pool's two threads while the machine is loaded.
        let reader = ready.fileHandleForReading
        let said = await withCheckedContinuation { (c: CheckedContinuation<String, Never>) in
            Thread { c.resume(returning: String(decoding: reader.availableData, as: UTF8.self)) }.start()
        }
        #expect(said.hasPrefix("ready"), "setsid -c exited before the terminal was its own")
        let leader = try Syscall.sessionOfTerminal(pty.master, path: pty.path)
        let sid = try #require(leader, "setsid -c gave \(pty.path) no session")

        let place = try #require(PromptPlace.current(path: pty.path, term: "xterm", sessionLeader: sid))
        #expect(place.sessionLeader == sid && place.sessionLeaderStart != nil)
        #expect(place.isOpen && place.outlivesRestart)
        // Registered from outside the terminal's session (this test's own session): open, but not
        // found again after a restart.
        let outside = try #require(PromptPlace.current(path: pty.path, term: "xterm", sessionLeader: getsid(0)))
        #expect(outside.sessionLeader == nil && outside.isOpen && !outside.outlivesRestart)
        // The shell ends: the node is still there (the master is open), the place is not.
        kill(sid, SIGKILL)
        shell.waitUntilExit()
        #expect(PromptPlace.current(path: pty.path, term: "xterm") != nil)
        #expect(!place.isOpen && !place.outlivesRestart)
    }

    @Test("settings changes are listed key by key; the confirmed settings are sealed")
    func settings() throws {
        let confirmed = GuardedSettings(["profiles.default.allowExport": "false", "pinentry": "/usr/bin/pinentry-tty"])
        let requested = GuardedSettings(["profiles.default.allowExport": "true", "storage.provider": "file"])
        let changes = confirmed.changes(to: requested)
        #expect(
            changes.map(\.description) == [
                "pinentry: /usr/bin/pinentry-tty → (not set)",
                "profiles.default.allowExport: false → true",
                "storage.provider: (not set) → file",
            ])
        #expect(confirmed.changes(to: confirmed).isEmpty)
        #expect(confirmed.digest != requested.digest)
        #expect(confirmed.digest.count == 64)

        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try ConfirmedSettingsStore(stateDirectory: directory, storageKey: try SymmetricKey.random())
        #expect(try store.load() == nil)
        try store.save(confirmed)
        #expect(try store.load() == confirmed)
        let text = try String(contentsOfFile: store.path, encoding: .utf8)
        #expect(text.contains("false"))
        try text.replacingOccurrences(of: "false", with: "true").write(toFile: store.path, atomically: true, encoding: .utf8)
        #expect(throws: RainError.self) { try store.load() }
    }
}

extension CallerIdentity {
    func with(unapprovable: [String]) -> CallerIdentity {
        var copy = self
        copy.unapprovable = unapprovable
        return copy
    }
}
