import Foundation
import RainCore
@testable import RainCrypto
import Testing

/// A fresh directory under /tmp, removed when the test ends.
final class TemporaryDirectory {
    let path: String

    init() throws {
        path = "/tmp/raincrypto-test-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(
            atPath: path, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    func file(_ name: String) -> String { path + "/" + name }
}

private func mode(of path: String) throws -> mode_t {
    var info = stat()
    try #require(stat(path, &info) == 0)
    return info.st_mode & 0o7777
}

@Suite struct KeyFileTests {
    @Test func createsA0600FileAndLoadsTheSameKeyAgain() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("storage.key")
        let created = try KeyFile.loadOrCreate(at: path)
        #expect(created.byteCount == 32)
        #expect(try mode(of: path) == 0o600)
        let onDisk = try #require(FileManager.default.contents(atPath: path))
        #expect(Array(onDisk) == keyBytes(created))

        let loaded = try KeyFile.loadOrCreate(at: path)
        #expect(keyBytes(loaded) == keyBytes(created))
        #expect(loaded.keyID == created.keyID)
    }

    @Test func createsWith0600EvenUnderAPermissiveUmask() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("k")
        let previous = umask(0)
        defer { umask(previous) }
        _ = try KeyFile.loadOrCreate(at: path, byteCount: 16)
        #expect(try mode(of: path) == 0o600)
        #expect(try #require(FileManager.default.contents(atPath: path)).count == 16)
    }

    @Test(arguments: [0o644, 0o640, 0o604, 0o660, 0o606, 0o700 | 0o001])
    func refusesGroupOrOtherAccess(permissions: Int) throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("storage.key")
        _ = try KeyFile.loadOrCreate(at: path)
        try #require(chmod(path, mode_t(permissions)) == 0)
        let error = #expect(throws: RainError.self) { try KeyFile.loadOrCreate(at: path) }
        #expect(error?.code == .invalidArgument)
        #expect(error?.details.reason == "key_file_mode")
        #expect(error?.message.contains(path) == true)
        #expect(error?.message.contains("chmod 600 \(path)") == true)
        // The refused file is left alone, not replaced by a new key.
        #expect(try mode(of: path) == mode_t(permissions))
    }

    @Test(arguments: [0, 16, 31, 33, 64])
    func refusesWrongSize(size: Int) throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("storage.key")
        try #require(
            FileManager.default.createFile(
                atPath: path, contents: Data(repeating: 7, count: size), attributes: [.posixPermissions: 0o600]))
        let error = #expect(throws: RainError.self) { try KeyFile.loadOrCreate(at: path) }
        #expect(error?.code == .invalidArgument)
        #expect(error?.details.reason == "key_file_size")
        #expect(try #require(FileManager.default.contents(atPath: path)).count == size)
    }

    @Test func loadsAnExistingKeyWrittenByHand() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("storage.key")
        let bytes = (0..<32).map { UInt8($0) }
        try #require(
            FileManager.default.createFile(
                atPath: path, contents: Data(bytes), attributes: [.posixPermissions: 0o400]))
        #expect(keyBytes(try KeyFile.loadOrCreate(at: path)) == bytes)
    }

    @Test func refusesADirectory() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("sub")
        try #require(mkdir(path, 0o700) == 0)
        let error = #expect(throws: RainError.self) { try KeyFile.loadOrCreate(at: path) }
        #expect(error?.code == .invalidArgument)
    }

    /// Ownership can only be changed as root; elsewhere the check cannot be set up.
    @Test(.enabled(if: geteuid() == 0, "needs root to chown the file to another uid"))
    func refusesAFileOwnedBySomeoneElse() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("storage.key")
        _ = try KeyFile.loadOrCreate(at: path)
        try #require(chown(path, 65534, 65534) == 0)
        let error = #expect(throws: RainError.self) { try KeyFile.loadOrCreate(at: path) }
        #expect(error?.code == .invalidArgument)
        #expect(error?.details.reason == "key_file_owner")
    }

    @Test func missingDirectoryIsAnError() throws {
        let directory = try TemporaryDirectory()
        let error = #expect(throws: RainError.self) {
            try KeyFile.loadOrCreate(at: directory.file("missing/storage.key"))
        }
        #expect(error?.code == .internalError)
    }

    @Test func doesNotFollowASymbolicLinkWhenCreating() throws {
        let directory = try TemporaryDirectory()
        let target = directory.file("target")
        let link = directory.file("link")
        try #require(symlink(target, link) == 0)
        #expect(throws: RainError.self) { try KeyFile.loadOrCreate(at: link) }
        #expect(!FileManager.default.fileExists(atPath: target))
    }

    @Test(arguments: [0, -1, 4097])
    func refusesBadKeyLength(byteCount: Int) throws {
        let directory = try TemporaryDirectory()
        let error = #expect(throws: RainError.self) {
            try KeyFile.loadOrCreate(at: directory.file("k"), byteCount: byteCount)
        }
        #expect(error?.code == .invalidArgument)
    }

    @Test(arguments: [("a/b/c", "a/b"), ("/c", "/"), ("c", "."), ("/a/c", "/a")])
    func directoryOfPath(path: String, directory: String) {
        #expect(KeyFile.directory(of: path) == directory)
    }
}
