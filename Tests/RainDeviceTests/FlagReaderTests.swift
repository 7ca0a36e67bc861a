import RainCore
import Testing

@testable import RainDevice

@Suite struct FlagReaderTests {
    @Test func daemonFlagsParse() throws {
        let o = try #require(
            try Daemon.parse(["--socket", "/s", "--state-dir", "/d", "--authority", "127.0.0.1:1", "--log-level", "debug"]))
        #expect(o.socket == "/s")
        #expect(o.stateDirectory == "/d")
        #expect(o.authority == "127.0.0.1:1")
        #expect(o.logLevel == .debug)
        #expect(try Daemon.parse(["--help"]) == nil)
    }

    @Test(arguments: [["--socket"], ["--socket", "--config"], ["--log-level", "loud"], ["--bogus"]])
    func daemonFlagErrorsNameTheFlag(args: [String]) {
        let error = #expect(throws: RainError.self) { try Daemon.parse(args) }
        #expect(error?.code == .invalidArgument)
        #expect(error?.details.field?.hasPrefix("--") == true)
    }

    @Test func authorityFlagsParseWithRanges() throws {
        let o = try #require(
            try AuthorityDaemon.parse([
                "--listen", "127.0.0.1:0", "--state-dir", "/a", "--access-token-lifetime", "6", "--refresh-grace", "0.5",
                "--dev-outbox",
            ]))
        #expect(o.settings.accessTokenLifetime == .seconds(6))
        #expect(o.settings.refreshGraceWindow == .milliseconds(500))
        #expect(o.settings.isDevOutboxEnabled)
        let tooShort = #expect(throws: RainError.self) {
            try AuthorityDaemon.parse(["--listen", "127.0.0.1:0", "--state-dir", "/a", "--access-token-lifetime", "1"])
        }
        #expect(tooShort?.details.field == "--access-token-lifetime")
        let missing = #expect(throws: RainError.self) { try AuthorityDaemon.parse(["--state-dir", "/a"]) }
        #expect(missing?.details.field == "--listen")
    }
}
