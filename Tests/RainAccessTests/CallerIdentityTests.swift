import Testing

@testable import RainAccess

@Suite("CallerIdentity")
struct CallerIdentityTests {
    @Test("an interpreter's identity binds the executable and the script, by path and by content")
    func interpreterIdentity() {
        let plain = CallerIdentity(pid: 1, uid: 0, executablePath: "/usr/bin/tool", executableSHA256: [0xab, 0x01])
        #expect(plain.appPath == "/usr/bin/tool")
        #expect(plain.contentHash == "ab01")
        var script = plain
        script.script = .init(path: "/home/u/a.py", sha256: [0x0f])
        #expect(script.appPath == "/usr/bin/tool /home/u/a.py")
        #expect(script.contentHash == "ab01:0f")
        #expect(script != plain)
    }
}
