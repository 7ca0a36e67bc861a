import Foundation
import RainConfig
import RainDevice
import RainTestSupport
import Testing

/// The built binaries identify and document themselves without a daemon: `--version`, shell
/// completion driven by bash itself, man pages, and the JSON error line of a usage mistake.
@Suite("rainwallet and rainwalletd: --version, completion, man pages")
struct CLICompletionTests {
    func binary(_ name: String) throws -> String {
        try DaemonHarness.binaryDirectory().appendingPathComponent(name).path
    }

    @Test("--version on both binaries: version, commit, date and Swift version, exit 0 with no daemon")
    func version() async throws {
        for program in ["rainwallet", "rainwalletd"] {
            let r = try await TestProcess.run(
                try binary(program), ["--version"], environment: ["RAINWALLET_SOCKET": "/nonexistent"])
            #expect(r.status == 0, "\(program): \(r)")
            let lines = r.stdout.split(separator: "\n").map(String.init)
            // The daemon reports the same version over GetInfo (`daemonVersion`): VERSION and it must agree.
            #expect(lines.first == "\(program) \(daemonVersion)", "\(program): \(r)")
            for key in ["commit: ", "commit date: ", "swift: "] {
                #expect(lines.contains { $0.hasPrefix(key) && $0.count > key.count }, "\(program) lacks \(key): \(r)")
            }
        }
    }

    @Test("a usage error under --json ends stderr with the JSON error line and exits 64")
    func usageErrorAsJSON() async throws {
        let h = try DaemonHarness.prepare()
        defer { h.shutdown() }
        for arguments in [["--json", "stauts"], ["status", "--json", "--bogus"], ["--json", "export", "key", "--chain"]] {
            let r = try await h.runCLI(arguments)
            #expect(r.status == 64, "\(arguments): \(r)")
            let last = try #require(r.stderr.split(separator: "\n").last.map(String.init), "\(arguments): \(r)")
            let object = try JSONSerialization.jsonObject(with: Data(last.utf8)) as? [String: Any]
            let error = try #require(object?["error"] as? [String: Any], "\(arguments): \(last)")
            #expect(error["code"] as? String == "RAIN_102", "\(arguments): \(last)")
            #expect(error["reason"] as? String == "usage", "\(arguments): \(last)")
            #expect((error["message"] as? String)?.isEmpty == false, "\(arguments): \(last)")
        }
        // Without --json, no JSON line.
        let plain = try await h.runCLI(["stauts"])
        #expect(plain.status == 64)
        #expect(!plain.stderr.contains("{\"error\""), "\(plain)")
    }

    @Test("bash completes commands, options and choices from `rainwallet completion bash`")
    func bashCompletion() async throws {
        let h = try DaemonHarness.prepare()
        defer { h.shutdown() }
        let script = try await h.runCLI(["completion", "bash"])
        #expect(script.status == 0, "\(script)")
        let path = "\(h.directory)/rainwallet.bash"
        try Data(script.stdout.utf8).write(to: URL(fileURLWithPath: path))
        // bash drives the function `complete -p` names with COMP_WORDS and COMP_CWORD, as on <TAB>.
        let driver = """
            source "$1" || exit 3
            complete -p rainwallet || exit 4
            complete_words() {
                COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=()
                _rainwallet rainwallet "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
                echo "$*: ${COMPREPLY[*]}"
            }
            complete_words rainwallet co
            complete_words rainwallet code send --e
            complete_words rainwallet --json export key --chain ''
            complete_words rainwallet ma
            """
        let r = try await TestProcess.run("/bin/bash", ["--norc", "--noprofile", "-c", driver, "driver", path])
        #expect(r.status == 0, "\(r)")
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines.contains("complete -F _rainwallet rainwallet"), "\(r)")
        #expect(lines.contains("rainwallet co: code contact completion"), "\(r)")
        #expect(lines.contains("rainwallet code send --e: --email"), "\(r)")
        #expect(lines.contains("rainwallet --json export key --chain : ethereum solana"), "\(r)")
        // The hidden `man` command is not offered.
        #expect(lines.contains("rainwallet ma: "), "\(r)")
    }

    @Test("completion for an unknown shell is a usage error naming the choices")
    func unknownShell() async throws {
        let h = try DaemonHarness.prepare()
        defer { h.shutdown() }
        let r = try await h.runCLI(["completion", "tcsh"])
        #expect(r.status == 64, "\(r)")
        #expect(r.stderr.contains("bash, zsh or fish"), "\(r)")
    }

    @Test("man pages: rainwallet(1), rainwalletd(8) and rainwallet-config(5) with every config key")
    func manPages() async throws {
        let pages = [
            ("rainwallet", ["man"], ".TH \"RAINWALLET\" 1"), ("rainwalletd", ["man", "rainwalletd"], ".TH \"RAINWALLETD\" 8"),
            ("rainwalletd", ["man", "rainwallet-config"], ".TH \"RAINWALLET\\-CONFIG\" 5"),
        ]
        for (program, arguments, header) in pages {
            let r = try await TestProcess.run(try binary(program), arguments)
            #expect(r.status == 0, "\(program) \(arguments): \(r.stderr)")
            #expect(r.stdout.contains(header), "\(program) \(arguments)")
            #expect(r.stdout.contains(".SH \"NAME\"") || r.stdout.contains(".SH NAME"), "\(program) \(arguments)")
        }
        let config = try await TestProcess.run(try binary("rainwalletd"), ["man", "rainwallet-config"])
        for key in ConfigSchema.keys {
            #expect(config.stdout.contains(key.path.replacingOccurrences(of: "-", with: "\\-")), "\(key.path) missing")
        }
        let cli = try await TestProcess.run(try binary("rainwallet"), ["man"])
        #expect(cli.stdout.contains(".SS \"rainwallet code send\""))
        #expect(cli.stdout.contains(".SS \"rainwallet completion\""))
        #expect(!cli.stdout.contains(".SS \"rainwallet man\""), "the hidden man command is documented")
    }
}
