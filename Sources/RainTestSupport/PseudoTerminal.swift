import Foundation
import Glibc
import RainCore
import RainSystem
import Synchronization

/// A pseudo-terminal for tests that drive a real terminal program (`pinentry-tty`): the test holds
/// the master side, reads what the program shows and types on its keyboard; the program opens
/// `path`, the terminal side. Owns the master descriptor (closed by `close` or `deinit`).
public final class PseudoTerminal: Sendable {
    /// The terminal's path, `/dev/pts/N`.
    public let path: String
    private let master: Int32
    private let state = Mutex<(shown: [UInt8], isClosed: Bool)>(([], false))

    /// Opens a new pair (`posix_openpt`, `grantpt`, `unlockpt`, `ptsname`).
    public init() throws(RainError) {
        let (master, path) = try Syscall.openPseudoTerminal()
        self.master = master
        self.path = path
        try Syscall.setNonBlocking(master, true)
    }

    deinit { close() }

    /// Closes the master (the program on the terminal side then reads end of file or gets `EIO`).
    public func close() {
        let wasClosed = state.withLock { s in
            defer { s.isClosed = true }
            return s.isClosed
        }
        if !wasClosed { Syscall.closeUnchecked(master, because: .failurePath) }
    }

    /// The terminal's device number (`st_rdev`), as `/proc/PID/stat`'s `tty_nr` encodes it.
    public func deviceNumber() throws(RainError) -> UInt64 {
        var st = stat()
        try Syscall.call("stat", path: path) { stat(path, &st) }
        return UInt64(st.st_rdev)
    }

    /// Everything the program has shown so far (read from the master).
    public var shown: String {
        drain(waitMilliseconds: 0)
        return state.withLock { String(decoding: $0.shown, as: UTF8.self) }
    }

    /// Forgets what was shown so far (before the next prompt).
    public func clearShown() {
        drain(waitMilliseconds: 0)
        state.withLock { $0.shown = [] }
    }

    /// Waits until what was shown contains `text`, or `timeout` passes.
    /// - Returns: everything shown, or nil at the deadline.
    public func waitForText(_ text: String, timeout: Duration = .seconds(10)) async -> String? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            drain(waitMilliseconds: 0)
            let shown = state.withLock { String(decoding: $0.shown, as: UTF8.self) }
            if shown.contains(text) { return shown }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return nil
    }

    /// The place secret the tests choose with a daemon's first prompt place.
    public static let placeSecret = "a place secret for tests"

    /// Answers `rainwallet prompt here`'s questions for a new place secret on this terminal (the
    /// first place of a daemon without a display): the secret, then the same again. Each is
    /// typed once its question shows: the command turns echo off (flushing what was typed) first.
    /// - Returns: whether both questions showed and were answered.
    public func choosePlaceSecret(_ secret: String = placeSecret, timeout: Duration = .seconds(20)) async throws(RainError)
        -> Bool
    {
        guard await waitForText("Choose a place secret", timeout: timeout) != nil else { return false }
        clearShown()
        try type(secret + "\n")
        guard await waitForText("The same place secret again", timeout: timeout) != nil else { return false }
        clearShown()
        try type(secret + "\n")
        return true
    }

    /// Answers `rainwallet prompt here`'s question for the place secret once it shows.
    /// - Returns: whether the question showed and was answered.
    public func enterPlaceSecret(_ secret: String = placeSecret, timeout: Duration = .seconds(20)) async throws(RainError)
        -> Bool
    {
        guard await waitForText("Enter the place secret", timeout: timeout) != nil else { return false }
        clearShown()
        try type(secret + "\n")
        return true
    }

    /// Types `text` on the terminal's keyboard (writes it to the master).
    public func type(_ text: String) throws(RainError) {
        try type(Array(text.utf8))
    }

    /// Types raw bytes (`[0x04]` is Ctrl-D: end of file at the start of a line).
    public func type(_ bytes: [UInt8]) throws(RainError) {
        try bytes.withUnsafeBytes { raw in Result { () throws(RainError) in try Syscall.writeAll(master, raw) } }.get()
    }

    private func drain(waitMilliseconds: Int32) {
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let result = chunk.withUnsafeMutableBytes { bytes in
                Result { () throws(RainError) in try Syscall.readNonBlocking(master, into: bytes) }
            }
            // EIO: nobody has the terminal side open (the program exited); nothing more to read.
            guard case .success(.processed(let count)) = result, count > 0 else { return }
            state.withLock { $0.shown += chunk[..<count] }
        }
    }
}
