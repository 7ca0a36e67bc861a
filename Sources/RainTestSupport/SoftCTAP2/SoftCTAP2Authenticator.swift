import Dispatch
import Foundation
import RainCore
import RainCrypto
import RainSecurityKey

/// A software FIDO2 security key for tests: CTAP2 (make credential, get assertion, client PIN
/// protocol 2) behind CTAPHID 64-byte reports, which real libfido2 reaches through injected io
/// functions (`InjectedSecurityKeys`, `SecurityKeys.injected`). Never shipped.
///
/// CTAPHID: INIT (answering the nonce with a new channel), CBOR, PING, WINK, CANCEL, KEEPALIVE
/// (status "UP needed" while it waits for a touch) and ERROR. The test decides when the user
/// touches the key: ``TouchPolicy``, or ``touch()`` while ``isBlinking``.
// @unchecked Sendable: every stored property is guarded by `condition` (an NSCondition), except
// `commands`, which only `worker` (a serial queue) uses.
public final class SoftCTAP2Authenticator: SecurityKeyHIDTransport, @unchecked Sendable {
    /// When the simulated user touches the key.
    public enum TouchPolicy: Sendable {
        /// As soon as it blinks.
        case immediately
        /// Only when the test calls ``touch()`` while it blinks.
        case manual
        /// Never: the ceremony ends when the key's own user-presence timeout passes.
        case never
    }

    /// The path libfido2 opens it by.
    public let path: String
    /// The manufacturer and product strings it is listed with.
    public let manufacturer = "Rain Test"
    /// The product string.
    public let product = "Soft CTAP2 key"

    private static let reportByteCount = 64
    private static let broadcastChannel: UInt32 = 0xFFFF_FFFF
    private static let keepaliveInterval = 0.1

    private let condition = NSCondition()
    private let worker: DispatchQueue
    private let commands: SoftCTAP2Commands
    private let userPresenceTimeout: Double
    // Guarded by `condition`:
    private var touchPolicy: TouchPolicy
    private var outbound: [[UInt8]] = []
    private var assembly: (channel: UInt32, command: UInt8, length: Int, data: [UInt8], nextSequence: UInt8)?
    private var nextChannel: UInt32 = 1
    private var busyChannel: UInt32?
    private var isCancelRequested = false
    private var isWaitingForTouch = false
    private var pendingTouch = false
    private var unplugged = false
    private var openCount = 0

    /// Creates the key and registers it for libfido2's injected io.
    /// - Parameters:
    ///   - name: part of its path, for logs.
    ///   - touch: when the user touches it.
    ///   - attestation: `packed` self attestation (the default) or `none`.
    ///   - pin: a PIN already set, or nil for a key without one.
    ///   - userPresenceTimeout: seconds it blinks before giving up (CTAP2_ERR_USER_ACTION_TIMEOUT).
    public init(
        name: String = "key", touch: TouchPolicy = .immediately, packedAttestation: Bool = true, pin: String? = nil,
        userPresenceTimeout: Double = 30
    ) throws {
        commands = try SoftCTAP2Commands(
            aaguid: try SecureRandom.bytes(count: 16), attestation: packedAttestation ? .packedSelf : .none)
        if let pin { commands.setPINDirectly(pin) }
        touchPolicy = touch
        self.userPresenceTimeout = userPresenceTimeout
        worker = DispatchQueue(label: "rain.soft-ctap2.\(name)")
        path = InjectedSecurityKeys.pathPrefix + name + "-" + UUID().uuidString
        InjectedSecurityKeys.register(self, path: path)
    }

    /// The listing libfido2 gets for it (`SecurityKeys.injected([key.listing])`).
    public var listing: (path: String, manufacturer: String, product: String) { (path, manufacturer, product) }

    /// Takes it out of the injected device table (call when the test ends).
    public func detach() {
        InjectedSecurityKeys.unregister(path: path)
    }

    // MARK: - What the test does

    /// The simulated user touches the key: counts only while it blinks (waits for a touch).
    public func touch() {
        condition.withLock {
            if isWaitingForTouch { pendingTouch = true }
            condition.broadcast()
        }
    }

    /// Changes when the user touches it.
    public func setTouchPolicy(_ policy: TouchPolicy) {
        condition.withLock {
            touchPolicy = policy
            condition.broadcast()
        }
    }

    /// Whether it is blinking now (a ceremony waits for a touch).
    public var isBlinking: Bool { condition.withLock { isWaitingForTouch } }

    /// Waits until it blinks, or `seconds` pass. Returns whether it blinks.
    public func waitUntilBlinking(seconds: Double = 10) -> Bool {
        let deadline = Date(timeIntervalSinceNow: seconds)
        condition.lock()
        defer { condition.unlock() }
        while !isWaitingForTouch {
            if !condition.wait(until: deadline) { return isWaitingForTouch }
        }
        return true
    }

    /// Waits until it stops blinking, or `seconds` pass. Returns whether it stopped.
    public func waitUntilNotBlinking(seconds: Double = 10) -> Bool {
        let deadline = Date(timeIntervalSinceNow: seconds)
        condition.lock()
        defer { condition.unlock() }
        while isWaitingForTouch {
            if !condition.wait(until: deadline) { return !isWaitingForTouch }
        }
        return true
    }

    /// The key is pulled out: reads and writes fail from now on, as on a vanished hidraw node.
    public func unplug() {
        condition.withLock {
            unplugged = true
            condition.broadcast()
        }
    }

    /// Whether a host has it open (libfido2 opened and has not closed it).
    public var isOpen: Bool { condition.withLock { openCount > 0 } }

    /// Whether it is unplugged (``unplug()``, until ``powerCycle()``).
    public var isUnplugged: Bool { condition.withLock { unplugged } }

    /// Unplugged and plugged in again (the PIN may be tried again after three wrong ones).
    public func powerCycle() throws {
        condition.withLock {
            unplugged = false
            outbound.removeAll()
            assembly = nil
        }
        try worker.sync { try commands.powerCycle() }
    }

    /// Sets the PIN tries left directly (a key that has been given wrong PINs before).
    public func setPINRetries(_ retries: Int) { worker.sync { commands.pinRetries = retries } }

    /// PIN tries left (read directly, not through CTAP).
    public var pinRetries: Int { worker.sync { commands.pinRetries } }

    /// How many credentials it holds, resident or not.
    public var credentialCount: Int { worker.sync { commands.credentials.count } }

    // MARK: - SecurityKeyHIDTransport

    package func open() -> Bool {
        condition.withLock {
            guard !unplugged else { return false }
            openCount += 1
            return true
        }
    }

    package func close() {
        condition.withLock { openCount -= 1 }
    }

    package func readReport(timeoutMilliseconds: Int) -> [UInt8]? {
        // A negative timeout waits without limit: NSCondition.wait(until: .distantFuture) traps
        // (the date overflows its timespec), so that case uses wait().
        let deadline = timeoutMilliseconds < 0 ? nil : Date(timeIntervalSinceNow: Double(timeoutMilliseconds) / 1000)
        condition.lock()
        defer { condition.unlock() }
        while outbound.isEmpty && !unplugged {
            if let deadline {
                if !condition.wait(until: deadline) { break }
            } else {
                condition.wait()
            }
        }
        guard !unplugged, !outbound.isEmpty else { return nil }
        return outbound.removeFirst()
    }

    package func writeReport(_ report: [UInt8]) -> Bool {
        guard report.count == Self.reportByteCount else { return false }
        condition.lock()
        defer { condition.unlock() }
        guard !unplugged else { return false }
        receive(report)
        return true
    }

    // MARK: - CTAPHID (called with `condition` held)

    private enum HIDCommand: UInt8 {
        case ping = 0x01, message = 0x03, initialize = 0x06, wink = 0x08, cbor = 0x10, cancel = 0x11
        case keepalive = 0x3B, error = 0x3F
    }

    private enum HIDError: UInt8 {
        case invalidCommand = 0x01, invalidLength = 0x03, invalidSequence = 0x04, channelBusy = 0x06, invalidChannel = 0x0B
    }

    private func receive(_ report: [UInt8]) {
        let channel = report[0..<4].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        if report[4] & 0x80 != 0 {
            let command = report[4] & 0x7F
            let length = Int(report[5]) << 8 | Int(report[6])
            if command == HIDCommand.cancel.rawValue {
                // No answer of its own: the running CBOR request ends with KEEPALIVE_CANCEL.
                if busyChannel == channel {
                    isCancelRequested = true
                    condition.broadcast()
                }
                return
            }
            guard length <= Int(SoftCTAP2Commands.maximumMessageSize) + 1 else {
                return sendError(.invalidLength, channel: channel)
            }
            if let assembly, assembly.channel != channel {
                return sendError(.channelBusy, channel: channel)
            }
            let data = Array(report[7..<min(Self.reportByteCount, 7 + length)])
            assembly = (channel, command, length, data, 0)
        } else {
            guard var pending = assembly, pending.channel == channel else { return }
            guard report[4] == pending.nextSequence else {
                assembly = nil
                return sendError(.invalidSequence, channel: channel)
            }
            let wanted = pending.length - pending.data.count
            pending.data += report[5..<min(Self.reportByteCount, 5 + wanted)]
            pending.nextSequence += 1
            assembly = pending
        }
        guard let complete = assembly, complete.data.count >= complete.length else { return }
        assembly = nil
        dispatch(channel: complete.channel, command: complete.command, payload: complete.data)
    }

    private func dispatch(channel: UInt32, command: UInt8, payload: [UInt8]) {
        switch HIDCommand(rawValue: command) {
        case .initialize:
            guard payload.count == 8 else { return sendError(.invalidLength, channel: channel) }
            var newChannel = channel
            if channel == Self.broadcastChannel {
                newChannel = nextChannel
                nextChannel += 1
            }
            let channelBytes = (0..<4).map { UInt8(truncatingIfNeeded: newChannel >> (24 - 8 * $0)) }
            // Protocol 2, device version 1.0.0; capabilities WINK | CBOR | NMSG (no U2F messages).
            send(.initialize, payload + channelBytes + [2, 1, 0, 0, 0x01 | 0x04 | 0x08], channel: channel)
        case .ping:
            send(.ping, payload, channel: channel)
        case .wink:
            send(.wink, [], channel: channel)
        case .cbor:
            guard busyChannel == nil else { return sendError(.channelBusy, channel: channel) }
            busyChannel = channel
            isCancelRequested = false
            worker.async { [self] in
                let response = commands.handle(payload) { waitForTouch(channel: channel) }
                condition.withLock {
                    busyChannel = nil
                    if !unplugged { send(.cbor, response, channel: channel) }
                }
            }
        default:
            sendError(.invalidCommand, channel: channel)
        }
    }

    /// Blinks (sending KEEPALIVE "UP needed") until touched, cancelled, unplugged or timed out.
    /// Runs on `worker`.
    private func waitForTouch(channel: UInt32) -> CTAPStatus? {
        let deadline = Date(timeIntervalSinceNow: userPresenceTimeout)
        condition.lock()
        defer {
            isWaitingForTouch = false
            pendingTouch = false
            condition.broadcast()
            condition.unlock()
        }
        isWaitingForTouch = true
        condition.broadcast()
        while true {
            if isCancelRequested || unplugged { return .keepaliveCancel }
            if touchPolicy == .immediately || pendingTouch { return nil }
            if Date() >= deadline { return .userActionTimeout }
            send(.keepalive, [0x02], channel: channel)
            _ = condition.wait(until: min(deadline, Date(timeIntervalSinceNow: Self.keepaliveInterval)))
        }
    }

    private func sendError(_ error: HIDError, channel: UInt32) {
        send(.error, [error.rawValue], channel: channel)
    }

    /// Splits a message into an initialization report and continuation reports.
    private func send(_ command: HIDCommand, _ payload: [UInt8], channel: UInt32) {
        let channelBytes = (0..<4).map { UInt8(truncatingIfNeeded: channel >> (24 - 8 * $0)) }
        var report = channelBytes + [0x80 | command.rawValue, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        var rest = payload[...]
        report += rest.prefix(Self.reportByteCount - 7)
        rest = rest.dropFirst(Self.reportByteCount - 7)
        outbound.append(report + [UInt8](repeating: 0, count: Self.reportByteCount - report.count))
        var sequence: UInt8 = 0
        while !rest.isEmpty {
            report = channelBytes + [sequence] + rest.prefix(Self.reportByteCount - 5)
            rest = rest.dropFirst(Self.reportByteCount - 5)
            outbound.append(report + [UInt8](repeating: 0, count: Self.reportByteCount - report.count))
            sequence += 1
        }
        condition.broadcast()
    }
}
