internal import CFido2
import RainCore
import RainWebAuthn
import Synchronization

/// An opened security key (owns a `fido_dev_t`).
///
/// Every ceremony blocks until the key answers, the user touches it, or the timeout passes: run
/// them off the Swift concurrency pool. One ceremony at a time per key; ``cancel()`` may be
/// called from another thread while one runs.
// @unchecked Sendable: the `fido_dev_t` is written by libfido2 only in `init` (open), in `deinit`
// (close, free) and by the one ceremony `busy` admits at a time; `cancel()` only sends a CTAPHID
// CANCEL report through it, which libfido2 supports during a ceremony.
public final class SecurityKeyDevice: @unchecked Sendable {
    /// The key this is.
    public let info: SecurityKeyInfo
    private let device: OpaquePointer
    private let timeoutMilliseconds: Int?
    private let busy = Mutex(false)

    /// Opens a key: CTAPHID INIT (a channel of its own), then `authenticatorGetInfo`.
    /// - Parameters:
    ///   - info: from ``SecurityKeys/list()``.
    ///   - timeoutMilliseconds: how long a ceremony may wait for the key (and its touch); nil waits
    ///     until the key itself gives up.
    /// - Throws: RAIN_404 `security_key_removed` when the key cannot be opened; RAIN_501 otherwise.
    public init(_ info: SecurityKeyInfo, timeoutMilliseconds: Int? = nil) throws(RainError) {
        _ = SecurityKeys.libraryReady
        guard let device = fido_dev_new() else {
            throw RainError(.internalError, "fido_dev_new failed", details: .init(reason: SecurityKeyFailure.failed.rawValue))
        }
        var status = FIDO_ERR_SUCCESS
        if info.isInjected {
            // Must come before fido_dev_open: it also tells libfido2 the handle is not a hidraw
            // context (whose report lengths it would otherwise read through the handle).
            var io = FidoIOBridge.io()
            status = fido_dev_set_io_functions(device, &io)
        }
        if status == FIDO_ERR_SUCCESS, let timeoutMilliseconds {
            status = fido_dev_set_timeout(device, Int32(clamping: timeoutMilliseconds))
        }
        if status == FIDO_ERR_SUCCESS {
            status = fido_dev_open(device, info.path)
        }
        guard status == FIDO_ERR_SUCCESS else {
            var owned: OpaquePointer? = device
            fido_dev_free(&owned)
            // An open that fails is a key that went away (or never answered INIT).
            throw status == FIDO_ERR_INTERNAL || status == FIDO_ERR_RX || status == FIDO_ERR_TX
                ? RainError.securityKey(FIDO_ERR_RX, "open \(info.path)") : RainError.securityKey(status, "open \(info.path)")
        }
        self.info = info
        self.device = device
        self.timeoutMilliseconds = timeoutMilliseconds
    }

    deinit {
        _ = fido_dev_close(device)
        var owned: OpaquePointer? = device
        fido_dev_free(&owned)
    }

    /// Whether the key speaks CTAP2 (it answered INIT with the CBOR capability).
    public var isFIDO2: Bool { fido_dev_is_fido2(device) }

    /// The key's `authenticatorGetInfo`.
    /// - Throws: a `SecurityKeyFailure` reason when the key fails.
    public func capabilities() throws(RainError) -> SecurityKeyCapabilities {
        try ceremony("read the security key's info") { () throws(RainError) in
            guard let info = fido_cbor_info_new() else { throw RainError.securityKey(FIDO_ERR_INTERNAL, "read info") }
            defer {
                var owned: OpaquePointer? = info
                fido_cbor_info_free(&owned)
            }
            let status = fido_dev_get_cbor_info(device, info)
            guard status == FIDO_ERR_SUCCESS else { throw RainError.securityKey(status, "read the security key's info") }
            var versions: [String] = []
            if let names = fido_cbor_info_versions_ptr(info) {
                for index in 0..<fido_cbor_info_versions_len(info) { names[index].map { versions.append(String(cString: $0)) } }
            }
            var options: [String: Bool] = [:]
            if let names = fido_cbor_info_options_name_ptr(info), let values = fido_cbor_info_options_value_ptr(info) {
                for index in 0..<fido_cbor_info_options_len(info) {
                    if let name = names[index] { options[String(cString: name)] = values[index] }
                }
            }
            return SecurityKeyCapabilities(
                isFIDO2: fido_dev_is_fido2(device), versions: versions, options: options,
                aaguid: fidoBytes(fido_cbor_info_aaguid_ptr(info), fido_cbor_info_aaguid_len(info)),
                pinProtocols: fidoBytes(fido_cbor_info_protocols_ptr(info), fido_cbor_info_protocols_len(info)),
                maximumMessageSize: fido_cbor_info_maxmsgsiz(info))
        }
    }

    /// Creates an ES256 credential (`authenticatorMakeCredential`); the key blinks until touched.
    /// - Parameters:
    ///   - rpID: the relying party ID (`example.com`).
    ///   - rpName: the relying party's name, stored with a discoverable credential.
    ///   - clientDataHash: SHA-256 of the client data JSON (32 bytes).
    ///   - user: the account.
    ///   - residentKey: store a discoverable credential (a passkey) on the key.
    ///   - excludeCredentialIDs: credentials the account already has; a key holding one refuses.
    ///   - pin: the key's PIN, when it has one (then the credential is user-verified).
    /// - Returns: the credential and its attestation.
    /// - Throws: RAIN_202 (`security_key_pin_invalid` with `attemptsRemaining`,
    ///   `security_key_pin_auth_blocked`, `security_key_pin_blocked`, `security_key_pin_required`),
    ///   RAIN_401 (`security_key_timeout`, `security_key_cancelled`), RAIN_404
    ///   (`security_key_removed`), RAIN_302 (`security_key_credential_excluded`), RAIN_501.
    public func makeCredential(
        rpID: String, rpName: String, clientDataHash: [UInt8], user: SecurityKeyUser, residentKey: Bool,
        excludeCredentialIDs: [[UInt8]] = [], pin: String? = nil
    ) throws(RainError) -> SecurityKeyRegistration {
        try makeCredential(
            rpID: rpID, rpName: rpName, clientDataHash: clientDataHash, user: user, residentKey: residentKey,
            excludeCredentialIDs: excludeCredentialIDs, secretPIN: Self.secret(pin))
    }

    /// ``makeCredential(rpID:rpName:clientDataHash:user:residentKey:excludeCredentialIDs:pin:)`` with
    /// the PIN in memory that is zeroed when released (as the prompt returns it).
    public func makeCredential(
        rpID: String, rpName: String, clientDataHash: [UInt8], user: SecurityKeyUser, residentKey: Bool,
        excludeCredentialIDs: [[UInt8]] = [], secretPIN pin: SecretBytes?
    ) throws(RainError) -> SecurityKeyRegistration {
        let operation = "make a credential on the security key"
        return try ceremony(operation) { () throws(RainError) in
            guard let credential = fido_cred_new() else { throw RainError.securityKey(FIDO_ERR_INTERNAL, operation) }
            defer {
                var owned: OpaquePointer? = credential
                fido_cred_free(&owned)
            }
            try check(fido_cred_set_type(credential, COSE_ES256), operation)
            try check(
                clientDataHash.withUnsafeBufferPointer { fido_cred_set_clientdata_hash(credential, $0.baseAddress, $0.count) },
                operation)
            try check(fido_cred_set_rp(credential, rpID, rpName), operation)
            try check(
                user.id.withUnsafeBufferPointer {
                    fido_cred_set_user(credential, $0.baseAddress, $0.count, user.name, user.displayName, nil)
                }, operation)
            try check(fido_cred_set_rk(credential, residentKey ? FIDO_OPT_TRUE : FIDO_OPT_OMIT), operation)
            for id in excludeCredentialIDs {
                try check(id.withUnsafeBufferPointer { fido_cred_exclude(credential, $0.baseAddress, $0.count) }, operation)
            }
            try withPIN(pin) { (pin) throws(RainError) in try run(operation) { fido_dev_make_cred(device, credential, pin) } }
            let statementBytes = fidoBytes(fido_cred_attstmt_ptr(credential), fido_cred_attstmt_len(credential))
            let statement = statementBytes.isEmpty ? CBORValue.map([]) : try CBORDecoder.decode(statementBytes)
            return SecurityKeyRegistration(
                credentialID: fidoBytes(fido_cred_id_ptr(credential), fido_cred_id_len(credential)),
                authenticatorData: fidoBytes(fido_cred_authdata_raw_ptr(credential), fido_cred_authdata_raw_len(credential)),
                attestationFormat: fido_cred_fmt(credential).map { String(cString: $0) } ?? "none",
                attestationStatement: statement)
        }
    }

    /// Signs a challenge with a credential on the key (`authenticatorGetAssertion`, then
    /// `authenticatorGetNextAssertion` for each further discoverable credential).
    /// - Parameters:
    ///   - rpID: the relying party ID.
    ///   - clientDataHash: SHA-256 of the client data JSON (32 bytes).
    ///   - allowCredentialIDs: the account's credentials; empty for a discoverable login.
    ///   - pin: the key's PIN, to have the assertion user-verified.
    /// - Returns: one assertion per matching credential (several only for a discoverable login).
    /// - Throws: as ``makeCredential(rpID:rpName:clientDataHash:user:residentKey:excludeCredentialIDs:pin:)``,
    ///   and RAIN_404 `security_key_no_credentials`.
    public func getAssertion(
        rpID: String, clientDataHash: [UInt8], allowCredentialIDs: [[UInt8]] = [], pin: String? = nil
    ) throws(RainError) -> [SecurityKeyAssertion] {
        try getAssertion(
            rpID: rpID, clientDataHash: clientDataHash, allowCredentialIDs: allowCredentialIDs, secretPIN: Self.secret(pin))
    }

    /// ``getAssertion(rpID:clientDataHash:allowCredentialIDs:pin:)`` with the PIN in memory that is
    /// zeroed when released.
    public func getAssertion(
        rpID: String, clientDataHash: [UInt8], allowCredentialIDs: [[UInt8]] = [], secretPIN pin: SecretBytes?
    ) throws(RainError) -> [SecurityKeyAssertion] {
        let operation = "sign in with the security key"
        return try ceremony(operation) { () throws(RainError) in
            guard let assertion = fido_assert_new() else { throw RainError.securityKey(FIDO_ERR_INTERNAL, operation) }
            defer {
                var owned: OpaquePointer? = assertion
                fido_assert_free(&owned)
            }
            try check(fido_assert_set_rp(assertion, rpID), operation)
            try check(
                clientDataHash.withUnsafeBufferPointer { fido_assert_set_clientdata_hash(assertion, $0.baseAddress, $0.count) },
                operation)
            for id in allowCredentialIDs {
                try check(id.withUnsafeBufferPointer { fido_assert_allow_cred(assertion, $0.baseAddress, $0.count) }, operation)
            }
            try withPIN(pin) { (pin) throws(RainError) in try run(operation) { fido_dev_get_assert(device, assertion, pin) } }
            var results: [SecurityKeyAssertion] = []
            for index in 0..<fido_assert_count(assertion) {
                // libfido2 keeps an assertion's authenticator data CBOR-encoded (a byte string).
                let wrapped = fidoBytes(fido_assert_authdata_ptr(assertion, index), fido_assert_authdata_len(assertion, index))
                guard case .bytes(let authenticatorData) = try CBORDecoder.decode(wrapped) else {
                    throw RainError.securityKey(FIDO_ERR_RX_INVALID_CBOR, operation)
                }
                let userHandle = fidoBytes(fido_assert_user_id_ptr(assertion, index), fido_assert_user_id_len(assertion, index))
                results.append(
                    SecurityKeyAssertion(
                        credentialID: fidoBytes(fido_assert_id_ptr(assertion, index), fido_assert_id_len(assertion, index)),
                        authenticatorData: authenticatorData,
                        signature: fidoBytes(fido_assert_sig_ptr(assertion, index), fido_assert_sig_len(assertion, index)),
                        userHandle: userHandle.isEmpty ? nil : userHandle))
            }
            return results
        }
    }

    /// The PIN tries left before the key blocks its PIN (`getPINRetries`).
    /// - Throws: a `SecurityKeyFailure` reason when the key fails.
    public func pinRetries() throws(RainError) -> Int {
        try ceremony("read the PIN tries left") { () throws(RainError) in
            var retries: Int32 = 0
            try run("read the PIN tries left") { fido_dev_get_retry_count(device, &retries) }
            return Int(retries)
        }
    }

    /// Sets the key's first PIN, or changes it (`setPIN`, `changePIN`).
    /// - Parameters:
    ///   - newPIN: 4 to 63 bytes of UTF-8.
    ///   - currentPIN: the PIN now, when there is one.
    /// - Throws: RAIN_102 `security_key_pin_policy`; RAIN_202 for a wrong current PIN; as a ceremony.
    public func setPIN(_ newPIN: String, currentPIN: String? = nil) throws(RainError) {
        try ceremony("set the security key's PIN") { () throws(RainError) in
            try run("set the security key's PIN") { fido_dev_set_pin(device, newPIN, currentPIN) }
        }
    }

    /// Blinks until the key is touched, so the user can choose it among several (libfido2's
    /// `fido_dev_get_touch_begin`: a make credential for a dummy relying party that the key
    /// answers only when touched, and that creates nothing when it has a PIN).
    /// - Parameters:
    ///   - timeout: how long to wait for the touch.
    ///   - isCancelled: polled between reads; true stops the wait with `security_key_cancelled`.
    /// - Throws: RAIN_401 `security_key_timeout` or `security_key_cancelled`; RAIN_404
    ///   `security_key_removed` when the key stops answering.
    public func waitForTouch(timeout: Duration, isCancelled: @Sendable () -> Bool) throws(RainError) {
        let operation = "wait for a touch of the security key"
        try ceremony(operation) { () throws(RainError) in
            try check(fido_dev_get_touch_begin(device), operation)
            let deadline = ContinuousClock.now + timeout
            var quickFailures = 0
            while true {
                var touched: Int32 = 0
                let started = ContinuousClock.now
                let status = fido_dev_get_touch_status(device, &touched, Int32(Self.touchPollMilliseconds))
                guard status == FIDO_ERR_SUCCESS else { throw RainError.securityKey(status, operation) }
                if touched != 0 { return }
                // libfido2 takes a failed read for "not touched yet"; a key that is still there
                // makes the read wait the whole poll, a removed one fails it at once.
                let quick = ContinuousClock.now - started < .milliseconds(Self.touchPollMilliseconds / 4)
                quickFailures = quick ? quickFailures + 1 : 0
                if quickFailures >= 5 {
                    throw RainError.securityKey(FIDO_ERR_RX, operation)
                }
                if isCancelled() {
                    _ = fido_dev_cancel(device)
                    throw RainError.securityKey(FIDO_ERR_KEEPALIVE_CANCEL, operation)
                }
                if ContinuousClock.now >= deadline {
                    _ = fido_dev_cancel(device)
                    throw RainError.securityKey(FIDO_ERR_RX, operation, timedOut: true)
                }
            }
        }
    }

    /// How long one read of `waitForTouch` waits before checking for a cancel and the deadline.
    static let touchPollMilliseconds = 200

    /// Asks the key to stop the running ceremony (CTAPHID CANCEL): it stops blinking and the
    /// ceremony ends with RAIN_401 `security_key_cancelled`. Safe from any thread; does nothing
    /// when no ceremony runs.
    public func cancel() {
        _ = fido_dev_cancel(device)
    }

    // MARK: - Running libfido2 calls

    private func ceremony<R>(_ operation: String, _ body: () throws(RainError) -> R) throws(RainError) -> R {
        let admitted = busy.withLock { isBusy in
            if isBusy { return false }
            isBusy = true
            return true
        }
        guard admitted else {
            throw RainError(
                .refused, "\(operation): the security key is busy with another request",
                details: .init(reason: SecurityKeyFailure.failed.rawValue))
        }
        defer { busy.withLock { $0 = false } }
        return try body()
    }

    /// Runs a blocking libfido2 call and translates its status; a wrong PIN reads the tries left.
    private func run(_ operation: String, _ call: () -> Int32) throws(RainError) {
        let start = ContinuousClock.now
        let status = call()
        guard status != FIDO_ERR_SUCCESS else { return }
        var retries: Int?
        if status == FIDO_ERR_PIN_INVALID {
            var left: Int32 = 0
            if fido_dev_get_retry_count(device, &left) == FIDO_ERR_SUCCESS { retries = Int(left) }
        }
        // libfido2 reports its own deadline as a failed read: tell that apart from an unplugged key.
        let timedOut = timeoutMilliseconds.map { ContinuousClock.now - start >= .milliseconds($0) } ?? false
        // The key would otherwise go on blinking for a ceremony nobody waits for.
        if timedOut { _ = fido_dev_cancel(device) }
        throw RainError.securityKey(status, operation, retriesLeft: retries, timedOut: timedOut)
    }

    /// Runs `body` with the PIN as a C string (nil without one), for the body's duration only.
    private func withPIN<R>(
        _ pin: SecretBytes?, _ body: (UnsafePointer<CChar>?) throws(RainError) -> R
    ) throws(RainError) -> R {
        guard let pin else { return try body(nil) }
        let result: Result<R, RainError> = pin.withCString { (pointer) in
            Result { () throws(RainError) in try body(pointer) }
        }
        return try result.get()
    }

    /// A PIN given as a string, moved into zeroed-on-release memory (nil for none).
    private static func secret(_ pin: String?) -> SecretBytes? {
        guard let pin else { return nil }
        var bytes = Array(pin.utf8)
        return SecretBytes(taking: &bytes)
    }

    private func check(_ status: Int32, _ operation: String) throws(RainError) {
        guard status == FIDO_ERR_SUCCESS else { throw RainError.securityKey(status, operation) }
    }
}
