import RainCore
import RainSystem

/// What rainwalletd reads in a `--store postgres://…` URL itself, without libpq: whether it holds a
/// password, and where, so the password can be kept out of the process's command line.
///
/// A URL needs no password: libpq reads the standard environment for whatever the URL leaves out
/// (`PGHOST`, `PGPORT`, `PGUSER`, `PGPASSWORD`, `PGDATABASE`, `PGSSLMODE`, `PGSERVICE`,
/// `PGCONNECT_TIMEOUT`, `PGAPPNAME`, …) and looks the password up in `PGPASSFILE` (by default
/// `~/.pgpass`, mode 0600), so `--store postgres://` or `--store postgres:///rainwallet` work.
package enum PostgresURL {
    /// The byte ranges of the passwords in one command-line argument that holds a PostgreSQL URL
    /// (`postgres://USER:PASSWORD@HOST/DB`, or `?password=…` in its query), after any prefix such
    /// as `--store=`. Follows libpq's URI parser: the user part ends at the first `@` before a `/`.
    package static func passwordRanges(in argument: [UInt8]) -> [Range<Int>] {
        guard let start = schemeEnd(argument) else { return [] }
        var ranges: [Range<Int>] = []
        var at: Int?
        var index = start
        while index < argument.count, argument[index] != UInt8(ascii: "/") {
            if argument[index] == UInt8(ascii: "@") {
                at = index
                break
            }
            index += 1
        }
        if let at, let colon = argument[start..<at].firstIndex(of: UInt8(ascii: ":")), colon + 1 < at {
            ranges.append((colon + 1)..<at)
        }
        if let question = argument[start...].firstIndex(of: UInt8(ascii: "?")) {
            var parameterStart = question + 1
            while parameterStart < argument.count {
                let end = argument[parameterStart...].firstIndex(of: UInt8(ascii: "&")) ?? argument.count
                let key = Array("password=".utf8)
                if end - parameterStart > key.count, argument[parameterStart..<(parameterStart + key.count)].elementsEqual(key) {
                    ranges.append((parameterStart + key.count)..<end)
                }
                parameterStart = end + 1
            }
        }
        return ranges
    }

    /// `postgres://HOST:PORT/DATABASE`: the database `url` names, validated by libpq's parser,
    /// with what it leaves out from the environment libpq reads; never the user or the password.
    /// - Throws: RAIN_102 (field `--store`) when it is not a valid PostgreSQL URL; RAIN_502 when
    ///   the PostgreSQL client library cannot be loaded.
    package static func databaseIdentity(_ url: String) throws(RainError) -> String {
        try PostgresConnection.databaseIdentity(url: url)
    }

    /// Whether `url` holds a password (which then shows in `ps` to every user of the machine).
    package static func hasPassword(_ url: String) -> Bool {
        !passwordRanges(in: Array(url.utf8)).isEmpty
    }

    /// When `url` holds a password: overwrites it in this process's command line (`ps` and
    /// `/proc/PID/cmdline` then show `*`) and logs a warning that says what to use instead. Neither
    /// the log nor anything else ever holds the password.
    package static func warnAboutPassword(in url: String, logger: Logger) {
        guard hasPassword(url) else { return }
        ProcessArguments.mask(passwordRanges(in:))
        logger.warning(
            "store.password_in_url",
            [
                "hint":
                    "the --store URL holds a password, which every user of this machine can read with ps until the daemon hides it; "
                    + "leave it out and put it in PGPASSFILE (~/.pgpass, mode 0600) or PGPASSWORD"
            ])
    }

    /// The index just after `postgres://` or `postgresql://` in `argument`, if it holds one.
    private static func schemeEnd(_ argument: [UInt8]) -> Int? {
        for scheme in ["postgresql://", "postgres://"] {
            let bytes = Array(scheme.utf8)
            guard argument.count >= bytes.count else { continue }
            for start in 0...(argument.count - bytes.count)
            where argument[start..<(start + bytes.count)].elementsEqual(bytes) {
                return start + bytes.count
            }
        }
        return nil
    }
}
