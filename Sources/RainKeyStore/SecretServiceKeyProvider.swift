import FoundationEssentials
import Glibc
import RainCore
import RainCrypto

/// The `secret-service` provider: each key an item of the user's default keyring (GNOME Keyring,
/// KWallet, KeePassXC) through the freedesktop Secret Service, with libsecret.
///
/// Items carry the schema `org.rainwallet.Key` (`xdg:schema`), the daemon's absolute state
/// directory (`state-directory`, so two daemons of one user keep apart) and the key's name (`key`:
/// `storage`, `authority-master`, `device-key`). The value is the 32 key bytes in base64 text; the
/// label reads well in Seahorse: `RainWallet storage key (/home/u/.local/state/rainwallet)`. The
/// device key is an Ed25519 seed kept as an item and used in this process (`SoftwareDeviceSigner`).
///
/// It protects against other users, backups of the state directory and a stolen disk while the
/// keyring is locked. It does not protect against the same user's programs while the keyring is
/// unlocked: any of them may ask the Secret Service for the items.
///
/// The daemon never prompts: it searches without unlocking and reports a locked keyring as
/// RAIN_501 `keyring_locked`. Each operation opens its own service proxy and is cancelled after
/// `timeout`, so a silent service cannot hang the daemon. libsecret talks over GDBus's shared
/// session-bus connection, made from `DBUS_SESSION_BUS_ADDRESS` when first used: one session bus per
/// process, and a bus that goes away does not end the daemon (its operations then fail with
/// `no_secret_service`).
public struct SecretServiceKeyProvider: KeyProvider {
    /// The `xdg:schema` attribute of every item.
    public static let schemaName = "org.rainwallet.Key"

    /// The absolute state directory that identifies this daemon's items.
    public let stateDirectory: String
    /// How long one operation (connect, find the keyring, read or write) may take.
    let timeout: Duration
    /// The session bus's address, or nil when this process has none.
    let busAddress: String?

    /// A provider for the daemon whose state directory is `stateDirectory` (made absolute), on the
    /// session bus of this process's environment.
    public init(stateDirectory: String) {
        self.init(stateDirectory: stateDirectory, environment: ProcessInfo.processInfo.environment, timeout: .seconds(3))
    }

    /// A provider whose operations are cancelled after `timeout`, and which first checks that the
    /// session bus `environment` names (`DBUS_SESSION_BUS_ADDRESS`, else `$XDG_RUNTIME_DIR/bus` when
    /// that socket exists) is there. Pass this process's environment: libsecret reads the process's
    /// own `DBUS_SESSION_BUS_ADDRESS`.
    package init(stateDirectory: String, environment: [String: String], timeout: Duration) {
        self.stateDirectory = URL(fileURLWithPath: stateDirectory).standardizedFileURL.path
        self.timeout = timeout
        self.busAddress = Self.sessionBusAddress(environment)
    }

    /// The session bus as GLib would find it, without ever autolaunching a bus (X11 `dbus-launch`).
    static func sessionBusAddress(_ environment: [String: String]) -> String? {
        if let address = environment["DBUS_SESSION_BUS_ADDRESS"], !address.isEmpty { return address }
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty,
            FileManager.default.fileExists(atPath: "\(runtime)/bus")
        {
            return "unix:path=\(runtime)/bus"
        }
        return nil
    }

    public var kind: KeyProviderKind { .secretService }
    public var location: String { "Secret Service (default collection)" }

    /// What an item holds: one of the slots, or the device key's seed.
    enum Item: String, CaseIterable {
        case storage
        case authorityMaster = "authority-master"
        case deviceKey = "device-key"

        init(_ slot: KeySlot) {
            switch slot {
            case .storage: self = .storage
            case .authorityMaster: self = .authorityMaster
            }
        }

        var title: String {
            switch self {
            case .storage: "storage key"
            case .authorityMaster: "authority master key"
            case .deviceKey: "device key"
            }
        }
    }

    /// The attributes that find `item` of this daemon, and nothing else.
    func attributes(of item: Item) -> [(name: String, value: String)] {
        [("xdg:schema", Self.schemaName), ("state-directory", stateDirectory), ("key", item.rawValue)]
    }

    /// The label people see in Seahorse.
    func label(of item: Item) -> String { "RainWallet \(item.title) (\(stateDirectory))" }

    /// Reaches the Secret Service and checks the default keyring is unlocked.
    /// - Throws: RAIN_501 `no_secret_service` or `keyring_locked`, with what to do.
    public func checkAvailable() throws(RainError) {
        try withDefaultCollection { _ throws(RainError) in }
    }

    public func loadSecret(_ slot: KeySlot) throws(RainError) -> SymmetricKey? {
        try loadKey(.init(slot))
    }

    public func storeSecret(_ key: SymmetricKey, slot: KeySlot) throws(RainError) {
        try storeKey(key, as: .init(slot))
    }

    public func deleteSecret(_ slot: KeySlot) throws(RainError) {
        try deleteKey(.init(slot))
    }

    public func loadDeviceKey() throws(RainError) -> (any DeviceSigner)? {
        guard let seed = try loadKey(.deviceKey) else { return nil }
        return try Self.signer(seed: seed)
    }

    public func createDeviceKey() throws(RainError) -> any DeviceSigner {
        let seed = try SymmetricKey.random()
        let signer = try Self.signer(seed: seed)
        try storeKey(seed, as: .deviceKey)
        return signer
    }

    public func deleteDeviceKey() throws(RainError) {
        try deleteKey(.deviceKey)
    }

    static func signer(seed: SymmetricKey) throws(RainError) -> SoftwareDeviceSigner {
        var bytes = seed.withUnsafeBytes { Array($0) }
        defer { SecretBytes.wipe(&bytes) }
        return SoftwareDeviceSigner(try Ed25519PrivateKey(rawRepresentation: bytes))
    }
}

// MARK: - Errors

extension SecretServiceKeyProvider {
    /// RAIN_501 `no_secret_service`: no session bus, nobody serving the Secret Service on it, no
    /// default keyring, or a service that did not answer in time.
    static func noSecretService(_ situation: String, cause: String? = nil) -> RainError {
        RainError(
            .provider,
            "\(situation): log in to a desktop session (or start gnome-keyring-daemon in this session), "
                + "or set storage.provider to file or tpm2",
            details: .init(reason: "no_secret_service"), underlying: cause.map(ProviderCause.init))
    }

    /// RAIN_501 `keyring_locked`: the default keyring is locked and the daemon never prompts.
    static var keyringLocked: RainError {
        RainError(
            .provider,
            "the default keyring is locked: unlock your keyring (log in to the desktop, or unlock it in "
                + "Seahorse \"Passwords and Keys\") and retry",
            details: .init(reason: "keyring_locked"))
    }

    /// RAIN_501 `secret_service_error`: the service refused or failed an operation.
    static func serviceFailed(_ operation: String, cause: String?) -> RainError {
        RainError(
            .provider, "the Secret Service could not \(operation): retry, or restart the keyring daemon",
            details: .init(reason: "secret_service_error"), underlying: cause.map(ProviderCause.init))
    }

    /// RAIN_102: an item that is not a 32-byte key in base64.
    static func damaged(_ item: Item, directory: String) -> RainError {
        RainError.invalid(
            "the keyring item \"RainWallet \(item.title) (\(directory))\" is not a RainWallet key: "
                + "remove it (Seahorse) or restore it from a backup",
            field: "storage.provider", reason: "damaged_key")
    }
}

/// The message of a GLib error, kept as a `RainError`'s underlying cause (never shown on the wire).
struct ProviderCause: Error, Sendable, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

// MARK: - Key text

/// The base64 text of a key, in buffers that are wiped once used (no `String`, which cannot be).
enum SecretBytes {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// Zeroes `bytes` in place, in a way the optimizer keeps.
    static func wipe(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { buffer in
            if let base = buffer.baseAddress { explicit_bzero(base, buffer.count) }
        }
    }

    /// Standard base64 with padding.
    static func base64(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        var text = [UInt8]()
        text.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index < bytes.count {
            let count = min(3, bytes.count - index)
            var group: UInt32 = 0
            for offset in 0..<3 {
                group <<= 8
                if offset < count { group |= UInt32(bytes[index + offset]) }
            }
            for position in 0..<4 {
                let sextet = Int((group >> UInt32(18 - 6 * position)) & 0x3F)
                text.append(position <= count ? alphabet[sextet] : UInt8(ascii: "="))
            }
            group = 0
            index += 3
        }
        return text
    }

    /// Decodes standard base64 with padding; nil for anything else.
    static func decodeBase64(_ text: UnsafeRawBufferPointer) -> [UInt8]? {
        guard text.count % 4 == 0 else { return nil }
        var bytes = [UInt8]()
        bytes.reserveCapacity(text.count / 4 * 3)
        var index = 0
        while index < text.count {
            var group: UInt32 = 0
            var padding = 0
            for offset in 0..<4 {
                let character = text[index + offset]
                group <<= 6
                if character == UInt8(ascii: "=") {
                    guard index + 4 == text.count, offset >= 2 else { wipe(&bytes); return nil }
                    padding += 1
                } else {
                    guard padding == 0, let value = alphabet.firstIndex(of: character) else {
                        wipe(&bytes)
                        return nil
                    }
                    group |= UInt32(value)
                }
            }
            for offset in 0..<(3 - padding) { bytes.append(UInt8((group >> UInt32(16 - 8 * offset)) & 0xFF)) }
            group = 0
            index += 4
        }
        return bytes
    }
}
