import FoundationEssentials

/// Text for people about an error from Foundation's decoders and file calls, as
/// `localizedDescription` words it on Linux. `localizedDescription` comes from the Foundation module,
/// which links ICU and its data into every binary (docs/performance.md, "Size").
package enum ErrorText {
    /// What went wrong, in the words of `error.localizedDescription` for the errors the decoders
    /// and `FileManager` throw; other errors as they describe themselves.
    package static func describe(_ error: any Error) -> String {
        let prefix = "The operation could not be completed. "
        switch error {
        case let decoding as DecodingError:
            switch decoding {
            case .keyNotFound, .valueNotFound: return prefix + "The data is missing."
            default: return prefix + "The data isn’t in the correct format."
            }
        case let cocoa as CocoaError:
            if cocoa.code == .fileNoSuchFile || cocoa.code == .fileReadNoSuchFile {
                return prefix + "The file doesn’t exist."
            }
            return prefix + "(NSCocoaErrorDomain error \(cocoa.code.rawValue).)"
        default:
            return String(describing: error)
        }
    }
}

/// Standard error, written directly: what `FileHandle.standardError.write` did, without the
/// Foundation module.
package enum StandardError {
    /// Writes `text` to file descriptor 2, retrying short writes; a failure is ignored, as a
    /// diagnostic that cannot be written has nowhere else to go.
    package static func write(_ text: String) {
        StandardErrorSink.writeAll(Array(text.utf8))
    }
}
