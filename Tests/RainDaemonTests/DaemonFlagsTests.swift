import RainAuthorityAPI
import RainCore
import Testing

@testable import RainDaemon

@Suite struct DaemonFlagsTests {
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
                "--dev-outbox", "--refresh-token-lifetime", "60",
            ]))
        #expect(o.settings.accessTokenLifetime == .seconds(6))
        #expect(o.settings.refreshTokenLifetime == .seconds(60))
        #expect(o.settings.refreshGraceWindow == .milliseconds(500))
        #expect(o.settings.isDevOutboxEnabled)
        let tooShort = #expect(throws: RainError.self) {
            try AuthorityDaemon.parse(["--listen", "127.0.0.1:0", "--state-dir", "/a", "--access-token-lifetime", "1"])
        }
        #expect(tooShort?.details.field == "--access-token-lifetime")
        let missing = #expect(throws: RainError.self) { try AuthorityDaemon.parse(["--state-dir", "/a"]) }
        #expect(missing?.details.field == "--listen")
    }

    @Test func authoritySendLimitAndPruneFlags() throws {
        let base = ["--listen", "127.0.0.1:0", "--state-dir", "/a"]
        let defaults = try #require(try AuthorityDaemon.parse(base))
        #expect(defaults.settings.sendLimits == CodeSendLimits())
        let o = try #require(
            try AuthorityDaemon.parse(
                base + [
                    "--send-cooldown", "0", "--contact-max-sends", "8", "--contact-window", "120", "--account-max-sends", "30",
                    "--account-window", "600", "--prune-interval", "2", "--prune-retention", "60",
                ]))
        #expect(
            o.settings.sendLimits
                == CodeSendLimits(
                    contactCooldown: .zero, contactWindow: .seconds(120), contactMaxSends: 8, accountWindow: .seconds(600),
                    accountMaxSends: 30))
        #expect(o.settings.pruneInterval == .seconds(2))
        #expect(o.settings.pruneRetention == .seconds(60))
        for (flag, value) in [
            ("--contact-max-sends", "0"), ("--contact-max-sends", "2.5"), ("--account-max-sends", "x"),
            ("--send-cooldown", "-1"), ("--prune-interval", "0"), ("--account-window", "0"),
        ] {
            let error = #expect(throws: RainError.self) { try AuthorityDaemon.parse(base + [flag, value]) }
            #expect(error?.details.field == flag)
        }
    }

    @Test func authorityRevocationHeartbeatFlag() throws {
        let base = ["--listen", "127.0.0.1:0", "--state-dir", "/a"]
        #expect(try #require(try AuthorityDaemon.parse(base)).revocationHeartbeat == .seconds(15))
        #expect(
            try #require(try AuthorityDaemon.parse(base + ["--revocation-heartbeat", "0.2"])).revocationHeartbeat
                == .milliseconds(200))
        for value in ["0.01", "0", "x", "3601"] {
            let error = #expect(throws: RainError.self) {
                try AuthorityDaemon.parse(base + ["--revocation-heartbeat", value])
            }
            #expect(error?.details.field == "--revocation-heartbeat")
        }
    }

    @Test func authorityReadLeaseFlag() throws {
        let base = ["--listen", "127.0.0.1:0", "--state-dir", "/a"]
        #expect(try #require(try AuthorityDaemon.parse(base)).readLease == .seconds(1))
        #expect(try #require(try AuthorityDaemon.parse(base + ["--read-lease", "0.25"])).readLease == .milliseconds(250))
        #expect(try #require(try AuthorityDaemon.parse(base + ["--read-lease", "0"])).readLease == .zero)
        for value in ["1.5", "-1", "x"] {
            let error = #expect(throws: RainError.self) { try AuthorityDaemon.parse(base + ["--read-lease", value]) }
            #expect(error?.details.field == "--read-lease")
        }
    }
}
