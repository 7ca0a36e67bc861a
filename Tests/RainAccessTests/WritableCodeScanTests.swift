import Glibc
import Testing

@testable import RainAccess

@Suite("Executable mappings: only files the caller's user cannot write")
struct WritableCodeScanTests {
    static let uid: UInt32 = 1000

    /// A `stat` of a file with this owner, mode and inode.
    static func file(uid: UInt32, mode: mode_t, inode: UInt64) -> stat {
        var st = stat()
        st.st_uid = uid
        st.st_mode = S_IFREG | mode
        st.st_ino = ino_t(inode)
        return st
    }

    static let files: [String: stat] = [
        "/usr/lib/libc.so.6": file(uid: 0, mode: 0o644, inode: 11),
        "/home/u/libevil.so": file(uid: uid, mode: 0o755, inode: 12),
        "/home/u/readonly.so": file(uid: uid, mode: 0o555, inode: 13),
        "/opt/shared.so": file(uid: 0, mode: 0o666, inode: 14),
        "/usr/lib/replaced.so": file(uid: 0, mode: 0o644, inode: 99),
        "/home/u/app": file(uid: uid, mode: 0o755, inode: 10),
    ]

    static func findings(_ lines: [String], uid: UInt32 = uid, isTruncated: Bool = false) -> [String] {
        WritableCodeScan.findings(
            maps: Array(lines.joined(separator: "\n").utf8), isTruncated: isTruncated, executablePath: "/home/u/app", uid: uid,
            status: { files[$0] })
    }

    @Test("system libraries, the kernel's mappings, non-executable memory and the app itself pass")
    func cleanCaller() {
        #expect(
            Self.findings([
                "00400000-00452000 r-xp 00000000 08:02 10         /home/u/app",
                "7f00-7f10 r-xp 00000000 08:02 11                 /usr/lib/libc.so.6",
                "7f10-7f20 rw-p 00000000 00:00 0 ",
                "7ffd-7ffe r-xp 00000000 00:00 0                  [vdso]",
                "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 [vsyscall]",
                "7f20-7f30 r--p 00000000 08:02 12                 /home/u/libevil.so",
            ]) == [])
    }

    @Test("anonymous executable memory, a memfd, a deleted or replaced file, a library the user can write: each named")
    func findingsAreNamed() {
        let found = Self.findings([
            "7f00-7f10 rwxp 00000000 00:00 0 ",
            "7f10-7f20 r-xp 00000000 00:01 5                  /memfd:jit (deleted)",
            "7f20-7f30 r-xp 00000000 08:02 12                 /home/u/libevil.so",
            "7f30-7f40 r-xp 00000000 08:02 15                 /tmp/gone.so (deleted)",
        ])
        #expect(
            found == [
                "anonymous executable memory", "code from a memfd (/memfd:jit (deleted))",
                "code from /home/u/libevil.so, which uid 1000 can write",
                "1 more mapping(s) of such code",
            ], "\(found)")
        #expect(
            Self.findings(["7f00-7f10 r-xp 00000000 08:02 14 /opt/shared.so"]) == [
                "code from /opt/shared.so, which uid 1000 can write"
            ])
        #expect(
            Self.findings(["7f00-7f10 r-xp 00000000 08:02 11 /usr/lib/replaced.so"]) == [
                "code from /usr/lib/replaced.so, replaced on disk since it was loaded"
            ])
        #expect(
            Self.findings(["7f00-7f10 r-xp 00000000 08:02 15 /tmp/gone.so (deleted)"]) == [
                "code from a deleted file (/tmp/gone.so)"
            ])
        #expect(
            Self.findings(["7f00-7f10 r-xp 00000000 08:02 16 /nowhere.so"]) == ["code from /nowhere.so, which cannot be read"])
        // A file the user owns but cannot write is not writable code (owner and mode bits, nothing more).
        #expect(Self.findings(["7f00-7f10 r-xp 00000000 08:02 13 /home/u/readonly.so"]) == [])
    }

    @Test("a map too large to read in full is a finding; a root caller is not judged")
    func limits() {
        #expect(Self.findings([], isTruncated: true) == ["a memory map too large to check"])
        #expect(Self.findings(["7f00-7f10 rwxs 00000000 00:01 7 /dev/zero (deleted)"]) == ["anonymous executable memory"])
        #expect(Self.findings(["7f00-7f10 rwxp 00000000 00:00 0 "], uid: 0) == [])
    }

    @Test("paths with spaces are read whole")
    func pathWithSpaces() {
        let m = WritableCodeScan.Mapping(line: "7f00-7f10 r-xp 00000000 08:02 12     /home/u/my lib.so")
        #expect(m?.path == "/home/u/my lib.so" && m?.isExecutable == true && m?.inode == 12)
    }
}
