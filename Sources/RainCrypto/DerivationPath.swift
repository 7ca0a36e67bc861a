import RainCore

/// A BIP-32 derivation path such as `m/44'/60'/0'/0/0`, parsed into child indices.
///
/// The text is `m` followed by `/index` components; an index is a decimal number below 2^31,
/// followed by `'`, `h` or `H` for a hardened child (index + 2^31). `m` alone is the master key.
struct DerivationPath: Sendable, Equatable {
    /// Added to an index to make it hardened.
    static let hardenedOffset: UInt32 = 0x8000_0000
    /// BIP-32 serializes the depth in one byte.
    static let maximumDepth = 255

    /// The child indices, hardened ones with ``hardenedOffset`` added.
    let indices: [UInt32]

    /// Parses `text`.
    /// - Throws: RAIN_102 (field `path`) when `text` does not start with `m`, has an empty or
    ///   non-decimal component, an index of 2^31 or more, or more than 255 components.
    init(parsing text: String) throws(RainError) {
        var components = text.split(separator: "/", omittingEmptySubsequences: false)
        guard components.first == "m" else { throw Self.invalid(text, "must start with m") }
        components.removeFirst()
        guard components.count <= Self.maximumDepth else { throw Self.invalid(text, "is deeper than 255") }
        var indices: [UInt32] = []
        indices.reserveCapacity(components.count)
        for component in components {
            var digits = component
            var isHardened = false
            if let last = digits.last, last == "'" || last == "h" || last == "H" {
                isHardened = true
                digits = digits.dropLast()
            }
            // Digits only: no sign, no spaces, at most 10 of them (2^31 has 10 digits).
            guard !digits.isEmpty, digits.count <= 10,
                digits.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
                let value = UInt32(digits), value < Self.hardenedOffset
            else {
                throw Self.invalid(text, "has an index that is not a number below 2^31")
            }
            indices.append(isHardened ? value | Self.hardenedOffset : value)
        }
        self.indices = indices
    }

    private static func invalid(_ text: String, _ problem: String) -> RainError {
        // Paths are not secret: naming the path helps whoever configured it.
        RainError.invalid("derivation path \"\(text)\" \(problem)", field: "path")
    }
}
