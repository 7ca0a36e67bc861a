import FoundationEssentials
import Glibc
import RainCommandLine
import RainCore
import RainSystem
import RainWallet

/// `rainwallet storage status|backup|migrate`: the running daemon's keys, through its socket (the
/// daemon's own user only). `rainwalletd storage …` does the same offline, with the daemon stopped.
enum StorageCommand: CLICommand {
    static let declaration = Command(
        name: "storage", abstract: "see, back up and migrate the running daemon's keys",
        discussion: """
            The daemon's keys live in one key provider: tpm2 (sealed by the TPM), secret-service (the
            desktop keyring) or file (0600 files in the state directory). Only the daemon's own user
            may call these. With the daemon stopped, `rainwalletd storage …` does the same, and also
            restores a backup.
            """)
    static var subcommands: [any CLICommand.Type] {
        [StorageStatusCommand.self, StorageBackupCommand.self, StorageMigrateCommand.self]
    }

    /// The providers `--to` takes.
    static let providers = ["tpm2", "secret-service", "file"]
}

/// `rainwallet storage status`.
enum StorageStatusCommand: CLICommand {
    static let declaration = Command(
        name: "status", abstract: "show the key provider, its keys and what each protects",
        discussion: """
            Shows the provider the daemon uses and where it keeps the keys, each key's id and algorithm
            and what it protects, a migration under way, and why the provider cannot be used now.
            """,
        json: .init(
            .object,
            [
                .init("provider", "tpm2, secret-service or file"), .init("location", "where the keys are"),
                .init(
                    "keys", "the keys",
                    fields: [
                        .init("slot", "storage, authority-master or device"), .init("keyId", "the key's id"),
                        .init("algorithm", "its algorithm"), .init("protects", "what it protects"),
                    ]),
                .init("unavailable", "why the provider cannot be used now, when it cannot"),
                .init("migration", "a migration under way: to, step"),
            ]))

    static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
        let status = try await context.provider.storageStatus()
        if context.output.isJSON {
            context.output.line(status.jsonText)
        } else {
            status.humanLines(command: "rainwallet storage migrate").forEach(context.output.line)
        }
    }
}

/// `rainwallet storage backup --out FILE`.
enum StorageBackupCommand: CLICommand {
    static let declaration = Command(
        name: "backup", abstract: "write the embedded authority's master key, sealed under a passphrase",
        discussion: """
            Asks for a passphrase (twice on a terminal, not echoed; else one line of stdin: never an
            argument), has the daemon seal the embedded authority's master key under it, and writes the
            backup to FILE (mode 0600, atomically). Without this backup, a lost TPM or keyring loses
            every wallet of an embedded authority. `rainwalletd storage restore FILE` puts the key back.
            A device with a remote authority has no master key: back up the authority's instead.
            """,
        options: [
            Command.Option("--out", value: "FILE", help: "the backup file to write", kind: .file, isRequired: true),
            .flag("--force", help: "replace FILE when it exists"),
        ],
        json: .init(.object, [.init("file", "the file written"), .init("keyId", "the master key's id")]),
        exitStatuses: [
            .init(3, "no passphrase, the two differ, or FILE exists without --force (RAIN_102)"),
            .init(5, "no master key here: a remote authority (RAIN_202, reason no_master_key)"),
        ])

    static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
        let path = parsed.value("--out") ?? ""
        if !parsed.flag("--force"), FileManager.default.fileExists(atPath: path) {
            throw RainError.invalid("\(path) exists; give --force to replace it", field: "--out")
        }
        let passphrase = try PassphraseInput.read(prompt: "Backup passphrase: ", confirm: "Repeat the passphrase: ")
        let (backup, keyID) = try await context.provider.storageBackup(passphrase: passphrase)
        try AtomicFile.write(backup, to: path, mode: 0o600)
        context.output.result(
            json: ["file": path, "keyId": keyID],
            text: "master key \(keyID) written to \(path) (keep the passphrase apart from the file)")
    }
}

/// `rainwallet storage migrate --to PROVIDER`.
enum StorageMigrateCommand: CLICommand {
    static let declaration = Command(
        name: "migrate", abstract: "move the running daemon's keys to another provider",
        discussion: """
            The daemon creates new keys in the target provider, has the authority accept the new device
            key, re-encrypts every session file, records the new provider, has the authority confirm the
            new key, deletes the old keys, then opens the new ones and restores the sessions. It prints
            one line per step. Meanwhile every other call is RAIN_501 storage_migrating. A kill at any
            point is finished by the daemon's next start.
            """,
        options: [
            Command.Option(
                "--to", value: "PROVIDER", help: "the target provider", kind: .choice(StorageCommand.providers),
                isRequired: true)
        ],
        json: .init(.lines, [.init("step", "one line per step done")]),
        exitStatuses: [
            .init(3, "the keys are already there, or another migration is under way (RAIN_102)"),
            .init(11, "the target cannot be used, or a migration is running (RAIN_501)"),
        ])

    static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
        let target = parsed.value("--to") ?? ""
        for try await line in try context.provider.storageMigrate(to: target) {
            context.output.result(json: ["step": line], text: line)
        }
    }
}
