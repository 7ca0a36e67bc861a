import Foundation
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainTestSupport
import RainWire
import Testing

/// `rainwalletd storage status|backup|restore` on the state directory of a real
/// `rainwalletd-test authority`: its authority.key backed up under a passphrase, the state
/// directory wiped, the key restored, and the authority started again on the same store keeps the
/// devices' sessions.
@Suite("Authority key backup (processes)")
struct AuthorityBackupTests {
    static let passphrase = "correct horse battery staple"

    /// Runs `rainwalletd-test ARGS` with `stdin`; its status and its stdout and stderr together.
    static func rainwalletd(_ arguments: [String], stdin: String = "") async throws -> (status: Int32, output: String) {
        var environment = ProcessInfo.processInfo.environment
        // A keyring of another suite must not be seen by these commands.
        environment["DBUS_SESSION_BUS_ADDRESS"] = nil
        let r = try await TestProcess.run(
            try DaemonHarness.binaryDirectory().appendingPathComponent("rainwalletd-test").path, arguments,
            environment: environment, input: stdin, timeout: .seconds(30))
        return (r.status, r.stdout + r.stderr)
    }

    /// A 0600 file holding `text`.
    static func privateFile(_ path: String, _ text: String, mode: mode_t = 0o600) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        #expect(chmod(path, mode) == 0)
    }

    @Test(
        "an authority's key backed up with a passphrase file, its state directory wiped and the key restored: restarted on the same store, a device's session still refreshes",
        arguments: StoreKind.allCases)
    func backupWipeRestoreKeepsSessions(kind: StoreKind) async throws {
        let url = kind == .postgres ? try await PostgresTestCluster.freshDatabaseURL(label: "keybackup") : nil
        let store = url.map { ["--store", $0] } ?? []
        let (base, cleanup) = try AuthorityStoreIdentityTests.directories(["a", "saved"])
        defer { cleanup() }
        let state = "\(base)/a/authority"
        let passphraseFile = "\(base)/passphrase"
        try Self.privateFile(passphraseFile, Self.passphrase + "\n")
        let backup = "\(base)/saved/authority.rwkb"

        var session: (tokens: SessionTokens, device: TestDeviceKeys)?
        try await AuthorityProcess.with(in: "\(base)/a", ["--listen", "127.0.0.1:0"] + store) { authority in
            session = try await AuthorityStoreIdentityTests.logIn(authority, email: "backup@example.com")
            // The backup needs no stop; a restore is refused while the authority holds its state directory.
            let made = try await Self.rainwalletd([
                "storage", "backup", "--state-dir", state, "--out", backup, "--passphrase-file", passphraseFile,
            ])
            #expect(made.status == 0, "\(made.output)")
            #expect(fileMode(backup)?.permissions == 0o600)
            #expect(!made.output.contains(Self.passphrase))
            let busy = try await Self.rainwalletd([
                "storage", "restore", backup, "--state-dir", state, "--passphrase-file", passphraseFile, "--force",
            ])
            #expect(busy.status == 1, "\(busy.output)")
        }
        let keyID = try AuthorityStoreIdentityTests.keyID(state)

        let status = try await Self.rainwalletd(["storage", "status", "--json", "--state-dir", state])
        #expect(status.status == 0, "\(status.output)")
        #expect(status.output.contains("\"role\":\"authority\"") && status.output.contains(keyID), "\(status.output)")
        #expect(status.output.contains("\"provider\":\"file\"") && status.output.contains("\"slot\":\"authority-master\""))

        // The database's own backup (a copy of the stopped SQLite file; PostgreSQL keeps its
        // database), then the state directory is lost.
        for name in try FileManager.default.contentsOfDirectory(atPath: state) where name.hasPrefix("authority.sqlite3") {
            try FileManager.default.copyItem(atPath: "\(state)/\(name)", toPath: "\(base)/saved/\(name)")
        }
        try FileManager.default.removeItem(atPath: state)

        // Into the empty, new directory; the passphrase as one line of stdin this time.
        let restored = try await Self.rainwalletd(
            ["storage", "restore", backup, "--state-dir", state, "--authority-server"], stdin: Self.passphrase + "\n")
        #expect(restored.status == 0, "\(restored.output)")
        #expect(try AuthorityStoreIdentityTests.keyID(state) == keyID)
        #expect(fileMode("\(state)/authority.key")?.permissions == 0o600)
        for name in try FileManager.default.contentsOfDirectory(atPath: "\(base)/saved")
        where name.hasPrefix("authority.sqlite3") {
            try FileManager.default.copyItem(atPath: "\(base)/saved/\(name)", toPath: "\(state)/\(name)")
        }

        let (tokens, device) = try #require(session)
        try await AuthorityProcess.with(in: "\(base)/a", ["--listen", "127.0.0.1:0"] + store) { authority in
            #expect(authority.log.contains("masterKey=\(keyID)"))
            _ = try await AuthorityStoreIdentityTests.refresh(authority, tokens, device: device)
        }
    }

    @Test("a wrong passphrase is a clear error and writes nothing, not even the state directory")
    func wrongPassphraseWritesNothing() async throws {
        let (base, cleanup) = try AuthorityStoreIdentityTests.directories(["a"])
        defer { cleanup() }
        try await AuthorityProcess.with(in: "\(base)/a", ["--listen", "127.0.0.1:0"]) { _ in }
        let backup = "\(base)/a.rwkb"
        let made = try await Self.rainwalletd(
            ["storage", "backup", "--state-dir", "\(base)/a/authority", "--out", backup], stdin: Self.passphrase + "\n")
        #expect(made.status == 0, "\(made.output)")

        let target = "\(base)/new"
        let wrong = try await Self.rainwalletd(
            ["storage", "restore", backup, "--state-dir", target, "--authority-server"], stdin: "not the passphrase\n")
        #expect(wrong.status == 1, "\(wrong.output)")
        #expect(wrong.output.contains("RAIN_102") && wrong.output.contains("passphrase"), "\(wrong.output)")
        #expect(!wrong.output.contains("not the passphrase"))
        #expect(!FileManager.default.fileExists(atPath: target))
    }

    @Test(
        "a restore over another authority.key is refused and leaves it; with --force the old key moves aside and the backup's takes its place"
    )
    func anotherKeyIsKeptUnlessForced() async throws {
        let (base, cleanup) = try AuthorityStoreIdentityTests.directories(["a", "b"])
        defer { cleanup() }
        try await AuthorityProcess.with(in: "\(base)/a", ["--listen", "127.0.0.1:0"]) { _ in }
        try await AuthorityProcess.with(in: "\(base)/b", ["--listen", "127.0.0.1:0"]) { _ in }
        let (a, b) = ("\(base)/a/authority", "\(base)/b/authority")
        let backup = "\(base)/a.rwkb"
        let made = try await Self.rainwalletd(
            ["storage", "backup", "--state-dir", a, "--out", backup], stdin: Self.passphrase + "\n")
        #expect(made.status == 0, "\(made.output)")
        let other = try AuthorityStoreIdentityTests.keyID(b)

        let refused = try await Self.rainwalletd(["storage", "restore", backup, "--state-dir", b], stdin: Self.passphrase + "\n")
        #expect(refused.status == 1, "\(refused.output)")
        #expect(refused.output.contains("--force") && refused.output.contains(other), "\(refused.output)")
        #expect(try AuthorityStoreIdentityTests.keyID(b) == other)

        let forced = try await Self.rainwalletd(
            ["storage", "restore", backup, "--state-dir", b, "--force"], stdin: Self.passphrase + "\n")
        #expect(forced.status == 0, "\(forced.output)")
        #expect(try AuthorityStoreIdentityTests.keyID(b) == (try AuthorityStoreIdentityTests.keyID(a)))
        let replacedKey = try FileManager.default.contentsOfDirectory(atPath: b).first { $0.hasPrefix("authority.key.replaced-") }
        let aside = try #require(replacedKey)
        #expect(try #require(try KeyFile.load(at: "\(b)/\(aside)")).keyID == other)
    }

    @Test("a passphrase file that others may read is refused and no backup is written")
    func loosePassphraseFileIsRefused() async throws {
        let (base, cleanup) = try AuthorityStoreIdentityTests.directories(["a"])
        defer { cleanup() }
        try await AuthorityProcess.with(in: "\(base)/a", ["--listen", "127.0.0.1:0"]) { _ in }
        let file = "\(base)/passphrase"
        try Self.privateFile(file, Self.passphrase + "\n", mode: 0o644)
        let backup = "\(base)/a.rwkb"
        let refused = try await Self.rainwalletd([
            "storage", "backup", "--state-dir", "\(base)/a/authority", "--out", backup, "--passphrase-file", file,
        ])
        #expect(refused.status == 1, "\(refused.output)")
        #expect(refused.output.contains("chmod 600"), "\(refused.output)")
        #expect(!FileManager.default.fileExists(atPath: backup))
    }

    @Test("--authority-server on a device daemon's state directory is refused and writes no authority.key there")
    func authorityServerFlagOnADeviceDirectoryIsRefused() async throws {
        let (base, cleanup) = try AuthorityStoreIdentityTests.directories(["device"])
        defer { cleanup() }
        try Self.privateFile("\(base)/device/key-provider", "file\n")
        try Self.privateFile("\(base)/any.rwkb", "RWKB")
        let refused = try await Self.rainwalletd(
            ["storage", "restore", "\(base)/any.rwkb", "--state-dir", "\(base)/device", "--authority-server"],
            stdin: Self.passphrase + "\n")
        #expect(refused.status == 1, "\(refused.output)")
        #expect(refused.output.contains("--authority-server"), "\(refused.output)")
        #expect(!FileManager.default.fileExists(atPath: "\(base)/device/authority.key"))
    }
}
