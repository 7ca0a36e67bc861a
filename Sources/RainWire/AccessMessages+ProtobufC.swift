internal import CProtobufC
internal import CRainProto
import RainCore

// Swift ⇄ protobuf-c for the per-app access messages (proto/access.proto).

private func cAppEntry(_ e: AppEntry, _ arena: CArena) throws(RainError) -> UnsafeMutablePointer<Rain__Wallet__V1__AppEntry> {
    var c = cMessage(rain__wallet__v1__app_entry__init)
    c.profile = try arena.string(e.profile, field: "profile")
    c.path = try arena.string(e.path, field: "path")
    c.content_hash = try arena.string(e.contentHash, field: "content_hash")
    c.approved_at = try arena.string(e.approvedAt, field: "approved_at")
    c.source = try arena.string(e.source, field: "source")
    c.is_owner = e.isOwner ? 1 : 0
    return arena.box(c)
}

private func readAppEntry(_ p: UnsafeMutablePointer<Rain__Wallet__V1__AppEntry>?) throws(RainError) -> AppEntry? {
    guard let c = p?.pointee else { return nil }
    return AppEntry(
        profile: try readString(c.profile, field: "profile"), path: try readString(c.path, field: "path"),
        contentHash: try readString(c.content_hash, field: "content_hash"),
        approvedAt: try readString(c.approved_at, field: "approved_at"), source: try readString(c.source, field: "source"),
        isOwner: c.is_owner != 0)
}

extension ListAppsRequest {
    /// Decodes a `ListAppsRequest` (empty).
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> ListAppsRequest {
        try unpackMessage(bytes, name: "ListAppsRequest", rain__wallet__v1__list_apps_request__init) { _ throws(RainError) in
            ListAppsRequest()
        }
    }
    /// Encodes (zero bytes).
    public func encode() throws(RainError) -> [UInt8] { [] }
}

extension ListAppsResponse {
    /// Decodes a `ListAppsResponse`.
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> ListAppsResponse {
        try unpackMessage(bytes, name: "ListAppsResponse", rain__wallet__v1__list_apps_response__init) { (p) throws(RainError) in
            ListAppsResponse(
                apps: try readList(p.pointee.apps, count: p.pointee.n_apps) { (e) throws(RainError) in try readAppEntry(e) })
        }
    }
    /// Encodes a `ListAppsResponse`.
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__list_apps_response__init)
        (m.n_apps, m.apps) = try arena.list(apps) { (e) throws(RainError) in try cAppEntry(e, arena) }
        return packMessage(&m)
    }
}

extension ApproveAppRequest {
    /// Decodes an `ApproveAppRequest`.
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> ApproveAppRequest {
        try unpackMessage(bytes, name: "ApproveAppRequest", rain__wallet__v1__approve_app_request__init) {
            (p) throws(RainError) in
            ApproveAppRequest(
                path: try readString(p.pointee.path, field: "path"), script: try readString(p.pointee.script, field: "script"))
        }
    }
    /// Encodes an `ApproveAppRequest`.
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__approve_app_request__init)
        m.path = try arena.string(path, field: "path")
        m.script = try arena.string(script, field: "script")
        return packMessage(&m)
    }
}

extension ApproveAppResponse {
    /// Decodes an `ApproveAppResponse`.
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> ApproveAppResponse {
        try unpackMessage(bytes, name: "ApproveAppResponse", rain__wallet__v1__approve_app_response__init) {
            (p) throws(RainError) in
            ApproveAppResponse(app: try readAppEntry(p.pointee.app))
        }
    }
    /// Encodes an `ApproveAppResponse`.
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__approve_app_response__init)
        if let app { m.app = try cAppEntry(app, arena) }
        return packMessage(&m)
    }
}

extension RevokeAppRequest {
    /// Decodes a `RevokeAppRequest`.
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> RevokeAppRequest {
        try unpackMessage(bytes, name: "RevokeAppRequest", rain__wallet__v1__revoke_app_request__init) { (p) throws(RainError) in
            RevokeAppRequest(path: try readString(p.pointee.path, field: "path"))
        }
    }
    /// Encodes a `RevokeAppRequest`.
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__revoke_app_request__init)
        m.path = try arena.string(path, field: "path")
        return packMessage(&m)
    }
}

extension RevokeAppResponse {
    /// Decodes a `RevokeAppResponse` (empty).
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> RevokeAppResponse {
        try unpackMessage(bytes, name: "RevokeAppResponse", rain__wallet__v1__revoke_app_response__init) { _ throws(RainError) in
            RevokeAppResponse()
        }
    }
    /// Encodes (zero bytes).
    public func encode() throws(RainError) -> [UInt8] { [] }
}

extension GetSettingsRequest {
    /// Decodes a `GetSettingsRequest` (empty).
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> GetSettingsRequest {
        try unpackMessage(bytes, name: "GetSettingsRequest", rain__wallet__v1__get_settings_request__init) {
            _ throws(RainError) in
            GetSettingsRequest()
        }
    }
    /// Encodes (zero bytes).
    public func encode() throws(RainError) -> [UInt8] { [] }
}

extension GetSettingsResponse {
    /// Decodes a `GetSettingsResponse`.
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> GetSettingsResponse {
        try unpackMessage(bytes, name: "GetSettingsResponse", rain__wallet__v1__get_settings_response__init) {
            (p) throws(RainError) in
            let m = p.pointee
            let pending = try readList(m.pending, count: m.n_pending) { (e) throws(RainError) -> SettingChange? in
                guard let c = e?.pointee else { return nil }
                return SettingChange(
                    key: try readString(c.key, field: "key"),
                    confirmed: c.has_confirmed != 0 ? try readString(c.confirmed, field: "confirmed") : nil,
                    requested: c.has_requested != 0 ? try readString(c.requested, field: "requested") : nil)
            }
            return GetSettingsResponse(
                confirmedDigest: try readString(m.confirmed_digest, field: "confirmed_digest"), pending: pending,
                fixedByPolicy: try readStrings(m.fixed_by_policy, count: m.n_fixed_by_policy, field: "fixed_by_policy"),
                requestedDigest: try readString(m.requested_digest, field: "requested_digest"))
        }
    }
    /// Encodes a `GetSettingsResponse`.
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__get_settings_response__init)
        m.confirmed_digest = try arena.string(confirmedDigest, field: "confirmed_digest")
        m.requested_digest = try arena.string(requestedDigest, field: "requested_digest")
        (m.n_pending, m.pending) = try arena.list(pending) { (change) throws(RainError) in
            var c = cMessage(rain__wallet__v1__setting_change__init)
            c.key = try arena.string(change.key, field: "key")
            c.confirmed = try arena.string(change.confirmed ?? "", field: "confirmed")
            c.has_confirmed = change.confirmed == nil ? 0 : 1
            c.requested = try arena.string(change.requested ?? "", field: "requested")
            c.has_requested = change.requested == nil ? 0 : 1
            return arena.box(c)
        }
        (m.n_fixed_by_policy, m.fixed_by_policy) = try arena.strings(fixedByPolicy, field: "fixed_by_policy")
        return packMessage(&m)
    }
}

extension ConfirmSettingsRequest {
    /// Decodes a `ConfirmSettingsRequest`.
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> ConfirmSettingsRequest {
        try unpackMessage(bytes, name: "ConfirmSettingsRequest", rain__wallet__v1__confirm_settings_request__init) {
            (p) throws(RainError) in
            ConfirmSettingsRequest(requestedDigest: try readString(p.pointee.requested_digest, field: "requested_digest"))
        }
    }
    /// Encodes a `ConfirmSettingsRequest`.
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__confirm_settings_request__init)
        m.requested_digest = try arena.string(requestedDigest, field: "requested_digest")
        return packMessage(&m)
    }
}

extension ConfirmSettingsResponse {
    /// Decodes a `ConfirmSettingsResponse`.
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> ConfirmSettingsResponse {
        try unpackMessage(bytes, name: "ConfirmSettingsResponse", rain__wallet__v1__confirm_settings_response__init) {
            (p) throws(RainError) in
            ConfirmSettingsResponse(confirmedDigest: try readString(p.pointee.confirmed_digest, field: "confirmed_digest"))
        }
    }
    /// Encodes a `ConfirmSettingsResponse`.
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__confirm_settings_response__init)
        m.confirmed_digest = try arena.string(confirmedDigest, field: "confirmed_digest")
        return packMessage(&m)
    }
}

extension RegisterPromptRequest {
    /// Decodes a `RegisterPromptRequest`.
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> RegisterPromptRequest {
        try unpackMessage(bytes, name: "RegisterPromptRequest", rain__wallet__v1__register_prompt_request__init) {
            (p) throws(RainError) in
            RegisterPromptRequest(terminal: try readString(p.pointee.terminal, field: "terminal"))
        }
    }
    /// Encodes a `RegisterPromptRequest`.
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__register_prompt_request__init)
        m.terminal = try arena.string(terminal, field: "terminal")
        return packMessage(&m)
    }
}

extension RegisterPromptResponse {
    /// Decodes a `RegisterPromptResponse`.
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> RegisterPromptResponse {
        try unpackMessage(bytes, name: "RegisterPromptResponse", rain__wallet__v1__register_prompt_response__init) {
            (p) throws(RainError) in
            RegisterPromptResponse(terminal: try readString(p.pointee.terminal, field: "terminal"))
        }
    }
    /// Encodes a `RegisterPromptResponse`.
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__register_prompt_response__init)
        m.terminal = try arena.string(terminal, field: "terminal")
        return packMessage(&m)
    }
}
