import Foundation
import RainCore
import RainCrypto
@testable import RainDevice
import RainSystem
import Testing

/// A temp state directory removed at the end of each test.
final class TempDir {
    let path: String
    init() {
        path = "/tmp/rwdt-\(UInt32.random(in: 0...UInt32.max))"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}

@Suite struct EncryptedFileStorageTests {
    let session = StoredSession(
        accountID: "acct_1", walletID: "wal_1", accessToken: "rwa_secret-access", refreshToken: "rwr_secret-refresh",
        expiresAt: Date(unixMilliseconds: 1_900_000_000_000), lifetimeSeconds: 900, contact: .email("user@example.com"))

    func storage(_ dir: TempDir, sink: CapturingLogSink = CapturingLogSink()) throws -> EncryptedFileStorage {
        try EncryptedFileStorage(stateDirectory: dir.path, logger: Logger(label: "test", sink: sink))
    }

    @Test func roundTrip() async throws {
        let dir = TempDir()
        let s = try storage(dir)
        try await s.save(session, profile: "default")
        #expect(await s.load(profile: "default") == session)
        // A fresh instance (a restarted daemon) reads it with the key file.
        #expect(await (try storage(dir)).load(profile: "default") == session)
        #expect(await s.storedProfiles() == ["default"])
    }

    @Test func filesAreOwnerOnlyAndHoldNoPlaintext() async throws {
        let dir = TempDir()
        let s = try storage(dir)
        try await s.save(session, profile: "default")
        let path = "\(dir.path)/sessions/default.session"
        let attrs = try FileManager.default.attributesOfItem(atPath: path)
        #expect((attrs[.posixPermissions] as? Int) == 0o600)
        let keyAttrs = try FileManager.default.attributesOfItem(atPath: "\(dir.path)/storage.key")
        #expect((keyAttrs[.posixPermissions] as? Int) == 0o600)
        let bytes = try #require(FileManager.default.contents(atPath: path))
        #expect(bytes.range(of: Data("rwr_secret-refresh".utf8)) == nil)
        #expect(bytes.range(of: Data("acct_1".utf8)) == nil)
    }

    @Test func missingFileIsNoSession() async throws {
        let dir = TempDir()
        #expect(await (try storage(dir)).load(profile: "nobody") == nil)
    }

    @Test func everyFlippedBitReadsAsNoSessionAndIsMovedAside() async throws {
        let dir = TempDir()
        let sink = CapturingLogSink()
        let s = try storage(dir, sink: sink)
        let sealed = try s.seal(session, profile: "default")
        // Every byte of the header and a spread of the body: each flip must be detected.
        for index in stride(from: 0, to: sealed.count, by: max(1, sealed.count / 64)) {
            var tampered = sealed
            tampered[index] ^= 0x01
            if case .success = s.open(tampered, profile: "default") {
                Issue.record("flipped byte \(index) still opened")
            }
        }
        var tampered = sealed
        tampered[sealed.count - 1] ^= 0x80
        let path = "\(dir.path)/sessions/default.session"
        try AtomicFile.write(tampered, to: path)
        #expect(await s.load(profile: "default") == nil)
        #expect(!FileManager.default.fileExists(atPath: path))
        let aside = try FileManager.default.contentsOfDirectory(atPath: "\(dir.path)/sessions").filter {
            $0.contains(".corrupt-")
        }
        #expect(aside.count == 1)
        #expect(sink.captured.contains { $0.contains("storage.corrupt") })
    }

    @Test func truncatedFileReadsAsNoSession() async throws {
        let dir = TempDir()
        let s = try storage(dir)
        try await s.save(session, profile: "default")
        let path = "\(dir.path)/sessions/default.session"
        let bytes = try #require(try AtomicFile.read(path))
        for length in [0, 3, 5, 21, bytes.count / 2, bytes.count - 1] {
            try AtomicFile.write(Array(bytes.prefix(length)), to: path)
            #expect(await s.load(profile: "default") == nil, "length \(length)")
        }
    }

    @Test func wrongKeyReadsAsNoSession() async throws {
        let dir = TempDir()
        try await (try storage(dir)).save(session, profile: "default")
        // Replace the key: the file was sealed with another one.
        try AtomicFile.write(try SecureRandom.bytes(count: 32), to: "\(dir.path)/storage.key", mode: 0o600)
        #expect(await (try storage(dir)).load(profile: "default") == nil)
    }

    @Test func fileRenamedToAnotherProfileDoesNotOpen() async throws {
        let dir = TempDir()
        let s = try storage(dir)
        try await s.save(session, profile: "alpha")
        try FileManager.default.copyItem(
            atPath: "\(dir.path)/sessions/alpha.session", toPath: "\(dir.path)/sessions/beta.session")
        #expect(await s.load(profile: "beta") == nil)
        #expect(await s.load(profile: "alpha") == session)
    }

    @Test func looseKeyFileModeIsRefused() async throws {
        let dir = TempDir()
        _ = try storage(dir)
        chmod("\(dir.path)/storage.key", 0o644)
        let error = #expect(throws: RainError.self) { try storage(dir) }
        #expect(error?.code == .invalidArgument)
    }

    @Test func deleteRemovesTheSession() async throws {
        let dir = TempDir()
        let s = try storage(dir)
        try await s.save(session, profile: "default")
        try await s.delete(profile: "default")
        #expect(await s.load(profile: "default") == nil)
        try await s.delete(profile: "default")  // deleting nothing is fine
    }
}
