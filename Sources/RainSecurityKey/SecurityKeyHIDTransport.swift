import RainCore
import Synchronization

/// A security key's HID reports as a Swift object, for devices that are not hidraw nodes: the
/// tests' software authenticator, reached by libfido2 through injected io functions.
///
/// Reports are 64 bytes without the report ID. Every method is called on libfido2's calling
/// thread, and `write` may be called from another thread while a `read` blocks (`fido_dev_cancel`),
/// so implementations must be thread-safe.
package protocol SecurityKeyHIDTransport: AnyObject, Sendable {
    /// libfido2 opened the device (`fido_dev_open`). Returns false when it cannot be opened
    /// (removed), which libfido2 reports as `FIDO_ERR_INTERNAL`.
    func open() -> Bool
    /// libfido2 closed the device.
    func close()
    /// Waits for the next 64-byte input report.
    /// - Parameter timeoutMilliseconds: how long to wait; negative waits without limit.
    /// - Returns: the report, or nil on timeout or when the device is gone.
    func readReport(timeoutMilliseconds: Int) -> [UInt8]?
    /// Sends one 64-byte output report. Returns false when the device is gone.
    func writeReport(_ report: [UInt8]) -> Bool
}

/// The injected devices, by path: libfido2's C io callbacks receive only a path (on open) and an
/// opaque handle, so they find the Swift object here.
package enum InjectedSecurityKeys {
    /// The path prefix of injected devices, so they never collide with `/dev/hidraw*`.
    package static let pathPrefix = "rain-injected:"

    private static let devices = Mutex<[String: any SecurityKeyHIDTransport]>([:])

    /// Registers `transport` under `path` (which should start with ``pathPrefix``), replacing
    /// whatever was there.
    package static func register(_ transport: any SecurityKeyHIDTransport, path: String) {
        devices.withLock { $0[path] = transport }
    }

    /// Removes a registration; a device already opened keeps its handle until libfido2 closes it.
    package static func unregister(path: String) {
        _ = devices.withLock { $0.removeValue(forKey: path) }
    }

    /// The transport registered under `path`.
    static func transport(path: String) -> (any SecurityKeyHIDTransport)? {
        devices.withLock { $0[path] }
    }
}
