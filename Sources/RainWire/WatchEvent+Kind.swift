// The CLI prints an event's kind by name (`rainwallet session watch`), so the kind is a closed Swift
// enum over those names rather than the wire's open number (WalletEnums+ProtobufC.swift converts).
extension WatchEvent {
    /// What changed.
    public enum Kind: String, Sendable, Hashable {
        case authState, sessionState, sessionExpired
        /// The link to the authority changed, its revocation stream included (`state.authorityLink`).
        case authorityLink
        /// The daemon's keys became usable or unusable (`state.storage`).
        case storage
    }
}
