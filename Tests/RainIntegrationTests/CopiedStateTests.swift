import Foundation
import RainTestSupport
import RainWallet
import RainWire
import Testing

/// A copied state directory, with the embedded authority: a state directory (or part of it) copied from a
/// logged-in daemon into another daemon's, for each key provider. docs/security.md "What each
/// provider stops": with `file`, a copy that leaves `device.key` out (or a session file with `storage.key`)
/// reads and exports nothing, while a copy of every key is the device; with `tpm2` the copy opens
/// only on the same TPM, with `secret-service` only beside the same keyring's items. Each test has
/// its control: the same copy with the missing piece does open, so each refusal is the one the
/// test is about.
@Suite("A copied state directory is useless elsewhere (processes)")
struct CopiedStateTests {
    static let allowExport = #""profiles": {"default": {"allowExport": true}}"#
    static let fileConfig = "{\(allowExport)}"

    /// The plaintext key files of the `file` provider.
    static let plaintextKeyFiles = ["storage.key", "device.key", "authority/authority.key"]

    /// `cp -a` of `owner`'s state directory into `thief`'s (which must not exist yet), then removes
    /// the paths of `leftOut` from the copy (the lock file goes too: it is the owner's).
    static func copyState(of owner: DaemonHarness, to thief: DaemonHarness, leavingOut leftOut: [String]) async throws {
        let copied = try await TestProcess.run(
            "/bin/cp", ["-a", owner.stateDirectory, thief.stateDirectory], timeout: .seconds(10))
        #expect(copied.status == 0, "\(copied)")
        for path in leftOut + ["rainwalletd.lock"] {
            try? FileManager.default.removeItem(atPath: "\(thief.stateDirectory)/\(path)")
        }
    }

    /// Copies only `files` (relative paths) of `owner`'s state directory into `thief`'s.
    static func copyFiles(_ files: [String], of owner: DaemonHarness, to thief: DaemonHarness) throws {
        let fm = FileManager.default
        for file in files {
            let target = "\(thief.stateDirectory)/\(file)"
            try fm.createDirectory(
                atPath: (target as NSString).deletingLastPathComponent, withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700])
            try fm.copyItem(atPath: "\(owner.stateDirectory)/\(file)", toPath: target)
        }
    }

    /// What `account` and `export phrase` get on `h`'s copied session: the two errors (nil when
    /// served) and whether the phrase came out.
    static func tryTheCopy(_ h: DaemonHarness) async -> (read: RainError?, export: RainError?) {
        let provider = h.provider()
        let read = await rainError { _ = try await provider.account() }
        let export = await rainError { _ = try await provider.exportRecoveryPhrase() }
        return (read, export)
    }

    /// The owner's session still serves after the theft: restored, read, refreshed, exported.
    static func ownerStillWorks(_ owner: DaemonHarness, accountID: String, phrase: [String]) async throws {
        let provider = owner.provider()
        try await provider.awaitSessionRestore()
        #expect(try await provider.account().accountID == accountID)
        #expect(await rainError { _ = try await provider.refreshSession() } == nil)
        #expect(try await provider.exportRecoveryPhrase() == phrase)
    }

    @Test(
        "file: the state directory without device.key, or the session file with storage.key, copied to another daemon: account and export are RAIN_201 there; the owner's session still works"
    )
    func fileProvider() async throws {
        let owner = try await DaemonHarness.start(config: Self.fileConfig)
        defer { owner.shutdown() }
        let provider = owner.provider()
        try await owner.logIn(provider, .email("copied-file@example.com"))
        let accountID = try await provider.account().accountID
        let phrase = try await provider.exportRecoveryPhrase()
        // Stopped for the copy, so that the database is copied whole (nothing writes it meanwhile).
        _ = try await owner.stop()

        // 1. Every file but device.key: the copy makes a device key of its own, and the embedded
        // authority (its database and master key copied along) refuses the session's tokens on it.
        let withoutDeviceKey = try DaemonHarness.prepare(config: Self.fileConfig)
        defer { withoutDeviceKey.shutdown() }
        try await Self.copyState(of: owner, to: withoutDeviceKey, leavingOut: ["device.key"])
        try await withoutDeviceKey.start()
        let stolen = await Self.tryTheCopy(withoutDeviceKey)
        #expect(stolen.read?.code == .sessionExpired, "\(String(describing: stolen.read))")
        #expect(stolen.export?.code == .sessionExpired, "\(String(describing: stolen.export))")
        // Theft as the authority sees it: a proof by another key revokes the copy's family (in the
        // copy's own database: the owner's is another file, see below), and the copy's session ends
        // (docs/user-guide.md "Sessions": a refusal ends it at once, reason refreshFailed).
        #expect(stolen.read?.details.reason == "refresh_failed", "\(String(describing: stolen.read)) \(withoutDeviceKey.log)")
        #expect(stolen.export?.details.reason == "refresh_failed", "\(String(describing: stolen.export))")
        #expect(
            withoutDeviceKey.log.contains("session.family_revoked") && withoutDeviceKey.log.contains("stolen_token"),
            "\(withoutDeviceKey.log)")
        let cli = try await withoutDeviceKey.runCLI(["account"])
        #expect(cli.status != 0 && cli.stderr.contains("RAIN_201"), "\(cli)")
        #expect(withoutDeviceKey.isRunning)

        // 2. The session file and storage.key alone: the storage key opens the file, but the
        // tokens belong to the owner's embedded authority, which is not there.
        let sessionOnly = try DaemonHarness.prepare(config: Self.fileConfig)
        defer { sessionOnly.shutdown() }
        try Self.copyFiles(["storage.key", "sessions/default.session"], of: owner, to: sessionOnly)
        try await sessionOnly.start()
        let copiedSession = await Self.tryTheCopy(sessionOnly)
        #expect(copiedSession.read?.code == .sessionExpired, "\(String(describing: copiedSession.read))")
        #expect(copiedSession.export?.code == .sessionExpired, "\(String(describing: copiedSession.export))")
        #expect(copiedSession.read?.details.reason == "refresh_failed", "\(String(describing: copiedSession.read))")
        #expect(copiedSession.export?.details.reason == "refresh_failed", "\(String(describing: copiedSession.export))")
        #expect(sessionOnly.log.contains("session.ended"), "\(sessionOnly.log)")

        // The control: the same copy WITH device.key is the device (docs/security.md: with `file`, a stolen
        // whole state directory holds every key).
        let everything = try DaemonHarness.prepare(config: Self.fileConfig)
        defer { everything.shutdown() }
        try await Self.copyState(of: owner, to: everything, leavingOut: [])
        try await everything.start()
        let whole = await Self.tryTheCopy(everything)
        #expect(whole.read == nil && whole.export == nil, "\(String(describing: whole))")

        // The owner's own database never saw the copies' calls: its session goes on.
        try await owner.start()
        try await Self.ownerStillWorks(owner, accountID: accountID, phrase: phrase)
    }

    @Test(
        "tpm2: the whole state directory copied to a daemon on another swtpm: the sealed keys do not open, every call is RAIN_501 tpm_key_lost, no crash, no plaintext key"
    )
    func tpmProvider() async throws {
        let ownerTPM = try SoftwareTPM()
        defer { ownerTPM.stop() }
        let otherTPM = try SoftwareTPM()
        defer { otherTPM.stop() }
        func config(_ tpm: SoftwareTPM) -> String {
            #"{"storage": {"provider": "tpm2", "tcti": "\#(tpm.tcti)"}, \#(Self.allowExport)}"#
        }
        let owner = try await DaemonHarness.start(config: config(ownerTPM))
        defer { owner.shutdown() }
        let provider = owner.provider()
        try await owner.logIn(provider, .email("copied-tpm@example.com"))
        let accountID = try await provider.account().accountID
        let phrase = try await provider.exportRecoveryPhrase()
        _ = try await owner.stop()

        let thief = try DaemonHarness.prepare(config: config(otherTPM))
        defer { thief.shutdown() }
        try await Self.copyState(of: owner, to: thief, leavingOut: [])
        try await thief.start()
        // A clear state, not a crash: GetInfo answers (storage loading), every other call is
        // RAIN_501 with the reason and what to do.
        let info = try GetInfoResponse.decode(
            try await thief.call(Method.daemonGetInfo, payload: try GetInfoRequest().encode(), timeout: .seconds(5)))
        #expect(info.capabilities.contains("storage-loading"), "\(info.capabilities)")
        let stolen = await Self.tryTheCopy(thief)
        for error in [stolen.read, stolen.export] {
            #expect(error?.code == .provider, "\(String(describing: error))")
            #expect(error?.details.reason == "tpm_key_lost", "\(String(describing: error))")
            #expect(error?.message.contains("another TPM") == true, "\(String(describing: error))")
        }
        // A login is refused the same way (docs/security.md: never a silent fallback to new keys).
        let login = await rainError { try await thief.provider().sendLoginCode(to: .email("copied-tpm@example.com")) }
        #expect(login?.code == .provider && login?.details.reason == "tpm_key_lost", "\(String(describing: login))")
        let cli = try await thief.runCLI(["account"])
        #expect(cli.status == 11 && cli.stderr.contains("RAIN_501"), "\(cli)")
        #expect(thief.log.contains("storage.unavailable") && thief.log.contains("tpm_key_lost"), "\(thief.log)")
        #expect(thief.isRunning)
        // No key in a file, in either directory: only sealed blobs, and the copy made no key of its own.
        for h in [owner, thief] {
            for file in Self.plaintextKeyFiles {
                #expect(!FileManager.default.fileExists(atPath: "\(h.stateDirectory)/\(file)"), "\(file)")
            }
        }

        // The control: the same copy on the owner's TPM opens (the blobs are bound to the TPM, and
        // only to it).
        let sameTPM = try DaemonHarness.prepare(config: config(ownerTPM))
        defer { sameTPM.shutdown() }
        try await Self.copyState(of: owner, to: sameTPM, leavingOut: [])
        try await sameTPM.start()
        let onTheSameTPM = await Self.tryTheCopy(sameTPM)
        #expect(onTheSameTPM.read == nil && onTheSameTPM.export == nil, "\(String(describing: onTheSameTPM))")
        _ = try await sameTPM.stop()

        try await owner.start()
        try await Self.ownerStillWorks(owner, accountID: accountID, phrase: phrase)
    }

    /// The attributes of a daemon's key item (as `SecretServiceKeyProvider` stores it).
    static func keyringItem(_ key: String, stateDirectory: String) -> [String: String] {
        ["xdg:schema": "org.rainwallet.Key", "state-directory": stateDirectory, "key": key]
    }

    @Test(
        "secret-service: the whole state directory copied to a daemon on another keyring: the start is refused with RAIN_102 master_key_missing, and no key file is made"
    )
    func secretServiceProvider() async throws {
        let ownerKeyring = try TestKeyring()
        defer { ownerKeyring.stop() }
        let otherKeyring = try TestKeyring()
        defer { otherKeyring.stop() }
        let config = #"{"storage": {"provider": "secret-service"}, \#(Self.allowExport)}"#
        let owner = try await DaemonHarness.start(
            config: config, environment: ["DBUS_SESSION_BUS_ADDRESS": ownerKeyring.address])
        defer { owner.shutdown() }
        let provider = owner.provider()
        try await owner.logIn(provider, .email("copied-keyring@example.com"))
        let accountID = try await provider.account().accountID
        let phrase = try await provider.exportRecoveryPhrase()
        _ = try await owner.stop()

        let thief = try DaemonHarness.prepare(config: config, environment: ["DBUS_SESSION_BUS_ADDRESS": otherKeyring.address])
        defer { thief.shutdown() }
        try await Self.copyState(of: owner, to: thief, leavingOut: [])
        // The database is there and its master key is not: the daemon refuses to start rather than
        // make a new key (which would lose every wallet), and says how to restore it.
        let refused = try await thief.runDaemon(arguments: thief.daemonArguments)
        #expect(refused.status == 78, "\(refused.output)")
        #expect(refused.output.contains("master key is missing from Secret Service"), "\(refused.output)")
        #expect(refused.output.contains("storage restore"), "\(refused.output)")
        for file in Self.plaintextKeyFiles {
            #expect(!FileManager.default.fileExists(atPath: "\(thief.stateDirectory)/\(file)"), "\(file)")
        }
        for key in ["storage", "device-key", "authority-master"] {
            #expect(try otherKeyring.lookupItem(attributes: Self.keyringItem(key, stateDirectory: thief.stateDirectory)) == nil)
        }

        // The control: with the owner's three items copied into the other keyring (for the copy's
        // directory), the same copy opens.
        for key in ["storage", "device-key", "authority-master"] {
            let secret = try #require(
                try ownerKeyring.lookupItem(attributes: Self.keyringItem(key, stateDirectory: owner.stateDirectory)))
            try otherKeyring.storeItem(
                label: "copied \(key)", attributes: Self.keyringItem(key, stateDirectory: thief.stateDirectory),
                secret: secret.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        try await thief.start()
        let withTheItems = await Self.tryTheCopy(thief)
        #expect(withTheItems.read == nil && withTheItems.export == nil, "\(String(describing: withTheItems))")
        _ = try await thief.stop()

        try await owner.start()
        try await Self.ownerStillWorks(owner, accountID: accountID, phrase: phrase)
    }
}
