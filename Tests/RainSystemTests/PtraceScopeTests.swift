import Foundation
import RainSystem
import Testing

@Suite("Yama's ptrace_scope: read, carried on the wire, explained")
struct PtraceScopeTests {
    /// `text` in a file of its own, read as the kernel's setting.
    func read(_ text: String?) throws -> PtraceScope {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ptrace-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        if let text { try #require(FileManager.default.createFile(atPath: path, contents: Data(text.utf8))) }
        return PtraceScope.read(path: path)
    }

    @Test("no file is no Yama LSM; the kernel's numbers are read; anything else is unknown")
    func reading() throws {
        #expect(try read(nil) == .noYama)
        #expect(try read("0\n") == .scope(0))
        #expect(try read("1\n") == .scope(1))
        #expect(try read("3") == .scope(3))
        #expect(try read("one\n") == .unknown)
        #expect(try read("") == .unknown)
    }

    @Test(
        "only no Yama and scope 0 let programs of the user read each other's memory",
        arguments: [
            (PtraceScope.noYama, true), (.scope(0), true), (.scope(1), false), (.scope(2), false), (.scope(3), false),
            (.unknown, false),
        ])
    func openness(scope: PtraceScope, isOpen: Bool) {
        #expect(scope.isOpenToSameUser == isOpen)
        #expect((scope.promptNote != nil) == isOpen)
        // Where it is open, the explanation gives the one-line fix.
        #expect(scope.explanation.contains("kernel.yama.ptrace_scope = 1 to stop it") == isOpen, "\(scope.explanation)")
    }

    @Test("the wire form round-trips: none, 0 to 3, empty for unknown")
    func wire() {
        for scope in [PtraceScope.noYama, .scope(0), .scope(1), .scope(2), .scope(3), .unknown] {
            #expect(PtraceScope(wireValue: scope.wireValue) == scope)
        }
        #expect(PtraceScope.noYama.wireValue == "none")
        #expect(PtraceScope.unknown.wireValue == "")
    }
}
