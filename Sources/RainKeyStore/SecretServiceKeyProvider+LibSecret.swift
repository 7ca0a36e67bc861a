internal import CLibSecret
import Dispatch
import FoundationEssentials
import RainCore
import RainCrypto
import Synchronization

extension SecretServiceKeyProvider {
    /// Runs `body` with the default keyring, reached and unlocked, within `timeout`.
    func withDefaultCollection<R>(_ body: (LibSecretCall) throws(RainError) -> R) throws(RainError) -> R {
        guard let busAddress else {
            throw Self.noSecretService(
                "no D-Bus session bus (DBUS_SESSION_BUS_ADDRESS is not set and $XDG_RUNTIME_DIR/bus does not exist)")
        }
        // A bus socket that is not there fails at once, without GLib.
        if busAddress.hasPrefix("unix:path="), let path = busAddress.dropFirst(10).split(separator: ",").first,
            !FileManager.default.fileExists(atPath: String(path))
        {
            throw Self.noSecretService("no D-Bus session bus (\(path) does not exist)")
        }
        let call = try LibSecretCall(timeout: timeout)
        return try body(call)
    }

    func loadKey(_ item: Item) throws(RainError) -> SymmetricKey? {
        try withDefaultCollection { (call) throws(RainError) -> SymmetricKey? in
            let found = try call.search(attributes(of: item), loadSecrets: true)
            guard let only = found.first else { return nil }
            guard found.count == 1 else {
                throw RainError.invalid(
                    "the keyring holds more than one \"\(label(of: item))\" item: remove all but one (Seahorse)",
                    field: "storage.provider", reason: "damaged_key")
            }
            guard let key = try only.key() else { throw Self.damaged(item, directory: stateDirectory) }
            return key
        }
    }

    func storeKey(_ key: SymmetricKey, as item: Item) throws(RainError) {
        try withDefaultCollection { (call) throws(RainError) in
            try call.create(attributes(of: item), label: label(of: item), key: key)
        }
    }

    func deleteKey(_ item: Item) throws(RainError) {
        try withDefaultCollection { (call) throws(RainError) in
            for found in try call.search(attributes(of: item), loadSecrets: false) {
                try call.delete(found)
            }
        }
    }
}

/// One operation on the Secret Service: the service proxy and the default collection, checked
/// unlocked, both released at the end. A watchdog cancels every blocking call
/// once `timeout` has passed.
final class LibSecretCall {
    private let cancellable: OpaquePointer
    private let watchdog: any DispatchSourceTimer
    private let expired = ExpiryFlag()
    private let timeout: Duration
    private var service: OpaquePointer?
    private var collection: OpaquePointer?

    /// Opens the Secret Service on this process's session bus, then its default collection.
    /// - Throws: RAIN_501 `no_secret_service` (no bus, nobody serving, no default keyring, no
    ///   answer in time), `keyring_locked`.
    init(timeout: Duration) throws(RainError) {
        if let failure = rain_secret_load() {
            throw SecretServiceKeyProvider.noSecretService(
                "libsecret could not be loaded (install libsecret-1-0)", cause: String(cString: failure))
        }
        guard let cancellable = rain_g_cancellable_new() else {
            throw RainError(.internalError, "internal error: GCancellable")
        }
        self.cancellable = cancellable
        self.timeout = timeout
        watchdog = Self.startWatchdog(cancelling: cancellable, after: timeout, flag: expired)

        var busClosed: Int32 = 0
        var error: UnsafeMutablePointer<RainGError>?
        service = rain_secret_service_open(cancellable, &busClosed, &error)
        if busClosed != 0 {
            throw SecretServiceKeyProvider.noSecretService(
                "the D-Bus session bus went away while the daemon was running (restart the daemon in the new session)")
        }
        if service == nil || error != nil {
            throw failure(error, noSecretService: "the Secret Service could not be reached on the D-Bus session bus")
        }
        guard let owner = rain_g_dbus_proxy_get_name_owner(service) else {
            throw SecretServiceKeyProvider.noSecretService(
                "no Secret Service on the D-Bus session bus (nobody owns org.freedesktop.secrets)")
        }
        rain_g_free(owner)
        collection = rain_secret_collection_for_alias_sync(service, "default", cancellable, &error)
        if error != nil {
            throw failure(error, noSecretService: "the Secret Service's default keyring could not be read")
        }
        guard collection != nil else {
            throw SecretServiceKeyProvider.noSecretService(
                "the Secret Service has no default keyring (create one, e.g. in Seahorse)")
        }
        if rain_secret_collection_get_locked(collection) != 0 { throw SecretServiceKeyProvider.keyringLocked }
    }

    deinit {
        watchdog.cancel()
        if let collection { rain_g_object_unref(collection) }
        if let service { rain_g_object_unref(service) }
        rain_g_object_unref(cancellable)
    }

    /// The items of the default collection with exactly these attributes. Never unlocks (an unlock
    /// may prompt): a locked item is `keyring_locked`.
    func search(_ attributes: [(name: String, value: String)], loadSecrets: Bool) throws(RainError) -> [LibSecretItem] {
        let table = Self.table(attributes)
        defer { rain_secret_attributes_unref(table) }
        var error: UnsafeMutablePointer<RainGError>?
        let list = rain_secret_collection_search_sync(collection, table, loadSecrets ? 1 : 0, cancellable, &error)
        if error != nil { throw failure(error, operation: "search the keyring") }
        var items = [LibSecretItem]()
        var node = list
        while let current = node {
            if let data = current.pointee.data { items.append(LibSecretItem(OpaquePointer(data))) }
            node = current.pointee.next
        }
        rain_g_list_free(list)
        if items.contains(where: { rain_secret_item_get_locked($0.item) != 0 }) {
            throw SecretServiceKeyProvider.keyringLocked
        }
        return items
    }

    /// Stores `key` (base64 text) in an item with these attributes, replacing any such item.
    func create(_ attributes: [(name: String, value: String)], label: String, key: SymmetricKey) throws(RainError) {
        var text = key.withUnsafeBytes { SecretBytes.base64($0) }
        let value = text.withUnsafeBytes { bytes in
            rain_secret_value_new(bytes.baseAddress?.assumingMemoryBound(to: CChar.self), bytes.count, "text/plain")
        }
        SecretBytes.wipe(&text)
        guard let value else { throw RainError(.internalError, "internal error: SecretValue") }
        // libsecret keeps its copy in memory it wipes when the value is freed.
        defer { rain_secret_value_unref(value) }
        let table = Self.table(attributes)
        defer { rain_secret_attributes_unref(table) }
        var error: UnsafeMutablePointer<RainGError>?
        let item = rain_secret_item_create_sync(collection, table, label, value, cancellable, &error)
        if error != nil || item == nil { throw failure(error, operation: "store the key") }
        rain_g_object_unref(item)
    }

    /// Deletes `item`.
    func delete(_ item: LibSecretItem) throws(RainError) {
        var error: UnsafeMutablePointer<RainGError>?
        if rain_secret_item_delete_sync(item.item, cancellable, &error) == 0 {
            throw failure(error, operation: "delete the key")
        }
    }

    // MARK: Errors and helpers

    /// The error for a failed call: no answer in time when the watchdog fired, else `no_secret_service`.
    private func failure(_ error: UnsafeMutablePointer<RainGError>?, noSecretService situation: String) -> RainError {
        let cause = Self.take(error)
        if let late = lateError() { return late }
        return SecretServiceKeyProvider.noSecretService(situation, cause: cause)
    }

    /// The error for a failed operation: no answer in time when the watchdog fired, else
    /// `secret_service_error`.
    private func failure(_ error: UnsafeMutablePointer<RainGError>?, operation: String) -> RainError {
        let cause = Self.take(error)
        if let late = lateError() { return late }
        return SecretServiceKeyProvider.serviceFailed(operation, cause: cause)
    }

    private func lateError() -> RainError? {
        guard expired.isSet else { return nil }
        let milliseconds = timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000
        return SecretServiceKeyProvider.noSecretService("the Secret Service did not answer within \(milliseconds) ms")
    }

    /// The message of `error`, which is freed.
    private static func take(_ error: UnsafeMutablePointer<RainGError>?) -> String? {
        guard let error else { return nil }
        defer { rain_g_error_free(error) }
        return error.pointee.message.map { String(cString: $0) }
    }

    private static func table(_ attributes: [(name: String, value: String)]) -> OpaquePointer? {
        let table = rain_secret_attributes_new()
        for attribute in attributes { rain_secret_attributes_insert(table, attribute.name, attribute.value) }
        return table
    }

    /// A timer that cancels `cancellable` after `timeout`, holding its own reference until the timer
    /// is cancelled.
    private static func startWatchdog(
        cancelling cancellable: OpaquePointer, after timeout: Duration, flag: ExpiryFlag
    ) -> any DispatchSourceTimer {
        let handle = CancellableHandle(pointer: rain_g_object_ref(cancellable))
        let timer = DispatchSource.makeTimerSource(queue: .global())
        timer.setEventHandler {
            flag.set()
            rain_g_cancellable_cancel(handle.pointer)
        }
        timer.setCancelHandler { rain_g_object_unref(handle.pointer) }
        let nanoseconds = timeout.components.seconds * 1_000_000_000 + timeout.components.attoseconds / 1_000_000_000
        timer.schedule(deadline: .now() + .nanoseconds(Int(nanoseconds)))
        timer.activate()
        return timer
    }
}

// @unchecked Sendable: g_cancellable_cancel is thread-safe, and the watchdog holds its own
// reference (released in its cancel handler, after any event handler has returned).
/// A GCancellable the watchdog timer may cancel from another thread.
private struct CancellableHandle: @unchecked Sendable {
    let pointer: OpaquePointer?
}

/// Set once the watchdog has fired.
private final class ExpiryFlag: Sendable {
    private let value = Atomic(false)
    func set() { value.store(true, ordering: .sequentiallyConsistent) }
    var isSet: Bool { value.load(ordering: .sequentiallyConsistent) }
}

/// One SecretItem of a search, released with it.
final class LibSecretItem {
    let item: OpaquePointer

    init(_ item: OpaquePointer) { self.item = item }

    deinit { rain_g_object_unref(item) }

    /// The 32-byte key the item holds, or nil when it holds something else.
    /// - Throws: RAIN_501 `secret_service_error` when the secret was not loaded.
    func key() throws(RainError) -> SymmetricKey? {
        guard let value = rain_secret_item_get_secret(item) else {
            throw SecretServiceKeyProvider.serviceFailed("read the key", cause: nil)
        }
        defer { rain_secret_value_unref(value) }
        var length = 0
        guard let text = rain_secret_value_get(value, &length) else { return nil }
        guard var bytes = SecretBytes.decodeBase64(UnsafeRawBufferPointer(start: text, count: length)) else {
            return nil
        }
        defer { SecretBytes.wipe(&bytes) }
        guard bytes.count == 32 else { return nil }
        return SymmetricKey(bytes: bytes)
    }
}
