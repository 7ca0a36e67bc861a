import Foundation
import RainCore
import Testing

@testable import RainWire

/// A session state with every field set, for the messages that embed one.
private let everySessionField = SessionSnapshot(
    authState: .authenticated, sessionState: .active(expiresAt: Date(unixMilliseconds: 1_800_000_000_000)),
    accountID: "acc_1", walletID: "wal_1", contact: .email("a@example.com"), hasActiveSession: true,
    storageWarning: "disk full",
    authorityLink: AuthorityLinkState(
        phase: .degraded, lastError: "timeout", since: Date(unixMilliseconds: 5),
        revocationStream: RevocationStreamState(isUp: false, lastError: "tls_unknown_ca", since: Date(unixMilliseconds: 6))),
    storage: StorageHealthState(isAvailable: false, lastError: "the TPM cannot be reached", since: Date(unixMilliseconds: 7)))

/// A session policy with every field set.
private let everyPolicyField = SessionPolicy(
    refreshBufferSeconds: 60, isAutoRefreshEnabled: false, transientRetries: 3, retryInitialDelayMilliseconds: 100,
    retryMaxDelayMilliseconds: 5_000, activeThresholdSeconds: 30, restoreTimeoutSeconds: 5)

/// One value of every message scripts/gen-proto generates, every field set (a field left at its
/// default would not show a field the conversion drops).
private let everyGeneratedMessage: [any WireMessage & Equatable] = [
    // proto/storage.proto
    StorageStatusRequest(),
    StorageKeyInfo(slot: "storage", keyID: "k1", algorithm: "aes-256-gcm", protects: "the state directory"),
    StorageStatusResponse(
        provider: "file", location: "/var/lib/rainwallet",
        keys: [
            StorageKeyInfo(slot: "storage", keyID: "k1", algorithm: "aes-256-gcm", protects: "state"),
            StorageKeyInfo(slot: "device", keyID: "k2", algorithm: "ecdsa-p256", protects: "the device"),
        ],
        unavailable: "RAIN_501: locked", migrationTo: "tpm2", migrationStep: "sealed"),
    StorageBackupRequest(passphrase: Array("correct horse".utf8)),
    StorageBackupResponse(backup: [0, 1, 2, 255], keyID: "k1"),
    StorageMigrateRequest(to: "tpm2"),
    StorageMigrateProgress(line: "sealed the storage key"),
    // proto/access.proto
    AppEntry(
        profile: "default", path: "/usr/bin/python3 /opt/app.py", contentHash: "ab:cd", approvedAt: "2026-12-06T10:00:00Z",
        source: "prompt", isOwner: true),
    ListAppsRequest(),
    ListAppsResponse(apps: [
        AppEntry(profile: "default", path: "/usr/bin/a", source: "prompt", isOwner: true),
        AppEntry(profile: "work", path: "/usr/bin/b", contentHash: "ef", approvedAt: "2026-12-06T10:00:00Z", source: "policy"),
    ]),
    ApproveAppRequest(path: "/usr/bin/python3", script: "/opt/app.py"),
    ApproveAppResponse(app: AppEntry(profile: "default", path: "/usr/bin/a", source: "first-use", isOwner: true)),
    RevokeAppRequest(path: "/usr/bin/a"),
    RevokeAppResponse(),
    SettingChange(key: "profiles.default.allowExport", confirmed: "false", requested: "true"),
    GetSettingsRequest(),
    GetSettingsResponse(
        confirmedDigest: "ab", pending: [SettingChange(key: "a", confirmed: "1"), SettingChange(key: "b", requested: "2")],
        fixedByPolicy: ["c", "d"], requestedDigest: "cd"),
    ConfirmSettingsRequest(requestedDigest: "cd"),
    ConfirmSettingsResponse(confirmedDigest: "cd"),
    RegisterPromptRequest(terminal: "/dev/pts/3"),
    RegisterPromptResponse(terminal: "/dev/pts/3"),
    AddPromptKeyRequest(),
    AddPromptKeyResponse(name: "YubiKey 5", keyCount: 1),
    RemovePromptKeysRequest(),
    RemovePromptKeysResponse(removed: 2),
    GetPromptRequest(),
    GetPromptResponse(
        terminal: "/dev/pts/3", hasDisplay: true, multiplexer: "tmux", multiplexerPID: 4242,
        confirmationKeys: ["YubiKey 5", "security key"]),
    // proto/audit.proto
    ReadAuditLogRequest(sinceMilliseconds: 1_800_000_000_123, isVerifyRequested: true),
    ReadAuditLogResponse(
        lines: [#"{"seq":1}"#, #"{"seq":2}"#], isTruncated: true,
        verification: AuditVerificationMessage(entries: 7, problem: "edited", file: "audit.jsonl.1", line: 3, message: "edited")),
    AuditVerificationMessage(
        entries: UInt64.max, problem: "torn", file: "audit.jsonl", line: UInt32.max, message: "torn", anchor: "matched"),
    // proto/authority_device.proto
    AuthorityBeginDeviceProofRequest(),
    AuthorityBeginDeviceProofResponse(challenge: Array(repeating: 0xA5, count: 32)),
    AuthorityProveDeviceRequest(deviceID: "d1", devicePublicKey: [1, 2, 3], signature: [4, 5, 6]),
    AuthorityProveDeviceResponse(),
    AuthorityRebindDeviceRequest(deviceID: "d1", newPublicKey: [7, 8]),
    AuthorityRebindDeviceResponse(),
    AuthorityConfirmDeviceKeyRequest(deviceID: "d1", devicePublicKey: [9]),
    AuthorityConfirmDeviceKeyResponse(),
    AuthorityWatchRevocationsRequest(),
    AuthorityRevocation(
        appID: "app", deviceID: "d1", reason: "replaced", heartbeatIntervalMilliseconds: 15_000, isRecheck: true,
        changeSequence: 7),
    AuthorityRenewLeaseRequest(ackedSequence: 7),
    AuthorityRenewLeaseResponse(leaseMilliseconds: 1000, changeSequence: 8),
    // proto/wallet.proto (its SessionState, Contact, PasskeyInfo and a few enums are hand-written types)
    GetInfoRequest(),
    GetInfoResponse(
        daemonVersion: "1.2.3", protocolVersion: 1, capabilities: ["dev-outbox", "passkeys"], maxFrameBytes: 1 << 20,
        storageProvider: "tpm2", ptraceScope: "1", auditAnchor: "mismatch",
        authorityLink: AuthorityLinkState(
            phase: .unreachable, lastError: "unknown CA", since: Date(unixMilliseconds: 8),
            revocationStream: RevocationStreamState(isUp: true, since: Date(unixMilliseconds: 9))),
        storage: StorageHealthState(isAvailable: true, since: Date(unixMilliseconds: 10))),
    SendLoginCodeRequest(contact: .email("a@example.com")),
    SendLoginCodeResponse(contact: .phone("+15551234567"), expiresAtMilliseconds: 1_800_000_000_123),
    ConfirmLoginCodeRequest(code: "123456"),
    ConfirmLoginCodeResponse(session: everySessionField, isAccountCreated: true),
    LogoutRequest(),
    LogoutResponse(hadSession: true, isRevokedAtAuthority: true),
    GetSessionStateRequest(),
    AwaitRestoreRequest(timeoutMilliseconds: 2_500),
    WatchRequest(),
    WatchEvent(sequence: 7, kind: .sessionExpired, state: everySessionField, expiryReason: .revokedElsewhere),
    ListOutboxRequest(),
    OutboxEntry(contact: .email("a@example.com"), code: "654321", sentAtMilliseconds: 1_800_000_000_000, appID: "app"),
    ListOutboxResponse(entries: [
        OutboxEntry(contact: .email("a@example.com"), code: "1", sentAtMilliseconds: 1, appID: "a"),
        OutboxEntry(contact: .phone("+15551234567"), code: "2", sentAtMilliseconds: 2, appID: "b"),
    ]),
    SlowEchoRequest(delayMilliseconds: 20, data: [0, 1, 255]),
    SlowEchoResponse(data: [0, 1, 255]),
    RefreshSessionRequest(),
    GetAccountRequest(),
    AccountResponse(
        accountID: "acc_1", walletID: "wal_1", createdAtMilliseconds: 1_800_000_000_000,
        contacts: [.email("a@example.com"), .phone("+15551234567")], needsBackupEmail: true,
        passkeys: [
            PasskeyInfo(
                credentialID: "cred", rpID: "example.com", createdAt: Date(unixMilliseconds: 1_800_000_000_000),
                lastUsedAt: Date(unixMilliseconds: 1_800_000_000_500), kind: .securityKey)
        ]),
    ConfigureProfileRequest(passkeyDomain: "example.com", sessionPolicy: everyPolicyField),
    ConfigureProfileResponse(passkeyDomain: "example.com", sessionPolicy: everyPolicyField, configKeys: ["autoRefresh"]),
    ChangePasskeyDomainRequest(passkeyDomain: "other.com"),
    ChangePasskeyDomainResponse(passkeyDomain: "other.com", previousDomain: "example.com"),
    everyPolicyField,
    GetWalletRequest(),
    WalletResponse(
        walletID: "wal_1", createdAtMilliseconds: 1_800_000_000_000, ethereumAddress: "0xabc", solanaAddress: "Sol1"),
    ExportRecoveryPhraseRequest(),
    ExportRecoveryPhraseResponse(words: ["abandon", "ability"]),
    ExportPrivateKeyRequest(chain: .solana),
    ExportPrivateKeyResponse(chain: .ethereum, privateKey: "0x" + String(repeating: "ab", count: 32)),
    SignRequest(
        chain: .solana, chainID: 8453, cluster: "devnet", payload: [1, 2, 3], from: "0xabc",
        idempotencyKey: [UInt8](repeating: 7, count: 16)),
    SignResponse(
        chain: .ethereum, address: "0xabc", signature: [UInt8](repeating: 1, count: 65), signedTransaction: [2, 3],
        transactionHash: [UInt8](repeating: 4, count: 32), signedBytesSha256: [UInt8](repeating: 5, count: 32)),
    BeginPasskeyRequest(),
    BeginPasskeyResponse(ceremonyID: "c1", optionsJSON: "{}", origin: "https://example.com", expiresAtMilliseconds: 5),
    FinishPasskeyRequest(ceremonyID: "c1", responseJSON: "{}"),
    FinishPasskeyResponse(session: everySessionField, isAccountCreated: true),
    CancelPasskeyRequest(ceremonyID: "c1"),
    PasskeyRemoveRequest(credentialID: "Y3JlZA"),
    RunPasskeyRequest(ceremony: .login, authenticator: .platform, timeoutMilliseconds: 30_000),
    CancelPasskeyResponse(),
    ConfirmContactVerificationRequest(code: "123456"),
    // proto/authority.proto
    SendCodeRequest(appID: "app", deviceID: "d1", contact: .email("a@example.com")),
    SendCodeResult(challengeID: "chl_1", contact: .phone("+15551234567"), expiresAtMilliseconds: 1_800_000_000_123),
    SessionTokens(accessToken: "at", refreshToken: "rt", accessLifetimeMilliseconds: 900_000),
    PasskeyFinishResult(
        isLoggedIn: true, accountID: "acc_1", walletID: "wal_1", accountCreated: true,
        tokens: SessionTokens(accessToken: "at", refreshToken: "rt", accessLifetimeMilliseconds: 1)),
    ConfirmCodeRequest(
        appID: "app", deviceID: "d1", challengeID: "chl_1", code: "123456", devicePublicKey: [1, 2, 3],
        idempotencyKey: Array(repeating: 7, count: 16)),
    LoginResult(
        accountID: "acc_1", walletID: "wal_1", accountCreated: true,
        tokens: SessionTokens(accessToken: "at", refreshToken: "rt", accessLifetime: .milliseconds(900_000))),
    RefreshRequest(appID: "app", deviceID: "d1", refreshToken: "rt"),
    AuthorityRefreshSessionResponse(
        tokens: SessionTokens(accessToken: "at", refreshToken: "rt", accessLifetime: .milliseconds(1))),
    AuthorityAccountInfoRequest(appID: "app", accessToken: "at"),
    AccountInfo(
        accountID: "acc_1", walletID: "wal_1", createdAtMilliseconds: 1_800_000_000_000,
        contacts: [.email("a@example.com"), .phone("+15551234567")], needsBackupEmail: true,
        passkeys: [
            PasskeyInfo(
                credentialID: "cred", rpID: "example.com", createdAt: Date(unixMilliseconds: 1_800_000_000_000),
                lastUsedAt: Date(unixMilliseconds: 1_800_000_000_500))
        ]),
    AuthorityRevokeSessionRequest(appID: "app", refreshToken: "rt"),
    AuthorityRevokeSessionResponse(),
    AuthorityWalletRequest(appID: "app", accessToken: "at"),
    AuthoritySignRequest(
        appID: "app", accessToken: "at", kind: "transaction", request: SignRequest(chain: .ethereum, payload: [9]),
        confirmedSha256: [UInt8](repeating: 6, count: 32)),
    WalletInfo(walletID: "wal_1", createdAtMilliseconds: 1_800_000_000_000, ethereumAddress: "0xabc", solanaAddress: "Sol1"),
    WalletSecrets(
        mnemonic: ["abandon", "ability"], ethereumPrivateKeyHex: "0x" + String(repeating: "ab", count: 32),
        solanaKeypairBase58: "Sol1"),
    PasskeyBeginRequest(
        appID: "app", deviceID: "d1", rpID: "example.com", origins: ["https://example.com"], accessToken: "at"),
    PasskeyCeremony(ceremonyID: "pkc_1", optionsJSON: "{}", expiresAtMilliseconds: 1_800_000_000_123),
    PasskeyFinishRequest(
        appID: "app", deviceID: "d1", ceremonyID: "pkc_1", responseJSON: "{}", devicePublicKey: [1, 2],
        idempotencyKey: Array(repeating: 3, count: 16)),
    AuthorityPasskeyCancelRequest(appID: "app", deviceID: "d1", ceremonyID: "pkc_1"),
    AuthorityRemovePasskeyRequest(appID: "app", accessToken: "rwa_x", credentialID: "Y3JlZA"),
    AuthorityPasskeyCancelResponse(),
    AuthoritySendContactVerificationRequest(appID: "app", deviceID: "d1", accessToken: "at", contact: .phone("+15551234567")),
    AuthorityConfirmContactVerificationRequest(
        appID: "app", deviceID: "d1", accessToken: "at", challengeID: "chl_1", code: "123456",
        idempotencyKey: Array(repeating: 9, count: 16)),
    AuthorityAuditAnchor(entries: UInt64.max, headHash: String(repeating: "ab", count: 32)),
    AuthorityAnchorAuditHeadRequest(deviceID: "d1", head: AuthorityAuditAnchor(entries: 7, headHash: "cd")),
    AuthorityAnchorAuditHeadResponse(),
    AuthorityGetAuditAnchorRequest(deviceID: "d1"),
    AuthorityGetAuditAnchorResponse(anchor: AuthorityAuditAnchor(entries: 1, headHash: "ef")),
]

/// A message of each generated file with a NUL in a string, top-level or nested.
private let withNUL: [any WireMessage] = [
    StorageMigrateRequest(to: "tpm2\0file"),
    StorageStatusResponse(keys: [StorageKeyInfo(keyID: "k\0")]),
    ApproveAppRequest(path: "/usr/bin/a\0/usr/bin/b"),
    ListAppsResponse(apps: [AppEntry(profile: "de\0fault")]),
    GetSettingsResponse(pending: [SettingChange(key: "k", confirmed: "a\0b")]),
    ReadAuditLogResponse(verification: AuditVerificationMessage(file: "audit\0.jsonl")),
    AuthorityRevocation(appID: "a\0pp"),
    AccountResponse(passkeys: [PasskeyInfo(credentialID: "c\0", rpID: "example.com", createdAt: Date(), lastUsedAt: nil)]),
    WatchEvent(state: SessionSnapshot(authState: .authenticated, sessionState: .none, accountID: "acc\0")),
    LoginResult(tokens: SessionTokens(accessToken: "a\0t", refreshToken: "rt", accessLifetime: .zero)),
]

/// Encodes `message`, decodes the bytes as the same type.
private func roundTripped<M: WireMessage & Equatable>(_ message: M) throws(RainError) -> M {
    try M.decode(try message.encode())
}

private func roundTrips<M: WireMessage & Equatable>(_ message: M) throws(RainError) -> Bool {
    try roundTripped(message) == message
}

private func decodes<M: WireMessage>(_ bytes: [UInt8], as _: M) throws(RainError) {
    _ = try M.decode(bytes)
}

private func hex(_ s: String) -> [UInt8] {
    stride(from: 0, to: s.count, by: 2).map {
        let start = s.index(s.startIndex, offsetBy: $0)
        return UInt8(s[start..<s.index(start, offsetBy: 2)], radix: 16) ?? 0
    }
}

@Suite("Messages generated by scripts/gen-proto")
struct GeneratedMessagesTests {
    @Test("a message with every field set round-trips through encode and decode", arguments: everyGeneratedMessage.indices)
    func roundTrip(index: Int) throws {
        let message = everyGeneratedMessage[index]
        #expect(try roundTrips(message), "\(type(of: message))")
    }

    @Test("the table has a value of every generated message")
    func tableIsComplete() throws {
        let generated = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../Sources/RainWire/Generated").standardized
        var declared: Set<String> = []
        for file in try FileManager.default.contentsOfDirectory(atPath: generated.path) where file.hasSuffix(".pb.swift") {
            let text = try String(contentsOf: generated.appendingPathComponent(file), encoding: .utf8)
            for line in text.split(separator: "\n") where line.hasPrefix("public struct ") && line.contains(": WireMessage") {
                declared.insert(String(line.dropFirst("public struct ".count).prefix { $0 != ":" && $0 != " " }))
            }
        }
        #expect(!declared.isEmpty)
        #expect(Set(everyGeneratedMessage.map { "\(type(of: $0))" }) == declared)
    }

    // The expected bytes come from protoc, an encoder independent of protobuf-c:
    // printf 'backup: "\001\002\003"\nkey_id: "k1"\n' \
    //   | protoc --encode=rain.wallet.v1.StorageBackupResponse -Iproto proto/storage.proto | xxd -p
    @Test("storage.proto: the bytes are the ones protoc encodes, and decode back")
    func storageBytesMatchProtoc() throws {
        let message = StorageBackupResponse(backup: [1, 2, 3], keyID: "k1")
        let bytes = hex("0a0301020312026b31")
        #expect(try message.encode() == bytes)
        #expect(try StorageBackupResponse.decode(bytes) == message)
    }

    // printf 'confirmed_digest: "ab"\npending { key: "k" confirmed: "1" has_confirmed: true }\n'\
    //   'fixed_by_policy: "p"\nrequested_digest: "cd"\n' \
    //   | protoc --encode=rain.wallet.v1.GetSettingsResponse -Iproto proto/access.proto | xxd -p
    @Test("access.proto: the bytes are the ones protoc encodes, a has_ flag and all, and decode back")
    func accessBytesMatchProtoc() throws {
        let message = GetSettingsResponse(
            confirmedDigest: "ab", pending: [SettingChange(key: "k", confirmed: "1")], fixedByPolicy: ["p"],
            requestedDigest: "cd")
        let bytes = hex("0a02616212080a016b12013118011a017022026364")
        #expect(try message.encode() == bytes)
        #expect(try GetSettingsResponse.decode(bytes) == message)
    }

    // printf 'lines: "a"\ntruncated: true\nverification { entries: 2 problem: "torn" file: "f" line: 3 message: "m" }\n' \
    //   | protoc --encode=rain.wallet.v1.ReadAuditLogResponse -Iproto proto/audit.proto | xxd -p
    @Test("audit.proto: the bytes are the ones protoc encodes, and decode back")
    func auditBytesMatchProtoc() throws {
        let message = ReadAuditLogResponse(
            lines: ["a"], isTruncated: true,
            verification: AuditVerificationMessage(entries: 2, problem: "torn", file: "f", line: 3, message: "m"))
        let bytes = hex("0a016110011a1008021204746f726e1a016620032a016d")
        #expect(try message.encode() == bytes)
        #expect(try ReadAuditLogResponse.decode(bytes) == message)
    }

    // printf 'app_id: "a"\ndevice_id: "d"\nreason: "r"\nheartbeat_interval_ms: 15000\nrecheck: true\n' \
    //   | protoc --encode=rain.wallet.v1.AuthorityRevocation -Iproto proto/authority_device.proto | xxd -p
    @Test("authority_device.proto: the bytes are the ones protoc encodes, and decode back")
    func authorityDeviceBytesMatchProtoc() throws {
        let message = AuthorityRevocation(
            appID: "a", deviceID: "d", reason: "r", heartbeatIntervalMilliseconds: 15_000, isRecheck: true)
        let bytes = hex("0a01611201641a01722098752801")
        #expect(try message.encode() == bytes)
        #expect(try AuthorityRevocation.decode(bytes) == message)
    }

    @Test("a revocation message is a heartbeat, a recheck or a revocation")
    func revocationKinds() {
        #expect(AuthorityRevocation.heartbeat(interval: .seconds(15)).heartbeatIntervalMilliseconds == 15_000)
        #expect(AuthorityRevocation.heartbeat(interval: .zero).isHeartbeat)
        #expect(AuthorityRevocation.recheck.isRecheck && !AuthorityRevocation.recheck.isHeartbeat)
        #expect(!AuthorityRevocation(appID: "a", deviceID: "d", reason: "logout").isHeartbeat)
    }

    @Test("an absent optional string stays nil and an empty one stays empty")
    func presenceFlags() throws {
        for change in [SettingChange(key: "k"), SettingChange(key: "k", confirmed: "", requested: "")] {
            #expect(try roundTripped(change) == change)
        }
    }

    @Test("a string with NUL is refused with RAIN_102 when encoding, at any depth", arguments: withNUL.indices)
    func nulRefused(index: Int) throws {
        let error = #expect(throws: RainError.self) { try withNUL[index].encode() }
        #expect(error?.code == .invalidArgument)
    }

    @Test("bytes with NUL in a string field, at any depth, are refused with RAIN_102")
    func nulInBytesRefused() throws {
        // StorageMigrateRequest.to = "a\0b"; ListAppsResponse.apps[0].profile = "a\0b".
        let cases: [([UInt8], any WireMessage)] = [
            ([0x0A, 0x03, 0x61, 0x00, 0x62], StorageMigrateRequest()),
            ([0x0A, 0x05, 0x0A, 0x03, 0x61, 0x00, 0x62], ListAppsResponse()),
        ]
        for (bytes, message) in cases {
            let error = #expect(throws: RainError.self) { try decodes(bytes, as: message) }
            #expect(error?.code == .invalidArgument)
            #expect(error?.details.reason == "nul_in_string")
        }
    }

    @Test("a string that is not UTF-8 is refused with RAIN_102")
    func invalidUTF8Refused() throws {
        let error = #expect(throws: RainError.self) { try RevokeAppRequest.decode([0x0A, 0x02, 0xC3, 0x28]) }
        #expect(error?.code == .invalidArgument)
        #expect(error?.details.reason == "invalid_utf8")
    }

    @Test("malformed bytes are refused with RAIN_102 naming the message")
    func malformedRefused() throws {
        let error = #expect(throws: RainError.self) { try StorageStatusResponse.decode([0x0A, 0x05, 0x61]) }
        #expect(error?.code == .invalidArgument)
        #expect(error?.details.reason == "undecodable_payload")
        #expect(error?.message.contains("StorageStatusResponse") == true)
    }

    @Test("a secret field prints redacted, alone and inside other values")
    func secretRedacted() {
        let request = StorageBackupRequest(passphrase: Array("hunter2".utf8))
        for printed in ["\(request)", String(reflecting: request), "\([request])", "\(Optional(request) as Any)"] {
            #expect(printed.contains("<redacted>"), "\(printed)")
            #expect(!printed.contains(Array("hunter2".utf8).map(String.init).joined(separator: ", ")), "\(printed)")
        }
    }

    @Test("a storage status and its message convert both ways, its absent parts as empty strings")
    func storageStatusConversion() {
        let key = StorageStatus.Key(slot: "storage", keyID: "k1", algorithm: "aes-256-gcm", protects: "state")
        for status in [
            StorageStatus(provider: "file", location: "/x", keys: [key], unavailable: nil, migration: nil),
            StorageStatus(
                provider: "tpm2", location: "/y", keys: [], unavailable: "RAIN_501: locked",
                migration: .init(to: "file", step: "copied")),
        ] {
            #expect(StorageStatusResponse(status: status).status == status)
        }
        let none = StorageStatus(provider: "f", location: "", keys: [], unavailable: nil, migration: nil)
        #expect(StorageStatusResponse(status: none).unavailable == "")
    }

    @Test("a field the proto marks Required refuses a message without it: RAIN_102 naming the field")
    func requiredFieldIsRefusedWhenAbsent() throws {
        // app_id "app" and nothing else: an AuthoritySendLoginCodeRequest or -Response without its contact.
        let bytes: [UInt8] = [0x0a, 0x03, 0x61, 0x70, 0x70]
        let request = #expect(throws: RainError.self) { try SendCodeRequest.decode(bytes) }
        #expect(request?.code == .invalidArgument)
        #expect(request?.details.field == "contact")
        let result = #expect(throws: RainError.self) { try SendCodeResult.decode(bytes) }
        #expect(result?.code == .invalidArgument)
        #expect(result?.details.field == "contact")
    }

    @Test("a passkey finish without a login is sent as an empty tokens message and read back as no login")
    func passkeyFinishWithoutLogin() throws {
        let none = PasskeyFinishResult(login: nil)
        // Only field 5 (tokens), empty: what this message has always carried without a login.
        #expect(try none.encode() == [0x2a, 0x00])
        #expect(try PasskeyFinishResult.decode([0x2a, 0x00]).login == nil)
        let login = LoginResult(
            accountID: "acc_1", walletID: "wal_1", accountCreated: true,
            tokens: SessionTokens(accessToken: "at", refreshToken: "rt", accessLifetime: .seconds(900)))
        #expect(try PasskeyFinishResult.decode(PasskeyFinishResult(login: login).encode()).login == login)
    }
}
