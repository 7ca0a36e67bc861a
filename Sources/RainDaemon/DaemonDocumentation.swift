import RainCommandLine
import RainConfig
import RainCore
import RainDevice

/// rainwalletd's man pages, generated from its declarations and the config schema:
/// rainwalletd(8) and rainwallet-config(5). `rainwalletd man PAGE` prints one (scripts/gen-man).
/// `rainwallet man` prints rainwallet(1): the CLI cannot see the daemon's modules (ARCHITECTURE.md),
/// so each binary documents itself.
enum DaemonDocumentation {
    /// The pages `rainwalletd man` prints.
    static let pages = ["rainwalletd", "rainwallet-config"]

    /// `rainwalletd man [PAGE]`: hidden, for packaging.
    static let declaration = Command(
        name: "man", abstract: "print a man page as roff (for packaging: scripts/gen-man)",
        arguments: [.init("PAGE", help: "rainwalletd (8) or rainwallet-config (5)", isOptional: true, kind: .choice(pages))],
        isHidden: true)

    /// Runs `rainwalletd man`.
    static func run(_ parsed: ParsedCommand, root: Command) -> Int32 {
        let page = parsed.argument("PAGE") ?? "rainwalletd"
        print(page == "rainwallet-config" ? configPage(build: root.build).roff : daemonPage(root).roff, terminator: "")
        return 0
    }

    /// rainwalletd(8).
    static func daemonPage(_ root: Command) -> ManPage {
        var page = ManPage(program: root, section: 8, manual: "RainWallet Manual")
        page.add(
            "FILES",
            [
                .item(tag: "$XDG_CONFIG_HOME/rainwallet/config.json", text: "the config, see rainwallet-config(5)"),
                .item(tag: "~/.config/rainwallet/config.json", text: "the config when XDG_CONFIG_HOME is unset"),
                .item(tag: SecurityPolicy.defaultPath, text: "the machine's security policy, owned by root"),
                .item(tag: "$XDG_STATE_HOME/rainwallet", text: "the state directory (~/.local/state/rainwallet when unset)"),
            ])
        page.add("SEE ALSO", [.paragraph("rainwallet(1), rainwallet-config(5), systemd.socket(5)")])
        return page
    }

    /// rainwallet-config(5): every key of ``ConfigSchema``, its default and its check.
    static func configPage(build: BuildInfo?) -> ManPage {
        var page = ManPage(
            name: "rainwallet-config", section: 5, date: build?.day ?? "", source: "rainwalletd \(build?.version ?? "")",
            manual: "RainWallet Manual", summary: "the configuration file of rainwalletd")
        page.add(
            "SYNOPSIS",
            [
                .paragraph(
                    "$XDG_CONFIG_HOME/rainwallet/config.json, else ~/.config/rainwallet/config.json, or `rainwalletd --config FILE`"
                )
            ])
        page.add(
            "DESCRIPTION",
            ManPage.paragraphs(
                """
                A JSON object, read when rainwalletd starts. Every key is optional; a key not listed
                here, a value of the wrong type or out of its range stops the daemon with RAIN_102
                naming the key (exit status 78). The file must be a regular file owned by the user
                (or root) that group and others cannot write, never a symbolic link.

                Keys marked guarded are security settings: a change takes effect once the user
                confirms it, and /etc/rainwallet/policy.json (owned by root, the same format with only
                these keys) fixes them without confirmation. In the paths below NAME stands for a
                profile name and [] for each item of an array.
                """) + [
                    .example(
                        """
                        {
                          "storage": {"provider": "auto"},
                          "profiles": {"myapp": {"passkeyDomain": "example.com",
                                                 "sessionPolicy": {"refreshBufferSeconds": 60}}}
                        }
                        """)
                ])
        var sections: [String: [ManPage.Block]] = [:]
        var order: [String] = []
        for key in ConfigSchema.keys {
            let top = String(key.path.prefix { $0 != "." })
            if sections[top] == nil { order.append(top) }
            let text = "\(key.type); default \(key.defaultValue). \(key.check)\(key.isGuarded ? " (guarded)" : "")"
            sections[top, default: []].append(.item(tag: "`\(key.path)`", text: text))
        }
        page.add("KEYS", order.flatMap { [ManPage.Block.subsection($0)] + (sections[$0] ?? []) })
        page.add("SEE ALSO", [.paragraph("rainwalletd(8), rainwallet(1)")])
        return page
    }
}
