import Foundation
import RainCore
import RainSystem

/// The glue between a fuzz executable and its ``FuzzTarget``.
package enum FuzzDriver {
    /// Runs one libFuzzer input. A broken invariant aborts, which libFuzzer reports as a crash
    /// and saves as a `crash-…` file; a refused input is the expected outcome for most inputs.
    /// - Returns: 0, as libFuzzer expects.
    package static func runOne(_ target: FuzzTarget, _ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
        guard let scratch = sharedScratch else {
            fail("cannot create the fuzzing scratch directory (set TMPDIR to a writable directory)")
        }
        let input = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
        if let why = target.run(input, scratch: scratch).brokenInvariant {
            fail("\(target.rawValue): invariant broken: \(why)")
        }
        return 0
    }

    /// A fuzz executable's whole `main`: under `-DFUZZING` it starts libFuzzer's driver with
    /// `callback` (SwiftPM links its own `main`, which replaces libFuzzer's); otherwise
    /// `mainWithoutFuzzer`. Never returns.
    package static func main(
        _ target: FuzzTarget, callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
    ) -> Never {
        #if FUZZING
            var argc = CommandLine.argc
            var argv = CommandLine.unsafeArgv
            exit(runLibFuzzer(&argc, &argv, callback))
        #else
            exit(mainWithoutFuzzer(target, arguments: CommandLine.arguments))
        #endif
    }

    /// The entry point of a fuzz executable built without `-DFUZZING`: `--write-seeds DIR` writes
    /// the target's seeds (scripts/gen-fuzz-corpus); anything else prints how to fuzz.
    /// - Returns: the exit status: 0, 1 when seeds cannot be written, 64 for usage.
    package static func mainWithoutFuzzer(_ target: FuzzTarget, arguments: [String]) -> Int32 {
        if arguments.count == 3, arguments[1] == "--write-seeds" {
            do throws(RainError) {
                let directory = arguments[2]
                guard let scratch = sharedScratch else { throw RainError(.internalError, "no scratch directory") }
                try AtomicFile.makeDirectory(directory, mode: 0o755)
                let seeds = try target.seeds(scratch: scratch)
                for seed in seeds {
                    try AtomicFile.write(seed.bytes, to: "\(directory)/\(seed.name)", mode: 0o644)
                }
                print("\(target.rawValue): wrote \(seeds.count) seeds to \(directory)")
                return 0
            } catch {
                FileHandle.standardError.write(Data("\(target.rawValue): \(error)\n".utf8))
                return 1
            }
        }
        let hint = """
            \(target.rawValue) is a libFuzzer target; this build has no fuzzer in it.
            Fuzz it with:   scripts/fuzz \(target.rawValue) SECONDS
            Replay a file:  scripts/fuzz \(target.rawValue) --replay FILE
            (or build it yourself: swift build -c release --scratch-path .build-fuzz \
            -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING --product \(target.rawValue))

            """
        FileHandle.standardError.write(Data(hint.utf8))
        return 64
    }

    private static func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("\(message)\n".utf8))
        abort()
    }
}

/// One scratch directory per fuzzing process (libFuzzer runs inputs one at a time on one thread).
private let sharedScratch: FuzzScratch? = try? FuzzScratch()

#if FUZZING
    /// libFuzzer's driver, linked in by `-sanitize=fuzzer`.
    @_silgen_name("LLVMFuzzerRunDriver")
    func runLibFuzzer(
        _ argc: UnsafeMutablePointer<CInt>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
        _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
    ) -> CInt
#endif
