import FoundationEssentials
import Glibc
import RainCore
import RainCrypto
import RainSystem

/// The remote authority a device uses (`remoteAuthority` in the config, or `--authority` and
/// `--authority-ca`): a guarded setting, since whoever chooses it receives the device's session
/// tokens and proofs. A start that names another one than the confirmed setting is refused until
/// the user confirms it (or root's policy sets it).
public struct RemoteAuthoritySetting: Sendable, Equatable {
    /// `HOST:PORT`.
    public var address: String
    /// The PEM file of the CA certificates trusted for its TLS certificate; nil: plain TCP
    /// (loopback only).
    public var ca: String?
    /// The SHA-256 (hex) of the CA file's bytes, read at start: the CA's content is what is
    /// confirmed, so a file replaced under the same name is a change too. Nil until read.
    public var caSHA256: String?

    /// A setting.
    public init(address: String, ca: String? = nil, caSHA256: String? = nil) {
        self.address = address
        self.ca = ca
        self.caSHA256 = caSHA256
    }

    /// The most bytes a CA file may hold.
    public static let maximumCABytes = 1 << 20

    /// The CA file's bytes, read as a trusted file (this user's or root's, not writable by others,
    /// no symbolic link).
    /// - Throws: RAIN_102 (field `remoteAuthority.ca`) naming the file and what is wrong with it.
    public func readCA() throws(RainError) -> [UInt8]? {
        guard let ca else { return nil }
        guard
            let bytes = try OwnedPath.readTrustedFile(
                ca, owners: [geteuid(), 0], name: "the authority's CA file", field: "remoteAuthority.ca",
                limit: Self.maximumCABytes)
        else {
            throw RainError.invalid(
                "the authority's CA file \(ca) does not exist: give the PEM file of the CA that issued the authority's "
                    + "certificate", field: "remoteAuthority.ca")
        }
        return bytes
    }

    /// This setting with `caSHA256` read from its CA file.
    /// - Throws: as `readCA`; RAIN_102 when a pinned `caSHA256` is not the file's.
    public func withCADigest() throws(RainError) -> RemoteAuthoritySetting {
        var copy = self
        copy.caSHA256 = try readCA().map { Hex.encode(SHA256.hash($0)) }
        if let pinned = caSHA256, pinned != copy.caSHA256 {
            throw RainError.invalid(
                "the authority's CA file \(ca ?? "") does not hold the certificates remoteAuthority.caSHA256 pins "
                    + "(its SHA-256 is \(copy.caSHA256 ?? "none")): put the pinned CA back, or change the pin",
                field: "remoteAuthority.caSHA256", reason: "ca_mismatch")
        }
        return copy
    }

    /// `address`, and the CA file and its digest when there is one, for messages.
    public var description: String {
        guard let ca else { return "\(address) (plain TCP)" }
        return "\(address) with the CA \(ca) (sha256 \(caSHA256.map { String($0.prefix(16)) + "…" } ?? "unread"))"
    }
}

extension DaemonConfig {
    /// The guarded value of `remoteAuthority`: `"embedded"`, or its address, CA file and CA digest.
    static func json(_ remote: RemoteAuthoritySetting?) -> JSONValue {
        guard let remote else { return .string("embedded") }
        var o: [String: JSONValue] = ["address": .string(remote.address)]
        if let ca = remote.ca { o["ca"] = .string(ca) }
        if let digest = remote.caSHA256 { o["caSHA256"] = .string(digest) }
        return .object(o)
    }

    /// This config with the CA file of its remote authority read into its digest.
    /// - Throws: RAIN_102 for a CA file that is missing, another user's or writable by others.
    public func withAuthorityCADigest() throws(RainError) -> DaemonConfig {
        var copy = self
        copy.remoteAuthority = try remoteAuthority?.withCADigest()
        return copy
    }
}

extension ConfigReader {
    /// `remoteAuthority`: `"embedded"`, or `{"address": "HOST:PORT", "ca": "/abs/ca.pem"}` (a
    /// confirmed record or root's policy may also pin `caSHA256`).
    func remoteAuthority(_ value: JSONValue, _ path: String) throws(RainError) -> RemoteAuthoritySetting? {
        if case .string("embedded") = value { return nil }
        let dict = try object(value, path, allowed: ["address", "ca", "caSHA256"])
        guard let a = dict["address"] else {
            throw fail(join(path, "address"), "is required: the authority's HOST:PORT, as rainwalletd authority --listen has it")
        }
        let address = try string(a, join(path, "address"))
        guard !address.isEmpty, address.utf8.count <= 300, address.contains(":"), !address.contains(where: \.isWhitespace)
        else { throw fail(join(path, "address"), "must be HOST:PORT (authority.example.com:7420)") }
        var setting = RemoteAuthoritySetting(address: address)
        if let c = dict["ca"] {
            let ca = try string(c, join(path, "ca"))
            guard ca.hasPrefix("/"), ca.utf8.count <= 4096, !ca.contains("\0") else {
                throw fail(join(path, "ca"), "must be the absolute path of the CA's PEM file")
            }
            setting.ca = ca
        }
        if let d = dict["caSHA256"] {
            let hex = try string(d, join(path, "caSHA256")).lowercased()
            guard hex.utf8.count == 64, hex.allSatisfy(\.isHexDigit), setting.ca != nil else {
                throw fail(join(path, "caSHA256"), "must be 64 hex digits (sha256sum of the CA file), with ca")
            }
            setting.caSHA256 = hex
        }
        return setting
    }
}
