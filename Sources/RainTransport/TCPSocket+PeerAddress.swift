import FoundationEssentials
import Glibc
import RainCore

extension TCPSocket {
    /// The numeric text of an address as `Syscall.peerAddress` gives it (4 bytes for IPv4, an
    /// IPv4-mapped IPv6 peer included; 16 for IPv6): `192.0.2.7`, `2001:db8::1`. Nil for any other
    /// length (a Unix socket's empty address).
    public static func addressText(_ bytes: [UInt8]) -> String? {
        let family: Int32
        switch bytes.count {
        case 4: family = AF_INET
        case 16: family = AF_INET6
        default: return nil
        }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        let isWritten = bytes.withUnsafeBytes { raw in
            inet_ntop(family, raw.baseAddress, &text, socklen_t(text.count)) != nil
        }
        guard isWritten else { return nil }
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
