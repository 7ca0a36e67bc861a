import Foundation
import RainCore
import RainCrypto
@testable import RainFuzz
import Testing

/// The seeded replay of the fuzz targets in plain `swift test`: every committed corpus file and
/// every regression input (`Tests/FuzzCorpus/<TARGET>/regressions/`) goes through the same entry
/// point the libFuzzer executables use (`FuzzTarget.run`). An input may decode or be refused with
/// a Rain error; it may not crash or break an invariant. Fuzzing itself: `scripts/fuzz`.
@Suite struct FuzzCorpusReplayTests {
    static let corpusRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("FuzzCorpus")

    /// Every Rain code of docs/errors.md's table that a refusal may carry.
    static let knownCodes: Set<UInt32> = [101, 102, 201, 202, 203, 301, 302, 401, 404, 501, 502]

    static func files(_ target: FuzzTarget, under subdirectory: String? = nil) throws -> [URL] {
        var directory = corpusRoot.appendingPathComponent(target.rawValue)
        if let subdirectory { directory = directory.appendingPathComponent(subdirectory) }
        let enumerator = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: [.isRegularFileKey])
        var files: [URL] = []
        while let url = enumerator?.nextObject() as? URL {
            if try url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile == true { files.append(url) }
        }
        return files.sorted { $0.path < $1.path }
    }

    @Test(arguments: FuzzTarget.allCases)
    func everyCorpusFileIsDecodedOrRefusedWithARainError(_ target: FuzzTarget) throws {
        let scratch = try FuzzScratch()
        let files = try Self.files(target)
        #expect(files.count >= 5, "the seed corpus of \(target.rawValue) is missing: run scripts/gen-fuzz-corpus")
        for file in files {
            let outcome = target.run(Array(try Data(contentsOf: file)), scratch: scratch)
            #expect(outcome.brokenInvariant == nil, "\(file.lastPathComponent): \(outcome.brokenInvariant ?? "")")
            if case .rejected(let error) = outcome {
                #expect(Self.knownCodes.contains(error.code.rawValue), "\(file.lastPathComponent): \(error.code)")
                #expect(!error.message.isEmpty, "\(file.lastPathComponent): a refusal without a message")
            }
        }
    }

    /// The generator and the committed corpus agree on which seeds exist, so a new message type or
    /// parser cannot be added without its seed.
    @Test(arguments: FuzzTarget.allCases)
    func everyGeneratedSeedIsCommittedAndRunsCleanly(_ target: FuzzTarget) throws {
        let scratch = try FuzzScratch()
        let committed = Set(try Self.files(target).filter { !$0.path.contains("/regressions/") }.map(\.lastPathComponent))
        for seed in try target.seeds(scratch: scratch) {
            #expect(committed.contains(seed.name), "seed \(seed.name) is not committed: run scripts/gen-fuzz-corpus")
            let outcome = target.run(seed.bytes, scratch: scratch)
            #expect(outcome.brokenInvariant == nil, "\(seed.name): \(outcome.brokenInvariant ?? "")")
        }
    }

    /// Seeds are valid input (except those named `invalid-…`), so fuzzing starts past the first
    /// checks: a seed the decoder refuses would only exercise the refusal.
    @Test(arguments: FuzzTarget.allCases)
    func seedsDecode(_ target: FuzzTarget) throws {
        let scratch = try FuzzScratch()
        for seed in try target.seeds(scratch: scratch) where !seed.name.hasPrefix("invalid-") {
            let outcome = target.run(seed.bytes, scratch: scratch)
            guard case .accepted = outcome else {
                Issue.record("seed \(seed.name) of \(target.rawValue) does not decode: \(outcome)")
                continue
            }
        }
    }

    /// The RS256 seed holds a real RSA key, not a made-up odd number: its modulus verifies a signature
    /// made with the private key when the seed was made (`openssl dgst -sha256 -sign`). OpenSSL checks
    /// a modulus with Miller-Rabin on random bases, so a made-up one was refused in about one load
    /// in 800, and the seed decoded or not by chance.
    @Test func theRSASeedIsARealKey() throws {
        let modulus = try #require(WebAuthnFuzzing.rsaModulus)
        let signature = try #require(WebAuthnFuzzing.bytes(hexBlock: Self.rsaSeedSignature))
        let key = try RSAPublicKey(modulus: modulus, exponent: [1, 0, 1])
        #expect(key.isValidSignature(signature, for: Array("the RS256 fuzz seed key".utf8)))
    }

    /// The signature over "the RS256 fuzz seed key" (RSASSA-PKCS1-v1_5, SHA-256) by the seed's key.
    static let rsaSeedSignature = """
        8f6a606cbdf8c1413ae08efb99f446fd14cd96f6f92bb90daee28ac090a53ceceb1eacf3a0d2ea1c5826a0de8a5c66c9
        aecc288dc071ca16bdc93e074baebeb2d82e3de6f9c74a26c4e66b5e79399f9d21917957821742fecdf3fe9adfacee04
        83d20d2b821179a48d4ed9889f3420cea49dabf7e170cdd6e8d7163f44d877597ecbe51d5ee2b4073642753443aa3dc6
        56ea4edb24ed51e18933542ad9b18ae090303262c590fbb1550d2ca49de060aee57da967e691601f10d2475214ce8e50
        e4914b44546bfcf69c7b1d31ae31e5130b2bd47aea21ca0369f06defd71bbbe70d30332dc2684d5b2373b60815f015b2
        7f0fb64aaf231b51a1f11f48cacaabc6
        """

    /// Inputs that crashed or broke an invariant before their fix now decode.
    @Test(arguments: [
        (FuzzTarget.requests, "account-created-at-int64-max"),
        (FuzzTarget.frame, "response-status-code-0-with-message"),
    ])
    func regressionInputsNowDecode(_ target: FuzzTarget, _ name: String) throws {
        let file = Self.corpusRoot.appendingPathComponent("\(target.rawValue)/regressions/\(name)")
        let outcome = target.run(Array(try Data(contentsOf: file)), scratch: try FuzzScratch())
        #expect(outcome.brokenInvariant == nil)
        if name == "account-created-at-int64-max" {
            guard case .accepted = outcome else {
                Issue.record("expected the account response to decode and re-encode, got \(outcome)")
                return
            }
        }
    }
}
