internal import CPSL
import FoundationEssentials
import RainCore
import Synchronization

/// The passkey relying-party domain rule (docs/user-guide.md "Passkey domain"): a registrable domain of at least two labels,
/// checked against the system's Public Suffix List with libpsl. A scheme, port, path, `localhost`,
/// an IP address, an unknown suffix (`foo.internal`) or a bare public suffix (`co.uk`,
/// `github.io`) is refused.
public enum PasskeyDomain {
    /// The system list, loaded once (libpsl reads `/usr/share/publicsuffix`). Read-only afterwards.
    private static let context = Mutex<PSLContext?>(nil)

    final class PSLContext: @unchecked Sendable {
        // @unchecked: libpsl contexts are immutable after loading; lookups are thread-safe.
        let handle: OpaquePointer
        init?() {
            guard let h = psl_latest(nil) else { return nil }
            handle = h
        }
        deinit { psl_free(handle) }
    }

    private static func psl() throws(RainError) -> PSLContext {
        try context.withLock { (c) throws(RainError) -> PSLContext in
            if let c { return c }
            guard let loaded = PSLContext() else {
                throw RainError(
                    .internalError, "the Public Suffix List could not be loaded (install the publicsuffix package)")
            }
            c = loaded
            return loaded
        }
    }

    /// Validates and normalizes (trims, lowercases) a passkey domain.
    /// - Throws: RAIN_102 (field `passkeyDomain`) naming what is wrong.
    public static func validate(_ raw: String) throws(RainError) -> String {
        func fail(_ why: String) -> RainError {
            RainError.invalid(
                "invalid passkey domain \"\(raw)\": \(why)", field: "passkeyDomain", reason: "invalid_passkey_domain")
        }
        let domain = raw.trimmingWhitespace().lowercased()
        if domain.isEmpty { throw fail("it is empty") }
        if domain.contains("://") { throw fail("give the domain only, without a scheme like https://") }
        if domain.contains("/") { throw fail("give the domain only, without a path") }
        if domain.contains(":") { throw fail("give the domain only, without a port") }
        if domain.contains("@") || domain.contains("?") || domain.contains("#") { throw fail("give the domain only") }
        if domain.utf8.count > 253 { throw fail("it is longer than 253 characters") }
        let labels = domain.split(separator: ".", omittingEmptySubsequences: false)
        if labels.contains(where: \.isEmpty) { throw fail("it has an empty label") }
        if domain == "localhost" || domain.hasSuffix(".localhost") { throw fail("localhost cannot hold passkeys") }
        if labels.count < 2 { throw fail("it needs at least two labels, like example.com") }
        if labels.allSatisfy({ $0.allSatisfy(\.isNumber) }) { throw fail("an IP address cannot hold passkeys") }
        for label in labels {
            guard label.utf8.count <= 63,
                label.unicodeScalars.allSatisfy({
                    $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "-")
                }),
                label.first != "-", label.last != "-"
            else {
                throw fail("label \"\(label)\" is not a valid DNS label (letters, digits and inner hyphens; punycode for IDNs)")
            }
        }
        let ctx = try psl()
        let isPublicSuffix = domain.withCString { psl_is_public_suffix2(ctx.handle, $0, PSL_TYPE_ANY) != 0 }
        if isPublicSuffix { throw fail("it is a public suffix; use a domain registered under it") }
        // psl_registrable_domain returns a pointer into its argument: use it inside withCString.
        let registrable: String? = domain.withCString { p in
            psl_registrable_domain(ctx.handle, p).map { String(cString: $0) }
        }
        guard let registrable else { throw fail("it is not under a registrable domain") }
        // The implicit "*" rule makes foo.internal registrable: require a suffix the list knows.
        let suffix = registrable.split(separator: ".", maxSplits: 1).dropFirst().first.map(String.init) ?? ""
        let isKnown = suffix.withCString { psl_is_public_suffix2(ctx.handle, $0, PSL_TYPE_ANY | PSL_TYPE_NO_STAR_RULE) != 0 }
        if !isKnown { throw fail("its suffix \"\(suffix)\" is not on the Public Suffix List") }
        return domain
    }
}
