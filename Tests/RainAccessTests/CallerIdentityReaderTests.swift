import Foundation
import Glibc
import RainCore
import RainCrypto
import Testing

@testable import RainAccess
@testable import RainSystem

/// The caller identity read from real processes.
@Suite("CallerIdentityReader")
struct CallerIdentityReaderTests {
    static let sleep = "/bin/sleep"
    static let python = "/usr/bin/python3"

    @Test("two copies of one program with different content hash differently; a second run of a copy is a cache hit")
    func copiesHashByContent() throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try copyExecutable(Self.sleep, to: dir + "/a")
        try copyExecutable(Self.sleep, to: dir + "/b", appending: [0x0a])
        let reader = CallerIdentityReader()
        let a = try Child(dir + "/a", ["30"])
        let b = try Child(dir + "/b", ["30"])
        let ida = try reader.read(try a.descriptor(), uid: getuid())
        let idb = try reader.read(try b.descriptor(), uid: getuid())
        #expect(ida.executablePath == dir + "/a")
        #expect(idb.executablePath == dir + "/b")
        #expect(ida.executableSHA256 == (try sha256(ofFile: dir + "/a")))
        #expect(idb.executableSHA256 == (try sha256(ofFile: dir + "/b")))
        #expect(ida.executableSHA256 != idb.executableSHA256)
        #expect(ida.unapprovable.isEmpty && idb.unapprovable.isEmpty)
        #expect(ida.pid == a.pid && ida.uid == getuid())

        let hits = reader.hashes.hitCount
        let again = try Child(dir + "/a", ["30"])
        let idAgain = try reader.read(try again.descriptor(), uid: getuid())
        #expect(idAgain.executableSHA256 == ida.executableSHA256)
        #expect(reader.hashes.hitCount == hits + 1)
    }

    @Test("a file rewritten in place with the same size is hashed again (the cache key holds the change time)")
    func rewrittenFileIsHashedAgain() throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try copyExecutable(Self.sleep, to: dir + "/c", appending: [0x01])
        let reader = CallerIdentityReader()
        let first = try Child(dir + "/c", ["30"])
        let before = try reader.read(try first.descriptor(), uid: getuid())
        first.stop()
        // Same inode, same size, other content.
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: dir + "/c")))
        bytes[bytes.count - 1] = 0x02
        let fd = open(dir + "/c", O_WRONLY)
        #expect(fd >= 0)
        _ = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        close(fd)
        let second = try Child(dir + "/c", ["30"])
        let after = try reader.read(try second.descriptor(), uid: getuid())
        #expect(after.executableSHA256 == (try sha256(ofFile: dir + "/c")))
        #expect(after.executableSHA256 != before.executableSHA256)
    }

    @Test("the hash cache keeps at most its capacity")
    func cacheIsBounded() throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let cache = ExecutableHashCache(capacity: 2)
        for i in 0..<5 {
            let path = dir + "/f\(i)"
            try Data([UInt8(i)]).write(to: URL(fileURLWithPath: path))
            let fd = open(path, O_RDONLY)
            defer { close(fd) }
            #expect(try cache.sha256(of: fd, path: path, limit: 1 << 20) == SHA256.hash([UInt8(i)]))
        }
        #expect(cache.count == 2)
    }

    @Test("a file larger than the limit is not hashed")
    func hashLimit() throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try Data(repeating: 7, count: 100).write(to: URL(fileURLWithPath: dir + "/big"))
        let fd = open(dir + "/big", O_RDONLY)
        defer { close(fd) }
        #expect(failureReason { _ = try ExecutableHashCache().sha256(of: fd, path: "big", limit: 99) } == "caller_unidentified")
    }

    @Test("a binary replaced on disk after its process started: the running content is hashed, under its path")
    func replacedBinary() throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try copyExecutable(Self.sleep, to: dir + "/tool")
        let original = try sha256(ofFile: dir + "/tool")
        let child = try Child(dir + "/tool", ["30"])
        try copyExecutable(Self.sleep, to: dir + "/tool.new", appending: Array("update".utf8))
        #expect(rename(dir + "/tool.new", dir + "/tool") == 0)
        #expect(try sha256(ofFile: dir + "/tool") != original)
        let identity = try CallerIdentityReader().read(try child.descriptor(), uid: getuid())
        #expect(identity.executableSHA256 == original)
        #expect(identity.executablePath == dir + "/tool")
    }

    @Test(
        "LD_PRELOAD or LD_AUDIT in the environment makes a caller unapprovable; an empty one does not",
        arguments: [
            ("LD_PRELOAD", "/nonexistent/libx.so", ["LD_PRELOAD"]),
            ("LD_AUDIT", "/nonexistent/libaudit.so", ["LD_AUDIT"]),
            ("LD_PRELOAD", "", []),
        ])
    func injectingEnvironment(name: String, value: String, expected: [String]) throws {
        let child = try Child(Self.sleep, ["30"], environment: ["HOME": "/", name: value])
        let identity = try CallerIdentityReader().read(try child.descriptor(), uid: getuid())
        #expect(identity.unapprovable == expected)
    }

    @Test("LD_PRELOAD past a large environment is found, and one past the limit makes the caller unapprovable")
    func largeEnvironment() throws {
        let filler = String(repeating: "x", count: 100_000)
        let child = try Child(
            Self.sleep, ["30"], environment: ["A_FILLER": filler, "Z_PRELOAD_AFTER": "1", "LD_PRELOAD": "/x.so"])
        let identity = try CallerIdentityReader().read(try child.descriptor(), uid: getuid())
        #expect(identity.unapprovable == ["LD_PRELOAD"])

        let clean = try Child(Self.sleep, ["30"], environment: ["A_FILLER": filler])
        var limits = CallerIdentityReader.Limits()
        limits.maximumEnvironmentBytes = 64 << 10
        let bounded = try CallerIdentityReader(limits: limits).read(try clean.descriptor(), uid: getuid())
        #expect(bounded.unapprovable.count == 1)
        #expect(bounded.unapprovable.first?.hasPrefix("environment larger than") == true)
    }

    @Test("the environment scanner finds names across any split of its input")
    func scannerSplits() {
        let environment = Array("A=1\0LD_PRELOAD=/x.so\0LD_AUDIT=\0B=LD_AUDIT=2\0XLD_AUDIT=3\0LD_AUDIT".utf8)
        for chunk in [1, 2, 3, 7, environment.count] {
            var scanner = EnvironmentScanner(names: ["LD_PRELOAD", "LD_AUDIT"])
            for start in stride(from: 0, to: environment.count, by: chunk) {
                environment[start..<min(start + chunk, environment.count)].withUnsafeBytes { scanner.feed($0) }
            }
            scanner.finish()
            #expect(scanner.found == ["LD_PRELOAD"], "chunk \(chunk)")
        }
    }

    @Test("a traced caller is unapprovable, and a tracer attached after the first read fails the re-check")
    func tracedCaller() throws {
        let strace = "/usr/bin/strace"
        guard access(strace, X_OK) == 0 else {
            Issue.record("strace is missing (Debian package strace): the tracer rule is not tested")
            return
        }
        let reader = CallerIdentityReader()
        let child = try Child(Self.sleep, ["30"])
        let descriptor = try child.descriptor()
        let clean = try reader.read(descriptor, uid: getuid())
        #expect(clean.unapprovable.isEmpty)
        #expect(try reader.recheck(clean, process: descriptor) == clean)

        let tracer = Process()
        tracer.executableURL = URL(fileURLWithPath: strace)
        tracer.arguments = ["-qq", "-o", "/dev/null", "-p", "\(child.pid)"]
        tracer.standardError = FileHandle.nullDevice
        try tracer.run()
        defer {
            kill(tracer.processIdentifier, SIGKILL)
            tracer.waitUntilExit()
        }
        #expect(
            waitUntil {
                (try? String(contentsOfFile: "/proc/\(child.pid)/status", encoding: .utf8))?.contains("TracerPid:\t0\n") == false
            })
        let traced = try reader.read(descriptor, uid: getuid())
        #expect(traced.unapprovable == ["traced by pid \(tracer.processIdentifier)"])
        #expect(failureReason { _ = try reader.recheck(clean, process: descriptor) } == "caller_changed")
    }

    @Test("a tracer on any thread, not only the main one, makes the caller unapprovable")
    func tracedThread() throws {
        let strace = "/usr/bin/strace"
        guard access(strace, X_OK) == 0 else {
            Issue.record("strace is missing (Debian package strace): the tracer rule is not tested")
            return
        }
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let script =
            "import sys, threading, time\nthreading.Thread(target=time.sleep, args=(30,), daemon=True).start()\nsys.stdin.read()\n"
        try script.write(toFile: dir + "/threads.py", atomically: true, encoding: .utf8)
        let child = try Child(Self.python, [dir + "/threads.py"])
        var thread: String?
        #expect(
            waitUntil {
                thread = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(child.pid)/task"))?.first {
                    $0 != "\(child.pid)"
                }
                return thread != nil
            })
        let tid = try #require(thread)
        let tracer = Process()
        tracer.executableURL = URL(fileURLWithPath: strace)
        tracer.arguments = ["-qq", "-o", "/dev/null", "-p", tid]
        tracer.standardError = FileHandle.nullDevice
        try tracer.run()
        defer {
            kill(tracer.processIdentifier, SIGKILL)
            tracer.waitUntilExit()
        }
        #expect(
            waitUntil {
                (try? String(contentsOfFile: "/proc/\(child.pid)/task/\(tid)/status", encoding: .utf8))?.contains(
                    "TracerPid:\t0\n") == false
            })
        #expect((try? String(contentsOfFile: "/proc/\(child.pid)/status", encoding: .utf8))?.contains("TracerPid:\t0\n") == true)
        let identity = try CallerIdentityReader().read(try child.descriptor(), uid: getuid())
        #expect(identity.unapprovable == ["traced by pid \(tracer.processIdentifier)"])
    }

    @Test("a process read again is known from its last read, until it runs itself again with LD_PRELOAD set")
    func recentIdentityFollowsExec() throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // A compiled program (interpreters are always read in full) that waits for a line, then runs
        // itself again with LD_PRELOAD in its environment: same pid, start time, file and arguments.
        let source = #"""
            #include <stdio.h>
            #include <stdlib.h>
            #include <unistd.h>
            int main(int argc, char **argv) {
                char line[16];
                if (getenv("LD_PRELOAD") == NULL) {
                    if (fgets(line, sizeof line, stdin) == NULL) return 1;
                    setenv("LD_PRELOAD", "/nonexistent/inject.so", 1);
                    execv("/proc/self/exe", argv);
                    return 2;
                }
                sleep(30);
                return 0;
            }
            """#
        try source.write(toFile: dir + "/reexec.c", atomically: true, encoding: .utf8)
        let gcc = Process()
        gcc.executableURL = URL(fileURLWithPath: "/usr/bin/gcc")
        gcc.arguments = ["-o", dir + "/reexec", dir + "/reexec.c"]
        try gcc.run()
        gcc.waitUntilExit()
        try #require(gcc.terminationStatus == 0, "gcc failed")

        let child = try Child(dir + "/reexec", [])
        let descriptor = try child.descriptor()
        let reader = CallerIdentityReader()
        let first = try reader.read(descriptor, uid: getuid())
        #expect(first.unapprovable.isEmpty)
        #expect(try reader.read(descriptor, uid: getuid()) == first, "read again: the same identity")
        child.send("go\n")
        #expect(
            waitUntil {
                (try? String(contentsOfFile: "/proc/\(child.pid)/environ", encoding: .isoLatin1))?.contains("LD_PRELOAD=")
                    == true
            })
        // Same pid, start time and file: only the environment tells, and it is read.
        let after = try reader.read(descriptor, uid: getuid())
        #expect(after.unapprovable.contains("LD_PRELOAD"), "\(after.unapprovable)")
    }

    @Test("a process that runs another program after it was read fails the re-check")
    func execFailsRecheck() throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try "read line\nexec /bin/sleep 30\n".write(toFile: dir + "/run.sh", atomically: true, encoding: .utf8)
        let child = try Child("/bin/bash", [dir + "/run.sh"])
        let descriptor = try child.descriptor()
        let reader = CallerIdentityReader()
        let before = try reader.read(descriptor, uid: getuid())
        #expect(before.script?.path == dir + "/run.sh")
        #expect(before.unapprovable.isEmpty)
        child.send("go\n")
        #expect(waitUntil { child.executableLink() == "/usr/bin/sleep" || child.executableLink() == "/bin/sleep" })
        #expect(failureReason { _ = try reader.recheck(before, process: descriptor) } == "caller_changed")
    }

    @Test("a python3 script is identified by the interpreter plus the script's path and hash")
    func pythonScript() throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let script = "import sys\nsys.stdin.read()\n"
        try script.write(toFile: dir + "/tool.py", atomically: true, encoding: .utf8)
        let reader = CallerIdentityReader()
        // Relative to the child's working directory, with a harmless flag.
        let child = try Child(Self.python, ["-u", "tool.py"], directory: dir)
        let identity = try reader.read(try child.descriptor(), uid: getuid())
        #expect(identity.executablePath == URL(fileURLWithPath: Self.python).resolvingSymlinksInPath().path)
        #expect(identity.script == .init(path: dir + "/tool.py", sha256: SHA256.hash(Array(script.utf8))))
        #expect(identity.unapprovable.isEmpty)
        #expect(identity.appPath == identity.executablePath + " " + dir + "/tool.py")

        // Another script under the same interpreter is another app.
        try "import sys\nsys.stdin.read()\n# other\n".write(toFile: dir + "/other.py", atomically: true, encoding: .utf8)
        let otherChild = try Child(Self.python, [dir + "/other.py"])
        let other = try reader.read(try otherChild.descriptor(), uid: getuid())
        #expect(other.script?.path == dir + "/other.py")
        #expect(other.contentHash != identity.contentHash)
    }

    @Test(
        "an interpreter that names no script file, or loads other code, is unapprovable",
        arguments: [
            (["-c", "import sys; sys.stdin.read()"], [String: String]()),
            (["-i", "SCRIPT"], [:]),
            (["-m", "code"], [:]),
            (["SCRIPT"], ["PYTHONPATH": "/tmp"]),
        ])
    func unapprovableInterpreter(arguments: [String], environment: [String: String]) throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try "import sys\nsys.stdin.read()\n".write(toFile: dir + "/s.py", atomically: true, encoding: .utf8)
        let child = try Child(Self.python, arguments.map { $0 == "SCRIPT" ? dir + "/s.py" : $0 }, environment: environment)
        let identity = try CallerIdentityReader().read(try child.descriptor(), uid: getuid())
        #expect(identity.unapprovable.count == 1, "\(identity.unapprovable)")
        if environment.isEmpty { #expect(identity.script == nil) }
    }

    @Test("interpreter variables do not concern a program that is not an interpreter")
    func interpreterVariablesOnlyForInterpreters() throws {
        let child = try Child(Self.sleep, ["30"], environment: ["PYTHONPATH": "/tmp", "NODE_OPTIONS": "-r x"])
        #expect(try CallerIdentityReader().read(try child.descriptor(), uid: getuid()).unapprovable.isEmpty)
    }

    @Test("interpreters are recognised by name, versions included")
    func interpreterNames() {
        for name in [
            "/usr/bin/python3", "/usr/bin/python3.11", "/usr/bin/node", "/bin/bash", "/bin/sh", "/bin/dash",
            "/usr/bin/zsh", "/usr/bin/perl", "/usr/bin/perl5.36.0", "/usr/bin/ruby3.1", "/usr/bin/php8.2", "/usr/bin/lua5.4",
        ] {
            #expect(InterpreterRule.matching(executablePath: name) != nil, "\(name)")
        }
        for name in ["/bin/sleep", "/usr/bin/rainwallet", "/usr/bin/pythonista", "/usr/bin/nodemon"] {
            #expect(InterpreterRule.matching(executablePath: name) == nil, "\(name)")
        }
    }

    @Test("the script is the first argument past harmless options; any other option leaves it unknown")
    func scriptArgument() {
        let python = InterpreterRule.python
        #expect(python.script(in: ["python3", "a.py", "-c", "x"]) == .script("a.py"))
        #expect(python.script(in: ["python3", "-u", "-BE", "a.py"]) == .script("a.py"))
        #expect(python.script(in: ["python3", "--", "-a.py"]) == .script("-a.py"))
        #expect(python.script(in: ["python3", "-X", "a.py", "b.py"]) != .script("a.py"))
        #expect(python.script(in: ["python3", "-"]) != .script("-"))
        #expect(python.script(in: ["python3"]) != .script(""))
        #expect(InterpreterRule.shell.script(in: ["bash", "-eu", "+x", "run.sh"]) == .script("run.sh"))
        #expect(InterpreterRule.shell.script(in: ["bash", "-c", "run.sh"]) != .script("run.sh"))
        #expect(InterpreterRule.shell.script(in: ["bash", "-s", "run.sh"]) != .script("run.sh"))
        #expect(InterpreterRule.node.script(in: ["node", "-r", "evil.js", "app.js"]) != .script("evil.js"))
    }

    @Test("the session id and controlling terminal come from /proc/PID/stat")
    func sessionAndTerminal() throws {
        let child = try Child(Self.sleep, ["30"])
        let identity = try CallerIdentityReader().read(try child.descriptor(), uid: getuid())
        #expect(identity.sessionID == getsid(child.pid))
        let stat = try ProcessStat(
            parsing: Array("12 (a) b) c) S 1 12 34 34816 12 4194304 0 0 0 0 0 0 0 0 20 0 1 0 987654 0 0\n".utf8))
        #expect(stat.sessionID == 34 && stat.controllingTerminal == 34816 && stat.startTime == 987654)
        #expect(stat.environmentEnd == nil)
        let fields = (3...52).map { $0 == 22 ? "555" : $0 == 51 ? "140000" : "0" }.joined(separator: " ")
        #expect(try ProcessStat(parsing: Array("1 (x) \(fields)\n".utf8)).environmentEnd == 140000)
    }

    @Test("a pidfd whose process exited is detected, even when its pid now names a live process")
    func exitedProcess() throws {
        let child = try Child(Self.sleep, ["30"])
        let descriptor = try child.descriptor()
        child.stop()
        let reader = CallerIdentityReader()
        #expect(failureReason { _ = try reader.read(descriptor, uid: getuid()) } == "caller_gone")
        // As if the pid were reused: the exited process's pidfd with a live pid.
        let reused = try descriptor.withDescriptor { fd throws(RainError) in
            ProcessDescriptor(adopting: dup(fd), pid: getpid(), source: .socketPeer, startTime: nil)
        }
        #expect(failureReason { _ = try reader.read(reused, uid: getuid()) } == "caller_gone")
    }

    @Test("without SO_PEERPIDFD, a start time other than the one recorded means the pid was reused")
    func startTimeCheck() throws {
        let child = try Child(Self.sleep, ["30"])
        let descriptor = try child.descriptor()
        #expect(descriptor.source == .pid)
        #expect(descriptor.startTime == (try ProcessDescriptor.readStat(pid: child.pid)).startTime)
        let reader = CallerIdentityReader()
        #expect(try reader.read(descriptor, uid: getuid()).pid == child.pid)
        let other = ProcessDescriptor(
            adopting: try Syscall.openProcessDescriptor(pid: child.pid), pid: child.pid, source: .pid,
            startTime: (descriptor.startTime ?? 0) + 1)
        #expect(failureReason { _ = try reader.read(other, uid: getuid()) } == "caller_gone")
    }

    @Test("a socket's peer: SO_PEERPIDFD where the kernel has it, pidfd_open with the start time otherwise")
    func socketPeer() throws {
        var pair: [Int32] = [-1, -1]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
        defer { close(pair[0]); close(pair[1]) }
        let peer = try Syscall.peerCredentials(pair[0])
        let direct = try ProcessDescriptor.peer(ofSocket: pair[0], pid: peer.pid)
        #expect(direct.source == .socketPeer && direct.startTime == nil)
        let fallback = try ProcessDescriptor.peer(ofSocket: pair[0], pid: peer.pid, usesPeerPidfd: false)
        #expect(fallback.source == .pid && fallback.startTime != nil)
        let reader = CallerIdentityReader()
        let own = try reader.read(direct, uid: getuid())
        #expect(own.pid == getpid())
        #expect(try reader.read(fallback, uid: getuid()).executableSHA256 == own.executableSHA256)
    }

    @Test("a closed descriptor refuses reads; closing waits for a read in progress")
    func closedDescriptor() throws {
        let child = try Child(Self.sleep, ["30"])
        let descriptor = try child.descriptor()
        try descriptor.withDescriptor { fd throws(RainError) in
            descriptor.close()
            #expect(fcntl(fd, F_GETFD) >= 0)  // still open while in use
        }
        #expect(descriptor.isClosed)
        #expect(failureReason { _ = try CallerIdentityReader().read(descriptor, uid: getuid()) } == "caller_gone")
    }

    @Test("cgroup, Flatpak info and TracerPid parsing")
    func parsers() {
        let cgroup = Array("0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-org.foo-123.scope\n".utf8)
        #expect(ProcfsParsing.systemdUnit(cgroup: cgroup) == "app-org.foo-123.scope")
        #expect(ProcfsParsing.systemdUnit(cgroup: Array("0::/system.slice/foo.service/sub\n".utf8)) == "foo.service")
        #expect(ProcfsParsing.systemdUnit(cgroup: Array("0::/\n".utf8)) == nil)
        let info = Array("[Instance]\nname=x\n[Application]\nname=org.example.Wallet\nruntime=r\n".utf8)
        #expect(ProcfsParsing.flatpakAppID(info: info) == "org.example.Wallet")
        #expect(ProcfsParsing.flatpakAppID(info: Array("[Runtime]\nname=org.x\n".utf8)) == nil)
        #expect(ProcfsParsing.tracerPID(status: Array("Name:\ta\nTracerPid:\t42\n".utf8)) == 42)
        #expect(ProcfsParsing.tracerPID(status: Array("Name:\ta\n".utf8)) == nil)
    }
}
