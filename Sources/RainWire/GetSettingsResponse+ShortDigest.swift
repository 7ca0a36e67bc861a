extension GetSettingsResponse {
    /// How many hex digits of a settings digest the prompt shows when the changes do not fit on
    /// it: 64 bits, too many to find another config with the same short digest.
    public static let shortDigestLength = 16

    /// The start of `digest` the prompt shows and `rainwallet settings` prints.
    public static func shortDigest(_ digest: String) -> String { String(digest.prefix(shortDigestLength)) }
}
