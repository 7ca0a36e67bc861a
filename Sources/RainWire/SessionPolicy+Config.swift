import RainCore

// A profile's policy travels in the config file's names and units (wallet.proto's SessionPolicy);
// the daemon and the client library hold a RainWalletSessionPolicy. The two meet here.
extension SessionPolicy {
    /// Every field of `policy` (counts and milliseconds saturated to `UInt32`).
    public init(_ policy: RainWalletSessionPolicy) {
        func ms(_ d: Duration) -> UInt32 { UInt32(clamping: d.milliseconds) }
        self.init(
            refreshBufferSeconds: policy.refreshBuffer.timeInterval, isAutoRefreshEnabled: policy.isAutoRefreshEnabled,
            transientRetries: UInt32(clamping: policy.transientRetries),
            retryInitialDelayMilliseconds: ms(policy.retryInitialDelay), retryMaxDelayMilliseconds: ms(policy.retryMaxDelay),
            activeThresholdSeconds: policy.activeThreshold.timeInterval,
            restoreTimeoutSeconds: policy.restoreTimeout.timeInterval)
    }

    /// The set fields by their config-file key, as JSON numbers and booleans.
    public var configValues: [String: JSONValue] {
        var values: [String: JSONValue] = [:]
        if let v = refreshBufferSeconds { values["refreshBufferSeconds"] = .number(v) }
        if let v = isAutoRefreshEnabled { values["autoRefresh"] = .bool(v) }
        if let v = transientRetries { values["transientRetries"] = .number(Double(v)) }
        if let v = retryInitialDelayMilliseconds { values["retryInitialDelayMilliseconds"] = .number(Double(v)) }
        if let v = retryMaxDelayMilliseconds { values["retryMaxDelayMilliseconds"] = .number(Double(v)) }
        if let v = activeThresholdSeconds { values["activeThresholdSeconds"] = .number(v) }
        if let v = restoreTimeoutSeconds { values["restoreTimeoutSeconds"] = .number(v) }
        return values
    }
}
