import RainCore
import RainCrypto
import Testing

/// Bytes from a hex literal in a test vector; fails the test on a typo.
func hexBytes(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> [UInt8] {
    try #require(Hex.decode(text), "bad hex in test vector", sourceLocation: sourceLocation)
}

/// The bytes of a key, for comparing derived keys with vectors.
func keyBytes(_ key: SymmetricKey) -> [UInt8] {
    key.withUnsafeBytes { Array($0) }
}

/// Pearson's chi-square statistic of observed counts against a uniform expectation.
func chiSquare(_ counts: [Int]) -> Double {
    let total = counts.reduce(0, +)
    let expected = Double(total) / Double(counts.count)
    return counts.reduce(0.0) { sum, observed in
        let difference = Double(observed) - expected
        return sum + difference * difference / expected
    }
}
