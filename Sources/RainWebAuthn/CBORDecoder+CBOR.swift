internal import CCBOR
import RainCore

/// Owns one item returned by `cbor_load`; `deinit` releases it with `cbor_decref`.
private final class CBORItem {
    let pointer: UnsafeMutablePointer<cbor_item_t>

    /// Parses `bytes` with `cbor_load`; they must be exactly one item.
    init(loading bytes: UnsafeBufferPointer<UInt8>, offset: Int) throws(RainError) {
        guard let base = bytes.baseAddress, bytes.count > 0 else {
            throw CBORDecoder.malformed("empty input", offset: offset)
        }
        var result = cbor_load_result()
        guard let pointer = cbor_load(base, bytes.count, &result) else {
            throw CBORDecoder.malformed(
                "libcbor refused the input (error \(result.error.code.rawValue))", offset: offset + result.error.position)
        }
        self.pointer = pointer
        guard result.error.code == CBOR_ERR_NONE, result.read == bytes.count else {
            throw CBORDecoder.malformed("libcbor read \(result.read) of \(bytes.count) bytes", offset: offset)
        }
    }

    deinit {
        var item: UnsafeMutablePointer<cbor_item_t>? = pointer
        cbor_decref(&item)
    }
}

extension CBORDecoder {
    /// Parses `bytes[range]`, already checked by the header walk, with libcbor and copies the
    /// result into a `CBORValue`.
    static func loadWithLibcbor(_ bytes: [UInt8], range: Range<Int>) throws(RainError) -> CBORValue {
        let result: Result<CBORValue, RainError> = bytes.withUnsafeBufferPointer { buffer in
            let slice = UnsafeBufferPointer(rebasing: buffer[range])
            do throws(RainError) {
                let item = try CBORItem(loading: slice, offset: range.lowerBound)
                return .success(try convert(item.pointer, offset: range.lowerBound))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// Copies a borrowed libcbor item (and its children) into a `CBORValue`.
    private static func convert(_ item: UnsafeMutablePointer<cbor_item_t>, offset: Int) throws(RainError) -> CBORValue {
        switch cbor_typeof(item) {
        case CBOR_TYPE_UINT:
            return .unsigned(cbor_get_int(item))
        case CBOR_TYPE_NEGINT:
            return .negative(cbor_get_int(item))
        case CBOR_TYPE_BYTESTRING:
            guard cbor_bytestring_is_definite(item) else { throw malformed("indefinite byte string", offset: offset) }
            return .bytes(copy(cbor_bytestring_handle(item), count: cbor_bytestring_length(item)))
        case CBOR_TYPE_STRING:
            guard cbor_string_is_definite(item) else { throw malformed("indefinite text string", offset: offset) }
            let raw = copy(cbor_string_handle(item), count: cbor_string_length(item))
            guard let text = String(validating: raw, as: UTF8.self) else {
                throw malformed("text string is not valid UTF-8", offset: offset)
            }
            return .text(text)
        case CBOR_TYPE_ARRAY:
            guard cbor_array_is_definite(item) else { throw malformed("indefinite array", offset: offset) }
            let count = cbor_array_size(item)
            guard count > 0 else { return .array([]) }
            guard let handle = cbor_array_handle(item) else { throw malformed("array without items", offset: offset) }
            var elements: [CBORValue] = []
            elements.reserveCapacity(count)
            for index in 0..<count {
                guard let child = handle[index] else { throw malformed("missing array item", offset: offset) }
                elements.append(try convert(child, offset: offset))
            }
            return .array(elements)
        case CBOR_TYPE_MAP:
            guard cbor_map_is_definite(item) else { throw malformed("indefinite map", offset: offset) }
            let count = cbor_map_size(item)
            guard count > 0 else { return .map([]) }
            guard let handle = cbor_map_handle(item) else { throw malformed("map without entries", offset: offset) }
            var entries: [CBORValue.MapEntry] = []
            entries.reserveCapacity(count)
            for index in 0..<count {
                let pair = handle[index]
                guard let key = pair.key, let value = pair.value else {
                    throw malformed("incomplete map entry", offset: offset)
                }
                entries.append(CBORValue.MapEntry(try convert(key, offset: offset), try convert(value, offset: offset)))
            }
            return .map(entries)
        case CBOR_TYPE_FLOAT_CTRL:
            guard cbor_float_ctrl_is_ctrl(item) else { throw malformed("floating-point value", offset: offset) }
            switch cbor_ctrl_value(item) {
            case UInt8(CBOR_CTRL_FALSE.rawValue): return .bool(false)
            case UInt8(CBOR_CTRL_TRUE.rawValue): return .bool(true)
            case UInt8(CBOR_CTRL_NULL.rawValue): return .null
            default: throw malformed("simple value not accepted", offset: offset)
            }
        default:
            throw malformed("tags are not accepted", offset: offset)
        }
    }

    private static func copy(_ pointer: UnsafeMutablePointer<UInt8>?, count: Int) -> [UInt8] {
        guard let pointer, count > 0 else { return [] }
        return Array(UnsafeBufferPointer(start: pointer, count: count))
    }
}
