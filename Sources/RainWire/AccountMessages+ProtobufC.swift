internal import CProtobufC
internal import CRainProto
import Foundation
import RainCore

// Swift ⇄ protobuf-c for the account, profile and wallet messages (proto/wallet.proto); the
// shared pieces (contacts, passkeys, the session state) are in Messages+ProtobufC.swift.

extension RefreshSessionRequest {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> RefreshSessionRequest {
        try unpackMessage(bytes, name: "RefreshSessionRequest", rain__wallet__v1__refresh_session_request__init) {
            _ throws(RainError) in RefreshSessionRequest()
        }
    }
    public func encode() throws(RainError) -> [UInt8] { [] }
}

extension GetAccountRequest {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> GetAccountRequest {
        try unpackMessage(bytes, name: "GetAccountRequest", rain__wallet__v1__get_account_request__init) { _ throws(RainError) in
            GetAccountRequest()
        }
    }
    public func encode() throws(RainError) -> [UInt8] { [] }
}

extension AccountResponse {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> AccountResponse {
        try unpackMessage(bytes, name: "AccountResponse", rain__wallet__v1__account_response__init) { (p) throws(RainError) in
            AccountResponse(try p.pointee.account())
        }
    }
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__account_response__init)
        try m.set(self, arena)
        return packMessage(&m)
    }
}

extension ConfigureProfileRequest {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> ConfigureProfileRequest {
        try unpackMessage(bytes, name: "ConfigureProfileRequest", rain__wallet__v1__configure_profile_request__init) {
            (p) throws(RainError) in
            ConfigureProfileRequest(
                passkeyDomain: try readString(p.pointee.passkey_domain, field: "passkey domain"),
                sessionPolicy: readSessionPolicy(p.pointee.session_policy))
        }
    }
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__configure_profile_request__init)
        m.passkey_domain = try arena.string(passkeyDomain, field: "passkey domain")
        m.session_policy = sessionPolicy.map { cSessionPolicy($0, arena) }
        return packMessage(&m)
    }
}

extension ConfigureProfileResponse {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> ConfigureProfileResponse {
        try unpackMessage(bytes, name: "ConfigureProfileResponse", rain__wallet__v1__configure_profile_response__init) {
            (p) throws(RainError) in
            ConfigureProfileResponse(
                passkeyDomain: try readString(p.pointee.passkey_domain, field: "passkey domain"),
                sessionPolicy: readSessionPolicy(p.pointee.session_policy),
                configKeys: try readStrings(p.pointee.config_keys, count: p.pointee.n_config_keys, field: "config key"))
        }
    }
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__configure_profile_response__init)
        m.passkey_domain = try arena.string(passkeyDomain, field: "passkey domain")
        m.session_policy = sessionPolicy.map { cSessionPolicy($0, arena) }
        (m.n_config_keys, m.config_keys) = try arena.strings(configKeys, field: "config key")
        return packMessage(&m)
    }
}

/// A `SessionPolicy` submessage: each field in its own oneof, so an unset field stays nil.
private func readSessionPolicy(_ p: UnsafeMutablePointer<Rain__Wallet__V1__SessionPolicy>?) -> SessionPolicyFields? {
    guard let m = p?.pointee else { return nil }
    var f = SessionPolicyFields()
    if m.refresh_buffer_seconds_value_case
        == RAIN__WALLET__V1__SESSION_POLICY__REFRESH_BUFFER_SECONDS_VALUE_REFRESH_BUFFER_SECONDS
    {
        f.refreshBufferSeconds = m.refresh_buffer_seconds
    }
    if m.auto_refresh_value_case == RAIN__WALLET__V1__SESSION_POLICY__AUTO_REFRESH_VALUE_AUTO_REFRESH {
        f.autoRefresh = m.auto_refresh != 0
    }
    if m.transient_retries_value_case == RAIN__WALLET__V1__SESSION_POLICY__TRANSIENT_RETRIES_VALUE_TRANSIENT_RETRIES {
        f.transientRetries = m.transient_retries
    }
    if m.retry_initial_delay_milliseconds_value_case
        == RAIN__WALLET__V1__SESSION_POLICY__RETRY_INITIAL_DELAY_MILLISECONDS_VALUE_RETRY_INITIAL_DELAY_MILLISECONDS
    {
        f.retryInitialDelayMilliseconds = m.retry_initial_delay_milliseconds
    }
    if m.retry_max_delay_milliseconds_value_case
        == RAIN__WALLET__V1__SESSION_POLICY__RETRY_MAX_DELAY_MILLISECONDS_VALUE_RETRY_MAX_DELAY_MILLISECONDS
    {
        f.retryMaxDelayMilliseconds = m.retry_max_delay_milliseconds
    }
    if m.active_threshold_seconds_value_case
        == RAIN__WALLET__V1__SESSION_POLICY__ACTIVE_THRESHOLD_SECONDS_VALUE_ACTIVE_THRESHOLD_SECONDS
    {
        f.activeThresholdSeconds = m.active_threshold_seconds
    }
    if m.restore_timeout_seconds_value_case
        == RAIN__WALLET__V1__SESSION_POLICY__RESTORE_TIMEOUT_SECONDS_VALUE_RESTORE_TIMEOUT_SECONDS
    {
        f.restoreTimeoutSeconds = m.restore_timeout_seconds
    }
    return f
}

private func cSessionPolicy(
    _ f: SessionPolicyFields, _ arena: CArena
) -> UnsafeMutablePointer<Rain__Wallet__V1__SessionPolicy> {
    var c = cMessage(rain__wallet__v1__session_policy__init)
    if let v = f.refreshBufferSeconds {
        c.refresh_buffer_seconds_value_case =
            RAIN__WALLET__V1__SESSION_POLICY__REFRESH_BUFFER_SECONDS_VALUE_REFRESH_BUFFER_SECONDS
        c.refresh_buffer_seconds = v
    }
    if let v = f.autoRefresh {
        c.auto_refresh_value_case = RAIN__WALLET__V1__SESSION_POLICY__AUTO_REFRESH_VALUE_AUTO_REFRESH
        c.auto_refresh = v ? 1 : 0
    }
    if let v = f.transientRetries {
        c.transient_retries_value_case = RAIN__WALLET__V1__SESSION_POLICY__TRANSIENT_RETRIES_VALUE_TRANSIENT_RETRIES
        c.transient_retries = v
    }
    if let v = f.retryInitialDelayMilliseconds {
        c.retry_initial_delay_milliseconds_value_case =
            RAIN__WALLET__V1__SESSION_POLICY__RETRY_INITIAL_DELAY_MILLISECONDS_VALUE_RETRY_INITIAL_DELAY_MILLISECONDS
        c.retry_initial_delay_milliseconds = v
    }
    if let v = f.retryMaxDelayMilliseconds {
        c.retry_max_delay_milliseconds_value_case =
            RAIN__WALLET__V1__SESSION_POLICY__RETRY_MAX_DELAY_MILLISECONDS_VALUE_RETRY_MAX_DELAY_MILLISECONDS
        c.retry_max_delay_milliseconds = v
    }
    if let v = f.activeThresholdSeconds {
        c.active_threshold_seconds_value_case =
            RAIN__WALLET__V1__SESSION_POLICY__ACTIVE_THRESHOLD_SECONDS_VALUE_ACTIVE_THRESHOLD_SECONDS
        c.active_threshold_seconds = v
    }
    if let v = f.restoreTimeoutSeconds {
        c.restore_timeout_seconds_value_case =
            RAIN__WALLET__V1__SESSION_POLICY__RESTORE_TIMEOUT_SECONDS_VALUE_RESTORE_TIMEOUT_SECONDS
        c.restore_timeout_seconds = v
    }
    return arena.box(c)
}

private func cChain(_ chain: RainChain?) -> Rain__Wallet__V1__Chain {
    switch chain {
    case .ethereum: RAIN__WALLET__V1__CHAIN__CHAIN_ETHEREUM
    case .solana: RAIN__WALLET__V1__CHAIN__CHAIN_SOLANA
    case nil: RAIN__WALLET__V1__CHAIN__CHAIN_UNSPECIFIED
    }
}

/// nil for an unspecified or unknown chain.
private func readChain(_ chain: Rain__Wallet__V1__Chain) -> RainChain? {
    switch chain {
    case RAIN__WALLET__V1__CHAIN__CHAIN_ETHEREUM: .ethereum
    case RAIN__WALLET__V1__CHAIN__CHAIN_SOLANA: .solana
    default: nil
    }
}

extension GetWalletRequest {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> GetWalletRequest {
        try unpackMessage(bytes, name: "GetWalletRequest", rain__wallet__v1__get_wallet_request__init) { _ throws(RainError) in
            GetWalletRequest()
        }
    }
    public func encode() throws(RainError) -> [UInt8] { [] }
}

extension WalletResponse {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> WalletResponse {
        try unpackMessage(bytes, name: "WalletResponse", rain__wallet__v1__wallet_response__init) { (p) throws(RainError) in
            WalletResponse(try p.pointee.wallet())
        }
    }
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__wallet_response__init)
        try m.set(self, arena)
        return packMessage(&m)
    }
}

extension ExportRecoveryPhraseRequest {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> ExportRecoveryPhraseRequest {
        try unpackMessage(bytes, name: "ExportRecoveryPhraseRequest", rain__wallet__v1__export_recovery_phrase_request__init) {
            _ throws(RainError) in ExportRecoveryPhraseRequest()
        }
    }
    public func encode() throws(RainError) -> [UInt8] { [] }
}

extension ExportRecoveryPhraseResponse {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> ExportRecoveryPhraseResponse {
        try unpackMessage(bytes, name: "ExportRecoveryPhraseResponse", rain__wallet__v1__export_recovery_phrase_response__init) {
            (p) throws(RainError) in
            ExportRecoveryPhraseResponse(words: try readStrings(p.pointee.words, count: p.pointee.n_words, field: "word"))
        }
    }
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__export_recovery_phrase_response__init)
        (m.n_words, m.words) = try arena.strings(words, field: "word")
        return packMessage(&m)
    }
}

extension ExportPrivateKeyRequest {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> ExportPrivateKeyRequest {
        try unpackMessage(bytes, name: "ExportPrivateKeyRequest", rain__wallet__v1__export_private_key_request__init) {
            (p) throws(RainError) in ExportPrivateKeyRequest(chain: readChain(p.pointee.chain))
        }
    }
    public func encode() throws(RainError) -> [UInt8] {
        var m = cMessage(rain__wallet__v1__export_private_key_request__init)
        m.chain = cChain(chain)
        return packMessage(&m)
    }
}

extension ExportPrivateKeyResponse {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> ExportPrivateKeyResponse {
        try unpackMessage(bytes, name: "ExportPrivateKeyResponse", rain__wallet__v1__export_private_key_response__init) {
            (p) throws(RainError) in
            ExportPrivateKeyResponse(
                chain: readChain(p.pointee.chain), privateKey: try readString(p.pointee.private_key, field: "private key"))
        }
    }
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__export_private_key_response__init)
        m.chain = cChain(chain)
        m.private_key = try arena.string(privateKey, field: "private key")
        return packMessage(&m)
    }
}
