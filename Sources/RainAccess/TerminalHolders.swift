import FoundationEssentials
import Glibc
import RainSystem

/// Who holds a terminal open, as `/proc` shows it to the daemon's uid: a process holding the
/// prompt's terminal outside the registered shell's session could redraw the prompt or read what is
/// typed, and a terminal multiplexer holding its other end can read the screen. A process the
/// daemon cannot read (another uid's, or one that made itself not dumpable) is not seen.
enum TerminalHolders {
    /// A process and what it is.
    struct Holder: Equatable {
        var pid: Int32
        var session: Int32
        var command: String

        var description: String { "pid \(pid) (\(command))" }

        /// What a prompt on a terminal this multiplexer holds says of it.
        var screenNote: String { "\(command) (pid \(pid)) holds this terminal and can read the screen" }
    }

    /// Programs that hold a terminal's other end and keep what it shows: they can read the screen.
    static let multiplexers: Set<String> = ["tmux", "tmux: server", "screen", "SCREEN", "zellij", "abduco", "dtach"]

    /// The processes with a descriptor open on `path`, except those in `excluding` and their
    /// children. A child of the daemon is the daemon's own: a pinentry it started (the one of the
    /// prompt before may still be exiting), or a child between its fork and its exec, which holds a
    /// copy of every descriptor of the daemon, the prompt terminal's among them. No other process
    /// can make itself the daemon's child.
    static func holders(of path: String, excluding: Set<Int32>) -> [Holder] {
        var found: [Holder] = []
        for pid in processes() where !excluding.contains(pid) {
            guard descriptors(of: pid).contains(where: { $0.target == path }),
                let stat = PromptTerminal.processTerminal("/proc/\(pid)/stat"), !excluding.contains(stat.parent)
            else { continue }
            found.append(Holder(pid: pid, session: stat.session, command: command(of: pid)))
        }
        return found
    }

    /// The process holding the other end (`/dev/ptmx`) of pseudo-terminal `/dev/pts/N`, when it is
    /// a terminal multiplexer.
    static func multiplexer(of path: String) -> Holder? {
        guard path.hasPrefix("/dev/pts/"), let index = Int(path.dropFirst("/dev/pts/".count)) else { return nil }
        for pid in processes() {
            let command = command(of: pid)
            guard multiplexers.contains(command) else { continue }
            for d in descriptors(of: pid) where d.target == "/dev/ptmx" || d.target == "/dev/pts/ptmx" {
                guard ptyIndex(pid: pid, descriptor: d.number) == index,
                    let stat = PromptTerminal.processTerminal("/proc/\(pid)/stat")
                else { continue }
                return Holder(pid: pid, session: stat.session, command: command)
            }
        }
        return nil
    }

    /// The pids of `/proc`.
    static func processes() -> [Int32] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { Int32($0) }
    }

    /// A process's descriptors and what each names; empty when they cannot be read.
    static func descriptors(of pid: Int32) -> [(number: Int, target: String)] {
        let directory = "/proc/\(pid)/fd"
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return [] }
        return names.compactMap { name in
            guard let number = Int(name),
                let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "\(directory)/\(name)")
            else { return nil }
            return (number, target)
        }
    }

    /// `/proc/PID/comm`, or `?`.
    static func command(of pid: Int32) -> String {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/comm") else { return "?" }
        return String(decoding: data, as: UTF8.self).trimmingNewlines()
    }

    /// The `tty-index` of a `/dev/ptmx` descriptor (`/proc/PID/fdinfo/FD`): the N of `/dev/pts/N`.
    static func ptyIndex(pid: Int32, descriptor: Int) -> Int? {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/fdinfo/\(descriptor)") else { return nil }
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n") where line.hasPrefix("tty-index:") {
            return Int(line.dropFirst("tty-index:".count).trimmingWhitespace())
        }
        return nil
    }
}
