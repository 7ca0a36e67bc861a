import Glibc
import RainCore
import RainSystem

/// The code a process runs that its user could have written: what memory cannot fake about a
/// caller, unlike its environment and command line, which are its own writable memory (a
/// preloaded library can rename its own `LD_PRELOAD=`, a program can rewrite its command line).
///
/// Read from `/proc/PID/maps`: every executable mapping except the process's own executable and
/// the kernel's (`[vdso]`, `[vsyscall]`, `[uprobes]`) must be a file on disk, still the file at
/// that path, that the caller's uid cannot write (judged by owner and mode bits). Anything else is
/// a finding: anonymous executable memory (what a JIT makes), a memfd, a deleted or replaced file,
/// or a library the user can write. A root caller is not judged: root can write every file.
enum WritableCodeScan {
    /// The kernel's own executable mappings.
    static let kernelMappings: Set<String> = ["[vdso]", "[vsyscall]", "[uprobes]"]
    /// Findings listed by name before the rest are counted.
    static let listed = 3

    /// One line of `/proc/PID/maps`.
    struct Mapping: Equatable {
        var isExecutable: Bool
        var inode: UInt64
        /// The path, with a `" (deleted)"` suffix as the kernel writes it; empty for anonymous memory.
        var path: String

        /// Parses `start-end perms offset dev inode [path]`; nil for a line that is not one.
        init?(line: Substring) {
            var rest = line[...]
            func field() -> Substring? {
                rest = rest.drop { $0 == " " }
                guard let end = rest.firstIndex(of: " ") else {
                    defer { rest = rest[rest.endIndex...] }
                    return rest.isEmpty ? nil : rest
                }
                defer { rest = rest[end...] }
                return rest[..<end]
            }
            guard field() != nil, let perms = field(), perms.count == 4, field() != nil, field() != nil,
                let inodeText = field(), let inode = UInt64(inodeText)
            else { return nil }
            isExecutable = perms.dropFirst(2).first == "x"
            self.inode = inode
            path = String(rest.drop { $0 == " " })
        }
    }

    /// What is wrong with the executable mappings of `maps`, for a caller of `uid` running
    /// `executablePath`; empty for a clean caller. `status(path)` stats a mapped file (a seam for
    /// tests).
    static func findings(
        maps: [UInt8], isTruncated: Bool, executablePath: String, uid: UInt32,
        status: (String) -> stat? = Self.status
    ) -> [String] {
        if uid == 0 { return [] }
        var found: [String] = []
        var seen = Set<String>()
        for line in String(decoding: maps, as: UTF8.self).split(separator: "\n") {
            guard let m = Mapping(line: line), m.isExecutable else { continue }
            let finding: String?
            // Shared anonymous memory shows as the deleted `/dev/zero` it is backed by.
            if m.path.isEmpty || m.path == "/dev/zero (deleted)" || (m.path.hasPrefix("[") && !kernelMappings.contains(m.path)) {
                finding = m.path.hasPrefix("[") ? "executable \(m.path) memory" : "anonymous executable memory"
            } else if kernelMappings.contains(m.path) || m.path == executablePath
                || m.path == executablePath + " (deleted)"
            {
                finding = nil
            } else if m.path.hasPrefix("/memfd:") {
                finding = "code from a memfd (\(m.path))"
            } else if m.path.hasSuffix(" (deleted)") {
                finding = "code from a deleted file (\(m.path.dropLast(" (deleted)".count)))"
            } else if let st = status(m.path) {
                if UInt64(st.st_ino) != m.inode {
                    finding = "code from \(m.path), replaced on disk since it was loaded"
                } else if isWritable(st, by: uid) {
                    finding = "code from \(m.path), which uid \(uid) can write"
                } else {
                    finding = nil
                }
            } else {
                finding = "code from \(m.path), which cannot be read"
            }
            if let finding, seen.insert(finding).inserted { found.append(finding) }
        }
        if isTruncated { found.append("a memory map too large to check") }
        guard found.count > listed else { return found }
        return Array(found.prefix(listed)) + ["\(found.count - listed) more mapping(s) of such code"]
    }

    /// Whether `uid` can write a file with this owner and mode (group-writable counts: the
    /// caller's groups are not read, and a system library is never group-writable).
    static func isWritable(_ st: stat, by uid: UInt32) -> Bool {
        let mode = st.st_mode
        if st.st_uid == uid && mode & S_IWUSR != 0 { return true }
        return mode & (S_IWGRP | S_IWOTH) != 0
    }

    /// `stat` of a path (following links, as the kernel resolved it for the mapping).
    static func status(_ path: String) -> stat? {
        var st = stat()
        return fstatat(AT_FDCWD, path, &st, 0) == 0 ? st : nil
    }
}
