import Foundation
import RainCore
import RainCrypto
import RainDevice

extension DaemonHarness {
    /// Adds the secrets this harness's daemon keeps on disk to `scanner` (see
    /// `addStoredSecrets(stateDirectory:to:)`).
    public func addStoredSecrets(to scanner: inout SecretScanner) async throws {
        try await Self.addStoredSecrets(stateDirectory: stateDirectory, to: &scanner)
    }

    /// Adds the secrets a `rainwalletd` state directory holds to `scanner`: the device signing key
    /// (`device.key`), the storage key (`storage.key`), the embedded authority's master key
    /// (`authority/authority.key`) when there is one, and the access and refresh tokens of every
    /// stored session. Files that do not exist are skipped; none is created.
    public static func addStoredSecrets(stateDirectory: String, to scanner: inout SecretScanner) async throws {
        let fm = FileManager.default
        for (file, label) in [
            ("device.key", "device key"), ("storage.key", "storage key"), ("authority/authority.key", "master key"),
        ] {
            let path = "\(stateDirectory)/\(file)"
            guard fm.fileExists(atPath: path) else { continue }
            let key = try KeyFile.loadOrCreate(at: path)
            scanner.addKey(key.withUnsafeBytes { Array($0) }, label: label)
        }
        guard fm.fileExists(atPath: "\(stateDirectory)/storage.key") else { return }
        let storage = try EncryptedFileStorage(
            stateDirectory: stateDirectory, logger: Logger(label: "scan", sink: CapturingLogSink()))
        for profile in await storage.storedProfiles() {
            guard let session = await storage.load(profile: profile) else { continue }
            scanner.addToken(session.accessToken, label: "access token (\(profile))")
            scanner.addToken(session.refreshToken, label: "refresh token (\(profile))")
        }
    }
}
