import Foundation
import RainCore
import RainSystem
import Testing

/// A fresh 0700 directory under /tmp, removed when the test ends.
private final class Scratch {
    let path: String
    init() throws {
        var template = Array("/tmp/rwop-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { buf in buf.baseAddress.flatMap { mkdtemp($0) } }
        guard let made else { throw RainError(.internalError, "mkdtemp failed") }
        path = String(cString: made)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}

private func mode(_ path: String) -> mode_t? {
    var st = stat()
    return lstat(path, &st) == 0 ? st.st_mode & 0o7777 : nil
}

/// The daemon's own paths are never symbolic links, never another uid's, never writable
/// by others; a directory it did not create keeps its mode.
@Suite struct OwnedPathTests {
    @Test func createsWithExactModeAndParents() throws {
        let s = try Scratch()
        let dir = "\(s.path)/a/b/state"
        let old = umask(0o077)
        defer { umask(old) }
        #expect(try OwnedPath.makeOrCheckDirectory(dir, mode: 0o711, name: "state directory", field: "state-dir"))
        #expect(mode(dir) == 0o711)
        #expect(mode("\(s.path)/a") == 0o700)
        // A second call finds it and changes nothing.
        #expect(try !OwnedPath.makeOrCheckDirectory(dir, mode: 0o700, name: "state directory", field: "state-dir"))
        #expect(mode(dir) == 0o711)
    }

    @Test func refusesASymbolicLinkEvenToAnOwnDirectory() throws {
        let s = try Scratch()
        #expect(mkdir("\(s.path)/real", 0o700) == 0)
        #expect(symlink("\(s.path)/real", "\(s.path)/link") == 0)
        for spelling in ["\(s.path)/link", "\(s.path)/link/", "\(s.path)/link//"] {
            let error = #expect(throws: RainError.self) {
                try OwnedPath.makeOrCheckDirectory(spelling, mode: 0o700, name: "state directory", field: "state-dir")
            }
            #expect(error?.code == .invalidArgument)
            #expect(error?.message.contains("symbolic link") == true, "\(spelling)")
        }
    }

    @Test(arguments: [mode_t(0o777), 0o1777, 0o770, 0o702])
    func refusesADirectoryOthersCanWriteAndKeepsItsMode(_ permissions: mode_t) throws {
        let s = try Scratch()
        let dir = "\(s.path)/shared"
        #expect(mkdir(dir, 0o700) == 0 && chmod(dir, permissions) == 0)
        let error = #expect(throws: RainError.self) {
            try OwnedPath.makeOrCheckDirectory(dir, mode: 0o700, name: "socket directory", field: "socket")
        }
        #expect(error?.details.field == "socket")
        #expect(mode(dir) == permissions)
    }

    @Test(.enabled(if: getuid() == 0, "chown needs root"))
    func refusesAnotherOwner() throws {
        let s = try Scratch()
        let dir = "\(s.path)/theirs"
        #expect(mkdir(dir, 0o700) == 0 && chown(dir, 42425, 42425) == 0)
        let error = #expect(throws: RainError.self) {
            try OwnedPath.makeOrCheckDirectory(dir, mode: 0o700, name: "state directory", field: "state-dir")
        }
        #expect(error?.message.contains("owned by uid 42425") == true)
    }

    @Test func trustedFileRefusesLinksAndLooseModes() throws {
        let s = try Scratch()
        let file = "\(s.path)/config.json"
        #expect(FileManager.default.createFile(atPath: file, contents: Data("{}".utf8)))
        #expect(chmod(file, 0o644) == 0)
        func read(_ path: String) throws(RainError) -> [UInt8]? {
            try OwnedPath.readTrustedFile(path, owners: [geteuid()], name: "config file", field: "config", limit: 1024)
        }
        #expect(try read(file) == Array("{}".utf8))
        #expect(try read("\(s.path)/missing") == nil)

        #expect(symlink(file, "\(s.path)/link.json") == 0)
        #expect(throws: RainError.self) { try read("\(s.path)/link.json") }

        for loose: mode_t in [0o664, 0o646] {
            #expect(chmod(file, loose) == 0)
            let error = #expect(throws: RainError.self) { try read(file) }
            #expect(error?.code == .invalidArgument && error?.message.contains("chmod go-w") == true)
        }
    }

    @Test func appendNeverWritesThroughASymbolicLink() throws {
        let s = try Scratch()
        let target = "\(s.path)/loot"
        #expect(FileManager.default.createFile(atPath: target, contents: nil))
        #expect(chmod(target, 0o600) == 0)
        #expect(symlink(target, "\(s.path)/outbox.jsonl") == 0)
        #expect(throws: RainError.self) { try AtomicFile.append(Array("secret\n".utf8), to: "\(s.path)/outbox.jsonl") }
        #expect(try AtomicFile.read(target) == [])

        // A file others can read is refused too; a private one is appended to.
        let outbox = "\(s.path)/real.jsonl"
        try AtomicFile.append(Array("a\n".utf8), to: outbox)
        #expect(mode(outbox) == 0o600)
        #expect(chmod(outbox, 0o644) == 0)
        #expect(throws: RainError.self) { try AtomicFile.append(Array("b\n".utf8), to: outbox) }
        #expect(chmod(outbox, 0o600) == 0)
        try AtomicFile.append(Array("b\n".utf8), to: outbox)
        #expect(try AtomicFile.read(outbox) == Array("a\nb\n".utf8))
    }

    @Test func oneLockPerDirectoryNamingThePid() throws {
        let s = try Scratch()
        var first: DirectoryLock? = try DirectoryLock(directory: s.path)
        let error = #expect(throws: RainError.self) { try DirectoryLock(directory: s.path) }
        #expect(error?.code == .invalidArgument)
        #expect(error?.message.contains("pid \(getpid())") == true)
        #expect(first != nil)
        first = nil
        // Released with the descriptor. Other tests of this process start programs meanwhile, and a
        // child between its fork and its exec holds a copy of every descriptor (close-on-exec ones
        // too) and with it the lock, for a moment: try again for up to 2 s rather than fail then.
        var retaken: DirectoryLock?
        for _ in 0..<200 where retaken == nil {
            retaken = try? DirectoryLock(directory: s.path)
            if retaken == nil { usleep(10_000) }
        }
        #expect(retaken != nil, "the lock was not released with its object")
    }

    @Test func lockFileLinkRefused() throws {
        let s = try Scratch()
        #expect(symlink("\(s.path)/elsewhere", "\(s.path)/rainwalletd.lock") == 0)
        #expect(throws: RainError.self) { try DirectoryLock(directory: s.path) }
        #expect(mode("\(s.path)/elsewhere") == nil)
    }
}
