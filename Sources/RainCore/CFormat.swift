import Glibc

/// printf-style formatting through the C library, for the few numbers printed with a fixed layout
/// (`%.2f`, `%02x`, `%04d`). Foundation's `String(format:)` would do the same but links ICU and its
/// data into every binary; `vsnprintf` is what it calls for these conversions, so the text is the
/// same. The process never calls `setlocale`, so the C locale applies (a `.` decimal point).
package enum CFormat {
    /// `format` with `arguments`, as C's `snprintf` writes it.
    ///
    /// - Parameters:
    ///   - format: a C format string whose conversions match the arguments' types (`%d` an `Int32`,
    ///     `%ld` an `Int`, `%x` a `UInt32`, `%f` a `Double`).
    ///   - arguments: the values.
    /// - Returns: the formatted text; empty if the C library reports an error.
    package static func string(_ format: String, _ arguments: any CVarArg...) -> String {
        withVaList(arguments) { first in
            var buffer = [CChar](repeating: 0, count: 64)
            let needed = Int(vsnprintf(&buffer, buffer.count, format, first))
            guard needed >= 0 else { return "" }
            if needed < buffer.count {
                return String(decoding: buffer.prefix(needed).map { UInt8(bitPattern: $0) }, as: UTF8.self)
            }
            // A va_list can be walked once: format again with a fresh one and a large enough buffer.
            return withVaList(arguments) { again in
                buffer = [CChar](repeating: 0, count: needed + 1)
                let written = Int(vsnprintf(&buffer, buffer.count, format, again))
                guard written >= 0 else { return "" }
                return String(decoding: buffer.prefix(written).map { UInt8(bitPattern: $0) }, as: UTF8.self)
            }
        }
    }
}
