import Glibc
import RainCore

/// How far programs of one user may read each other's memory: Yama's `kernel.yama.ptrace_scope`.
///
/// Where any program of the user may (no Yama LSM, or scope 0), any of them can read the code a
/// prompt shows from the pinentry's memory and type it back, and can take a copy of a live
/// connection with `pidfd_getfd`: the daemon cannot close that, only say it. Scope 1 restricts
/// reading to a program's own descendants (and what declares a tracer), which is what stops both.
public enum PtraceScope: Sendable, Equatable {
    /// The kernel has no Yama LSM: any program of the user may read another's memory.
    case noYama
    /// `kernel.yama.ptrace_scope` is this value (0 to 3).
    case scope(Int)
    /// It could not be read.
    case unknown

    /// Where the kernel keeps it.
    public static let path = "/proc/sys/kernel/yama/ptrace_scope"

    /// The setting on this kernel.
    public static func read(path: String = PtraceScope.path) -> PtraceScope {
        guard let fd = try? Syscall.open(path, .readOnly) else {
            return errno == ENOENT ? .noYama : .unknown
        }
        defer { Syscall.closeUnchecked(fd, because: .readOnly) }
        guard let bytes = try? AtomicFile.readAll(fd: fd, path: path, limit: 64),
            let value = Int(String(decoding: bytes.prefix { $0 != UInt8(ascii: "\n") }, as: UTF8.self))
        else { return .unknown }
        return .scope(value)
    }

    /// As `GetInfoResponse.ptrace_scope` carries it: `none` (no Yama LSM), `0` to `3`, or empty
    /// when unknown.
    public var wireValue: String {
        switch self {
        case .noYama: "none"
        case .scope(let value): "\(value)"
        case .unknown: ""
        }
    }

    /// The setting from its wire form.
    public init(wireValue: String) {
        switch wireValue {
        case "none": self = .noYama
        case let text: self = Int(text).map(PtraceScope.scope) ?? .unknown
        }
    }

    /// True when any program of the user may read another's memory (no Yama, or scope 0).
    public var isOpenToSameUser: Bool {
        switch self {
        case .noYama, .scope(0): true
        default: false
        }
    }

    /// The line a prompt shows on a kernel where any program of the user may read its memory; nil
    /// elsewhere.
    public var promptNote: String? {
        isOpenToSameUser ? "programs of yours can read this code too (\(setting)); see rainwallet status" : nil
    }

    /// The setting as a person reads it.
    public var setting: String {
        switch self {
        case .noYama: "no Yama LSM"
        case .scope(let value): "kernel.yama.ptrace_scope = \(value)"
        case .unknown: "unknown"
        }
    }

    /// What it allows, in one line, with the fix where one is needed.
    public var explanation: String {
        if isOpenToSameUser {
            return """
                any program of yours can read another's memory (\(setting)): it can read a prompt's code and take \
                over a connection; set kernel.yama.ptrace_scope = 1 to stop it
                """
        }
        switch self {
        case .scope(1): return "programs of yours can read only their own children's memory (\(setting))"
        case .scope: return "programs of yours cannot read each other's memory (\(setting))"
        default: return "whether programs of yours can read each other's memory is unknown"
        }
    }
}
