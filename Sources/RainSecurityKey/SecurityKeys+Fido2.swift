internal import CFido2
import RainCore

/// Finding security keys.
public enum SecurityKeys {
    /// libfido2 is initialized once per process, before its first use (`fido_init`); setting
    /// `FIDO_DEBUG` in the environment makes it log to standard error.
    static let libraryReady: Bool = {
        fido_init(0)
        return true
    }()

    /// The most keys one listing returns.
    public static let maximumListed = 64

    /// The FIDO security keys plugged in (hidraw devices whose report descriptor says FIDO).
    ///
    /// Blocking (it opens each hidraw node): call it off the Swift concurrency pool.
    /// - Returns: the keys, in libfido2's order.
    /// - Throws: RAIN_501 when libfido2 fails.
    public static func list() throws(RainError) -> [SecurityKeyInfo] {
        _ = libraryReady
        return try withDeviceList(count: maximumListed) { (list) throws(RainError) in
            var found = 0
            let status = fido_dev_info_manifest(list, maximumListed, &found)
            guard status == FIDO_ERR_SUCCESS else { throw RainError.securityKey(status, "list security keys") }
            return read(list, count: found, isInjected: false)
        }
    }

    /// Injected devices as libfido2 lists them: each path goes through `fido_dev_info_set` with the
    /// injected io functions and is read back, the way a real listing comes out of
    /// `fido_dev_info_manifest`. For tests: real hidraw enumeration needs real keys.
    /// - Parameter devices: paths from `InjectedSecurityKeys.register`, with their USB strings.
    package static func injected(_ devices: [(path: String, manufacturer: String, product: String)]) throws(RainError)
        -> [SecurityKeyInfo]
    {
        _ = libraryReady
        guard !devices.isEmpty else { return [] }
        return try withDeviceList(count: devices.count) { (list) throws(RainError) in
            var io = FidoIOBridge.io()
            for (index, device) in devices.enumerated() {
                let status = fido_dev_info_set(list, index, device.path, device.manufacturer, device.product, &io, nil)
                guard status == FIDO_ERR_SUCCESS else { throw RainError.securityKey(status, "list injected security keys") }
            }
            return read(list, count: devices.count, isInjected: true)
        }
    }

    private static func withDeviceList<R>(
        count: Int, _ body: (OpaquePointer) throws(RainError) -> R
    ) throws(RainError) -> R {
        guard let list = fido_dev_info_new(count) else {
            throw RainError(
                .internalError, "fido_dev_info_new failed", details: .init(reason: SecurityKeyFailure.failed.rawValue))
        }
        defer {
            var owned: OpaquePointer? = list
            fido_dev_info_free(&owned, count)
        }
        return try body(list)
    }

    private static func read(_ list: OpaquePointer, count: Int, isInjected: Bool) -> [SecurityKeyInfo] {
        (0..<count).compactMap { index in
            guard let entry = fido_dev_info_ptr(list, index), let path = fido_dev_info_path(entry) else { return nil }
            return SecurityKeyInfo(
                path: String(cString: path),
                manufacturer: fido_dev_info_manufacturer_string(entry).map { String(cString: $0) } ?? "",
                product: fido_dev_info_product_string(entry).map { String(cString: $0) } ?? "",
                isInjected: isInjected)
        }
    }
}

/// Copies `count` bytes from a libfido2 getter (NULL with 0 means absent).
func fidoBytes(_ pointer: UnsafePointer<UInt8>?, _ count: Int) -> [UInt8] {
    guard let pointer, count > 0 else { return [] }
    return Array(UnsafeBufferPointer(start: pointer, count: count))
}
