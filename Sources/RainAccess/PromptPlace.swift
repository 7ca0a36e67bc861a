import FoundationEssentials
import Glibc
import RainCore
import RainSystem

/// The terminal registered for prompts (`rainwallet prompt here`), as recorded: kept across
/// restarts of the daemon in `prompt-place.json` (`PromptPlaceStore`), sealed under the storage key
/// like the approvals.
///
/// A registration is trusted without confirmation only while there is no place to confirm it on.
/// Kept in memory only, every restart of the daemon made such a place: any program of the user
/// that restarted it could then register a terminal it holds and answer the prompts itself. Kept
/// here, a restart finds the same terminal again, and registering another one is confirmed there,
/// for as long as that terminal is open.
///
/// "The same terminal" is checked twice. The device node must be the one registered: same device
/// number, same change time (the kernel stamps a pseudo-terminal's node when it makes it, but with
/// a coarse clock: a number given to a new terminal within the same few milliseconds can carry the
/// same stamp). And the session that had the terminal as its controlling terminal when it was
/// registered (the shell in it) must still run, the same process (pid and start time), with that
/// terminal still its own: closing a terminal hangs up its session. Only a place registered from
/// inside its terminal's session names a session, and only such a place is found again after a
/// restart.
public struct PromptPlace: SealedRecordValue, Equatable {
    /// Its path, `/dev/pts/4`.
    public var path: String
    /// Its `TERM`.
    public var term: String
    /// Its encoded device number (`st_rdev`).
    public var device: UInt64
    /// Its node's change time: the seconds.
    public var changedSeconds: Int64
    /// Its node's change time: the nanoseconds.
    public var changedNanoseconds: Int64
    /// The leader of the session whose controlling terminal it is (the shell in it); nil when
    /// it was registered from outside that session.
    public var sessionLeader: Int32?
    /// The session leader's start time (`/proc/PID/stat` field 22), against a reused pid.
    public var sessionLeaderStart: UInt64?

    /// The terminal now at `path`, if it is a character device of this uid.
    /// - Parameters:
    ///   - term: its `TERM`.
    ///   - sessionLeader: the leader of the registering process's session: recorded when that
    ///     session's controlling terminal is this terminal.
    public static func current(path: String, term: String, sessionLeader: Int32? = nil) -> PromptPlace? {
        guard let node = Syscall.characterDeviceNode(path: path), node.uid == geteuid() else { return nil }
        var place = PromptPlace(
            path: path, term: term, device: node.device, changedSeconds: node.changedSeconds,
            changedNanoseconds: node.changedNanoseconds)
        if let sessionLeader, sessionLeader > 0,
            let stat = try? ProcessDescriptor.readStat(pid: sessionLeader),
            stat.sessionID == sessionLeader,
            DeviceNumber(encoded: stat.controllingTerminal) == DeviceNumber(encoded: node.device)
        {
            place.sessionLeader = sessionLeader
            place.sessionLeaderStart = stat.startTime
        }
        return place
    }

    /// Whether the terminal registered is still there: the same device node, of this uid, and
    /// (when one was recorded) the same session leader with this terminal as its own.
    public var isOpen: Bool { Self.current(path: path, term: term, sessionLeader: sessionLeader) == self }

    /// Whether a restart may find it again: it names its session, and is still open.
    public var outlivesRestart: Bool { sessionLeader != nil && isOpen }

    /// The registered terminal it names.
    public var terminal: RegisteredTerminal { RegisteredTerminal(path: path, term: term) }

    /// `<state>/prompt-place.json`.
    public static let sealedFile = SealedRecordFile(
        fileName: "prompt-place.json", purpose: "prompt-place", name: "prompt place",
        startOver: "remove the file and run `rainwallet prompt here` again")
}
