import FoundationEssentials
import Glibc
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainStore
import RainWire

/// The authority running in-process: accounts, login codes, wallets and session tokens on an
/// `AuthorityStore` (SQLite in the state directory by default), codes delivered by a `CodeSender`
/// (the development outbox by default).
///
/// Rules (README "Error codes", login-code rules): 6-digit codes from a CSPRNG, stored only as a keyed hash bound to the
/// challenge, compared in constant time; 5-minute lifetime; locked after 3 wrong attempts; a resend
/// or another contact on the same device retires the device's pending code; at most 3 live codes
/// per account across devices (a 4th retires the oldest). A first login creates the account and
/// its wallet; every login revokes the account's sessions on other devices. Codes and tokens are
/// never logged.
///
/// Sessions: a session is bound at login to the device's public key (Ed25519, or
/// P-256 from a TPM). Every call with one of its tokens must come with a `DeviceProof` of that key
/// (the keys its connection proved, or the device's own keys in-process); no proof is RAIN_501 and
/// changes nothing, a proof by another key revokes the whole session. Each refresh rotates both
/// tokens to a pair derived from the old refresh token (`AuthorityKeys.rotatedTokens(from:)`), so a
/// repeat within `AuthoritySettings.refreshGraceWindow` gets the same pair; the old access token
/// stops working at once. Any other reuse of a rotated token revokes the whole session.
public final class EmbeddedAuthority: Authority {
    /// Where data lives.
    package let store: any AuthorityStore
    /// The derived keys.
    public let keys: AuthorityKeys
    /// Lifetimes and limits.
    public let settings: AuthoritySettings
    let clock: any RainClock
    /// Where this process's own sends come from (the daemon's uid), for the per-source limit
    /// when a send is not served for a remote caller.
    let localSource: SendSource
    let sender: any CodeSender
    private let outbox: OutboxCodeSender?
    let logger: Logger
    /// Where this authority announces the sessions it revoked: its server pushes them to
    /// the devices' streams; an embedded authority's device daemon ends its own sessions from it.
    public let revocations = RevocationHub()
    /// Code deliveries and send-limit refusals, counted always (`metricFamilies`).
    public let metrics = AuthorityMetrics()

    /// An authority on an explicit store and keys.
    /// - Parameters:
    ///   - sender: delivers codes.
    ///   - outbox: the outbox `listOutbox()` reads, or nil when there is none (then it is RAIN_202).
    package init(
        store: any AuthorityStore, keys: AuthorityKeys, settings: AuthoritySettings = AuthoritySettings(),
        clock: any RainClock = SystemClock(), sender: any CodeSender, outbox: OutboxCodeSender?, logger: Logger
    ) {
        self.store = store
        self.keys = keys
        self.settings = settings
        self.clock = clock
        self.localSource = .uid(getuid())
        self.sender = sender
        self.outbox = outbox
        self.logger = logger
    }

    /// An authority on `stateDirectory` (created 0700 if missing): `authority.key`,
    /// `authority.sqlite3` and, with the default sender, `outbox.jsonl`. Once the store is
    /// migrated, every wallet still missing its keys is backfilled (`backfillWallets()`). With the
    /// development outbox off (`settings.isDevOutboxEnabled`), an `outbox.jsonl` left from when it
    /// was on is removed: its codes are in clear and nobody may read them any more.
    /// - Parameters:
    ///   - sender: delivers codes; nil means the outbox in the state directory. An
    ///     `OutboxCodeSender` passed here is also the one `listOutbox` reads.
    ///   - store: an opened store (a shared `PostgresAuthorityStore`); nil means
    ///     `authority.sqlite3` in the state directory.
    ///   - masterKey: the master key from the device's key provider, checked against the store
    ///     (`StoreKeyBinding`) like a key file's; nil means `authority.key` in the state directory,
    ///     created only while the store holds no data.
    ///   - senderOnStore: makes the sender once the store is open, when the sender keeps state in
    ///     it (the SMS sender's hourly budget); what it returns replaces `sender`, nil
    ///     leaves `sender`.
    /// - Throws: RAIN_102 `master_key_mismatch` or `master_key_missing` when `authority.key` is not
    ///   the store's master key or is missing beside data; RAIN_102 `schema_too_new` when a newer
    ///   build migrated the store past what this one may share; RAIN_502 when the key file or the
    ///   database cannot be opened, or a backfill fails; what `senderOnStore` throws.
    package convenience init(
        stateDirectory: String, settings: AuthoritySettings = AuthoritySettings(), clock: any RainClock = SystemClock(),
        sender: (any CodeSender)? = nil, store: (any AuthorityStore)? = nil, masterKey: SymmetricKey? = nil,
        logger: Logger, senderOnStore: ((any AuthorityStore) throws(RainError) -> (any CodeSender)?)? = nil
    ) async throws(RainError) {
        let provided =
            if let masterKey { try await AuthorityKeys.load(stateDirectory: stateDirectory, masterKey: masterKey) } else {
                AuthorityKeys?.none
            }
        if provided == nil {
            // Checks the state directory before the store's file is made in it.
            _ = try await AuthorityKeys.loadExisting(stateDirectory: stateDirectory)
        }
        let opened: any AuthorityStore =
            if let store { store } else { try await SQLiteAuthorityStore.open(stateDirectory: stateDirectory) }
        if let schema = opened.schemaCompatibility, schema.isStoreNewer {
            // Allowed (the store says this build may share it), but an operator mid-upgrade should see it.
            logger.warning(
                "store.schema_newer",
                [
                    "storeVersion": String(schema.storeVersion), "buildVersion": String(schema.buildVersion),
                    "readableFrom": String(schema.readableFrom),
                    "hint": "a newer instance migrated the store; this one may share it: upgrade it soon",
                ])
        }
        let keys: AuthorityKeys
        let storeSender: (any CodeSender)?
        do {
            // The key must be the store's, whoever holds it: a key file, or the device daemon's key
            // provider (which `DaemonKeys` creates only beside no database). A provider's key that
            // is not the store's (a backup of another state directory restored) would open no
            // wallet and check no token.
            if let provided {
                try await StoreKeyBinding.check(
                    provided, store: opened, holder: "the master key of the daemon's key provider",
                    fix: "Restore this state directory's master key from its backup (rainwalletd storage restore "
                        + "FILE, daemon stopped)", logger: logger)
                keys = provided
            } else {
                keys = try await StoreKeyBinding.keys(stateDirectory: stateDirectory, store: opened, logger: logger)
            }
            storeSender = try senderOnStore?(opened)
        } catch {
            if store == nil { await opened.close() }
            throw error
        }
        if !settings.isDevOutboxEnabled {
            do {
                if try await OutboxCodeSender.removeFile(stateDirectory: stateDirectory) {
                    logger.warning(
                        "outbox.removed",
                        ["file": OutboxCodeSender.fileName, "why": "the development outbox is off; its codes were in clear"])
                }
            } catch {
                if store == nil { await opened.close() }
                throw error
            }
        }
        let chosen =
            storeSender ?? sender ?? OutboxCodeSender(stateDirectory: stateDirectory, logger: logger.child("outbox"))
        self.init(
            store: opened, keys: keys, settings: settings, clock: clock, sender: chosen,
            outbox: chosen as? OutboxCodeSender, logger: logger)
        // Wallets created before they had keys (schema version 2 and earlier) get them now.
        try await backfillWallets()
    }

    /// The development outbox (see `Authority.listOutbox`).
    /// - Throws: RAIN_202 unless `settings.isDevOutboxEnabled` and an outbox sender is configured.
    public func listOutbox(_ request: ListOutboxRequest, caller: AuthorityCaller) async throws(RainError)
        -> ListOutboxResponse
    {
        guard settings.isDevOutboxEnabled, let outbox else {
            throw RainError(.unauthorized, "the development outbox is disabled")
        }
        return ListOutboxResponse(deliveries: try await outbox.entries())
    }

    /// Deletes, in one pass: challenges and passkey ceremonies that expired more than
    /// `settings.pruneRetention` ago (challenges are kept at least `sendLimits.longestWindow`
    /// whatever the retention, since the send limits count them), sessions revoked more than
    /// `settings.pruneRetention` ago, refresh-token hashes rotated out more than
    /// `refreshTokenLifetime` ago (beyond the previous generation, which each session keeps;
    /// presenting such an old token is then refused as unknown, `refresh_rejected`, instead of
    /// revoking the session as reuse), and development-outbox deliveries sent more than
    /// `settings.pruneRetention` ago, wrong guesses made before the challenges' cutoff (it covers
    /// the guess window), and the SMS budget's slots that left its window
    /// (`SMSCodeSender.budgetWindow`). Logs one `prune` line with the counts (never contents).
    /// - Throws: RAIN_502 when the store or the outbox file fails.
    @discardableResult
    package func pruneExpired() async throws(RainError) -> PruneResult {
        let now = clock.now
        let cutoff = now.adding(.zero - settings.pruneRetention)
        let challengeCutoff = now.adding(.zero - settings.challengeRetention)
        var result = try await store.prune(
            challengesExpiredBefore: challengeCutoff, sessionsRevokedBefore: cutoff,
            refreshTokensRetiredBefore: now.adding(.zero - settings.refreshTokenLifetime),
            smsSlotsTakenBefore: now.adding(.zero - SMSCodeSender.budgetWindow))
        if let outbox { result.outboxEntriesDeleted = try await outbox.prune(olderThan: cutoff) }
        logger.info(
            "prune",
            [
                "challenges": String(result.challengesDeleted), "sessions": String(result.sessionsDeleted),
                "retiredRefreshTokens": String(result.retiredRefreshTokensDeleted),
                "passkeyCeremonies": String(result.passkeyCeremoniesDeleted),
                "outbox": String(result.outboxEntriesDeleted), "smsSlots": String(result.smsSlotsDeleted),
                "codeGuesses": String(result.codeGuessesDeleted),
            ])
        return result
    }

    static func requireNormalized(_ contact: RainWalletContact) throws(RainError) {
        let normalized = try contact.normalized()
        guard normalized == contact else {
            throw RainError.invalid(
                "the contact is not normalized; pass it through RainWalletContact.normalized() first",
                field: contact.kindName, reason: "not_normalized")
        }
    }

    /// The device key of a login: nil for an empty one (an unbound session), RAIN_102 (field
    /// `devicePublicKey`) for anything but a raw 32-byte Ed25519 key or a 65-byte uncompressed
    /// P-256 point (`DevicePublicKey(wireBytes:)`).
    static func deviceKey(_ bytes: [UInt8]) throws(RainError) -> DevicePublicKey? {
        guard !bytes.isEmpty else { return nil }
        return try DevicePublicKey(wireBytes: bytes)
    }

    /// RAIN_102 (field `appId`, reason `app_not_served`) for an app id outside
    /// `AuthoritySettings.servedAppIDs`, or one that is empty or too long.
    func requireServed(_ appID: String) throws(RainError) {
        try Self.requireIdentifier(appID, field: "appId")
        guard let served = settings.servedAppIDs, !served.contains(appID) else { return }
        let shown = appID.utf8.count <= 64 ? appID : String(decoding: appID.utf8.prefix(64), as: UTF8.self) + "…"
        throw RainError.invalid(
            "this authority does not serve app id \"\(shown)\"; start it with that app in --apps, or use one of "
                + served.sorted().joined(separator: ", "),
            field: "appId", reason: Self.appNotServedReason)
    }

    /// The `details.reason` of a call for an app the authority does not serve.
    public static let appNotServedReason = "app_not_served"

    static func requireIdentifier(_ value: String, field: String) throws(RainError) {
        guard !value.isEmpty, value.utf8.count <= 256 else {
            throw RainError.invalid("\(field) must be 1 to 256 bytes", field: field)
        }
    }

    static func isWellFormedCode(_ code: String) -> Bool {
        let bytes = Array(code.utf8)
        return bytes.count == 6 && bytes.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
    }
}
