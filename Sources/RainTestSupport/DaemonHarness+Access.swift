import Foundation
import Glibc
import RainAccess

/// Per-app access in a harness daemon. Every harness daemon gets `--policy DIR/policy.json`
/// (written here, owned by root as a managed machine's would be; tests run as root), so the machine's
/// `/etc/rainwallet/policy.json` never leaks in.
public enum HarnessAccess: Sendable, Equatable {
    /// The test runner and the harness's `rainwallet` are approved for every profile, the
    /// config's security settings are fixed by the policy (as on a CI machine: no confirmation
    /// waits, even for a state directory a test assembled by hand), and the user's confirmation is
    /// given by `DIR/pinentry-auto`, a test pinentry that types back the code each prompt shows and
    /// appends the prompt's text to `DIR/prompts.log`. For tests that are not about per-app access.
    case testRunnerApproved
    /// As `testRunnerApproved`, and these programs too, for every profile: app paths as the daemon
    /// reads them (`CallerIdentity.appPath`), e.g. `"/usr/bin/python3.11 /abs/client.py"` for a
    /// script: the interpreter's resolved executable, a space, the script as its command line names it.
    case testRunnerApprovedWith(apps: [String])
    /// Nothing approved in advance; `pinentry`, when given, is fixed by the policy (the harness's
    /// auto-confirming one is `DaemonHarness.autoPinentryName`, resolved in the harness's
    /// directory). For tests of per-app access itself.
    case enforced(pinentry: String?)
    /// This policy JSON, as written.
    case policy(String)
}

extension DaemonHarness {
    /// The file name of the auto-confirming test pinentry in the harness directory.
    public static let autoPinentryName = "pinentry-auto"

    /// `DIR/policy.json`.
    public var policyPath: String { "\(directory)/policy.json" }

    /// `DIR/pinentry-auto`.
    public var autoPinentryPath: String { "\(directory)/\(Self.autoPinentryName)" }

    /// `DIR/prompts.log`: each prompt the auto pinentry confirmed, one description a line.
    public var promptLogPath: String { "\(directory)/prompts.log" }

    /// Makes the auto pinentry dismiss every prompt from now on (`true`), or confirm again.
    public func autoPinentryDismisses(_ dismisses: Bool) {
        let flag = "\(directory)/pinentry-cancels"
        if dismisses {
            _ = FileManager.default.createFile(atPath: flag, contents: nil)
        } else {
            try? FileManager.default.removeItem(atPath: flag)
        }
    }

    /// The file of PINs the auto pinentry types on prompts that ask for one, one a line.
    static let autoPinentrySecretsName = "pinentry-secrets"

    /// Makes the auto pinentry type `secrets` on the next prompts that ask for a PIN, one each in
    /// order; once they are used up (or with none), such a prompt is dismissed.
    public func autoPinentryTypes(secrets: [String]) {
        let path = "\(directory)/\(Self.autoPinentrySecretsName)"
        _ = FileManager.default.createFile(
            atPath: path, contents: Data(secrets.map { $0 + "\n" }.joined().utf8), attributes: [.posixPermissions: 0o600])
    }

    /// The prompts the auto pinentry answered so far (their descriptions, Assuan-escaped).
    public var answeredPrompts: [String] {
        ((try? String(contentsOfFile: promptLogPath, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    /// The statuses the auto pinentry showed until the daemon withdrew them ("RainWallet waits:
    /// touch your security key…"), Assuan-escaped, in order.
    public var shownStatuses: [String] {
        ((try? String(contentsOfFile: promptLogPath + ".status", encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    /// The pages before the last of the paged prompts the auto pinentry went through (each one's
    /// description, Assuan-escaped), in order; the last pages are in `answeredPrompts`.
    public var answeredPages: [String] {
        ((try? String(contentsOfFile: promptLogPath + ".pages", encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    /// An Assuan-escaped description as the user reads it (`%0A` a newline, `%25` a percent sign).
    public static func unescaped(_ text: String) -> String {
        String(decoding: Assuan.unescape(Array(text.utf8)[...]), as: UTF8.self)
    }

    /// The test runner's own executable (what the daemon sees on connections from the test process).
    public static var testRunnerPath: String {
        guard let real = realpath("/proc/self/exe", nil) else { return CommandLine.arguments.first ?? "" }
        defer { free(real) }
        return String(cString: real)
    }

    /// Writes the auto pinentry and the policy for `access` into `directory`.
    static func writeAccessFiles(
        _ access: HarnessAccess, config: String?, directory: String, binaryDirectory: URL
    ) throws {
        let pinentry = "\(directory)/\(autoPinentryName)"
        try writeFile(
            pinentry,
            autoPinentryScript(
                log: "\(directory)/prompts.log", cancelFlag: "\(directory)/pinentry-cancels",
                secrets: "\(directory)/\(autoPinentrySecretsName)"),
            mode: 0o755)
        let policy: String
        switch access {
        case .testRunnerApproved, .testRunnerApprovedWith:
            var apps: [Any] = [["path": testRunnerPath], ["path": binaryDirectory.appendingPathComponent("rainwallet").path]]
            if case .testRunnerApprovedWith(let extra) = access { apps += extra.map { ["path": $0] } }
            var fixed = guardedSettings(of: config)
            var access = fixed["access"] as? [String: Any] ?? [:]
            var byProfile = access["apps"] as? [String: Any] ?? [:]
            apps += byProfile["*"] as? [Any] ?? []
            byProfile["*"] = apps
            access["apps"] = byProfile
            access["pinentry"] = access["pinentry"] ?? pinentry
            fixed["access"] = access
            policy = try json(fixed)
        case .enforced(let program):
            let resolved = program.map { $0 == autoPinentryName ? pinentry : $0 }
            policy = try json(resolved.map { ["access": ["pinentry": $0]] } ?? [:])
        case .policy(let text):
            policy = text
        }
        try writeFile("\(directory)/policy.json", policy, mode: 0o644)
    }

    /// The security settings of a config (JSON), in the policy's form: `allowedUIDs`,
    /// `codeSender`, `access`, and each profile's `allowExport` and `allowedUIDs`.
    static func guardedSettings(of config: String?) -> [String: Any] {
        guard let config, let root = try? JSONSerialization.jsonObject(with: Data(config.utf8)) as? [String: Any] else {
            return [:]
        }
        var fixed = root.filter { ["allowedUIDs", "codeSender", "access"].contains($0.key) }
        if let profiles = root["profiles"] as? [String: Any] {
            var kept: [String: Any] = [:]
            for (name, value) in profiles {
                let settings = (value as? [String: Any] ?? [:]).filter { ["allowExport", "allowedUIDs"].contains($0.key) }
                if !settings.isEmpty { kept[name] = settings }
            }
            if !kept.isEmpty { fixed["profiles"] = kept }
        }
        return fixed
    }

    private static func json(_ object: [String: Any]) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
    }

    private static func writeFile(_ path: String, _ text: String, mode: Int) throws {
        guard FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: mode])
        else { throw HarnessError("cannot write \(path)") }
    }

    /// A pinentry that answers every GETPIN with the code the description shows (`type the code
    /// XXXX and press Enter`), logging the description. Bash, as Debian has it.
    /// While `cancelFlag` exists, it dismisses each prompt instead (logged all the same).
    /// A prompt that asks for a PIN (`type the PIN and press Enter`) gets the first line of
    /// `secrets`, which is then removed; with none left it is dismissed.
    public static func autoPinentryScript(log: String, cancelFlag: String, secrets: String? = nil) -> String {
        let secretsPath = secrets ?? "\(log).secrets"
        return """
            #!/bin/bash
            # Test pinentry (integration tests only): confirms each prompt by typing back its code.
            echo "OK Pleased to meet you"
            desc=""
            while IFS= read -r line; do
              case "$line" in
                SETDESC\\ *) desc=${line#SETDESC }; echo OK ;;
                CONFIRM*)
                  # A status (what an authenticator waits for) stays until the daemon withdraws it,
                  # unless the test dismisses prompts: then its Cancel is chosen.
                  case "$desc" in "RainWallet waits:"*)
                    printf '%s\\n' "$desc" >> '\(log).status'
                    if [ -e '\(cancelFlag)' ]; then echo "ERR 83886179 Operation cancelled <Pinentry>"; continue; fi
                    while IFS= read -r _; do :; done; exit 0 ;;
                  esac
                  printf '%s\\n' "$desc" >> '\(log).pages'
                  if [ -e '\(cancelFlag)' ]; then echo "ERR 83886179 Operation cancelled <Pinentry>"; continue; fi
                  echo OK ;;
                GETPIN*)
                  printf '%s\\n' "$desc" >> '\(log)'
                  if [ -e '\(cancelFlag)' ]; then echo "ERR 83886179 Operation cancelled <Pinentry>"; continue; fi
                  case "$desc" in *"type the PIN and press"*)
                    secret=$(head -n 1 '\(secretsPath)' 2>/dev/null)
                    if [ -z "$secret" ]; then echo "ERR 83886179 Operation cancelled <Pinentry>"; continue; fi
                    sed -i 1d '\(secretsPath)'
                    echo "D $secret"; echo OK; continue ;;
                  esac
                  code=$(printf '%s' "$desc" | sed -n 's/.*type the code  \\([^ ]*\\)  and press.*/\\1/p')
                  echo "D $code"; echo OK ;;
                BYE*) echo OK; exit 0 ;;
                *) echo OK ;;
              esac
            done

            """
    }
}
