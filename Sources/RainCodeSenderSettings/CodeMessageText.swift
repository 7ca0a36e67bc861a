import RainCore

/// What the SMTP and SMS senders and their settings share: templates filled with the code, the
/// app's name and the expiry; the refusal of control characters (no header injection); the secret
/// files. The checks of configured values are here, with the settings; filling a template and
/// reading a secret file are the senders' (RainAuthority's extension).
///
/// Placeholders: `{{code}}`, `{{app}}` (the app's name: `appNames[appId]`, else the app id),
/// `{{minutes}}` (whole minutes until expiry, rounded up) and `{{expires}}` (the expiry in UTC,
/// RFC 3339).
public enum CodeMessageText {
    /// True for a Unicode control character (C0, DEL, C1) or a line or paragraph separator.
    static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar.value == 0x2028
            || scalar.value == 0x2029
    }

    /// Refuses a one-line value (a contact, an address, an app name, a subject) holding CR, LF or
    /// any other control character: it would end a header and start another.
    /// - Throws: RAIN_102 (`details.field` `field`).
    public static func requireSingleLine(_ value: String, field: String) throws(RainError) {
        if value.unicodeScalars.contains(where: isControl) {
            throw RainError.invalid(
                "\(field) holds a line break or another control character, which could forge message headers; remove it",
                field: field)
        }
    }

    /// Refuses a body template holding a control character other than a line feed or a tab.
    /// - Throws: RAIN_102 (`details.field` `field`).
    static func requireBodyText(_ value: String, field: String) throws(RainError) {
        if value.unicodeScalars.contains(where: { isControl($0) && $0 != "\n" && $0 != "\t" }) {
            throw RainError.invalid(
                "\(field) holds a control character (only line feeds and tabs may be in a body); remove it",
                field: field)
        }
    }

    /// True for a host name that is this machine: `localhost`, `127.0.0.0/8` or `::1`.
    static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host == "[::1]" || host.hasPrefix("127.")
    }
}
