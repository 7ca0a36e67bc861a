import Foundation
import RainCore
import RainCrypto
import RainKeyStore
import RainTestSupport
import Testing

/// The `tpm2` provider against a real software TPM (swtpm): one shared per test process, and one
/// of their own for the tests that count slots or need two different TPMs.
@Suite struct TPM2KeyProviderTests {
    @Test func sealsEachSlotAndAFreshProviderUnsealsTheSameSecrets() throws {
        let tpm = try SoftwareTPM.shared()
        let directory = try KeyStoreDirectory()
        let provider = TPM2KeyProvider(stateDirectory: directory.path, tcti: tpm.tcti)
        #expect(provider.kind == .tpm2)
        #expect(provider.location == "TPM 2.0 at \(tpm.tcti)")
        try provider.checkAvailable()
        for slot in KeySlot.allCases {
            #expect(try provider.loadSecret(slot) == nil)
            let key = try provider.loadOrCreateSecret(slot)
            #expect(try provider.loadSecret(slot)?.keyID == key.keyID)
        }
        #expect(try provider.loadSecret(.storage)?.keyID != provider.loadSecret(.authorityMaster)?.keyID)
        var info = stat()
        #expect(stat(provider.path(of: .storage), &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
        #expect(stat(provider.directory, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o700)

        // A new provider opens its own connection: the blobs and the TPM are all it needs.
        let again = TPM2KeyProvider(stateDirectory: directory.path, tcti: tpm.tcti)
        let master = try #require(try provider.loadSecret(.authorityMaster))
        #expect(try again.loadSecret(.authorityMaster)?.keyID == master.keyID)

        let replacement = try SymmetricKey.random()
        try again.storeSecret(replacement, slot: .storage)
        #expect(try provider.loadSecret(.storage)?.keyID == replacement.keyID)
        try provider.deleteSecret(.storage)
        #expect(try again.loadSecret(.storage) == nil)
        try provider.deleteSecret(.storage)
        #expect(try again.loadSecret(.authorityMaster)?.keyID == master.keyID)
    }

    @Test func theSealedFileHoldsNoKeyBytes() throws {
        let tpm = try SoftwareTPM.shared()
        let directory = try KeyStoreDirectory()
        let provider = TPM2KeyProvider(stateDirectory: directory.path, tcti: tpm.tcti)
        let key = try provider.loadOrCreateSecret(.storage)
        let file = try #require(FileManager.default.contents(atPath: provider.path(of: .storage)))
        let secret = key.withUnsafeBytes { Data($0) }
        #expect(file.range(of: secret) == nil)
    }

    /// Sealing and unsealing go through a salted session with parameter encryption: the tpm2-tss
    /// pcap TCTI records every byte exchanged with the TPM, and the key is not among them.
    @Test func theSecretCrossesTheTCTIEncryptedBothWays() throws {
        let tpm = try SoftwareTPM()
        defer { tpm.stop() }
        let directory = try KeyStoreDirectory()
        let capture = "\(directory.path)/tcti.pcap"
        let provider = TPM2KeyProvider(stateDirectory: directory.path, tcti: "pcap:\(tpm.tcti)")
        try SoftwareTPM.recordingTCTI(into: capture) {
            let key = try SymmetricKey.random()
            let secret = key.withUnsafeBytes { Data($0) }
            try provider.storeSecret(key, slot: .storage)
            let sealing = try #require(FileManager.default.contents(atPath: capture))
            #expect(sealing.count > 200)
            #expect(sealing.range(of: secret) == nil)
            try FileManager.default.removeItem(atPath: capture)
            #expect(try provider.loadSecret(.storage)?.keyID == key.keyID)
            let unsealing = try #require(FileManager.default.contents(atPath: capture))
            #expect(unsealing.count > 200)
            #expect(unsealing.range(of: secret) == nil)
        }
    }

    @Test func theDeviceKeySignsInsideTheTPMAndSurvivesAReload() throws {
        let tpm = try SoftwareTPM.shared()
        let directory = try KeyStoreDirectory()
        let provider = TPM2KeyProvider(stateDirectory: directory.path, tcti: tpm.tcti)
        #expect(try provider.loadDeviceKey() == nil)
        let signer = try provider.loadOrCreateDeviceKey()
        #expect(signer.publicKey.algorithm == "ecdsa-p256")
        #expect(signer.publicKey.wireBytes.count == 65)
        let message = Array("rain.bind.v1 test".utf8)
        let signature = try signer.sign(message)
        #expect(signer.publicKey.isValidSignature(signature, for: message))
        #expect(!signer.publicKey.isValidSignature(signature, for: message + [0]))

        let reloaded = try #require(try TPM2KeyProvider(stateDirectory: directory.path, tcti: tpm.tcti).loadDeviceKey())
        #expect(reloaded.publicKey == signer.publicKey)
        #expect(signer.publicKey.isValidSignature(try reloaded.sign(message), for: message))

        let replaced = try provider.createDeviceKey()
        #expect(replaced.publicKey != signer.publicKey)
        #expect(try provider.loadDeviceKey()?.publicKey == replaced.publicKey)
        #expect(replaced.publicKey.isValidSignature(try replaced.sign(message), for: message))
        try provider.deleteDeviceKey()
        #expect(try provider.loadDeviceKey() == nil)
        try provider.deleteDeviceKey()
    }

    @Test func derSignaturesAreMinimalPositiveIntegers() {
        let high = [UInt8](repeating: 0xFF, count: 32)
        let leadingZeros = [0, 0] + [UInt8](repeating: 0x01, count: 30)
        let der = TPM2DeviceSigner.derSignature(r: high, s: leadingZeros)
        #expect(der == [0x30, 0x43, 0x02, 0x21, 0x00] + high + [0x02, 0x1E] + [UInt8](repeating: 0x01, count: 30))
        #expect(TPM2DeviceSigner.derSignature(r: [0], s: [0x80]) == [0x30, 0x07, 0x02, 0x01, 0x00, 0x02, 0x02, 0x00, 0x80])
    }

    /// swtpm has 3 transient slots and no resource manager: a leaked object stays in it. The
    /// provider recovers from a full TPM (it flushes what was left and tries again), so a leak
    /// would not fail the calls: the test asks the TPM itself (`tpm2_getcap handles-transient`)
    /// what it still holds after the rounds. Six rounds each (twice the slots).
    @Test func repeatedUnsealAndSignLeaveNoObjectInTheTPM() throws {
        let tpm = try SoftwareTPM()
        defer { tpm.stop() }
        let directory = try KeyStoreDirectory()
        let provider = TPM2KeyProvider(stateDirectory: directory.path, tcti: tpm.tcti)
        let key = try provider.loadOrCreateSecret(.storage)
        let signer = try provider.loadOrCreateDeviceKey()
        let message = Array("round".utf8)
        for _ in 0..<6 {
            #expect(try provider.loadSecret(.storage)?.keyID == key.keyID)
            #expect(signer.publicKey.isValidSignature(try signer.sign(message), for: message))
        }
        // The failure paths flush too: a refused blob six times over.
        try corrupt(provider.path(of: .authorityMaster), from: provider.path(of: .storage), rewriteChecksum: true)
        for _ in 0..<6 {
            let error = #expect(throws: RainError.self) { try provider.loadSecret(.authorityMaster) }
            #expect(error?.code == .provider)
        }
        #expect(try provider.loadSecret(.storage)?.keyID == key.keyID)
        let held = try transientHandles(tpm)
        #expect(held.isEmpty, "objects left in the TPM: \(held)")
    }

    /// The transient objects the TPM holds now, as `tpm2_getcap` lists them (`0x80000000`, …).
    private func transientHandles(_ tpm: SoftwareTPM) throws -> [String] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/tpm2_getcap")
        process.arguments = ["-T", tpm.tcti, "handles-transient"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try DaemonHarness.withProcessLaunchLock { try process.run() }
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "tpm2_getcap failed (Debian package tpm2-tools)")
        return text.split(separator: "\n").map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "- ")) }
            .filter { !$0.isEmpty }
    }

    @Test(arguments: ["truncated", "garbled", "wrongKind", "notABlob"])
    func aDamagedBlobFileIsRefusedNamingTheFile(_ damage: String) throws {
        let tpm = try SoftwareTPM.shared()
        let directory = try KeyStoreDirectory()
        let provider = TPM2KeyProvider(stateDirectory: directory.path, tcti: tpm.tcti)
        _ = try provider.loadOrCreateSecret(.storage)
        _ = try provider.loadOrCreateDeviceKey()
        let file = provider.path(of: .storage)
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: file)))
        switch damage {
        case "truncated": bytes.removeLast(bytes.count / 3)
        case "garbled": bytes[bytes.count - 20] ^= 0x01  // inside the TPM's private part
        case "wrongKind": bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: provider.deviceKeyPath)))
        default: bytes = Array("not a blob\n".utf8)
        }
        try Data(bytes).write(to: URL(fileURLWithPath: file))
        let error = #expect(throws: RainError.self) { try provider.loadSecret(.storage) }
        #expect(error?.code == .invalidArgument)
        #expect(error?.details.reason == "tpm_blob_malformed")
        #expect(error?.message.contains(file) == true)
    }

    @Test func aBlobFromAnotherTPMIsAKeyLostForGood() throws {
        let first = try SoftwareTPM()
        defer { first.stop() }
        let second = try SoftwareTPM()
        defer { second.stop() }
        let directory = try KeyStoreDirectory()
        let made = TPM2KeyProvider(stateDirectory: directory.path, tcti: first.tcti)
        _ = try made.loadOrCreateSecret(.authorityMaster)
        _ = try made.loadOrCreateDeviceKey()

        let elsewhere = TPM2KeyProvider(stateDirectory: directory.path, tcti: second.tcti)
        let secretError = #expect(throws: RainError.self) { try elsewhere.loadSecret(.authorityMaster) }
        #expect(secretError?.code == .provider)
        #expect(secretError?.details.reason == "tpm_key_lost")
        #expect(secretError?.message.contains(made.path(of: .authorityMaster)) == true)
        let deviceError = #expect(throws: RainError.self) { try elsewhere.loadDeviceKey() }
        #expect(deviceError?.code == .provider)
        #expect(deviceError?.details.reason == "tpm_key_lost")
        // The second TPM still works (nothing leaked on the refusal), and the first still opens them.
        for _ in 0..<5 { #expect(throws: RainError.self) { try elsewhere.loadSecret(.authorityMaster) } }
        try elsewhere.checkAvailable()
        #expect(try made.loadSecret(.authorityMaster) != nil)
    }

    @Test(arguments: ["swtpm:path=/tmp/rain-no-such-tpm/tpm", "device:/dev/rain-no-such-tpm"])
    func anUnreachableTPMIsAClearProviderErrorAtOnce(_ tcti: String) throws {
        let tpm = try SoftwareTPM.shared()
        let directory = try KeyStoreDirectory()
        _ = try TPM2KeyProvider(stateDirectory: directory.path, tcti: tpm.tcti).loadOrCreateSecret(.storage)
        let provider = TPM2KeyProvider(stateDirectory: directory.path, tcti: tcti)
        let start = ContinuousClock.now
        let calls: [() throws -> Void] = [
            { try provider.checkAvailable() }, { _ = try provider.loadSecret(.storage) },
            { try provider.storeSecret(try SymmetricKey.random(), slot: .authorityMaster) },
            { _ = try provider.createDeviceKey() },
        ]
        for call in calls {
            let error = #expect(throws: RainError.self) { try call() }
            #expect(error?.code == .provider)
            #expect(error?.details.reason == "tpm_unavailable")
            #expect(error?.message.contains(tcti) == true)
            #expect(error?.message.contains("storage.provider") == true)
        }
        #expect(ContinuousClock.now - start < .seconds(1))
        #expect(!FileManager.default.fileExists(atPath: provider.deviceKeyPath))
    }

    @Test func ownerHierarchyWithAPasswordIsNamed() throws {
        let tpm = try SoftwareTPM()
        defer { tpm.stop() }
        let status = try run("/usr/bin/tpm2_changeauth", ["-T", tpm.tcti, "-c", "owner", "rain-owner-password"])
        try #require(status == 0, "tpm2_changeauth failed (Debian package tpm2-tools)")
        let directory = try KeyStoreDirectory()
        let provider = TPM2KeyProvider(stateDirectory: directory.path, tcti: tpm.tcti)
        let error = #expect(throws: RainError.self) { try provider.storeSecret(try SymmetricKey.random(), slot: .storage) }
        #expect(error?.code == .provider)
        #expect(error?.details.reason == "tpm_owner_auth")
    }

    /// Not a benchmark: prints what one unseal and one signature cost on swtpm, for the report.
    @Test func printsWhatAnUnsealAndASignatureCostOnSwtpm() throws {
        let tpm = try SoftwareTPM()
        defer { tpm.stop() }
        let directory = try KeyStoreDirectory()
        let provider = TPM2KeyProvider(stateDirectory: directory.path, tcti: tpm.tcti)
        _ = try provider.loadOrCreateSecret(.storage)
        let signer = try provider.loadOrCreateDeviceKey()
        let rounds = 20
        let message = Array("cost".utf8)
        let unseal = try ContinuousClock().measure {
            for _ in 0..<rounds { _ = try provider.loadSecret(.storage) }
        }
        let sign = try ContinuousClock().measure {
            for _ in 0..<rounds { _ = try signer.sign(message) }
        }
        let ping = try ContinuousClock().measure {
            for _ in 0..<rounds { try provider.checkAvailable() }
        }
        print(
            "swtpm, \(rounds) rounds each: connect+CreatePrimary+Load+Unseal \(unseal / rounds), "
                + "connect+CreatePrimary+Load+Sign \(sign / rounds), connect+GetRandom \(ping / rounds)")
    }

    /// Writes into `target` the blob of `source` with one bit of its private part flipped; with
    /// `rewriteChecksum` the file's checksum is recomputed, so only the TPM can notice.
    private func corrupt(_ target: String, from source: String, rewriteChecksum: Bool) throws {
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: source)))
        bytes[bytes.count - 20] ^= 0x01
        if rewriteChecksum {
            let body = Array(bytes[38...])
            bytes.replaceSubrange(6..<38, with: SHA256.hash(Array(bytes.prefix(6)) + body))
        }
        try Data(bytes).write(to: URL(fileURLWithPath: target))
        chmod(target, 0o600)
    }

    private func run(_ executable: String, _ arguments: [String]) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try DaemonHarness.withProcessLaunchLock { try process.run() }
        process.waitUntilExit()
        return process.terminationStatus
    }
}
