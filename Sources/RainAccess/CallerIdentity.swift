import RainCore
import RainCrypto

/// Who is on the other end of a connection: read once per connection from the peer's pidfd, and
/// again before a sensitive call. An identity names an *app*: the executable (and, for an
/// interpreter, the script it runs) with the hash of its content. The Flatpak app id and the
/// systemd unit may narrow what an identity may do; they never grant anything.
public struct CallerIdentity: Sendable, Hashable {
    /// The caller's process id when it was read.
    public var pid: Int32
    /// The caller's uid (from the socket's peer credentials).
    public var uid: UInt32
    /// `/proc/PID/exe`: the executable's path.
    public var executablePath: String
    /// SHA-256 of the executable's content (32 bytes).
    public var executableSHA256: [UInt8]
    /// For an interpreter (`python3`, `node`, `bash`, …): the script it runs, and its SHA-256.
    public var script: Script?
    /// The systemd unit of the caller (`/proc/PID/cgroup`), e.g. `app-foo@123.service`.
    public var systemdUnit: String?
    /// The Flatpak app id (`/proc/PID/root/.flatpak-info`), when the caller runs in a Flatpak.
    /// It may narrow what an identity may do, never grant anything: a program outside any sandbox
    /// can make a mount namespace of its own with whatever `.flatpak-info` it likes.
    public var flatpakAppID: String?
    /// Why this caller can never be approved (`LD_PRELOAD`, `LD_AUDIT`, `traced by pid N`, an
    /// interpreter variable such as `PYTHONPATH`, `interpreter PATH: …` when no script file can be
    /// trusted, an environment too large or unreadable); empty for a clean caller.
    public var unapprovable: [String]
    /// The caller's controlling terminal (`tty_nr` of `/proc/PID/stat`; 0 for none) and session id:
    /// a prompt is never shown on a terminal of the caller's session.
    public var controllingTerminal: UInt64
    /// The caller's session id (`/proc/PID/stat`).
    public var sessionID: Int32

    /// An interpreter's script.
    public struct Script: Sendable, Hashable {
        /// Its absolute path.
        public var path: String
        /// SHA-256 of its content.
        public var sha256: [UInt8]

        /// A script.
        public init(path: String, sha256: [UInt8]) {
            self.path = path
            self.sha256 = sha256
        }
    }

    /// An identity.
    public init(
        pid: Int32, uid: UInt32, executablePath: String, executableSHA256: [UInt8], script: Script? = nil,
        systemdUnit: String? = nil, flatpakAppID: String? = nil, unapprovable: [String] = [],
        controllingTerminal: UInt64 = 0, sessionID: Int32 = 0
    ) {
        self.pid = pid
        self.uid = uid
        self.executablePath = executablePath
        self.executableSHA256 = executableSHA256
        self.script = script
        self.systemdUnit = systemdUnit
        self.flatpakAppID = flatpakAppID
        self.unapprovable = unapprovable
        self.controllingTerminal = controllingTerminal
        self.sessionID = sessionID
    }

    /// What an approval binds to: the executable's path, plus the script's for an interpreter
    /// (`/usr/bin/python3 /home/u/tool.py`).
    public var appPath: String {
        script.map { "\(executablePath) \($0.path)" } ?? executablePath
    }

    /// The content an approval binds to: the executable's hash, plus the script's.
    public var contentHash: String {
        let executable = Hex.encode(executableSHA256)
        return script.map { "\(executable):\(Hex.encode($0.sha256))" } ?? executable
    }

    /// The first 12 hex digits of the executable's hash, as a prompt shows it.
    public var hashPrefix: String { String(Hex.encode(executableSHA256).prefix(12)) }

    /// For an interpreter, the first 12 hex digits of the script's hash: a prompt and the audit log
    /// show it beside the interpreter's, since the script is the code the approval is about.
    public var scriptHashPrefix: String? { script.map { String(Hex.encode($0.sha256).prefix(12)) } }

    /// `sha256 XXXXXXXXXXXX…`, with `, script sha256 YYYYYYYYYYYY…` for an interpreter.
    public var hashDescription: String {
        "sha256 \(hashPrefix)…" + (scriptHashPrefix.map { ", script sha256 \($0)…" } ?? "")
    }
}
