import Foundation
import RainCore
import RainCrypto
import RainKeyStore
import RainPlatformAuthenticator
import RainTestSupport
import RainWebAuthn
import Synchronization
import Testing

/// A fresh 0700 directory under /tmp, removed when the test ends.
final class PlatformTestDirectory {
    let path: String

    init() throws {
        path = "/tmp/rainplatform-test-\(UUID().uuidString.prefix(8).lowercased())"
        try FileManager.default.createDirectory(
            atPath: path, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// The person in front of the machine, scripted: records what the authenticator asked and answers
/// with the PINs queued (nil: no PIN), or refuses presence.
final class ScriptedUser: Sendable {
    private let presence = Mutex<[PlatformPresenceRequest]>([])
    private let pins = Mutex<[PlatformPINRequest]>([])
    private let answers = Mutex<[String?]>([])
    private let isRefusing = Mutex(false)

    /// Queues the answers to the next PIN requests, in order.
    func willAnswerPINs(_ digits: String?...) { answers.withLock { $0 += digits } }
    /// Refuses (RAIN_401) every presence confirmation from now on.
    func refusePresence() { isRefusing.withLock { $0 = true } }

    var presenceRequests: [PlatformPresenceRequest] { presence.withLock { $0 } }
    var pinRequests: [PlatformPINRequest] { pins.withLock { $0 } }

    var hooks: PlatformAuthenticatorHooks {
        PlatformAuthenticatorHooks(
            confirmPresence: { (request) throws(RainError) in
                self.presence.withLock { $0.append(request) }
                if self.isRefusing.withLock({ $0 }) {
                    throw RainError(.userCancelled, "the user dismissed the prompt", details: .init(reason: "prompt_dismissed"))
                }
            },
            askPIN: { (request) throws(RainError) -> PlatformPIN? in
                self.pins.withLock { $0.append(request) }
                let answer: String?? = self.answers.withLock { $0.isEmpty ? nil : $0.removeFirst() }
                guard let answer, let digits = answer else { return nil }
                var bytes = Array(digits.utf8)
                return try PlatformPIN(digits: &bytes)
            })
    }
}

/// One software TPM, a state directory with the `tpm2` provider's storage key, and a relying
/// party (`example.com`, our own verifier) to judge what the authenticator answers.
final class PlatformFixture {
    let tpm: SoftwareTPM
    let state: PlatformTestDirectory
    let provider: TPM2KeyProvider
    let storageKey: SymmetricKey
    let user = ScriptedUser()
    let rp = RelyingParty(
        rpID: "example.com", rpName: "Example", allowedOrigins: RelyingParty.origins(domain: "example.com"))

    /// Starts a TPM of its own. With `lockout`, sets its dictionary-attack parameters first: 5
    /// tries, one forgotten every 60 s (long enough that none is forgotten while a test runs on a
    /// loaded machine), never the reference defaults (3 tries, 1,000 s) on a shared TPM.
    init(lockout: Bool = false) throws {
        tpm = try SoftwareTPM()
        state = try PlatformTestDirectory()
        provider = TPM2KeyProvider(stateDirectory: state.path, tcti: tpm.tcti)
        if lockout {
            try provider.setDictionaryAttackParameters(maximumTries: 5, recoveryInterval: 60, lockoutRecovery: 10)
        }
        storageKey = try provider.loadOrCreateSecret(.storage)
    }

    deinit { tpm.stop() }

    var passkeyDirectory: String { "\(state.path)/platform" }

    /// A new authenticator over the same state: what a restarted daemon makes.
    func authenticator() throws -> TPM2PlatformAuthenticator {
        try TPM2PlatformAuthenticator(
            provider: provider, storageKey: storageKey, directory: passkeyDirectory, hooks: user.hooks)
    }

    /// Registers a passkey for `userHandle` and verifies the registration with the relying party.
    func register(
        _ authenticator: TPM2PlatformAuthenticator, userHandle: [UInt8], rp: RelyingParty? = nil,
        origin: String = "https://example.com"
    ) async throws -> VerifiedCredential {
        let rp = rp ?? self.rp
        let challenge = try RelyingParty.makeChallenge()
        let options = rp.creationOptions(
            challenge: challenge,
            user: PublicKeyCredentialUserEntityJSON(id: userHandle, name: "alice@\(rp.rpID)", displayName: "Alice"))
        let json = try await authenticator.createCredential(optionsJSON: try options.jsonString(), origin: origin)
        return try rp.verifyRegistration(try RegistrationResponseJSON.decode(json: json), expectedChallenge: challenge)
    }

    /// Asks for an assertion and verifies it with the relying party against `credential`.
    func assertion(
        _ authenticator: TPM2PlatformAuthenticator, credential: VerifiedCredential, userHandle: [UInt8],
        allow: [[UInt8]] = []
    ) async throws -> VerifiedAssertion {
        let challenge = try RelyingParty.makeChallenge()
        let options = rp.requestOptions(challenge: challenge, allowCredentialIDs: allow)
        let json = try await authenticator.getAssertion(optionsJSON: try options.jsonString(), origin: "https://example.com")
        let stored = StoredCredential(
            id: credential.credentialID, publicKey: credential.publicKey.encoded, signCount: 0, isBackupEligible: false,
            userHandle: userHandle)
        return try rp.verifyAuthentication(
            try AuthenticationResponseJSON.decode(json: json), expectedChallenge: challenge, credential: stored,
            allowCredentialIDs: allow)
    }

    /// What a program of the same user can do without the authenticator: open the credential file
    /// with the storage key (the TPM unseals it for any program of the user), take a key blob.
    func stolenKeyBlobs() throws -> [[UInt8]] {
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: "\(passkeyDirectory)/platform-passkeys.sealed")))
        let header = Array(bytes.prefix(5))
        let key = try HKDFSHA256.deriveKey(from: storageKey, salt: [], info: "rain/platform-passkeys/v1")
        let plaintext = try AESGCM.open(
            try AESGCM.SealedBox(combined: Array(bytes.dropFirst(5))), using: key, authenticating: header)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(plaintext)) as? [String: Any])
        let credentials = try #require(json["credentials"] as? [[String: Any]])
        return try credentials.map { credential in
            let text = try #require(credential["keyBlob"] as? String)
            return try #require(Base64URL.decode(text))
        }
    }
}

/// `error`'s code and reason, for one `#expect`.
func codeAndReason(_ error: RainError?) -> String {
    guard let error else { return "no error" }
    return "\(error.code) \(error.details.reason ?? "-")"
}
