internal import CFido2
import RainCore

/// What libfido2's io handle points at for an injected device: a retained box around the transport,
/// released by the close callback.
final class InjectedHandle: Sendable {
    let transport: any SecurityKeyHIDTransport
    init(transport: any SecurityKeyHIDTransport) { self.transport = transport }
}

/// libfido2's io functions for injected devices (`fido_dev_io_t`).
///
/// libfido2's contract, as `src/io.c` uses it when the io is set with `fido_dev_set_io_functions`:
/// `read(handle, buf, 64, ms)` must return exactly 64 bytes (no report ID) or -1, and `ms` is the
/// time left (-1: no limit); `write(handle, buf, 65)` gets the report ID 0 then the 64-byte report
/// and must return 65.
enum FidoIOBridge {
    static let reportByteCount = 64

    /// A fresh `fido_dev_io_t` (C function pointers that capture nothing).
    static func io() -> fido_dev_io_t {
        fido_dev_io_t(
            open: { path in
                guard let path, let transport = InjectedSecurityKeys.transport(path: String(cString: path)),
                    transport.open()
                else { return nil }
                return Unmanaged.passRetained(InjectedHandle(transport: transport)).toOpaque()
            },
            close: { handle in
                guard let handle else { return }
                let box = Unmanaged<InjectedHandle>.fromOpaque(handle)
                box.takeUnretainedValue().transport.close()
                box.release()
            },
            read: { handle, buffer, count, milliseconds in
                guard let handle, let buffer, count >= FidoIOBridge.reportByteCount else { return -1 }
                let transport = Unmanaged<InjectedHandle>.fromOpaque(handle).takeUnretainedValue().transport
                guard let report = transport.readReport(timeoutMilliseconds: Int(milliseconds)),
                    report.count == FidoIOBridge.reportByteCount
                else { return -1 }
                report.withUnsafeBufferPointer { source in
                    guard let base = source.baseAddress else { return }
                    buffer.update(from: base, count: FidoIOBridge.reportByteCount)
                }
                return Int32(FidoIOBridge.reportByteCount)
            },
            write: { handle, buffer, count in
                // The first byte is the HID report ID (0), which a hidraw write carries and the
                // device never sees.
                guard let handle, let buffer, count == FidoIOBridge.reportByteCount + 1 else { return -1 }
                let transport = Unmanaged<InjectedHandle>.fromOpaque(handle).takeUnretainedValue().transport
                let report = Array(UnsafeBufferPointer(start: buffer + 1, count: FidoIOBridge.reportByteCount))
                return transport.writeReport(report) ? Int32(count) : -1
            })
    }
}
