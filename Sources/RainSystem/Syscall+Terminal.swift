internal import CSystem
import Glibc
import RainCore

/// A terminal device's number, split as the kernel does (`major(3)`, `minor(3)`), so a number from
/// `stat`'s `st_rdev` and one from `/proc/PID/stat`'s `tty_nr` compare alike.
public struct DeviceNumber: Sendable, Hashable, CustomStringConvertible {
    /// The major number (136 to 143 for `/dev/pts/*`, 4 for virtual consoles).
    public var major: UInt32
    /// The minor number.
    public var minor: UInt32

    /// Splits an encoded device number (glibc's `makedev` layout, which `tty_nr` shares for the
    /// numbers a terminal can have).
    public init(encoded value: UInt64) {
        major = UInt32(truncatingIfNeeded: ((value >> 8) & 0xfff) | ((value >> 32) & ~UInt64(0xfff)))
        minor = UInt32(truncatingIfNeeded: (value & 0xff) | ((value >> 12) & ~UInt64(0xff)))
    }

    /// A device number from its parts.
    public init(major: UInt32, minor: UInt32) {
        self.major = major
        self.minor = minor
    }

    public var description: String { "\(major):\(minor)" }
}

/// A terminal's settings (`tcgetattr`), to put back after a program that changed them was killed.
public struct TerminalSettings: @unchecked Sendable {
    // @unchecked: `termios` is a plain C struct of integers, copied by value.
    fileprivate var value: termios
}

extension Syscall {
    /// Opens a new pseudo-terminal pair (`posix_openpt`, `grantpt`, `unlockpt`, `ptsname`); the
    /// master is close-on-exec and never becomes a controlling terminal.
    /// - Returns: the master's descriptor and the path of the terminal (`/dev/pts/N`).
    /// - Throws: RAIN_502 naming `posix_openpt`.
    public static func openPseudoTerminal() throws(RainError) -> (master: Int32, path: String) {
        var name = [CChar](repeating: 0, count: 128)
        let fd = try name.withUnsafeMutableBufferPointer { (buffer) throws(RainError) -> Int32 in
            guard let base = buffer.baseAddress else { throw error("posix_openpt", ErrnoError(code: EINVAL)) }
            return try call("posix_openpt") { rain_open_pseudo_terminal(base, buffer.count) }
        }
        let path = name.withUnsafeBufferPointer { buffer in
            String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        return (fd, path)
    }

    /// The character device at `path`, its link not followed (`lstat`): its encoded device number
    /// (`st_rdev`), owner and change time (`st_ctim`, set when the kernel makes the node: a
    /// pseudo-terminal's number given to a new terminal has a new one). Nil when there is nothing
    /// there or it is not a character device.
    public static func characterDeviceNode(
        path: String
    ) -> (device: UInt64, uid: UInt32, changedSeconds: Int64, changedNanoseconds: Int64)? {
        var st = stat()
        guard lstat(path, &st) == 0, st.st_mode & S_IFMT == S_IFCHR else { return nil }
        return (UInt64(st.st_rdev), UInt32(st.st_uid), Int64(st.st_ctim.tv_sec), Int64(st.st_ctim.tv_nsec))
    }

    /// The device number of an open character device (`fstat`'s `st_rdev`), or nil for anything else.
    /// - Throws: RAIN_502 naming `fstat` (and `path`).
    public static func characterDevice(_ fd: Int32, path: String? = nil) throws(RainError) -> (device: DeviceNumber, uid: UInt32)?
    {
        var st = stat()
        try call("fstat", path: path) { fstat(fd, &st) }
        guard st.st_mode & S_IFMT == S_IFCHR else { return nil }
        return (DeviceNumber(encoded: UInt64(st.st_rdev)), UInt32(st.st_uid))
    }

    /// The session whose controlling terminal `fd` is (`ioctl(TIOCGSID)`). Linux answers only a
    /// process of that session (or through the master of a pseudo-terminal): from outside, the
    /// answer is nil, as for a terminal that is no session's controlling terminal.
    /// - Returns: the session id, or nil (`ENOTTY`).
    /// - Throws: RAIN_502 naming `ioctl TIOCGSID` (and `path`).
    public static func sessionOfTerminal(_ fd: Int32, path: String? = nil) throws(RainError) -> Int32? {
        var sid: pid_t = 0
        switch retrying({ ioctl(fd, UInt(TIOCGSID), &sid) }) {
        case .success: return sid
        case .failure(let e) where e.code == ENOTTY: return nil
        case .failure(let e): throw error("ioctl TIOCGSID", path: path, e)
        }
    }

    /// The settings of the terminal `fd` (`tcgetattr`).
    /// - Throws: RAIN_502 naming `tcgetattr` (and `path`); `error.errno` is `ENOTTY` for a file
    ///   that is no terminal.
    public static func terminalSettings(_ fd: Int32, path: String? = nil) throws(RainError) -> TerminalSettings {
        var value = termios()
        try call("tcgetattr", path: path) { tcgetattr(fd, &value) }
        return TerminalSettings(value: value)
    }

    /// Puts settings read by `terminalSettings` back at once (`tcsetattr(TCSANOW)`).
    /// - Throws: RAIN_502 naming `tcsetattr` (and `path`).
    public static func setTerminalSettings(_ fd: Int32, _ settings: TerminalSettings, path: String? = nil) throws(RainError) {
        var value = settings.value
        try call("tcsetattr", path: path) { tcsetattr(fd, TCSANOW, &value) }
    }
}
