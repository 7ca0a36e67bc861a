import Foundation
import RainTestSupport
import RainWallet
import RainWire
import Testing

/// Hand-made protobuf bytes for hostile-input tests: lets a test put what `Envelope.encode()`
/// refuses (an embedded NUL, invalid UTF-8) or what a Swift `String` cannot hold into any field.
enum RawProto {
    static func varint(_ value: UInt64) -> [UInt8] {
        var v = value
        var out: [UInt8] = []
        while v >= 0x80 {
            out.append(UInt8(v & 0x7F) | 0x80)
            v >>= 7
        }
        out.append(UInt8(v))
        return out
    }

    /// A varint field.
    static func field(_ number: Int, varint value: UInt64) -> [UInt8] {
        varint(UInt64(number << 3)) + varint(value)
    }

    /// A length-delimited field (string, bytes or sub-message).
    static func field(_ number: Int, bytes: [UInt8]) -> [UInt8] {
        varint(UInt64(number << 3 | 2)) + varint(UInt64(bytes.count)) + bytes
    }

    /// `Request { method = 1; payload = 2 }` with arbitrary method bytes.
    static func request(method: [UInt8], payload: [UInt8] = []) -> [UInt8] {
        var out = field(1, bytes: method)
        if !payload.isEmpty { out += field(2, bytes: payload) }
        return out
    }

    /// `Envelope { request_id = 1; request = 2 }`, unframed.
    static func requestEnvelope(id: UInt64, method: [UInt8], payload: [UInt8] = []) -> [UInt8] {
        field(1, varint: id) + field(2, bytes: request(method: method, payload: payload))
    }

    /// `Envelope { request_id = 1; cancel = 5 }`, framed.
    static func cancelFrame(id: UInt64) -> [UInt8] {
        Frame.encode((id == 0 ? [] : field(1, varint: id)) + field(5, bytes: []))
    }

    /// `SendLoginCodeRequest { Contact contact = 1 { kind = 1 (email); value = 2 } }` with
    /// arbitrary value bytes.
    static func sendLoginCode(emailBytes value: [UInt8]) -> [UInt8] {
        field(1, bytes: field(1, varint: 1) + field(2, bytes: value))
    }
}

extension RawConnection {
    /// `shutdown(SHUT_WR)`: the daemon reads end of stream.
    func shutdownWrite() { _ = Glibc.shutdown(fd, Int32(SHUT_WR)) }

    /// True when the daemon has closed its end (POLLHUP), whether or not unread answers are still
    /// queued on ours: for a client that never reads. False at the deadline.
    func waitForHangup(timeout: Duration) -> Bool {
        let pollRDHUP: Int16 = 0x2000  // POLLRDHUP (Glibc hides it without _GNU_SOURCE)
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            var p = pollfd(fd: fd, events: pollRDHUP, revents: 0)
            let n = poll(&p, 1, 50)
            if n > 0 && p.revents & (Int16(POLLHUP | POLLERR) | pollRDHUP) != 0 { return true }
        }
        return false
    }

    /// Reads the next envelope on a thread of its own.
    func nextEnvelope() async throws -> Envelope? {
        try await onThread { try self.readEnvelope() }
    }
}

/// The daemon still serves a fresh client: GetInfo and GetState through `RainProvider`.
func expectStillServes(_ h: DaemonHarness, sourceLocation: SourceLocation = #_sourceLocation) async throws {
    let provider = h.provider()
    let info = try await provider.daemonInfo()
    #expect(info.protocolVersion == protocolVersion, sourceLocation: sourceLocation)
    let state = try await provider.currentSession()
    #expect(state.authState != .authenticated, sourceLocation: sourceLocation)
    #expect(h.isRunning, "the daemon died; log:\n\(h.log)", sourceLocation: sourceLocation)
}

/// The number of open descriptors of process `pid` (`/proc/PID/fd`), or nil when unreadable.
func openDescriptorCount(pid: Int32) -> Int? {
    (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd"))?.count
}

extension WireResponse {
    /// The status's machine-readable reason, for compact expectations.
    var reason: String? { status.details.reason }
}
