import RainConfig
import RainCore
import RainDevice

/// FuzzConfig: the input is the content of the config file; `DaemonConfig.load` reads it from a
/// file exactly as `rainwalletd --config` does.
enum ConfigFuzzing {
    static func run(_ input: [UInt8], scratch: FuzzScratch) -> FuzzOutcome {
        do {
            let path = try scratch.write(input, to: "config.json")
            _ = try DaemonConfig.load(path: path, isRequired: true)
            return .accepted
        } catch {
            return .rejected(error)
        }
    }

    /// Config files that load, covering every key.
    static func seeds() -> [(name: String, bytes: [UInt8])] {
        let files: [(String, String)] = [
            ("empty-object", "{}"),
            ("outbox", #"{"codeSender": {"type": "outbox"}, "allowedUIDs": [1000, 1001]}"#),
            (
                "command-sender",
                #"{"codeSender": {"type": "command", "command": ["/usr/local/bin/send-code", "--quiet"], "timeoutSeconds": 2.5}}"#
            ),
            (
                "authority",
                #"""
                {"authority": {"codeLifetimeSeconds": 600, "maxWrongAttempts": 5, "maxActiveCodesPerAccount": 3,
                  "accessTokenLifetimeSeconds": 900, "devOutbox": true, "passkeyCeremonyLifetimeSeconds": 300}}
                """#
            ),
            (
                "profiles",
                #"""
                {"profiles": {"default": {"appID": "com.example.app", "passkeyDomain": "example.com", "allowExport": true,
                  "allowedUIDs": [1002],
                  "androidCertificateFingerprints": ["AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89"],
                  "sessionPolicy": {"refreshBufferSeconds": 60, "autoRefresh": true, "transientRetries": 2,
                    "retryInitialDelayMilliseconds": 500, "retryMaxDelayMilliseconds": 4000, "activeThresholdSeconds": 30,
                    "restoreTimeoutSeconds": 5}},
                 "wallet-2": {"appID": "second"}}}
                """#
            ),
            ("invalid-unknown-key", #"{"colour": "blue"}"#),
        ]
        return files.map { (name: $0.0, bytes: Array($0.1.utf8)) }
    }
}
