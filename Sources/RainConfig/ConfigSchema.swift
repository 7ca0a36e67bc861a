import RainAuthorityAPI
import RainCore
import RainKeyStore

/// Every key of the daemon's config file (`config.json`): its type, default and the check
/// `DaemonConfig.parse` applies, for the rainwallet-config(5) man page.
///
/// `ConfigSchemaTests` feeds each key's example to the parser (a key listed here that the parser
/// refuses fails it) and asks the parser for the keys each object allows (a key the parser takes
/// that is not listed here fails it), so the page cannot drift from the parser.
public enum ConfigSchema {
    /// One key. `NAME` in a path stands for any profile name; `[]` for each item of an array.
    public struct Key: Sendable, Equatable {
        /// The dotted path (`authority.sendLimits.contactMaxSends`).
        public var path: String
        /// The JSON type (`number`, `array of uids`).
        public var type: String
        /// The value when the key is left out.
        public var defaultValue: String
        /// What the value must be, and what it does.
        public var check: String
        /// A value the parser accepts, for the test.
        public var example: JSONValue
        /// True for a security setting: a change waits for the user's confirmation, and
        /// /etc/rainwallet/policy.json may fix it.
        public var isGuarded: Bool

        init(
            _ path: String, _ type: String, default defaultValue: String, _ check: String, example: JSONValue,
            isGuarded: Bool = false
        ) {
            self.path = path
            self.type = type
            self.defaultValue = defaultValue
            self.check = check
            self.example = example
            self.isGuarded = isGuarded
        }
    }

    static func seconds(_ d: Duration) -> String {
        let ms = d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000
        return ms % 1000 == 0 ? "\(ms / 1000)" : "\(Double(ms) / 1000)"
    }

    static func milliseconds(_ d: Duration) -> String {
        "\(d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000)"
    }

    /// Every key, objects first where they hold keys of their own.
    public static let keys: [Key] = {
        let authority = AuthoritySettings()
        let limits = authority.sendLimits
        let policy = RainWalletSessionPolicy()
        let uids = "array of uids"
        let uidCheck = "whole numbers from 0 to 4294967294"
        func window(_ name: String, _ d: Duration, _ what: String) -> Key {
            Key(
                "authority.sendLimits.\(name)", "number", default: seconds(d), "seconds from 1 to 86400: \(what)",
                example: .number(60))
        }
        func sends(_ name: String, _ n: Int, _ what: String) -> Key {
            Key(
                "authority.sendLimits.\(name)", "number", default: "\(n)", "a whole number from 1 to 1000000: \(what)",
                example: .number(5))
        }
        return [
            Key(
                "allowedUIDs", uids, default: "[]",
                "\(uidCheck): the users served besides the daemon's own, for every profile", example: .array([.number(1001)]),
                isGuarded: true),
            Key(
                "codeSender.type", "string", default: "\"outbox\"",
                "\"outbox\" (codes appended to outbox.jsonl in the state directory: development), \"command\" (a program "
                    + "run with the delivery as JSON on stdin), \"smtp\" or \"sms\" (email through codeSender.smtp, phone "
                    + "numbers through codeSender.sms; the type names the one required); required in a codeSender object",
                example: .string("outbox"), isGuarded: true),
            Key(
                "codeSender.command", "array of strings", default: "none",
                "for type \"command\" only: the program's absolute path, then its arguments",
                example: .array([.string("/usr/bin/true")]), isGuarded: true),
            Key(
                "codeSender.timeoutSeconds", "number", default: "10", "seconds from 0.1 to 300 the command may run",
                example: .number(5), isGuarded: true),
            Key(
                "codeSender.smtp", "object", default: "none",
                "for types \"smtp\" and \"sms\": the SMTP server email codes go through: host, port, security "
                    + "(\"starttls\", \"tls\", \"none\" to this machine only), from, fromName, credentialsFile (0600: user, "
                    + "then password), caFile, connectTimeoutSeconds, timeoutSeconds, appNames, templates (docs/operations.md, \"Sending codes\")",
                example: .object([
                    "host": .string("smtp.example.com"), "port": .number(587), "security": .string("starttls"),
                    "from": .string("codes@example.com"), "credentialsFile": .string("/etc/rainwallet/smtp-credentials"),
                ]), isGuarded: true),
            Key(
                "codeSender.sms", "object", default: "none",
                "for types \"smtp\" and \"sms\": the HTTPS gateway SMS codes go through: url, api (\"webhook\" with "
                    + "secretFile, or \"form\" with accountId, tokenFile, from), allowedCountryCodes, hourlyBudget, caFile, "
                    + "connectTimeoutSeconds, timeoutSeconds, appNames, templates (docs/operations.md, \"Sending codes\")",
                example: .object([
                    "url": .string("https://sms.example.com/send"), "api": .string("webhook"),
                    "secretFile": .string("/etc/rainwallet/sms-secret"), "allowedCountryCodes": .array([.string("1")]),
                ]), isGuarded: true),
            Key(
                "storage.provider", "string", default: "\"auto\"",
                "\"auto\", \"tpm2\", \"secret-service\" or \"file\": where the keys live; used at the first start only "
                    + "(the choice is recorded in the state directory; `rainwalletd storage migrate` changes it)",
                example: .string("file"), isGuarded: true),
            Key(
                "storage.tcti", "string", default: "\"\(KeyProviders.defaultTCTI)\"",
                "how tpm2-tss reaches the TPM: device, swtpm, mssim or tabrmd, then \":\" and its configuration; "
                    + "at most 256 bytes, one line",
                example: .string("swtpm:path=/run/swtpm.sock"), isGuarded: true),
            Key(
                "remoteAuthority", "object or \"embedded\"", default: "\"embedded\"",
                "the remote authority the device uses (--authority and --authority-ca win over it): a start that names "
                    + "another one than the confirmed setting exits 78",
                example: .object(["address": .string("authority.example.com:7420")]), isGuarded: true),
            Key(
                "remoteAuthority.address", "string", default: "none",
                "HOST:PORT of `rainwalletd authority` (loopback only without ca); required in a remoteAuthority object",
                example: .string("authority.example.com:7420"), isGuarded: true),
            Key(
                "remoteAuthority.ca", "string", default: "none (plain TCP)",
                "the absolute path of the PEM file of the CA that issued the authority's certificate (TLS 1.3); its "
                    + "bytes are part of the confirmed setting",
                example: .string("/etc/rainwallet/authority-ca.pem"), isGuarded: true),
            Key(
                "remoteAuthority.caSHA256", "string", default: "the CA file's, read at start",
                "64 hex digits pinning the CA file's SHA-256 (root's policy sets it to fix the CA's content), with ca",
                example: .string(String(repeating: "ab", count: 32)), isGuarded: true),
            Key(
                "access.pinentry", "string",
                default: "the first of pinentry-gnome3, pinentry-qt, pinentry-curses, pinentry-tty in /usr/bin",
                "the absolute path of the pinentry program that asks the user to confirm",
                example: .string("/usr/bin/pinentry-tty"),
                isGuarded: true),
            Key(
                "access.apps.NAME", "array of objects", default: "none",
                "apps of profile NAME approved in advance", example: .array([]), isGuarded: true),
            Key(
                "access.apps.NAME[].path", "string", default: "required",
                "the app's absolute path (for an interpreter: \"/usr/bin/python3 /opt/tool.py\")",
                example: .string("/usr/bin/mywallet"), isGuarded: true),
            Key(
                "access.apps.NAME[].sha256", "string", default: "any content",
                "64 hex digits: the SHA-256 of the program (sha256sum)", example: .string(String(repeating: "ab", count: 32)),
                isGuarded: true),
            Key(
                "access.apps.NAME[].allowWritableCode", "boolean", default: "false",
                """
                let the app run code its user can write: a JIT's anonymous executable memory (node, Java, \
                Electron), a memfd, a library the user owns; any other app doing so is never approved
                """, example: .bool(true), isGuarded: true),
            Key(
                "authority.codeLifetimeSeconds", "number", default: seconds(authority.codeLifetime),
                "seconds from 1 to 3600 a login code stays valid", example: .number(120)),
            Key(
                "authority.maxWrongAttempts", "number", default: "\(authority.maxWrongAttempts)",
                "from 1 to 10: wrong codes before a code is spent", example: .number(3)),
            Key(
                "authority.maxActiveCodesPerAccount", "number", default: "\(authority.maxActiveCodesPerAccount)",
                "from 1 to 10: codes an account may have pending", example: .number(2)),
            Key(
                "authority.accessTokenLifetimeSeconds", "number", default: seconds(authority.accessTokenLifetime),
                "seconds from 2 to 86400 an access token lives", example: .number(600)),
            Key(
                "authority.refreshTokenLifetimeSeconds", "number", default: seconds(authority.refreshTokenLifetime),
                "seconds from 10 to 31536000 a session lives from its last refresh (the refresh token's lifetime)",
                example: .number(2_592_000)),
            Key(
                "authority.devOutbox", "boolean", default: "\(authority.isDevOutboxEnabled)",
                "serve the development outbox (codes in clear: development only)", example: .bool(true)),
            Key(
                "authority.passkeyCeremonyLifetimeSeconds", "number", default: seconds(authority.passkeyCeremonyLifetime),
                "seconds from 10 to 3600 a passkey ceremony may take", example: .number(60)),
            Key(
                "authority.sendLimits.contactCooldownSeconds", "number", default: seconds(limits.contactCooldown),
                "seconds from 0 to 3600 between two codes to one contact", example: .number(30)),
            sends("contactMaxSends", limits.contactMaxSends, "codes to one contact per contact window"),
            window("contactWindowSeconds", limits.contactWindow, "the contact window"),
            sends("accountMaxSends", limits.accountMaxSends, "codes for one account per account window"),
            window("accountWindowSeconds", limits.accountWindow, "the account window"),
            sends("contactAllAppsMaxSends", limits.contactAllAppsMaxSends, "codes to one contact per window, whatever the app"),
            window("contactAllAppsWindowSeconds", limits.contactAllAppsWindow, "the contact-all-apps window"),
            sends("sourceMaxSends", limits.sourceMaxSends, "codes per source address per source window"),
            window("sourceWindowSeconds", limits.sourceWindow, "the source window"),
            sends(
                "deviceKeyMaxWrongGuesses", limits.deviceKeyMaxWrongGuesses,
                "wrong codes per device key per guess window, across every account"),
            sends(
                "sourceMaxWrongGuesses", limits.sourceMaxWrongGuesses, "wrong codes per source per guess window (the uid here)"),
            window("guessWindowSeconds", limits.guessWindow, "the guess window"),
            Key(
                "authority.pruneIntervalSeconds", "number", default: seconds(authority.pruneInterval),
                "seconds from 1 to 86400 between two prunings of old codes, sessions and outbox lines", example: .number(600)),
            Key(
                "authority.pruneRetentionSeconds", "number", default: seconds(authority.pruneRetention),
                "seconds from 1 to 31536000 they are kept once expired or revoked", example: .number(86400)),
            Key(
                "profiles.NAME.appID", "string", default: "NAME",
                "1 to 128 characters: the app the profile belongs to (accounts live within an app); NAME is 1 to 64 of "
                    + "a-z, 0-9 and '-', starting with a letter or digit",
                example: .string("myapp")),
            Key(
                "profiles.NAME.passkeyDomain", "string", default: "none (no passkeys)",
                "the passkey relying-party domain: a registrable domain name, not a public suffix; set here, it "
                    + "is moved only here (edit and restart), never by an app",
                example: .string("example.com")),
            Key(
                "profiles.NAME.androidCertificateFingerprints", "array of strings", default: "[]",
                "SHA-256 fingerprints of the Android app's signing certificates, 32 hex pairs separated by colons "
                    + "(AB:CD:...): each adds an android:apk-key-hash origin to the passkey ceremonies",
                example: .array([.string(Array(repeating: "AB", count: 32).joined(separator: ":"))])),
            Key(
                "profiles.NAME.allowExport", "boolean", default: "false",
                "whether recovery phrases and keys may be exported (never from a client)", example: .bool(true),
                isGuarded: true),
            Key(
                "profiles.NAME.allowedUIDs", uids, default: "[]", "\(uidCheck): users allowed to use this profile",
                example: .array([.number(1002)]), isGuarded: true),
            Key(
                "profiles.NAME.sessionPolicy.refreshBufferSeconds", "number", default: seconds(policy.refreshBuffer),
                "seconds from 0 to 3600 before expiry at which the session is refreshed", example: .number(30)),
            Key(
                "profiles.NAME.sessionPolicy.autoRefresh", "boolean", default: "\(policy.isAutoRefreshEnabled)",
                "whether the daemon refreshes the session by itself", example: .bool(false)),
            Key(
                "profiles.NAME.sessionPolicy.transientRetries", "number", default: "\(policy.transientRetries)",
                "from 0 to 10: retries of a refresh that failed for a transient reason", example: .number(1)),
            Key(
                "profiles.NAME.sessionPolicy.retryInitialDelayMilliseconds", "number",
                default: milliseconds(policy.retryInitialDelay), "milliseconds from 1 to 60000 before the first retry",
                example: .number(200)),
            Key(
                "profiles.NAME.sessionPolicy.retryMaxDelayMilliseconds", "number", default: milliseconds(policy.retryMaxDelay),
                "milliseconds from 1 to 600000, not less than retryInitialDelayMilliseconds: the longest delay between retries",
                example: .number(8000)),
            Key(
                "profiles.NAME.sessionPolicy.activeThresholdSeconds", "number", default: seconds(policy.activeThreshold),
                "seconds from 0 to 3600: a session closer than this to expiry does not count as active",
                example: .number(5)),
            Key(
                "profiles.NAME.sessionPolicy.restoreTimeoutSeconds", "number", default: seconds(policy.restoreTimeout),
                "seconds from 0 to 60 a call waits for the stored session to load", example: .number(2)),
        ]
    }()
}
