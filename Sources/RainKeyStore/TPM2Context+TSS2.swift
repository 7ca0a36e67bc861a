import FoundationEssentials
import Glibc
internal import CTSS2
import RainCore
import RainCrypto
import Synchronization

/// One connection to a TPM (a TCTI and an ESYS context), opened for one operation and closed after
/// it.
///
/// Why a context per operation rather than one kept open: a TPM that restarts (the resource manager,
/// swtpm, a suspend) invalidates every handle a kept context holds, and a context per operation
/// needs no reconnect logic; the TCTI's connect costs far less than the TPM's own work (a primary
/// key, a load). Operations on one TCTI are serialized in this process (`run(tcti:_:)`): a TPM does
/// one command at a time anyway, and without a resource manager (swtpm) two operations at once could
/// exhaust its transient slots.
///
/// Every transient object is flushed on every path (`withTransient`): without a resource manager a
/// leaked object stays in the TPM until it restarts, and a TPM has only a few slots (swtpm: 3).
final class TPM2Context {
    /// The TCTI configuration this context was opened with (`device:/dev/tpmrm0`).
    let tcti: String
    private var tctiContext: OpaquePointer?
    private var esys: OpaquePointer?

    /// Opens the TCTI and an ESYS context on it.
    /// - Throws: RAIN_501 `tpm_unavailable` naming the TCTI and what to do.
    private init(tcti: String) throws(RainError) {
        _ = Self.quietLibraryLog
        self.tcti = tcti
        var loaded: OpaquePointer?
        let rc = Tss2_TctiLdr_Initialize(tcti, &loaded)
        guard rc == TSS2_RC_SUCCESS, let loaded else { throw TPM2Failure.unavailable(tcti: tcti, rc: rc) }
        tctiContext = loaded
        var context: OpaquePointer?
        let initialized = Esys_Initialize(&context, loaded, nil)
        guard initialized == TSS2_RC_SUCCESS, let context else {
            // deinit finalizes the TCTI.
            throw TPM2Failure.unavailable(tcti: tcti, rc: initialized)
        }
        esys = context
    }

    deinit {
        if esys != nil { Esys_Finalize(&esys) }
        if tctiContext != nil { Tss2_TctiLdr_Finalize(&tctiContext) }
    }

    /// tpm2-tss writes its own WARNING and ERROR lines to stderr (a refused load, an unreachable
    /// TCTI), which would land in the daemon's log without its format. Every failure reaches us as a
    /// return code, which becomes a `RainError` with `Tss2_RC_Decode`'s text, so the library's lines
    /// are turned off: `TSS2_LOG=all+NONE`, set once before the first tpm2-tss call, and only when
    /// the environment does not set `TSS2_LOG` already (to debug, run with `TSS2_LOG=all+DEBUG`).
    /// The library reads the variable when a module logs for the first time.
    static let quietLibraryLog: Void = { _ = setenv("TSS2_LOG", "all+NONE", 0) }()

    /// One lock per TCTI: serializes operations on it in this process (see the type's comment).
    private static let gates = Mutex<[String: Gate]>([:])

    private static func gate(for tcti: String) -> Gate {
        gates.withLock { gates in
            if let gate = gates[tcti] { return gate }
            let gate = Gate()
            gates[tcti] = gate
            return gate
        }
    }

    /// Runs `body` with a fresh context on `tcti`, alone on that TCTI in this process; the context
    /// is closed when `body` returns or throws.
    /// - Throws: RAIN_501 `tpm_unavailable` when the TPM cannot be reached; what `body` throws.
    static func run<R>(tcti: String, _ body: (TPM2Context) throws(RainError) -> R) throws(RainError) -> R {
        let gate = gate(for: tcti)
        gate.lock()
        defer { gate.unlock() }
        do {
            let context = try TPM2Context(tcti: tcti)
            return try withExtendedLifetime(context) { () throws(RainError) -> R in try body(context) }
        } catch {
            // Without a resource manager (swtpm, a raw /dev/tpm0) the objects and sessions of a
            // process killed in the middle of an operation stay loaded until the TPM restarts, and
            // after two or three such kills nothing loads any more. Flush what was abandoned and
            // try once more. Under a resource manager (/dev/tpmrm0) this process sees only its own
            // handles, which this lock says are none.
            guard error.details.reason == TPM2Failure.outOfMemoryReason else { throw error }
            try TPM2Context(tcti: tcti).flushAbandoned()
            let context = try TPM2Context(tcti: tcti)
            return try withExtendedLifetime(context) { () throws(RainError) -> R in try body(context) }
        }
    }

    /// Flushes every transient object and loaded session the TPM holds (see `run`).
    func flushAbandoned() throws(RainError) {
        for first: UInt32 in [0x8000_0000, 0x0200_0000, 0x0300_0000] {
            var more: TPMI_YES_NO = 0
            var data: UnsafeMutablePointer<TPMS_CAPABILITY_DATA>?
            let rc = Esys_GetCapability(
                handle, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, TPM2_CAP(TPM2_CAP_HANDLES), first, 64, &more, &data)
            defer { Esys_Free(data) }
            try check(rc, "GetCapability")
            guard let list = data?.pointee.data.handles else { continue }
            let handles = withUnsafeBytes(of: list.handle) { raw in
                Array(raw.bindMemory(to: TPM2_HANDLE.self).prefix(Int(list.count)))
            }
            for tpmHandle in handles {
                var object: ESYS_TR = ESYS_TR_NONE
                guard
                    Esys_TR_FromTPMPublic(handle, tpmHandle, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &object)
                        == TSS2_RC_SUCCESS
                else { continue }
                flush(object)
            }
        }
    }

    var handle: OpaquePointer? { esys }

    // MARK: - Operations

    /// A cheap round trip: 8 random bytes from the TPM.
    func ping() throws(RainError) {
        var random: UnsafeMutablePointer<TPM2B_DIGEST>?
        let rc = Esys_GetRandom(handle, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, 8, &random)
        Esys_Free(random)
        try check(rc, "GetRandom")
    }

    /// Creates the storage primary key and flushes it: what the keys need of the owner hierarchy.
    func checkPrimary() throws(RainError) {
        try withPrimary { _ throws(RainError) in }
    }

    /// Seals `key` (at most 128 bytes) as a data object under the storage primary key.
    func seal(_ key: SymmetricKey) throws(RainError) -> TPM2ObjectBlob {
        try withPrimary { (parent) throws(RainError) -> TPM2ObjectBlob in
            try withEncryptedSession(salt: parent, attributes: TPM2Constant.sessionDecrypt) {
                (session) throws(RainError) -> TPM2ObjectBlob in
                try TPM2ObjectBlob.withSensitive(key) { (sensitive) throws(RainError) -> TPM2ObjectBlob in
                    try create(
                        parent: parent, session: session, sensitive: sensitive, template: TPM2ObjectBlob.sealedDataTemplate())
                }
            }
        }
    }

    /// Creates an ECDSA P-256 signing key inside the TPM; only its TPM-encrypted blob leaves it.
    func createSigningKey() throws(RainError) -> TPM2ObjectBlob {
        try withPrimary { (parent) throws(RainError) -> TPM2ObjectBlob in
            let sensitive = UnsafeMutablePointer<TPM2B_SENSITIVE_CREATE>.allocate(capacity: 1)
            sensitive.initialize(to: TPM2B_SENSITIVE_CREATE())
            defer { sensitive.deallocate() }
            return try create(
                parent: parent, session: ESYS_TR_PASSWORD, sensitive: sensitive, template: TPM2ObjectBlob.signingKeyTemplate())
        }
    }

    /// Loads `blob` and unseals the secret it holds.
    /// - Throws: RAIN_501 `tpm_key_lost` when the TPM refuses the blob (see `load`).
    func unseal(_ blob: TPM2ObjectBlob, path: String) throws(RainError) -> SymmetricKey {
        try withPrimary { (parent) throws(RainError) -> SymmetricKey in
            try withLoaded(blob, parent: parent, path: path) { (item) throws(RainError) -> SymmetricKey in
                try withEncryptedSession(salt: parent, attributes: TPM2Constant.sessionEncrypt) {
                    (session) throws(RainError) -> SymmetricKey in
                    try unseal(item, session: session)
                }
            }
        }
    }

    /// Checks that the TPM loads `blob` (the key is usable on this TPM).
    func checkLoads(_ blob: TPM2ObjectBlob, path: String) throws(RainError) {
        try withPrimary { (parent) throws(RainError) in
            try withLoaded(blob, parent: parent, path: path) { (_) throws(RainError) in }
        }
    }

    /// Signs a SHA-256 digest with the key in `blob`; returns the ECDSA signature's r and s.
    func sign(digest: [UInt8], with blob: TPM2ObjectBlob, path: String) throws(RainError) -> (r: [UInt8], s: [UInt8]) {
        try withPrimary { (parent) throws(RainError) -> (r: [UInt8], s: [UInt8]) in
            try withLoaded(blob, parent: parent, path: path) { (key) throws(RainError) -> (r: [UInt8], s: [UInt8]) in
                try sign(digest: digest, key: key)
            }
        }
    }

    // MARK: - Commands

    /// Runs `body` with `object` loaded, then flushes it, whatever `body` does.
    func withTransient<R>(_ object: ESYS_TR, _ body: (ESYS_TR) throws(RainError) -> R) throws(RainError) -> R {
        defer { flush(object) }
        return try body(object)
    }

    /// Flushes a transient object. A failure is not reported: it means the TPM went away or
    /// restarted, and either way the object is gone with it.
    func flush(_ object: ESYS_TR) {
        _ = Esys_FlushContext(handle, object)
    }

    /// The owner hierarchy's storage primary key, recreated from its template (the same key every
    /// time on this TPM until the owner hierarchy is cleared), given to `body` and flushed after.
    func withPrimary<R>(_ body: (ESYS_TR) throws(RainError) -> R) throws(RainError) -> R {
        var template = TPM2ObjectBlob.storagePrimaryTemplate()
        var sensitive = TPM2B_SENSITIVE_CREATE()
        var outsideInfo = TPM2B_DATA()
        var creationPCR = TPML_PCR_SELECTION()
        var primary: ESYS_TR = ESYS_TR_NONE
        let rc = Esys_CreatePrimary(
            handle, ESYS_TR_RH_OWNER, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &sensitive, &template, &outsideInfo,
            &creationPCR, &primary, nil, nil, nil, nil)
        if rc != TSS2_RC_SUCCESS {
            if primary != ESYS_TR_NONE { flush(primary) }
            throw TPM2Failure.error(rc, command: "CreatePrimary", tcti: tcti)
        }
        return try withTransient(primary, body)
    }

    /// A salted HMAC session (salted with `salt`, the primary key) with AES-128-CFB parameter
    /// encryption, given to `body` and flushed after: the secret crosses the TCTI and the bus to the
    /// TPM encrypted (`sessionDecrypt`: the command's first parameter; `sessionEncrypt`: the
    /// response's), so a sniffer on the bus or the socket sees no key.
    func withEncryptedSession<R>(
        salt: ESYS_TR, attributes: TPMA_SESSION, _ body: (ESYS_TR) throws(RainError) -> R
    ) throws(RainError) -> R {
        var symmetric = TPMT_SYM_DEF()
        symmetric.algorithm = TPM2Constant.algAES
        symmetric.keyBits.aes = 128
        symmetric.mode.aes = TPM2Constant.algCFB
        var session: ESYS_TR = ESYS_TR_NONE
        let rc = Esys_StartAuthSession(
            handle, salt, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, nil, TPM2Constant.sessionHMAC, &symmetric,
            TPM2Constant.algSHA256, &session)
        if rc != TSS2_RC_SUCCESS {
            if session != ESYS_TR_NONE { flush(session) }
            throw TPM2Failure.error(rc, command: "StartAuthSession", tcti: tcti)
        }
        return try withTransient(session) { (session) throws(RainError) -> R in
            try check(
                Esys_TRSess_SetAttributes(handle, session, attributes | TPM2Constant.sessionContinue, 0xFF),
                "StartAuthSession")
            return try body(session)
        }
    }

    /// Creates an object under `parent` and returns its public and (TPM-encrypted) private parts.
    func create(
        parent: ESYS_TR, session: ESYS_TR, sensitive: UnsafePointer<TPM2B_SENSITIVE_CREATE>, template: TPM2B_PUBLIC
    ) throws(RainError) -> TPM2ObjectBlob {
        var template = template
        var outsideInfo = TPM2B_DATA()
        var creationPCR = TPML_PCR_SELECTION()
        var outPrivate: UnsafeMutablePointer<TPM2B_PRIVATE>?
        var outPublic: UnsafeMutablePointer<TPM2B_PUBLIC>?
        let rc = Esys_Create(
            handle, parent, session, ESYS_TR_NONE, ESYS_TR_NONE, sensitive, &template, &outsideInfo, &creationPCR,
            &outPrivate, &outPublic, nil, nil, nil)
        defer {
            Esys_Free(outPrivate)
            Esys_Free(outPublic)
        }
        try check(rc, "Create")
        guard let outPrivate, let outPublic else {
            throw RainError(.provider, "the TPM at \(tcti) returned no object from TPM2_Create")
        }
        return TPM2ObjectBlob(publicPart: outPublic.pointee, privatePart: outPrivate.pointee)
    }

    /// Loads `blob` under `parent`, runs `body` with it and flushes it.
    /// - Throws: RAIN_501 `tpm_key_lost` naming `path` when the TPM refuses the blob's integrity
    ///   (sealed by another TPM, or this TPM's owner hierarchy was cleared).
    func withLoaded<R>(
        _ blob: TPM2ObjectBlob, parent: ESYS_TR, path: String, _ body: (ESYS_TR) throws(RainError) -> R
    ) throws(RainError) -> R {
        var privatePart = blob.privatePart
        var publicPart = blob.publicPart
        var object: ESYS_TR = ESYS_TR_NONE
        let rc = Esys_Load(handle, parent, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &privatePart, &publicPart, &object)
        if rc != TSS2_RC_SUCCESS {
            if object != ESYS_TR_NONE { flush(object) }
            if TPM2Failure.isForeignBlob(rc) { throw TPM2Failure.keyLost(rc, path: path, tcti: tcti) }
            throw TPM2Failure.error(rc, command: "Load", tcti: tcti)
        }
        return try withTransient(object, body)
    }

    /// Unseals a loaded data object into a `SymmetricKey`; the TSS's copy is zeroed before it is
    /// freed, and the bytes never pass through an ordinary array.
    private func unseal(_ item: ESYS_TR, session: ESYS_TR) throws(RainError) -> SymmetricKey {
        var data: UnsafeMutablePointer<TPM2B_SENSITIVE_DATA>?
        let rc = Esys_Unseal(handle, item, session, ESYS_TR_NONE, ESYS_TR_NONE, &data)
        defer {
            if let data {
                explicit_bzero(data, MemoryLayout<TPM2B_SENSITIVE_DATA>.size)
                Esys_Free(data)
            }
        }
        try check(rc, "Unseal")
        guard let data, let offset = MemoryLayout<TPM2B_SENSITIVE_DATA>.offset(of: \.buffer) else {
            throw RainError(.provider, "the TPM at \(tcti) returned no data from TPM2_Unseal")
        }
        // Raw reads: `data.pointee` would copy the secret into a temporary.
        let raw = UnsafeRawPointer(data)
        let size = Int(raw.loadUnaligned(as: UInt16.self))
        let capacity = MemoryLayout<TPM2B_SENSITIVE_DATA>.size - offset
        guard size > 0, size <= capacity else {
            throw RainError(.provider, "the TPM at \(tcti) returned \(size) unsealed bytes, which is not a key")
        }
        return try SymmetricKey(byteCount: size) { (output) throws(RainError) in
            output.copyMemory(from: UnsafeRawBufferPointer(start: raw + offset, count: size))
        }
    }

    /// Signs `digest` (32 bytes) with ECDSA-SHA256; the TPM gets a NULL-hierarchy hash-check ticket,
    /// which an unrestricted signing key accepts. `session` authorizes the key: the empty password
    /// by default, an HMAC session for a key with an authorization value.
    func sign(
        digest: [UInt8], key: ESYS_TR, session: ESYS_TR = ESYS_TR_PASSWORD
    ) throws(RainError) -> (r: [UInt8], s: [UInt8]) {
        var message = TPM2B_DIGEST()
        guard digest.count == 32 else { throw RainError(.internalError, "a SHA-256 digest is 32 bytes") }
        message.size = UInt16(digest.count)
        withUnsafeMutableBytes(of: &message.buffer) { buffer in
            buffer.copyBytes(from: digest)
        }
        var scheme = TPMT_SIG_SCHEME()
        scheme.scheme = TPM2Constant.algECDSA
        scheme.details.ecdsa.hashAlg = TPM2Constant.algSHA256
        var validation = TPMT_TK_HASHCHECK()
        validation.tag = TPM2Constant.stHashcheck
        validation.hierarchy = TPM2Constant.rhNull
        var signature: UnsafeMutablePointer<TPMT_SIGNATURE>?
        let rc = Esys_Sign(handle, key, session, ESYS_TR_NONE, ESYS_TR_NONE, &message, &scheme, &validation, &signature)
        defer { Esys_Free(signature) }
        try check(rc, "Sign")
        guard let signature, signature.pointee.sigAlg == TPM2Constant.algECDSA else {
            throw RainError(.provider, "the TPM at \(tcti) returned no ECDSA signature from TPM2_Sign")
        }
        var ecdsa = signature.pointee.signature.ecdsa
        return (
            TPM2ObjectBlob.bytes(of: &ecdsa.signatureR.buffer, size: ecdsa.signatureR.size),
            TPM2ObjectBlob.bytes(of: &ecdsa.signatureS.buffer, size: ecdsa.signatureS.size)
        )
    }

    func check(_ rc: TSS2_RC, _ command: String) throws(RainError) {
        if rc != TSS2_RC_SUCCESS { throw TPM2Failure.error(rc, command: command, tcti: tcti) }
    }
}

/// tpm2-tss return codes turned into `RainError`s, in the words of the provider's contract.
enum TPM2Failure {
    static let layerMask: TSS2_RC = 0xFF_0000
    static let tctiLayer: TSS2_RC = 10 << 16
    static let tpmLayer: TSS2_RC = 0
    /// Format-one TPM codes carry a handle, session or parameter number in bits 6 and 8–11.
    static let formatOne: TSS2_RC = 0x080
    static let integrity: TSS2_RC = 0x080 + 0x01F
    static let binding: TSS2_RC = 0x080 + 0x025
    static let authFail: TSS2_RC = 0x080 + 0x00E
    static let badAuth: TSS2_RC = 0x080 + 0x022
    static let lockout: TSS2_RC = 0x900 + 0x021

    /// `Tss2_RC_Decode`'s text for `rc` (a layer, a parameter number and the meaning; never data).
    static func decode(_ rc: TSS2_RC) -> String {
        guard let text = Tss2_RC_Decode(rc) else { return CFormat.string("0x%06x", rc) }
        return String(cString: text)
    }

    /// The TPM code without its handle, session or parameter number.
    static func baseCode(_ rc: TSS2_RC) -> TSS2_RC {
        guard rc & layerMask == tpmLayer else { return rc }
        return rc & formatOne != 0 ? rc & 0xBF : rc & ~TSS2_RC(0xFF_0000)
    }

    /// Whether the TPM refused a blob to load because it does not belong to this TPM's owner
    /// hierarchy (its integrity or binding check fails under this parent).
    static func isForeignBlob(_ rc: TSS2_RC) -> Bool {
        guard rc & layerMask == tpmLayer else { return false }
        let base = baseCode(rc)
        return base == integrity || base == binding
    }

    /// `details.reason` of a key whose authorization value was wrong (RAIN_202).
    static let authorizationFailedReason = "tpm_authorization_failed"

    /// `details.reason` of a TPM out of object or session slots.
    static let outOfMemoryReason = "tpm_out_of_memory"

    /// Whether the TPM ran out of slots for objects or sessions (TPM_RC_OBJECT_MEMORY,
    /// TPM_RC_SESSION_MEMORY).
    static func isOutOfMemory(_ rc: TSS2_RC) -> Bool {
        guard rc & layerMask == tpmLayer else { return false }
        let base = baseCode(rc)
        return base == 0x902 || base == 0x903
    }

    /// Whether `rc` says the TPM could not be reached (the TCTI, or a lower layer's I/O).
    static func isUnreachable(_ rc: TSS2_RC) -> Bool {
        if rc & layerMask == tctiLayer { return true }
        guard rc & layerMask != tpmLayer else { return false }
        let base = rc & 0xFFFF
        return base == TSS2_RC(TSS2_BASE_RC_IO_ERROR) || base == TSS2_RC(TSS2_BASE_RC_NO_CONNECTION)
    }

    /// RAIN_501 `tpm_unavailable`.
    static func unavailable(tcti: String, rc: TSS2_RC) -> RainError {
        RainError(
            .provider,
            "the TPM at \(tcti) cannot be reached (\(decode(rc))): \(reachHint(tcti: tcti)), or choose another "
                + "storage.provider",
            details: RainError.Details(reason: "tpm_unavailable"))
    }

    /// What to check for the TCTI in use: the device node, the simulator's socket, the broker.
    static func reachHint(tcti: String) -> String {
        let (name, conf) =
            tcti.firstIndex(of: ":").map { (String(tcti[..<$0]), String(tcti[tcti.index(after: $0)...])) }
            ?? (tcti, "")
        switch name {
        case "device":
            let path = conf.isEmpty ? "/dev/tpmrm0" : conf
            return "check that \(path) exists (the kernel's TPM resource manager) and that this user may open it "
                + "(usually the tss group)"
        case "swtpm", "mssim":
            let target = conf.isEmpty ? "its default port on localhost" : conf
            return "start the software TPM (\(name)) listening at \(target), and check that this user may reach it"
        case "tabrmd":
            return "start the tpm2-abrmd broker (systemctl start tpm2-abrmd) and check that this user may reach it "
                + "on D-Bus"
        default:
            return "check that the TPM storage.tcti names (\(tcti)) is running and that this user may reach it"
        }
    }

    /// RAIN_501 `tpm_key_lost` for the blob in `path`.
    static func keyLost(_ rc: TSS2_RC, path: String, tcti: String) -> RainError {
        RainError(
            .provider,
            "the TPM at \(tcti) refuses the key in \(path) (\(decode(rc))): it was made by another TPM, or this TPM's "
                + "owner hierarchy was cleared, and nothing can open it again. Stop rainwalletd and run `rainwalletd "
                + "storage reset` (it moves the keys it cannot open, and the sessions they encrypted, into a lost- "
                + "directory of the state directory), start it and log in again; an embedded authority's wallets "
                + "need its master-key backup first: `rainwalletd storage restore BACKUP`",
            details: RainError.Details(reason: "tpm_key_lost"))
    }

    /// RAIN_501 for a failed command: `tpm_unavailable`, `tpm_owner_auth`, `tpm_lockout` or
    /// `tpm_error` with the decoded code.
    static func error(_ rc: TSS2_RC, command: String, tcti: String) -> RainError {
        if isUnreachable(rc) { return unavailable(tcti: tcti, rc: rc) }
        if isOutOfMemory(rc) {
            return RainError(
                .provider,
                "\(command) failed on the TPM at \(tcti): \(decode(rc)); objects left by a killed process fill its slots: "
                    + "restart the TPM or its resource manager",
                details: RainError.Details(reason: outOfMemoryReason))
        }
        if rc & layerMask == tpmLayer {
            switch baseCode(rc) {
            case authFail where command == "CreatePrimary", badAuth where command == "CreatePrimary":
                return RainError(
                    .provider,
                    "the TPM at \(tcti) refuses its owner hierarchy (\(decode(rc))): the owner hierarchy has an "
                        + "authorization value, and rainwallet uses it without one; remove it (tpm2_changeauth -c owner) "
                        + "or choose another storage.provider",
                    details: RainError.Details(reason: "tpm_owner_auth"))
            case authFail where command == "Sign", badAuth where command == "Sign":
                // Only a key with an authorization value of its own can fail here: the caller
                // turns this into what a wrong PIN means for it.
                return RainError(
                    .unauthorized, "the TPM at \(tcti) refused the key's authorization value (\(decode(rc)))",
                    details: RainError.Details(reason: authorizationFailedReason))
            case lockout:
                return RainError(
                    .provider,
                    "the TPM at \(tcti) is in dictionary-attack lockout (\(decode(rc))): wait for it to end, or reset "
                        + "it with the lockout authorization (tpm2_dictionarylockout -c)",
                    details: RainError.Details(reason: "tpm_lockout"))
            default:
                break
            }
        }
        return RainError(
            .provider, "TPM2_\(command) failed on the TPM at \(tcti): \(decode(rc))",
            details: RainError.Details(reason: "tpm_error"))
    }
}

/// A lock held around a call that returns any value (`Mutex.withLock` wants a `sending` result).
private final class Gate: @unchecked Sendable {
    // @unchecked: the mutex is reached only through pthread_mutex_lock and _unlock, which are
    // safe from any thread; the pointer itself never changes.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    func lock() { pthread_mutex_lock(mutex) }
    func unlock() { pthread_mutex_unlock(mutex) }
}
