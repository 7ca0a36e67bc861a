// libFuzzer target FuzzStorage (see RainFuzz.FuzzTarget.storage). Built by scripts/fuzz with
// -sanitize=fuzzer,address -DFUZZING; a plain build prints how to fuzz and exits 64.
import RainFuzz

/// libFuzzer calls this once per input.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    FuzzDriver.runOne(.storage, data, size)
}

FuzzDriver.main(.storage, callback: fuzzOneInput)
