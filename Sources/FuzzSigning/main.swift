// libFuzzer target FuzzSigning (see RainFuzz.FuzzTarget.signing). Built by scripts/fuzz with
// -sanitize=fuzzer,address -DFUZZING; a plain build prints how to fuzz and exits 64.
import RainFuzz

/// libFuzzer calls this once per input.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    FuzzDriver.runOne(.signing, data, size)
}

FuzzDriver.main(.signing, callback: fuzzOneInput)
