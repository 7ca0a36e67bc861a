import Foundation
import Testing

@testable import RainCrypto

/// BIP-39's NFKD, written from generated tables, gives what Foundation's
/// `decomposedStringWithCompatibilityMapping` gives.
@Suite("NFKD")
struct NFKDTests {
    @Test("NFKD matches Foundation on samples from many scripts")
    func matchesFoundationOnSamples() {
        let samples = [
            "", "abandon ability", "mnemonicTREZOR", "Ã©", "e\u{301}", "\u{FB01}", "①②", "ｱｲｳ", "ﾊﾟ", "한국어",
            "\u{1E9B}\u{0323}", "a\u{0301}\u{0316}\u{0300}", "Å", "Ω", "ǅ", "㎏", "½", "x²", "ｽｯﾎﾟﾝ", "あいこくしん　すうがく",
            "Ελληνικά", "a\u{0385}\u{0301}", "русский", "العربية", "देवनागरी", "\u{2126}\u{212B}", "q\u{0307}\u{0323}", "ﷺ",
            "\u{1F1EB}\u{1F1F7}",
        ]
        for text in samples {
            #expect(NFKD.normalize(text) == text.decomposedStringWithCompatibilityMapping, "\(text)")
            #expect(
                Array(NFKD.normalize(text).unicodeScalars) == Array(text.decomposedStringWithCompatibilityMapping.unicodeScalars),
                "\(text)")
        }
    }

    /// Each scalar alone between two letters: after a decomposition that ends in several marks, a
    /// further mark of a lower class is put in canonical order by UAX #15 (and Python's
    /// `unicodedata`, BIP-39's reference), where CoreFoundation's normalizer leaves it half-sorted.
    @Test("NFKD matches Foundation on every scalar of Unicode 14")
    func matchesFoundationScalarByScalar() {
        var mismatches: [String] = []
        for value in UInt32(0xA0)...0x2FFFF {
            guard let scalar = Unicode.Scalar(value) else { continue }
            // Scalars assigned after Unicode 14 (the tables' version) are Foundation's ICU's alone.
            guard let age = scalar.properties.age, age.major < 15 else { continue }
            let text = "a" + String(scalar) + "b"
            let ours = Array(NFKD.normalize(text).unicodeScalars)
            let foundation = Array(text.decomposedStringWithCompatibilityMapping.unicodeScalars)
            if ours != foundation { mismatches.append(String(value, radix: 16)) }
        }
        #expect(mismatches.isEmpty, "\(mismatches.prefix(20))")
    }
}
