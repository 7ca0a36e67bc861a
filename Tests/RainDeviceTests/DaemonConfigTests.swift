import Foundation
import RainAuthorityAPI
import RainConfig
import RainCore
@testable import RainDevice
import Testing

@Suite struct DaemonConfigTests {
    func parse(_ json: String) throws -> DaemonConfig { try DaemonConfig.parse(Data(json.utf8), source: "test.json") }

    @Test func emptyObjectGivesDefaults() throws {
        let c = try parse("{}")
        #expect(c == DaemonConfig())
        #expect(c.settings(for: "anything").appID == "anything")
        #expect(c.codeSender == .outbox)
    }

    @Test("dev-outbox is advertised only where ListOutbox answers: the outbox on and the code sender")
    func devOutboxCapability() throws {
        let outbox = DeviceService.capabilities(config: try parse("{}"), isTestMethodsEnabled: false)
        #expect(outbox.contains("dev-outbox"))
        let command = try parse(#"{"codeSender": {"type": "command", "command": ["/usr/bin/send"]}}"#)
        #expect(!DeviceService.capabilities(config: command, isTestMethodsEnabled: false).contains("dev-outbox"))
        let off = try parse(#"{"authority": {"devOutbox": false}}"#)
        #expect(!DeviceService.capabilities(config: off, isTestMethodsEnabled: false).contains("dev-outbox"))
    }

    @Test func fullConfigParses() throws {
        let c = try parse(
            """
            {"allowedUIDs": [1001],
             "codeSender": {"type": "command", "command": ["/usr/bin/send", "--x"], "timeoutSeconds": 5},
             "authority": {"codeLifetimeSeconds": 60, "accessTokenLifetimeSeconds": 30, "refreshTokenLifetimeSeconds": 120,
                           "maxWrongAttempts": 3,
                           "maxActiveCodesPerAccount": 3, "devOutbox": false},
             "profiles": {"my-app": {"appID": "com.example", "passkeyDomain": "example.com", "allowExport": true,
                                     "allowedUIDs": [1002],
                                     "sessionPolicy": {"refreshBufferSeconds": 10, "autoRefresh": false,
                                                       "transientRetries": 1, "retryInitialDelayMilliseconds": 100,
                                                       "retryMaxDelayMilliseconds": 200, "activeThresholdSeconds": 5,
                                                       "restoreTimeoutSeconds": 2}}}}
            """)
        #expect(c.allowedUIDs == [1001])
        #expect(c.codeSender == .command(arguments: ["/usr/bin/send", "--x"], timeout: .seconds(5)))
        #expect(c.authority.codeLifetime == .seconds(60))
        #expect(c.authority.accessTokenLifetime == .seconds(30))
        #expect(c.authority.refreshTokenLifetime == .seconds(120))
        let guesses = try parse(
            #"{"authority": {"sendLimits": {"deviceKeyMaxWrongGuesses": 7, "sourceMaxWrongGuesses": 9, "guessWindowSeconds": 60}}}"#
        )
        #expect(guesses.authority.sendLimits.deviceKeyMaxWrongGuesses == 7)
        #expect(guesses.authority.sendLimits.sourceMaxWrongGuesses == 9)
        #expect(guesses.authority.sendLimits.guessWindow == .seconds(60))
        #expect(!c.authority.isDevOutboxEnabled)
        #expect(throws: RainError.self) { try parse(#"{"authority": {"refreshTokenLifetimeSeconds": 9}}"#) }
        let p = c.settings(for: "my-app")
        #expect(p.appID == "com.example")
        #expect(p.passkeyDomain == "example.com")
        #expect(p.isExportAllowed)
        #expect(p.sessionPolicy.refreshBuffer == .seconds(10))
        #expect(!p.sessionPolicy.isAutoRefreshEnabled)
        #expect(p.sessionPolicy.retryMaxDelay == .milliseconds(200))
        #expect(c.allAllowedUIDs == [1001, 1002])
    }

    @Test("authority.sendLimits and the prune keys set the authority's settings; absent keys keep the defaults")
    func sendLimitsAndPruning() throws {
        let c = try DaemonConfig.parse(
            Data(
                #"""
                {"authority": {"sendLimits": {"contactCooldownSeconds": 0, "contactMaxSends": 7, "contactWindowSeconds": 60,
                                              "accountMaxSends": 20, "accountWindowSeconds": 7200},
                               "pruneIntervalSeconds": 5, "pruneRetentionSeconds": 120}}
                """#.utf8))
        #expect(
            c.authority.sendLimits
                == CodeSendLimits(
                    contactCooldown: .zero, contactWindow: .seconds(60), contactMaxSends: 7, accountWindow: .seconds(7200),
                    accountMaxSends: 20))
        #expect(c.authority.pruneInterval == .seconds(5))
        #expect(c.authority.pruneRetention == .seconds(120))
        let partial = try DaemonConfig.parse(Data(#"{"authority": {"sendLimits": {"contactMaxSends": 3}}}"#.utf8))
        #expect(partial.authority.sendLimits == CodeSendLimits(contactMaxSends: 3))
        #expect(partial.authority.pruneInterval == .seconds(600))
        #expect(try DaemonConfig.parse(Data("{}".utf8)).authority.sendLimits == CodeSendLimits())
    }

    /// Each bad config is refused with RAIN_102 and the error names the offending key.
    @Test(arguments: [
        ("[]", ""),
        ("{\"profile\": {}}", "profile"),
        ("{\"profiles\": {\"x\": {\"passkeyDomian\": \"a.com\"}}}", "profiles.x.passkeyDomian"),
        ("{\"profiles\": {\"Bad_Name\": {}}}", "profiles.Bad_Name"),
        ("{\"profiles\": {\"x\": {\"allowExport\": \"yes\"}}}", "profiles.x.allowExport"),
        ("{\"profiles\": {\"x\": {\"passkeyDomain\": \"https://example.com\"}}}", "profiles.x.passkeyDomain"),
        ("{\"profiles\": {\"x\": {\"passkeyDomain\": \"co.uk\"}}}", "profiles.x.passkeyDomain"),
        ("{\"profiles\": {\"x\": {\"allowExport\": 1}}}", "profiles.x.allowExport"),
        (
            "{\"profiles\": {\"x\": {\"sessionPolicy\": {\"refreshBufferSeconds\": -1}}}}",
            "profiles.x.sessionPolicy.refreshBufferSeconds"
        ),
        (
            "{\"profiles\": {\"x\": {\"sessionPolicy\": {\"transientRetries\": true}}}}",
            "profiles.x.sessionPolicy.transientRetries"
        ),
        (
            "{\"profiles\": {\"x\": {\"sessionPolicy\": {\"retryInitialDelayMilliseconds\": 500, \"retryMaxDelayMilliseconds\": 100}}}}",
            "profiles.x.sessionPolicy.retryMaxDelayMilliseconds"
        ),
        ("{\"allowedUIDs\": [\"root\"]}", "allowedUIDs[0]"),
        ("{\"allowedUIDs\": [1.5]}", "allowedUIDs[0]"),
        ("{\"codeSender\": {\"type\": \"pigeon\"}}", "codeSender.type"),
        ("{\"codeSender\": {\"type\": \"sms\"}}", "codeSender.sms"),
        ("{\"codeSender\": {\"type\": \"command\"}}", "codeSender.command"),
        ("{\"codeSender\": {\"type\": \"command\", \"command\": [\"relative/prog\"]}}", "codeSender.command[0]"),
        ("{\"authority\": {\"codeLifetimeSeconds\": 0}}", "authority.codeLifetimeSeconds"),
        ("{\"authority\": {\"tokenLifetime\": 5}}", "authority.tokenLifetime"),
        ("{\"authority\": {\"sendLimits\": {\"cooldown\": 5}}}", "authority.sendLimits.cooldown"),
        ("{\"authority\": {\"sendLimits\": 5}}", "authority.sendLimits"),
        ("{\"authority\": {\"sendLimits\": {\"contactMaxSends\": 0}}}", "authority.sendLimits.contactMaxSends"),
        ("{\"authority\": {\"sendLimits\": {\"accountMaxSends\": 2.5}}}", "authority.sendLimits.accountMaxSends"),
        ("{\"authority\": {\"sendLimits\": {\"contactCooldownSeconds\": -1}}}", "authority.sendLimits.contactCooldownSeconds"),
        ("{\"authority\": {\"sendLimits\": {\"contactWindowSeconds\": 0}}}", "authority.sendLimits.contactWindowSeconds"),
        ("{\"authority\": {\"sendLimits\": {\"accountWindowSeconds\": \"1h\"}}}", "authority.sendLimits.accountWindowSeconds"),
        ("{\"authority\": {\"pruneIntervalSeconds\": 0}}", "authority.pruneIntervalSeconds"),
        ("{\"authority\": {\"pruneRetentionSeconds\": true}}", "authority.pruneRetentionSeconds"),
    ])
    func invalidConfigNamesTheKey(json: String, key: String) {
        let error = #expect(throws: RainError.self) { try parse(json) }
        #expect(error?.code == .invalidArgument)
        if !key.isEmpty { #expect(error?.details.field == key) }
    }

    @Test func notJSONIsRefused() {
        let error = #expect(throws: RainError.self) { try parse("{profiles: }") }
        #expect(error?.code == .invalidArgument)
    }

    @Test func missingOptionalFileGivesDefaultsButExplicitOneMustExist() throws {
        #expect(try DaemonConfig.load(path: "/nonexistent/rainwallet/config.json", isRequired: false) == DaemonConfig())
        let error = #expect(throws: RainError.self) {
            try DaemonConfig.load(path: "/nonexistent/rainwallet/config.json", isRequired: true)
        }
        #expect(error?.code == .invalidArgument)
    }
}
