import RainCore

/// The security keys registered to confirm actions with a touch (`rainwallet prompt add-key`),
/// kept in `<state>/confirmation-keys.json` (`ConfirmationKeyStore`), sealed under the storage key
/// like the other prompt settings: a program of the user that could edit the file could otherwise
/// put in a key of its own, or remove the touch altogether.
public struct ConfirmationKeyRecord: SealedRecordValue, Equatable {
    /// One registered key.
    public struct Key: Codable, Sendable, Equatable {
        /// The credential ID, hex.
        public var credentialID: String
        /// The credential's public key (COSE_Key bytes), hex.
        public var publicKey: String
        /// The key's product name; empty when it gave none.
        public var name: String

        /// A key.
        public init(credentialID: String, publicKey: String, name: String) {
            self.credentialID = credentialID
            self.publicKey = publicKey
            self.name = name
        }
    }

    /// The keys, oldest first.
    public var keys: [Key]

    /// A record.
    public init(keys: [Key] = []) { self.keys = keys }

    public static let sealedFile = SealedRecordFile(
        fileName: "confirmation-keys.json", purpose: "rainwalletd confirmation keys v1", name: "confirmation keys",
        startOver: "remove the file, then add your keys again with `rainwallet prompt add-key`")
}

/// The confirmation keys, in `<state>/confirmation-keys.json`.
public typealias ConfirmationKeyStore = SealedRecordStore<ConfirmationKeyRecord>
