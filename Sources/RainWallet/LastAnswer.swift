import RainCore
internal import RainWire
import Synchronization

/// One read's last answer and the value it gave: `value(of:decode:)` gives that value again when
/// the same bytes come back, without decoding them.
final class LastAnswer<Value: Sendable>: Sendable {
    /// A class: a tuple in the mutex went through the runtime's generic value witnesses.
    private final class Kept: Sendable {
        let bytes: [UInt8]
        let value: Value

        init(bytes: [UInt8], value: Value) {
            self.bytes = bytes
            self.value = value
        }
    }

    private let kept = Mutex<Kept?>(nil)

    /// The value of `bytes`: the last one when the bytes are the same, else what `decode` makes of
    /// them (kept for the next call).
    func value(of bytes: [UInt8], decode: ([UInt8]) throws(RainError) -> Value) throws(RainError) -> Value {
        if let last = kept.withLock({ $0 }),
            last.bytes.withUnsafeBufferPointer({ old in bytes.withUnsafeBufferPointer { QuickRequest.equals(old, $0) } })
        {
            return last.value
        }
        let value = try decode(bytes)
        kept.withLock { $0 = Kept(bytes: bytes, value: value) }
        return value
    }
}
