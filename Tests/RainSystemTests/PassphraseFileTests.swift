import Foundation
import RainCore
import RainSystem
import Testing

/// `--passphrase-file`: the passphrase is the file's first line, and only a private file of this
/// user's is read.
@Suite("Passphrase file")
struct PassphraseFileTests {
    static func file(_ contents: String, mode: mode_t = 0o600) throws -> (path: String, cleanup: () -> Void) {
        let directory = NSTemporaryDirectory() + "rw-pass-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        let path = "\(directory)/passphrase"
        try Data(contents.utf8).write(to: URL(fileURLWithPath: path))
        #expect(chmod(path, mode) == 0)
        return (path, { try? FileManager.default.removeItem(atPath: directory) })
    }

    @Test(
        "the passphrase is the first line, without its newline or carriage return",
        arguments: ["long passphrase", "long passphrase\n", "long passphrase\r\n", "long passphrase\nsecond line\n"])
    func firstLine(contents: String) throws {
        let (path, cleanup) = try Self.file(contents)
        defer { cleanup() }
        #expect(try PassphraseInput.read(file: path) == Array("long passphrase".utf8))
    }

    @Test("a file group or others may read is refused, naming the fix", arguments: [0o640, 0o604, 0o644] as [mode_t])
    func looseModeRefused(mode: mode_t) throws {
        let (path, cleanup) = try Self.file("long passphrase\n", mode: mode)
        defer { cleanup() }
        let error = #expect(throws: RainError.self) { try PassphraseInput.read(file: path) }
        #expect(error?.code == .invalidArgument)
        #expect(error?.details.field == "--passphrase-file")
    }

    @Test("an empty first line, a missing file and a symbolic link are refused")
    func otherRefusals() throws {
        let (empty, cleanup) = try Self.file("\nlong passphrase\n")
        defer { cleanup() }
        #expect(throws: RainError.self) { try PassphraseInput.read(file: empty) }
        #expect(throws: RainError.self) { try PassphraseInput.read(file: empty + ".missing") }
        let link = empty + ".link"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: empty)
        let error = #expect(throws: RainError.self) { try PassphraseInput.read(file: link) }
        #expect(error?.code == .invalidArgument)
    }
}
