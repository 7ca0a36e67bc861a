import Foundation
import RainCore
import RainWire

/// FuzzRequests: the first input byte picks a payload type (modulo the number of types), the rest
/// is decoded with that type's `decode`, the same protobuf-c unpack path (with its NUL-in-string
/// check) that DeviceService, AuthorityService, RemoteAuthority and the client library use.
enum RequestFuzzing {
    struct Entry: Sendable {
        let name: String
        let type: any WireMessage.Type
        let run: @Sendable ([UInt8]) -> FuzzOutcome
        let sample: @Sendable () throws(RainError) -> [UInt8]
    }

    /// Every `WireMessage` the proto files' methods declare: those with a meaningful sample below,
    /// then every other declared message (in declaration order, with its proto3 defaults as the
    /// sample), so a new method's messages are fuzzed without an edit here. Appending keeps old
    /// seeds' first byte pointing at the same type; reordering does not.
    static let entries: [Entry] = {
        var entries = samples
        for declaration in Method.declarations + AuthorityMethod.declarations {
            for type in [declaration.requestType, declaration.responseType]
            where !entries.contains(where: { $0.type == type }) {
                if let entry = defaultEntry(type) { entries.append(entry) }
            }
        }
        return entries
    }()

    /// The messages with a hand-written, meaningful sample (one with the fields a real one has).
    private static let samples: [Entry] = {
        let email = RainWalletContact.email("user@example.com")
        let phone = RainWalletContact.phone("+15551234567")
        let date = Date(unixMilliseconds: 1_780_000_000_123)
        let session = SessionSnapshot(
            authState: .authenticated, sessionState: .active(expiresAt: date), accountID: "acc_1", walletID: "wal_1",
            contact: email, hasActiveSession: true)
        let tokens = SessionTokens(accessToken: "at_abc", refreshToken: "rt_def", accessLifetime: .seconds(900))
        let passkey = PasskeyInfo(credentialID: "Y3JlZA", rpID: "example.com", createdAt: date, lastUsedAt: date)
        let key = [UInt8](repeating: 0xA5, count: 32)
        return [
            entry(GetInfoRequest()),
            entry(
                GetInfoResponse(
                    daemonVersion: "0.1.0", protocolVersion: 1, capabilities: ["login-code", "watch"], maxFrameBytes: 1 << 20)),
            entry(SendLoginCodeRequest(contact: email)),
            entry(SendLoginCodeResponse(contact: phone, expiresAt: date)),
            entry(ConfirmLoginCodeRequest(code: "123456")),
            entry(ConfirmLoginCodeResponse(session: session, isAccountCreated: true)),
            entry(LogoutRequest()),
            entry(LogoutResponse(hadSession: true, isRevokedAtAuthority: true)),
            entry(GetSessionStateRequest()),
            entry(session),
            entry(AwaitRestoreRequest(timeoutMilliseconds: 2_000)),
            entry(WatchRequest()),
            entry(WatchEvent(sequence: 3, kind: .sessionExpired, state: session, expiryReason: .revokedElsewhere)),
            entry(ListOutboxRequest()),
            entry(ListOutboxResponse(entries: [OutboxEntry(contact: email, code: "123456", sentAt: date, appID: "default")])),
            entry(SlowEchoRequest(delayMilliseconds: 10, data: [1, 2, 3])),
            entry(SlowEchoResponse(data: [1, 2, 3])),
            entry(RefreshSessionRequest()),
            entry(GetAccountRequest()),
            entry(
                AccountResponse(
                    accountID: "acc_1", walletID: "wal_1", createdAt: date, contacts: [email, phone], needsBackupEmail: true,
                    passkeys: [passkey])),
            entry(ConfirmContactVerificationRequest(code: "654321")),
            entry(ConfigureProfileRequest(passkeyDomain: "example.com")),
            entry(ConfigureProfileResponse(passkeyDomain: "example.com")),
            entry(GetWalletRequest()),
            entry(
                WalletResponse(
                    walletID: "wal_1", createdAt: date, ethereumAddress: "0x52908400098527886E0F7030069857D2E4169EE7",
                    solanaAddress: "4Nd1mBQtrMJVYVfKf2PJy9NZUZdTAsp7D4xWLs4gDB4T")),
            entry(ExportRecoveryPhraseRequest()),
            entry(ExportRecoveryPhraseResponse(words: ["abandon", "ability", "able"])),
            entry(ExportPrivateKeyRequest(chain: .solana)),
            entry(ExportPrivateKeyResponse(chain: .ethereum, privateKey: "0x" + String(repeating: "ab", count: 32))),
            entry(
                SignRequest(
                    chain: .ethereum, chainID: 8453, payload: Array("Sign in to example.com".utf8),
                    from: "0x52908400098527886E0F7030069857D2E4169EE7", idempotencyKey: [UInt8](repeating: 7, count: 16))),
            entry(
                SignResponse(
                    chain: .ethereum, address: "0x52908400098527886E0F7030069857D2E4169EE7",
                    signature: [UInt8](repeating: 1, count: 65), signedTransaction: [2, 3],
                    transactionHash: [UInt8](repeating: 4, count: 32), signedBytesSha256: [UInt8](repeating: 5, count: 32))),
            entry(BeginPasskeyRequest()),
            entry(
                BeginPasskeyResponse(
                    ceremonyID: "cer_1", optionsJSON: #"{"challenge":"AAAA"}"#, origin: "https://example.com", expiresAt: date)),
            entry(FinishPasskeyRequest(ceremonyID: "cer_1", responseJSON: #"{"id":"Y3JlZA","type":"public-key"}"#)),
            entry(FinishPasskeyResponse(session: session, isAccountCreated: false)),
            entry(CancelPasskeyRequest(ceremonyID: "cer_1")),
            entry(CancelPasskeyResponse()),
            // The authority hop: the authority's value types, seeds named after their proto messages.
            entry(
                SendCodeRequest(appID: "default", deviceID: "dev_abcdefgh", contact: email),
                as: "AuthoritySendLoginCodeRequest"),
            entry(SendCodeResult(challengeID: "chl_1", contact: email, expiresAt: date), as: "AuthoritySendLoginCodeResponse"),
            entry(
                ConfirmCodeRequest(
                    appID: "default", deviceID: "dev_abcdefgh", challengeID: "chl_1", code: "123456", devicePublicKey: key),
                as: "AuthorityConfirmLoginCodeRequest"),
            entry(
                LoginResult(accountID: "acc_1", walletID: "wal_1", accountCreated: true, tokens: tokens),
                as: "AuthorityConfirmLoginCodeResponse"),
            entry(
                RefreshRequest(appID: "default", deviceID: "dev_abcdefgh", refreshToken: "rt_def"),
                as: "AuthorityRefreshSessionRequest"),
            entry(AuthorityRefreshSessionResponse(tokens: tokens)),
            entry(AuthorityAccountInfoRequest(appID: "default", accessToken: "at_abc")),
            entry(
                AccountInfo(
                    accountID: "acc_1", walletID: "wal_1", createdAt: date, contacts: [email], needsBackupEmail: false,
                    passkeys: [passkey]),
                as: "AuthorityAccountInfoResponse"),
            entry(
                AuthoritySendContactVerificationRequest(
                    appID: "default", deviceID: "dev_abcdefgh", accessToken: "at_abc", contact: phone)),
            entry(
                AuthorityConfirmContactVerificationRequest(
                    appID: "default", deviceID: "dev_abcdefgh", accessToken: "at_abc", challengeID: "chl_2", code: "654321")),
            entry(AuthorityRevokeSessionRequest(appID: "default", refreshToken: "rt_def")),
            entry(AuthorityRevokeSessionResponse()),
            entry(AuthorityWalletRequest(appID: "default", accessToken: "at_abc")),
            entry(
                AuthoritySignRequest(
                    appID: "default", accessToken: "at_abc", kind: "message",
                    request: SignRequest(chain: .solana, payload: Array("gm".utf8)),
                    confirmedSha256: [UInt8](repeating: 6, count: 32))),
            entry(
                WalletInfo(
                    walletID: "wal_1", createdAt: date, ethereumAddress: "0x52908400098527886E0F7030069857D2E4169EE7",
                    solanaAddress: "4Nd1mBQtrMJVYVfKf2PJy9NZUZdTAsp7D4xWLs4gDB4T"),
                as: "AuthorityWalletResponse"),
            entry(
                WalletSecrets(mnemonic: ["abandon", "ability"], ethereumPrivateKeyHex: "0xab", solanaKeypairBase58: "4Nd1"),
                as: "AuthorityExportWalletResponse"),
            entry(
                PasskeyBeginRequest(
                    appID: "default", deviceID: "dev_abcdefgh", rpID: "example.com", origins: ["https://example.com"],
                    accessToken: "at_abc"),
                as: "AuthorityPasskeyBeginRequest"),
            entry(
                PasskeyCeremony(ceremonyID: "cer_1", optionsJSON: #"{"challenge":"AAAA"}"#, expiresAt: date),
                as: "AuthorityPasskeyBeginResponse"),
            entry(
                PasskeyFinishRequest(
                    appID: "default", deviceID: "dev_abcdefgh", ceremonyID: "cer_1", responseJSON: "{}", devicePublicKey: key),
                as: "AuthorityPasskeyFinishRequest"),
            entry(
                PasskeyFinishResult(
                    login: LoginResult(accountID: "acc_1", walletID: "wal_1", accountCreated: false, tokens: tokens)),
                as: "AuthorityPasskeyFinishResponse"),
            entry(AuthorityPasskeyCancelRequest(appID: "default", deviceID: "dev_abcdefgh", ceremonyID: "cer_1")),
            entry(AuthorityPasskeyCancelResponse()),
        ]
    }()

    /// An entry named `name` (the seed's file name), by default the Swift type's name.
    private static func entry<M: WireMessage & Equatable>(_ sample: M, as name: String? = nil) -> Entry {
        Entry(
            name: name ?? "\(M.self)", type: M.self, run: { roundTrip(M.self, $0) },
            sample: { () throws(RainError) in try sample.encode() })
    }

    /// An entry whose sample is the message with every field at its proto3 default (no bytes); nil
    /// for a type that is not `Equatable` (every generated message is).
    private static func defaultEntry(_ type: any WireMessage.Type) -> Entry? {
        guard let type = type as? any (WireMessage & Equatable).Type else { return nil }
        return defaultEntry(of: type)
    }

    private static func defaultEntry<M: WireMessage & Equatable>(of _: M.Type) -> Entry {
        Entry(
            name: "\(M.self)", type: M.self, run: { roundTrip(M.self, $0) },
            sample: { () throws(RainError) in try M.decode([]).encode() })
    }

    /// Decodes; a decoded message must re-encode, and its encoding must decode to the same value.
    static func roundTrip<M: WireMessage & Equatable>(_: M.Type, _ bytes: [UInt8]) -> FuzzOutcome {
        .decoded(by: { () throws(RainError) -> M in try M.decode(bytes) }) { message in
            do throws(RainError) {
                guard try M.decode(message.encode()) == message else { return .broken("\(M.self): decode(encode(m)) != m") }
            } catch {
                return .broken("\(M.self): a decoded message does not re-encode (\(error.code), \(error.details.reason ?? "-"))")
            }
            return .accepted
        }
    }

    static func run(_ input: [UInt8]) -> FuzzOutcome {
        guard let selector = input.first else { return .accepted }
        return entries[Int(selector) % entries.count].run(Array(input.dropFirst()))
    }

    static func seeds() throws(RainError) -> [(name: String, bytes: [UInt8])] {
        var seeds: [(name: String, bytes: [UInt8])] = []
        for (index, entry) in entries.enumerated() {
            seeds.append((name: entry.name, bytes: [UInt8(index)] + (try entry.sample())))
        }
        return seeds
    }

    /// A valid request payload for every method of the device protocol and of the authority hop,
    /// in declaration order.
    static func methodSamples() throws(RainError) -> [(method: String, payload: [UInt8])] {
        var out: [(method: String, payload: [UInt8])] = []
        for declaration in Method.declarations + AuthorityMethod.declarations {
            guard let entry = entries.first(where: { $0.type == declaration.requestType }) else {
                throw RainError(.internalError, "no fuzzing sample for \(declaration.requestType)")
            }
            out.append((method: declaration.name, payload: try entry.sample()))
        }
        return out
    }
}
