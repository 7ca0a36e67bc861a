import Dispatch
import FoundationEssentials
import Glibc
import RainAuthority
import RainAuthorityAPI
import RainCommandLine
import RainConfig
import RainCore
import RainCrypto
import RainDevice
import RainKeyStore
import RainSystem
import RainTransport

/// `rainwalletd storage …`: the state directory's keys, seen and moved with the daemon's own code:
/// which provider holds them, a passphrase backup of the embedded authority's master key and its
/// restore, and a migration to another provider. Restore and migrate take the state directory's
/// lock: the daemon must be stopped.
enum StorageCommand {
    static let stateDirectoryOption = Command.Option(
        "--state-dir", value: "DIR", help: "the daemon's state directory", kind: .directory,
        default: .computed("$XDG_STATE_HOME/rainwallet or ~/.local/state/rainwallet"))
    static let passphraseFileOption = Command.Option(
        "--passphrase-file", value: "FILE",
        help: "read the passphrase from the first line of FILE (this user's, mode 0600) instead of the terminal or stdin",
        kind: .file)
    static let configOption = Command.Option(
        "--config", value: "FILE", help: "the daemon's JSON config (storage.provider, storage.tcti)", kind: .file,
        default: .computed("$XDG_CONFIG_HOME/rainwallet/config.json; optional there"))

    static let declaration = Command(
        name: "storage",
        abstract: "see, back up, restore, migrate and reset the keys (storage.provider)",
        discussion: """
            The keys of a state directory live in one provider: tpm2 (sealed by the TPM), secret-service
            (the user's keyring) or file (0600 files in the state directory). The first start records
            the choice (storage.provider, auto by default) in <state>/key-provider; only `migrate`
            changes it. After a lost or cleared TPM (the daemon answers RAIN_501 tpm_key_lost), `reset`
            moves the keys it cannot open aside so that you can log in again. On the state directory
            of `rainwalletd authority`, status, backup and restore work on its authority.key.
            """,
        subcommands: [
            Command(
                name: "status", abstract: "the provider, the key ids and what each key protects",
                options: [stateDirectoryOption, configOption, .flag("--json", help: "machine-readable output")]),
            Command(
                name: "backup",
                abstract: "write the authority's master key, encrypted under a passphrase",
                discussion: """
                    The passphrase is read from the terminal (twice, not echoed), as one line of stdin,
                    or from --passphrase-file, never from the command line. The file is
                    PBKDF2-HMAC-SHA256 (600,000 iterations) and AES-256-GCM, mode 0600. Without a
                    backup, a lost TPM loses every wallet of an embedded authority, and a lost
                    authority.key every wallet of an authority server.
                    """,
                options: [
                    stateDirectoryOption, configOption, passphraseFileOption,
                    Command.Option("--out", value: "FILE", help: "the backup file to write", kind: .file, isRequired: true),
                    .flag("--force", help: "replace FILE when it exists"),
                ]),
            Command(
                name: "restore",
                abstract: "put a backed-up master key into the provider (daemon stopped)",
                discussion: """
                    For a state directory whose master key is gone (a lost TPM, a new machine with the
                    database copied over). Refused when another master key is there. Nothing is written
                    unless the passphrase opens the backup. An authority server's state directory gets
                    the key as its authority.key (mode 0600); give --authority-server when the
                    directory holds nothing yet.
                    """,
                arguments: [Command.Argument("FILE", help: "a file written by `rainwalletd storage backup`", kind: .file)],
                options: [
                    stateDirectoryOption, configOption, passphraseFileOption,
                    .flag(
                        "--authority-server",
                        help: "the state directory is (or will be) a `rainwalletd authority`'s, even while it is empty"),
                    .flag(
                        "--force",
                        help: "an authority server's: replace another authority.key (moved aside to authority.key.replaced-TIME)"),
                ]),
            Command(
                name: "migrate",
                abstract: "move the keys to another provider (daemon stopped)",
                discussion: """
                    Creates a new storage key and a new device key in the target, copies the master key
                    unchanged (the database's token hashes and wallet encryption derive from it), has the
                    authority accept both device keys, re-encrypts every session file, records the new
                    provider, has the authority confirm the new device key, then deletes the old keys.
                    A journal makes it resumable: after a kill, run it again or start the daemon.
                    """,
                options: [
                    stateDirectoryOption, configOption,
                    Command.Option(
                        "--to", value: "PROVIDER", help: "the target provider",
                        kind: .choice(KeyProviderKind.allCases.map(\.rawValue)), isRequired: true),
                    Command.Option(
                        "--authority", value: "HOST:PORT", help: "the remote authority the daemon uses (--authority)"),
                    Command.Option(
                        "--authority-ca", value: "PEM", help: "its CA certificates (--authority-ca)", kind: .file,
                        requires: ["--authority"]),
                ]),
            Command(
                name: "reset",
                abstract: "move aside the keys a lost or cleared TPM cannot open (daemon stopped)",
                discussion: """
                    For RAIN_501 tpm_key_lost: the keys were sealed by another TPM, or this one's owner
                    hierarchy was cleared (a new motherboard, a firmware reset), and nothing can open them
                    again. Moves them, and the files they encrypted or bound (sessions/, the sealed records
                    apps.json, confirmed-settings.json and prompt-place.json, device-id), into a dated
                    lost-<time> directory inside the state directory; nothing is deleted. The next start makes new keys under the recorded
                    provider: log in again. The embedded authority's wallets need its master key: when it
                    is lost too, reset changes nothing and says so; restore the key from your backup first
                    (`rainwalletd storage restore BACKUP`), or give --lose-wallets to move the authority's
                    database aside as well (every wallet in it is lost; the next start makes a new one).
                    """,
                options: [
                    stateDirectoryOption, configOption,
                    .flag("--lose-wallets", help: "also move the embedded authority's database aside (no master-key backup)"),
                    .flag("--json", help: "machine-readable output"),
                ]),
        ],
        exitStatuses: [.init(0, "done"), .init(1, "failed"), .init(64, "a usage mistake")])

    /// Runs `rainwalletd storage SUBCOMMAND`; returns the exit status.
    static func run(_ parsed: ParsedCommand) -> Int32 {
        let logger = Logger(label: "rainwalletd-storage", minimumLevel: .warning)
        let paths = DaemonPaths.resolve(stateDirectory: parsed.value("--state-dir"), config: parsed.value("--config"))
        do throws(RainError) {
            if let lines = try runOnAuthorityServer(parsed, stateDirectory: paths.stateDirectory) {
                lines.forEach { print($0) }
                return 0
            }
            if parsed.flag("--force"), parsed.command.name == "restore" {
                throw RainError.invalid(
                    "--force applies to an authority server's state directory only", field: "--force")
            }
            let config = try DaemonConfig.load(path: paths.config, isRequired: paths.isConfigExplicit)
            let context = Context(stateDirectory: paths.stateDirectory, storage: config.storage, logger: logger)
            switch parsed.command.name {
            case "status": try context.status(isJSON: parsed.flag("--json"))
            case "backup":
                try context.backup(
                    to: parsed.value("--out") ?? "", isForced: parsed.flag("--force"),
                    passphraseFile: parsed.value("--passphrase-file"))
            case "restore":
                try context.restore(from: parsed.argument("FILE") ?? "", passphraseFile: parsed.value("--passphrase-file"))
            case "reset": try context.reset(loseWallets: parsed.flag("--lose-wallets"), isJSON: parsed.flag("--json"))
            case "migrate":
                let target = try KeyProviderChoice(parsing: parsed.value("--to") ?? "")
                guard case .provider(let kind) = target else { throw RainError.invalid("--to names a provider", field: "--to") }
                try context.migrate(
                    to: kind, authority: parsed.value("--authority"), authorityCA: parsed.value("--authority-ca"))
            default:
                print(HelpFormatter(root: Daemon.declaration).help(for: parsed.path))
                return 64
            }
            return 0
        } catch {
            Daemon.writeStderr("rainwalletd storage: error: \(error.code): \(error.message)\n")
            return 1
        }
    }

    /// Runs `status`, `backup` and `restore` on an authority server's state directory; nil when the
    /// directory is a device daemon's (or the subcommand is not one of those).
    static func runOnAuthorityServer(_ parsed: ParsedCommand, stateDirectory: String) throws(RainError) -> [String]? {
        let name = parsed.command.name
        let isAuthority =
            AuthorityStorage.isAuthorityStateDirectory(stateDirectory)
            || (name == "restore" && parsed.flag("--authority-server"))
        guard isAuthority else { return nil }
        if FileManager.default.fileExists(atPath: KeyProviderRecord.path(stateDirectory: stateDirectory)) {
            // --authority-server on a device daemon's directory: its master key lives in its provider.
            throw RainError.invalid(
                "\(stateDirectory) is a device daemon's state directory (it has a key-provider record): drop "
                    + "--authority-server", field: "--authority-server")
        }
        let storage = AuthorityStorage(stateDirectory: stateDirectory)
        let file = parsed.value("--passphrase-file")
        switch name {
        case "status":
            return try storage.status(isJSON: parsed.flag("--json"))
        case "backup":
            let line = try storage.backup(to: parsed.value("--out") ?? "", isForced: parsed.flag("--force")) {
                () throws(RainError) in try passphrase(file: file, isNew: true)
            }
            return [line]
        case "restore":
            let path = parsed.argument("FILE") ?? ""
            guard let bytes = try AtomicFile.read(path, limit: 4096, options: [.noFollow]) else {
                throw RainError.invalid("\(path) does not exist", field: "FILE")
            }
            return try storage.restore(backup: bytes, isForced: parsed.flag("--force")) { () throws(RainError) in
                try passphrase(file: file, isNew: false)
            }
        default:
            throw RainError.invalid(
                "\(stateDirectory) is the state directory of `rainwalletd authority`: `storage \(name)` is for a "
                    + "device daemon's; status, backup and restore work here", field: "state-dir")
        }
    }

    /// The backup's passphrase: from `file` when given, else the terminal (asked twice for a new
    /// backup) or one line of stdin. Never from the command line, which every user can read.
    static func passphrase(file: String?, isNew: Bool) throws(RainError) -> [UInt8] {
        if let file { return try PassphraseInput.read(file: file) }
        return try PassphraseInput.read(prompt: "Backup passphrase: ", confirm: isNew ? "Repeat the passphrase: " : nil)
    }

    /// What every subcommand works on.
    struct Context {
        let stateDirectory: String
        let storage: StorageSettings
        let logger: Logger

        var make: KeyProviderSelection.Factory { DaemonKeys.factory(stateDirectory: stateDirectory, storage: storage) }

        /// The recorded provider.
        /// - Throws: RAIN_102 when the state directory has none (the daemon never started there).
        func recordedProvider() throws(RainError) -> any KeyProvider {
            guard let kind = try KeyProviderRecord.read(stateDirectory: stateDirectory) else {
                throw RainError.invalid(
                    "\(stateDirectory) has no key-provider record: start rainwalletd once first (for the state "
                        + "directory of `rainwalletd authority`, give the directory that holds its authority.key)",
                    field: "state-dir")
            }
            return try make(kind)
        }

        func status(isJSON: Bool) throws(RainError) {
            let status = try StorageStatus.read(
                provider: try recordedProvider(), stateDirectory: stateDirectory, make: make, logger: logger)
            if isJSON {
                print(status.jsonText)
            } else {
                status.humanLines(command: "rainwalletd storage migrate").forEach { print($0) }
            }
        }

        func backup(to path: String, isForced: Bool, passphraseFile: String?) throws(RainError) {
            let provider = try recordedProvider()
            try provider.checkAvailable()
            guard let master = try provider.loadSecret(.authorityMaster) else {
                throw RainError(
                    .unauthorized,
                    """
                    there is no master key in \(provider.location): this device uses a remote authority, whose \
                    master key is backed up where it runs (its authority.key)
                    """, details: RainError.Details(reason: "no_master_key"))
            }
            if !isForced, FileManager.default.fileExists(atPath: path) {
                throw RainError.invalid("\(path) exists; give --force to replace it", field: "--out")
            }
            let passphrase = try StorageCommand.passphrase(file: passphraseFile, isNew: true)
            let bytes = try MasterKeyBackup.seal(master, passphrase: passphrase)
            try AtomicFile.write(bytes, to: path, mode: 0o600)
            print("master key \(master.keyID) written to \(path) (keep the passphrase apart from the file)")
        }

        func restore(from path: String, passphraseFile: String?) throws(RainError) {
            let lock = try Daemon.openStateDirectory(stateDirectory, role: "rainwalletd storage restore")
            defer { withExtendedLifetime(lock) {} }
            guard let bytes = try AtomicFile.read(path, limit: 4096, options: [.noFollow]) else {
                throw RainError.invalid("\(path) does not exist", field: "FILE")
            }
            let provider = try DaemonKeys.selectProvider(stateDirectory: stateDirectory, storage: storage, logger: logger)
            try provider.checkAvailable()
            let passphrase = try StorageCommand.passphrase(file: passphraseFile, isNew: false)
            let master = try MasterKeyBackup.open(bytes, passphrase: passphrase)
            let present: SymmetricKey?
            do {
                present = try provider.loadSecret(.authorityMaster)
            } catch  where StorageReset.isLost(error) {
                // Sealed by a lost or cleared TPM: kept aside, the backup takes its place.
                let moved = try StorageReset(stateDirectory: stateDirectory, provider: provider).moveLostMasterKey()
                print("the master key the TPM cannot open moved to \(stateDirectory)/\(moved)")
                present = nil
            }
            if let present {
                guard present.keyID == master.keyID else {
                    throw RainError.invalid(
                        "\(provider.location) already holds another master key (\(present.keyID)); restore into a state directory without one",
                        field: "FILE", reason: "master_key_present")
                }
                print("master key \(master.keyID) is already in \(provider.location)")
                return
            }
            try provider.storeSecret(master, slot: .authorityMaster)
            print("master key \(master.keyID) restored into \(provider.location)")
        }

        func reset(loseWallets: Bool, isJSON: Bool) throws(RainError) {
            let lock = try Daemon.openStateDirectory(stateDirectory, role: "rainwalletd storage reset")
            defer { withExtendedLifetime(lock) {} }
            let outcome = try StorageReset(stateDirectory: stateDirectory, provider: try recordedProvider())
                .run(loseWallets: loseWallets)
            if isJSON {
                print(outcome.jsonText)
                return
            }
            print("keys that cannot be opened: \(outcome.lostKeys.joined(separator: ", "))")
            for path in outcome.moved { print("moved \(path) to \(outcome.directory)/\(path)") }
            if outcome.isAuthorityReset {
                print("the embedded authority's database moved too: the next start makes a new, empty authority")
            }
            print(
                "start rainwalletd: it makes new keys; then log in again (\(stateDirectory)/\(outcome.directory) keeps the old files)"
            )
        }

        func migrate(to target: KeyProviderKind, authority remote: String?, authorityCA: String?) throws(RainError) {
            let lock = try Daemon.openStateDirectory(stateDirectory, role: "rainwalletd storage migrate")
            defer { withExtendedLifetime(lock) {} }
            let provider = try recordedProvider()
            try provider.checkAvailable()
            let hasMaster = remote == nil
            let migration = StorageMigration(
                stateDirectory: stateDirectory, make: make, logger: logger, progress: { print($0) })
            let authority: any Authority
            var device: DeviceIdentity?
            if let remote {
                let tls = try authorityCA.map { (ca) throws(RainError) in
                    try Daemon.renamingField(of: TLSContext.client(trustedCertificatesFile: ca), to: "--authority-ca")
                }
                // The remote authority rebinds only a device that proves its key on the connection:
                // the keys the daemon would start with (the old one, or the journal's pair), which
                // the migration updates as it goes.
                let identity =
                    if let journal = try migration.pendingJournal() {
                        try migration.startKeys(journal).device
                    } else {
                        try DeviceIdentity.loadOrCreate(stateDirectory: stateDirectory, provider: provider)
                    }
                device = identity
                authority = try RemoteAuthority(
                    address: remote, tls: tls, device: identity, clock: SystemClock(), logger: logger)
            } else {
                let master = try DaemonKeys.loadMasterKey(provider, stateDirectory: stateDirectory)
                let directory = stateDirectory
                let authorityLogger = logger
                authority = try Daemon.blockingAwait { () async throws(RainError) -> EmbeddedAuthority in
                    try await EmbeddedAuthority(
                        stateDirectory: "\(directory)/authority", masterKey: master, logger: authorityLogger)
                }
            }
            let running = device
            try Daemon.blockingAwait { () async throws(RainError) in
                try await migration.migrate(to: target, hasMasterKey: hasMaster, authority: authority, device: running)
            }
            if case .provider(let configured) = storage.provider, configured != target {
                print(
                    "note: the config's storage.provider names \(configured.rawValue): set it to \(target.rawValue) or auto before the next start"
                )
            }
        }
    }
}
