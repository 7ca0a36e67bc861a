import Foundation
import RainTestSupport
import RainWallet
import Testing

/// Storage migration between the two providers that keep no key in the state directory: a real
/// `gnome-keyring-daemon` on a private bus (`TestKeyring`) and a software TPM (`SoftwareTPM`).
/// A session and the embedded authority's wallet move from the keyring to the TPM in the running
/// daemon, then back offline, and keep working at each step; the source's keys are gone each time.
@Suite("Storage migration between the keyring and the TPM (processes)", .serialized)
struct KeyringTPMMigrationTests {
    static func config(_ provider: String, tpm: SoftwareTPM) -> String {
        #"{"storage": {"provider": "\#(provider)", "tcti": "\#(tpm.tcti)"}, "profiles": {"default": {"allowExport": true}}}"#
    }

    static let keyItems = ["storage", "device-key", "authority-master"]

    @Test func aSessionMovesFromTheKeyringToTheTPMAndBackAndRefreshesAtEachStep() async throws {
        let keyring = try TestKeyring()
        defer { keyring.stop() }
        let tpm = try SoftwareTPM()
        defer { tpm.stop() }
        let h = try await DaemonHarness.start(
            config: Self.config("secret-service", tpm: tpm), environment: SecretServiceDaemonTests.bus(keyring))
        defer { h.shutdown() }
        let provider = h.provider()
        let (session, _, _) = try await h.logIn(provider, .email("keyring-tpm@example.com"))
        let phrase = try await provider.exportRecoveryPhrase()
        func keyringItems() throws -> [String] {
            try Self.keyItems.filter {
                try keyring.lookupItem(attributes: SecretServiceDaemonTests.item($0, stateDirectory: h.stateDirectory)) != nil
            }
        }
        #expect(try keyringItems() == Self.keyItems)
        // From here on the record decides: only a migration changes the provider.
        try Data(Self.config("auto", tpm: tpm).utf8).write(to: URL(fileURLWithPath: "\(h.directory)/config.json"))

        // Live, keyring → TPM.
        let toTPM = try await h.runCLI(["storage", "migrate", "--to", "tpm2"])
        #expect(toTPM.status == 0, "\(toTPM)")
        #expect(try await provider.daemonInfo().storageProvider == "tpm2")
        #expect(try await provider.refreshSession().hasActiveSession)
        #expect(try await provider.exportRecoveryPhrase() == phrase)
        #expect(try keyringItems().isEmpty, "the keyring still holds keys of this daemon")
        for blob in ["storage.sealed", "authority-master.sealed", "device-key.blob"] {
            #expect(FileManager.default.fileExists(atPath: "\(h.stateDirectory)/tpm2/\(blob)"), "\(blob)")
        }
        try await h.restart()
        try await provider.awaitSessionRestore()
        #expect(try await provider.currentSession().accountID == session.accountID)
        #expect(try await provider.refreshSession().hasActiveSession)

        // Offline, TPM → keyring.
        try await h.stop()
        var arguments = ["storage", "migrate", "--to", "secret-service", "--state-dir", h.stateDirectory]
        if let configPath = h.configPath { arguments += ["--config", configPath] }
        let (status, output) = try await h.runDaemon(arguments: arguments, timeout: .seconds(30))
        #expect(status == 0, "\(output)")
        #expect(try keyringItems() == Self.keyItems)
        for blob in ["storage.sealed", "authority-master.sealed", "device-key.blob"] {
            #expect(!FileManager.default.fileExists(atPath: "\(h.stateDirectory)/tpm2/\(blob)"), "\(blob) left behind")
        }
        try await h.start()
        try await provider.awaitSessionRestore()
        #expect(try await provider.daemonInfo().storageProvider == "secret-service")
        #expect(try await provider.currentSession().accountID == session.accountID)
        #expect(try await provider.refreshSession().hasActiveSession)
        #expect(try await provider.exportRecoveryPhrase() == phrase)
        _ = try await provider.account()
    }
}
