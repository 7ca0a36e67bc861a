import RainCore
import RainCrypto
import Testing

@Suite struct SecureRandomTests {
    @Test func bytesHaveTheRequestedCount() throws {
        #expect(try SecureRandom.bytes(count: 0).isEmpty)
        let a = try SecureRandom.bytes(count: 32)
        let b = try SecureRandom.bytes(count: 32)
        #expect(a.count == 32)
        // Two 256-bit draws collide with probability 2^-256.
        #expect(a != b)
        #expect(try SecureRandom.bytes(count: 100_000).count == 100_000)
    }

    @Test func negativeCountsAreRefused() {
        #expect(throws: RainError.invalidArgument) { try SecureRandom.bytes(count: -1) }
        #expect(throws: RainError.invalidArgument) { try SecureRandom.digits(count: -1) }
        #expect(throws: RainError.invalidArgument) { try SecureRandom.token(byteCount: 0) }
    }

    @Test(arguments: [0, 1, 6, 8, 100, 1000])
    func digitsHaveLengthAndCharset(count: Int) throws {
        let digits = try SecureRandom.digits(count: count)
        #expect(digits.utf8.count == count)
        #expect(digits.utf8.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
    }

    /// 20,000 digits (4,000 five-digit codes): the counts per digit, overall and per position, must
    /// pass a chi-square test with 9 degrees of freedom at p = 1e-12 (bound 76), so a fair generator
    /// fails it about once in 10^11 runs while a constant or badly skewed one fails at once.
    @Test func digitsAreRoughlyUniform() throws {
        var overall = [Int](repeating: 0, count: 10)
        var byPosition = [[Int]](repeating: [Int](repeating: 0, count: 10), count: 5)
        for _ in 0..<4000 {
            let code = try SecureRandom.digits(count: 5)
            for (position, character) in code.utf8.enumerated() {
                let digit = Int(character - UInt8(ascii: "0"))
                overall[digit] += 1
                byPosition[position][digit] += 1
            }
        }
        #expect(overall.reduce(0, +) == 20_000)
        #expect(chiSquare(overall) < 76, "counts \(overall)")
        for counts in byPosition {
            #expect(chiSquare(counts) < 76, "counts \(counts)")
        }
    }

    /// The chi-square check above can tell a skewed source from a fair one at this sample size.
    @Test func chiSquareBoundCatchesBias() {
        // Digit 0 twice as likely as the others.
        let skewed = [3636] + [Int](repeating: 1818, count: 9)
        #expect(chiSquare(skewed) > 76)
        #expect(chiSquare([Int](repeating: 2000, count: 10)) == 0)
    }

    @Test func uniformStaysBelowTheBoundAndIsRoughlyUniform() throws {
        var counts = [Int](repeating: 0, count: 6)
        for _ in 0..<12_000 {
            let value = try SecureRandom.uniform(upperBound: 6)
            try #require(value < 6)
            counts[Int(value)] += 1
        }
        // 5 degrees of freedom, p = 1e-12.
        #expect(chiSquare(counts) < 65.2, "counts \(counts)")
    }

    @Test func uniformEdgeCases() throws {
        for _ in 0..<100 {
            #expect(try SecureRandom.uniform(upperBound: 1) == 0)
            #expect(try SecureRandom.uniform(upperBound: UInt32.max) < UInt32.max)
        }
        #expect(throws: RainError.invalidArgument) { try SecureRandom.uniform(upperBound: 0) }
    }

    @Test func tokensAreBase64URLWithoutPadding() throws {
        let token = try SecureRandom.token()
        #expect(token.count == 43)
        #expect(!token.contains("="))
        #expect(try #require(Base64URL.decode(token)).count == 32)
        #expect(try SecureRandom.token(byteCount: 16).count == 22)
        #expect(try SecureRandom.token() != token)
    }

    @Test func identifiersHavePrefixAndHex() throws {
        let id = try SecureRandom.identifier(prefix: "acct")
        #expect(id.hasPrefix("acct_"))
        let suffix = String(id.dropFirst(5))
        #expect(suffix.utf8.count == 32)
        #expect(
            suffix.utf8.allSatisfy {
                (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0)
            })
        #expect(try SecureRandom.identifier(prefix: "acct") != id)
        #expect(throws: RainError.invalidArgument) { try SecureRandom.identifier(prefix: "") }
    }
}
