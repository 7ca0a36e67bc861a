import FoundationEssentials
import RainAuthorityAPI

/// Who submits a code, for the wrong-guess budgets: the device key it comes with and its source.
///
/// The device key is whatever the caller presents (a caller can mint keys at will), which is why
/// the budget per source exists beside it; the source is never chosen by the caller.
struct CodeGuesser: Sendable, Equatable {
    /// The stored form of the device key (`key:` and its wire bytes in base64), or of the device
    /// id when no key came with the code (`device:` app and device id), so an unbound confirm is
    /// counted too.
    let deviceKey: String
    /// Where the code comes from.
    let source: SendSource

    /// The guesser presenting the device key with these wire bytes (empty: none) from `source`.
    init(deviceKey wireBytes: [UInt8], appID: String, deviceID: String, source: SendSource) {
        if wireBytes.isEmpty {
            self.deviceKey = "device:\(appID)/\(deviceID)"
        } else {
            self.deviceKey = "key:" + Data(wireBytes).base64EncodedString()
        }
        self.source = source
    }
}
