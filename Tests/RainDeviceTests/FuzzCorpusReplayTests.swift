import Foundation
import RainCore
import RainFuzz
import Testing

/// The seeded replay of the fuzz targets in plain `swift test`: every committed corpus file and
/// every regression input (`Tests/FuzzCorpus/<TARGET>/regressions/`) goes through the same entry
/// point the libFuzzer executables use (`FuzzTarget.run`). An input may decode or be refused with
/// a Rain error; it may not crash or break an invariant. Fuzzing itself: `scripts/fuzz`.
@Suite struct FuzzCorpusReplayTests {
    static let corpusRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("FuzzCorpus")

    /// Every Rain code of the README's error table that a refusal may carry.
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
