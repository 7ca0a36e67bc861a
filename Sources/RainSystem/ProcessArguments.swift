import Glibc

/// This process's own command line, as other users see it (`ps`, `/proc/PID/cmdline`, readable by
/// every uid): the memory the kernel reads it from can be overwritten, as the MySQL client does
/// with `-pPASSWORD`. It narrows the exposure of a secret given as an argument from the life of the
/// process to its first instants; it does not close it (the secret was readable until then),
/// which is why the commands also warn and document a form without the secret.
public enum ProcessArguments {
    /// Overwrites with `*` every occurrence of `secret` in the arguments after the program name.
    /// - Returns: whether some argument held it.
    @discardableResult
    public static func hide(_ secret: String) -> Bool {
        let needle = Array(secret.utf8)
        guard !needle.isEmpty else { return false }
        return mask { argument in
            var ranges: [Range<Int>] = []
            var start = 0
            while start + needle.count <= argument.count {
                if argument[start..<(start + needle.count)].elementsEqual(needle) {
                    ranges.append(start..<(start + needle.count))
                    start += needle.count
                } else {
                    start += 1
                }
            }
            return ranges
        }
    }

    /// Overwrites with `*`, in each argument after the program name, the byte ranges `ranges`
    /// returns for it (the bytes of the argument, without its NUL).
    /// - Returns: whether some bytes were overwritten.
    @discardableResult
    public static func mask(_ ranges: ([UInt8]) -> [Range<Int>]) -> Bool {
        let argv = CommandLine.unsafeArgv
        var isMasked = false
        for index in 1..<Int(max(1, CommandLine.argc)) {
            guard let pointer = argv[index] else { continue }
            let length = strlen(pointer)
            let bytes = (0..<length).map { UInt8(bitPattern: pointer[$0]) }
            for range in ranges(bytes) where range.lowerBound >= 0 && range.upperBound <= length {
                for offset in range { pointer[offset] = 0x2A }  // "*"
                isMasked = isMasked || !range.isEmpty
            }
        }
        return isMasked
    }
}
