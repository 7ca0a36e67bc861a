import Foundation
import RainTestSupport
import RainWallet
import Testing

/// Runs `rainwallet ARGS` on a pseudo-terminal (util-linux `script`), typing `input`.
func runOnTerminal(_ h: DaemonHarness, _ arguments: [String], input: String) async throws -> (status: Int32, output: String) {
    let cli = try DaemonHarness.binaryDirectory().appendingPathComponent("rainwallet").path
    let command = ([cli, "--socket", h.socketPath] + arguments).map { "'\($0)'" }.joined(separator: " ")
    return try await SecretArgumentTests.runOnTerminal(command, input: input)
}

@Suite("Export asks for confirmation on a terminal")
struct ExportPromptTests {
    @Test("typing YES prints the phrase; anything else prints nothing and exits 9")
    func confirmationOnATerminal() async throws {
        let h = try await DaemonHarness.start(config: #"{"profiles": {"default": {"allowExport": true}}}"#)
        defer { h.shutdown() }
        let provider = h.provider()
        try await h.logIn(provider, .email("prompt@example.com"))
        let words = try await provider.exportRecoveryPhrase()
        #expect(words.count == 12)

        let yes = try await runOnTerminal(h, ["export", "phrase"], input: "YES\n")
        #expect(yes.status == 0)
        #expect(yes.output.contains("Type YES"))
        #expect(yes.output.contains(words.joined(separator: " ")))

        let no = try await runOnTerminal(h, ["export", "phrase"], input: "no\n")
        #expect(no.status == 9)
        #expect(no.output.contains("RAIN_401"))
        #expect(!no.output.contains(words[0] + " " + words[1]))

        let key = try await runOnTerminal(h, ["export", "key", "--chain", "ethereum"], input: "YES\n")
        #expect(key.status == 0)
        #expect(key.output.range(of: #"0x[0-9a-f]{64}"#, options: .regularExpression) != nil)
    }
}
