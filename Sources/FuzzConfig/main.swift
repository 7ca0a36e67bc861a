// libFuzzer target FuzzConfig (see RainFuzz.FuzzTarget.config). Built by scripts/fuzz with
// -sanitize=fuzzer,address -DFUZZING; a plain build prints how to fuzz and exits 64.
import RainFuzz

#if canImport(Glibc)
    import Glibc
#endif

/// libFuzzer calls this once per input.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    FuzzDriver.runOne(.config, data, size)
}

#if FUZZING
    // SwiftPM links its own main, which replaces libFuzzer's: start libFuzzer's driver by hand.
    @_silgen_name("LLVMFuzzerRunDriver")
    func runLibFuzzer(
        _ argc: UnsafeMutablePointer<CInt>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
        _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
    ) -> CInt

    var argc = CommandLine.argc
    var argv = CommandLine.unsafeArgv
    exit(runLibFuzzer(&argc, &argv, fuzzOneInput))
#else
    exit(FuzzDriver.mainWithoutFuzzer(.config, arguments: CommandLine.arguments))
#endif
