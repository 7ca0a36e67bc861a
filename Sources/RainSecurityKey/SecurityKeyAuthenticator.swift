import Dispatch
import RainCore
import RainCrypto
import RainWebAuthn
import Synchronization

/// FIDO2 security keys as the daemon's own authenticator (`DaemonAuthenticator`).
///
/// A ceremony opens every plugged key and asks them all at once, so they all blink and the first
/// touched wins; the others get a CTAPHID CANCEL (`fido_dev_cancel`) and stop. A key with a PIN
/// is chosen by a touch first (libfido2's touch request, which creates nothing), then its PIN is
/// asked on the trusted prompt and the ceremony runs on it alone; a wrong PIN is asked again with
/// the tries left, until the key blocks it. Every way out (a touch, a timeout, a removed key, a
/// dismissed prompt, the call cancelled) waits for every key's ceremony to end and closes the
/// keys: nothing is left blinking or pending.
public struct SecurityKeyAuthenticator: DaemonAuthenticator {
    /// The keys to ask: the machine's (`SecurityKeys.list`) unless told.
    public typealias Listing = @Sendable () throws(RainError) -> [SecurityKeyInfo]

    private let list: Listing
    /// Blocking libfido2 calls run here, one thread per key in a ceremony: never on the Swift pool.
    private let queue = DispatchQueue(label: "rainwallet.security-key", attributes: .concurrent)

    /// An authenticator over the keys `list` returns.
    public init(list: @escaping Listing = { () throws(RainError) in try SecurityKeys.list() }) {
        self.list = list
    }

    /// The words the prompt uses while a key waits for its touch.
    public static let touchStatus = "touch your security key when it blinks"

    public func register(optionsJSON: String, context: DaemonAuthenticatorContext) async throws(RainError) -> String {
        let options = try PublicKeyCredentialCreationOptionsJSON.decode(json: optionsJSON)
        let rpID = options.rp.id ?? Self.host(of: context.origin)
        let clientData = CollectedClientData(
            type: CollectedClientData.createType, challenge: options.challenge.bytes, origin: context.origin
        ).serialized
        let hash = SHA256.hash(clientData)
        let user = SecurityKeyUser(id: options.user.id.bytes, name: options.user.name, displayName: options.user.displayName)
        let selection = options.authenticatorSelection
        let residentKey =
            selection?.requireResidentKey == true || selection?.residentKey == "required"
            || selection?.residentKey == "preferred"
        let excluded = (options.excludeCredentials ?? []).map(\.id.bytes)
        let rpName = options.rp.name
        let registration = try await run(context) { (device, pin) throws(RainError) in
            try device.makeCredential(
                rpID: rpID, rpName: rpName, clientDataHash: hash, user: user, residentKey: residentKey,
                excludeCredentialIDs: excluded, secretPIN: pin)
        }
        let attested =
            options.attestation == nil || options.attestation == "none" ? Self.anonymized(registration) : registration
        return try RegistrationResponseJSON(
            rawId: attested.credentialID,
            response: AuthenticatorAttestationResponseJSON(
                clientDataJSON: clientData, attestationObject: try attested.attestationObject(), transports: ["usb"]),
            authenticatorAttachment: "cross-platform"
        ).jsonString()
    }

    public func authenticate(optionsJSON: String, context: DaemonAuthenticatorContext) async throws(RainError) -> String {
        let options = try PublicKeyCredentialRequestOptionsJSON.decode(json: optionsJSON)
        let rpID = options.rpId ?? Self.host(of: context.origin)
        let clientData = CollectedClientData(
            type: CollectedClientData.getType, challenge: options.challenge.bytes, origin: context.origin
        ).serialized
        let hash = SHA256.hash(clientData)
        let allowed = (options.allowCredentials ?? []).map(\.id.bytes)
        let assertions = try await run(context) { (device, pin) throws(RainError) in
            try device.getAssertion(rpID: rpID, clientDataHash: hash, allowCredentialIDs: allowed, secretPIN: pin)
        }
        // A discoverable login may find several of the site's passkeys on one key: the first is
        // the one the key lists first (a key shows no account chooser of its own).
        guard let assertion = assertions.first else {
            throw RainError.securityKey(noCredentials: "sign in with the security key")
        }
        return try AuthenticationResponseJSON(
            rawId: assertion.credentialID,
            response: AuthenticatorAssertionResponseJSON(
                clientDataJSON: clientData, authenticatorData: assertion.authenticatorData, signature: assertion.signature,
                userHandle: assertion.userHandle),
            authenticatorAttachment: "cross-platform"
        ).jsonString()
    }

    /// What a browser sends for attestation conveyance `none` (WebAuthn §5.1.3): format `none`, an
    /// empty statement and a zero AAGUID, so the key's model and its batch certificate stay with
    /// the user (and a relying party that takes no certificates takes the credential).
    static func anonymized(_ registration: SecurityKeyRegistration) -> SecurityKeyRegistration {
        var anonymous = registration
        anonymous.attestationFormat = "none"
        anonymous.attestationStatement = .map([])
        // rpIdHash (32), flags (1), signCount (4), then the attested credential data's AAGUID (16).
        let aaguid = 37..<53
        if anonymous.authenticatorData.count >= aaguid.upperBound {
            anonymous.authenticatorData.replaceSubrange(aaguid, with: [UInt8](repeating: 0, count: aaguid.count))
        }
        return anonymous
    }

    /// The host of an `https://host` origin.
    static func host(of origin: String) -> String {
        origin.hasPrefix("https://") ? String(origin.dropFirst("https://".count)) : origin
    }

    // MARK: - One ceremony over every key

    /// What a key's part of the race ended with.
    private enum Outcome<R: Sendable>: Sendable {
        /// The ceremony ran on the key (no PIN was needed).
        case finished(R)
        /// The key was touched (or is the only one) and has a PIN: ask it, then run on this key.
        case needsPIN(SecurityKeyDevice)
    }

    /// Opens the keys, races them, and on a key with a PIN asks it and runs the ceremony there.
    /// - Parameter usesPIN: false for a ceremony that needs only a touch (an assertion with UP),
    ///   which a key with a PIN makes without it: every key then runs the ceremony at once.
    func run<R: Sendable>(
        _ context: DaemonAuthenticatorContext, usesPIN: Bool = true, status: String = Self.touchStatus,
        _ ceremony: @escaping @Sendable (SecurityKeyDevice, SecretBytes?) throws(RainError) -> R
    ) async throws(RainError) -> R {
        let list = self.list
        let milliseconds = Int(clamping: context.timeout.components.seconds * 1000)
        let keys = try await queue.runBlocking { () throws(RainError) -> [(SecurityKeyDevice, Bool)] in
            let infos = try list()
            var opened: [(SecurityKeyDevice, Bool)] = []
            var failure: RainError?
            for info in infos {
                do throws(RainError) {
                    let device = try SecurityKeyDevice(info, timeoutMilliseconds: milliseconds)
                    opened.append((device, usesPIN ? try device.capabilities().hasPIN : false))
                } catch {
                    failure = failure ?? error
                }
            }
            if opened.isEmpty {
                throw failure
                    ?? RainError(
                        .unavailable, "no security key is plugged in: plug one in and try again",
                        details: .init(reason: SecurityKeyFailure.notFound.rawValue))
            }
            return opened
        }
        let isAlone = keys.count == 1
        let timeout = context.timeout
        let outcome = try await context.prompt.whileWaiting(status) { () async throws(RainError) -> Outcome<R> in
            try await race(keys.map(\.0)) { (device) throws(RainError) -> Outcome<R> in
                guard let hasPIN = keys.first(where: { $0.0 === device })?.1, hasPIN else {
                    return .finished(try ceremony(device, nil))
                }
                return .needsPIN(device)
            } select: { (device, isCancelled) throws(RainError) in
                // A key with a PIN is chosen by a touch when there are others to choose from.
                guard !isAlone, keys.first(where: { $0.0 === device })?.1 == true else { return }
                try device.waitForTouch(timeout: timeout, isCancelled: isCancelled)
            }
        }
        switch outcome {
        case .finished(let result):
            return result
        case .needsPIN(let device):
            return try await withPIN(device, context, ceremony)
        }
    }

    /// Asks the PIN of `device` and runs the ceremony with it, again after each wrong PIN.
    private func withPIN<R: Sendable>(
        _ device: SecurityKeyDevice, _ context: DaemonAuthenticatorContext,
        _ ceremony: @escaping @Sendable (SecurityKeyDevice, SecretBytes?) throws(RainError) -> R
    ) async throws(RainError) -> R {
        let name = device.info.product.isEmpty ? "" : " (\(device.info.product))"
        var attemptsRemaining: Int?
        while true {
            let pin = try await context.prompt.askSecret(
                SecretQuestion(what: "the PIN of your security key\(name)", attemptsRemaining: attemptsRemaining))
            do throws(RainError) {
                return try await context.prompt.whileWaiting(Self.touchStatus) { () async throws(RainError) -> R in
                    try await race([device]) { (device) throws(RainError) -> R in
                        try ceremony(device, pin)
                    } select: { (_, _) throws(RainError) in
                    }
                }
            } catch  where error.details.reason == SecurityKeyFailure.pinInvalid.rawValue {
                attemptsRemaining = error.details.attemptsRemaining.map(Int.init)
            }
        }
    }

    /// Runs `body` on every key at once (after `select`, when it waits for a touch): the first to
    /// succeed wins and the others are cancelled; returns once every key's call has ended.
    /// - Throws: when every key failed, the first failure that is not a cancel (or the cancel); the
    ///   call's cancellation as RAIN_401 `security_key_cancelled`.
    private func race<T: Sendable>(
        _ devices: [SecurityKeyDevice], _ body: @escaping @Sendable (SecurityKeyDevice) throws(RainError) -> T,
        select: @escaping @Sendable (SecurityKeyDevice, @escaping @Sendable () -> Bool) throws(RainError) -> Void
    ) async throws(RainError) -> T {
        let state = RaceState(devices)
        let queue = self.queue
        let outcomes: [Result<T, RainError>] = await withTaskCancellationHandler {
            await withTaskGroup(of: Result<T, RainError>.self) { group in
                for device in devices {
                    group.addTask {
                        let result = await queue.runBlockingResult { () throws(RainError) -> T in
                            try select(device) { state.isOver }
                            guard !state.isOver else { throw RainError.securityKey(cancelled: "ask the security key") }
                            return try body(device)
                        }
                        if case .success = result { state.win(device) }
                        return result
                    }
                }
                group.addTask {
                    // A cancel sent before a key's request started is lost: repeat it until every
                    // key's call has ended.
                    while !state.isFinished {
                        if state.isOver { state.cancelLosers() }
                        // Not Task.sleep: in a cancelled call it returns at once, and this loop
                        // would spin on one of the pool's threads until the keys answer.
                        await queue.pause(milliseconds: 100)
                    }
                    return .failure(RainError.securityKey(cancelled: "ask the security key"))
                }
                var results: [Result<T, RainError>] = []
                for await result in group {
                    results.append(result)
                    if results.count == devices.count { state.finish() }
                }
                // The re-cancel loop ends only after every key's result came (`finish`): its own
                // result is the last, and no key's.
                return Array(results.dropLast())
            }
        } onCancel: {
            state.cancelAll()
        }
        if let winner = outcomes.lazy.compactMap({ try? $0.get() }).first, !state.isCallCancelled { return winner }
        if state.isCallCancelled {
            throw RainError(
                .userCancelled, "the call was cancelled; the security key stopped waiting",
                details: .init(reason: SecurityKeyFailure.cancelled.rawValue))
        }
        let failures = outcomes.compactMap { result -> RainError? in
            if case .failure(let error) = result { return error }
            return nil
        }
        throw failures.first(where: { $0.details.reason != SecurityKeyFailure.cancelled.rawValue }) ?? failures.first
            ?? RainError.securityKey(cancelled: "ask the security key")
    }
}

/// Who won a race of keys, and what to cancel.
private final class RaceState: Sendable {
    private struct State {
        var winner: ObjectIdentifier?
        var isCallCancelled = false
        var isFinished = false
    }

    private let devices: [SecurityKeyDevice]
    private let state = Mutex(State())

    init(_ devices: [SecurityKeyDevice]) { self.devices = devices }

    /// A key won, or the call was cancelled: no other key may start or go on.
    var isOver: Bool { state.withLock { $0.winner != nil || $0.isCallCancelled } }
    var isCallCancelled: Bool { state.withLock { $0.isCallCancelled } }
    var isFinished: Bool { state.withLock { $0.isFinished } }

    /// `device` succeeded: the first to do so wins and every other key is cancelled.
    func win(_ device: SecurityKeyDevice) {
        let isFirst = state.withLock { state in
            guard state.winner == nil, !state.isCallCancelled else { return false }
            state.winner = ObjectIdentifier(device)
            return true
        }
        if isFirst { cancelLosers() }
    }

    func cancelLosers() {
        let winner = state.withLock { $0.winner }
        for device in devices where ObjectIdentifier(device) != winner { device.cancel() }
    }

    func cancelAll() {
        state.withLock { $0.isCallCancelled = true }
        for device in devices { device.cancel() }
    }

    func finish() { state.withLock { $0.isFinished = true } }
}

extension DispatchQueue {
    /// Waits `milliseconds`, whether or not the task is cancelled.
    fileprivate func pause(milliseconds: Int) async {
        await withCheckedContinuation { continuation in
            asyncAfter(deadline: .now() + .milliseconds(milliseconds)) { continuation.resume() }
        }
    }

    /// `runBlocking`, its outcome as a value.
    fileprivate func runBlockingResult<T: Sendable>(
        _ body: @escaping @Sendable () throws(RainError) -> T
    ) async -> Result<T, RainError> {
        do throws(RainError) {
            return .success(try await runBlocking(body))
        } catch {
            return .failure(error)
        }
    }
}
