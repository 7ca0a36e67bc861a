internal import CCurl
import Dispatch
import FoundationEssentials
import RainCore
import Synchronization

/// One blocking libcurl transfer: an SMTP conversation or an HTTPS POST. Built and performed on a
/// sender's own queue (libcurl's easy API blocks), never on the Swift pool or the event loop.
struct CurlTransfer: Sendable {
    /// `smtp://host:port`, `smtps://host:port` or `https://…`.
    var url: String
    /// The protocols libcurl may use for `url` (`smtp,smtps` or `https`): no redirect or
    /// scheme trick reaches another one.
    var protocols: String
    /// PEM bundle of the certificate authorities to trust instead of the system's.
    var caFile: String?
    /// SMTP: STARTTLS is required (`smtp://` only).
    var requiresStartTLS = false
    /// SMTP: `MAIL FROM` address.
    var mailFrom: String?
    /// SMTP: `RCPT TO` addresses.
    var recipients: [String] = []
    /// SMTP AUTH or HTTP basic authentication.
    var username: String?
    var password: String?
    /// HTTP headers (`Name: value`).
    var headers: [String] = []
    /// The message (SMTP) or the request body (HTTP POST).
    var body: [UInt8]
    var connectTimeout: Duration
    var totalTimeout: Duration

    /// How far a transfer got and what the server last said.
    struct Result: Sendable {
        /// libcurl's result code (0: the server accepted).
        var code: Int32
        /// libcurl's description of `code` (never holds the body).
        var description: String
        /// `code` as `number (libcurl's fixed text for it)`: nothing the server said, so it is
        /// safe to log.
        var codeName: String
        /// The last SMTP reply code or the HTTP status (0 when none came).
        var responseCode: Int
        /// True once libcurl took the whole body to send: from here on, a failure may come after
        /// the server got the message.
        var isBodyHandedOver: Bool
        /// The HTTP response body (up to 16 KiB).
        var responseBody: [UInt8]

        var isSuccess: Bool { code == 0 }
        /// The connection or TLS handshake failed before anything was said.
        var isConnectFailure: Bool {
            code == Int32(CURLE_COULDNT_CONNECT.rawValue) || code == Int32(CURLE_COULDNT_RESOLVE_HOST.rawValue)
        }
        /// The server's certificate was not trusted.
        var isCertificateFailure: Bool {
            code == Int32(CURLE_PEER_FAILED_VERIFICATION.rawValue) || code == Int32(CURLE_SSL_CACERT_BADFILE.rawValue)
        }
        /// The server refused the credentials.
        var isLoginDenied: Bool { code == Int32(CURLE_LOGIN_DENIED.rawValue) }
        /// The total or connect timeout passed.
        var isTimeout: Bool { code == Int32(CURLE_OPERATION_TIMEDOUT.rawValue) }
    }

    /// libcurl, loaded and initialized once, when the first message is sent (`rain_curl_load`):
    /// nil when ready, else why it could not be loaded.
    private static let loadFailure: String? = rain_curl_load().map { String(cString: $0) }

    /// Where the deadline timers of `perform(on:within:)` fire (they only post an answer).
    private static let deadlineQueue = DispatchQueue(label: "rain.authority.curl.deadlines")

    /// Performs the transfer on `queue`, answering within `limit` when it is set: past it, the
    /// answer is a timeout (`CURLE_OPERATION_TIMEDOUT`), handed over or not as the body was at
    /// that moment, and the transfer is abandoned: a body not yet handed over never will be
    /// (libcurl's own timeouts then end the conversation in the background). libcurl's SMTP
    /// cleanup can wait past its total timeout, so its own timeouts alone cannot keep a caller's
    /// deadline.
    /// - Throws: as `perform(gate:)`.
    func perform(on queue: DispatchQueue, within limit: Duration?) async throws(RainError) -> Result {
        let gate = TransferGate()
        guard let limit else {
            return try await queue.runBlocking { () throws(RainError) in try perform(gate: gate) }
        }
        let outcome = await withCheckedContinuation {
            (continuation: CheckedContinuation<Swift.Result<Result, RainError>, Never>) in
            let answer = FirstAnswer(continuation)
            @Sendable func finish(_ result: Swift.Result<Result, RainError>) { answer.resume(result) }
            let timer = SystemClock().schedule(after: limit, on: Self.deadlineQueue) {
                let isHandedOver = gate.abandon()
                let code = Int32(CURLE_OPERATION_TIMEDOUT.rawValue)
                finish(
                    .success(
                        Result(
                            code: code, description: "no answer within the call's deadline (\(limit.milliseconds) ms)",
                            codeName: Self.codeName(CURLE_OPERATION_TIMEDOUT), responseCode: 0,
                            isBodyHandedOver: isHandedOver, responseBody: [])))
            }
            queue.async {
                let result: Swift.Result<Result, RainError>
                do throws(RainError) {
                    result = .success(try perform(gate: gate))
                } catch {
                    result = .failure(error)
                }
                timer.cancel()
                finish(result)
            }
        }
        return try outcome.get()
    }

    /// `number (text)` of a libcurl result.
    private static func codeName(_ code: CURLcode) -> String {
        "\(code.rawValue) (\(String(cString: rain_curl_easy_strerror(code))))"
    }

    /// Performs the transfer (blocking); `gate` can abandon it before the body is handed over.
    /// - Throws: RAIN_502 when libcurl cannot be initialized or an option is refused (a libcurl
    ///   without SMTP or TLS support).
    func perform(gate: TransferGate = TransferGate()) throws(RainError) -> Result {
        if let why = Self.loadFailure {
            throw RainError(
                .internalError, "libcurl could not be loaded (\(why)); install libcurl4 to send codes by SMTP or SMS")
        }
        guard let curl = rain_curl_easy_init() else {
            throw RainError(.internalError, "libcurl could not be initialized")
        }
        defer { rain_curl_easy_cleanup(curl) }
        let io = TransferIO(body: body, gate: gate)
        var lists: [UnsafeMutablePointer<curl_slist>] = []
        defer { for list in lists { rain_curl_slist_free_all(list) } }
        var errorBuffer = [CChar](repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)

        func set(_ option: CURLoption, _ value: Int) throws(RainError) {
            try check(rain_curl_setopt_long(curl, option, value), option)
        }
        func set(_ option: CURLoption, _ value: String) throws(RainError) {
            try check(value.withCString { rain_curl_setopt_string(curl, option, $0) }, option)
        }
        func set(_ option: CURLoption, list values: [String]) throws(RainError) {
            var list: UnsafeMutablePointer<curl_slist>?
            for value in values {
                guard let next = rain_curl_slist_append(list, value) else {
                    if let list { rain_curl_slist_free_all(list) }
                    throw RainError(.internalError, "libcurl could not allocate a list")
                }
                list = next
            }
            guard let list else { return }
            lists.append(list)
            try check(rain_curl_setopt_pointer(curl, option, UnsafeMutableRawPointer(list)), option)
        }
        func check(_ rc: CURLcode, _ option: CURLoption) throws(RainError) {
            guard rc == CURLE_OK else {
                throw RainError(
                    .internalError,
                    "libcurl refused option \(option.rawValue): \(String(cString: rain_curl_easy_strerror(rc))); "
                        + "install libcurl4-openssl-dev's libcurl (with SMTP and TLS)")
            }
        }

        // libcurl copies string options, so they need not outlive the calls.
        try set(CURLOPT_URL, url)
        try set(CURLOPT_PROTOCOLS_STR, protocols)
        try set(CURLOPT_NOSIGNAL, 1)
        try set(CURLOPT_CONNECTTIMEOUT_MS, Int(clamping: connectTimeout.milliseconds))
        try set(CURLOPT_TIMEOUT_MS, Int(clamping: totalTimeout.milliseconds))
        // After the total timeout, libcurl's SMTP cleanup still waits for the reply to the end of
        // the message with this limit alone (120 s by default): a silent server would hold a
        // delivery two minutes. Half the total (whole seconds, at least one) bounds a delivery to
        // about 1.5 times `totalTimeout`.
        try set(CURLOPT_SERVER_RESPONSE_TIMEOUT, Int(clamping: max(1, (totalTimeout.milliseconds / 2 + 999) / 1000)))
        try set(CURLOPT_SSL_VERIFYPEER, 1)
        try set(CURLOPT_SSL_VERIFYHOST, 2)
        if let caFile { try set(CURLOPT_CAINFO, caFile) }
        if let username { try set(CURLOPT_USERNAME, username) }
        if let password { try set(CURLOPT_PASSWORD, password) }
        if requiresStartTLS { try set(CURLOPT_USE_SSL, Int(CURLUSESSL_ALL.rawValue)) }
        if let mailFrom { try set(CURLOPT_MAIL_FROM, "<\(mailFrom)>") }
        if !recipients.isEmpty { try set(CURLOPT_MAIL_RCPT, list: recipients.map { "<\($0)>" }) }
        // No "Expect: 100-continue" round trip before the body.
        if mailFrom == nil { try set(CURLOPT_HTTPHEADER, list: headers + ["Expect:"]) }

        let context = Unmanaged.passUnretained(io).toOpaque()
        try check(rain_curl_setopt_io(curl, CURLOPT_READFUNCTION, TransferIO.read), CURLOPT_READFUNCTION)
        try check(rain_curl_setopt_pointer(curl, CURLOPT_READDATA, context), CURLOPT_READDATA)
        try check(rain_curl_setopt_io(curl, CURLOPT_WRITEFUNCTION, TransferIO.write), CURLOPT_WRITEFUNCTION)
        try check(rain_curl_setopt_pointer(curl, CURLOPT_WRITEDATA, context), CURLOPT_WRITEDATA)
        if mailFrom != nil {
            try set(CURLOPT_UPLOAD, 1)
            try check(rain_curl_setopt_off(curl, CURLOPT_INFILESIZE_LARGE, curl_off_t(body.count)), CURLOPT_INFILESIZE_LARGE)
        } else {
            try set(CURLOPT_POST, 1)
            try check(
                rain_curl_setopt_off(curl, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count)), CURLOPT_POSTFIELDSIZE_LARGE)
        }

        let rc = errorBuffer.withUnsafeMutableBufferPointer { buffer -> CURLcode in
            guard rain_curl_setopt_pointer(curl, CURLOPT_ERRORBUFFER, UnsafeMutableRawPointer(buffer.baseAddress)) == CURLE_OK
            else { return CURLE_FAILED_INIT }
            let rc = withExtendedLifetime(io) { rain_curl_easy_perform(curl) }
            // The buffer must not be written after this closure.
            _ = rain_curl_setopt_pointer(curl, CURLOPT_ERRORBUFFER, nil)
            return rc
        }
        var response = 0
        _ = rain_curl_getinfo_long(curl, CURLINFO_RESPONSE_CODE, &response)
        let detail = errorBuffer.withUnsafeBufferPointer { buffer in
            buffer.baseAddress.map { String(cString: $0) } ?? ""
        }
        let text = String(cString: rain_curl_easy_strerror(rc))
        return Result(
            code: Int32(rc.rawValue), description: detail.isEmpty ? text : "\(text): \(detail)",
            codeName: Self.codeName(rc), responseCode: response, isBodyHandedOver: gate.isBodyHandedOver,
            responseBody: io.response)
    }
}

/// Resumes a continuation with the first of several answers (the transfer's, the deadline's).
private final class FirstAnswer: Sendable {
    private let continuation: Mutex<CheckedContinuation<Swift.Result<CurlTransfer.Result, RainError>, Never>?>

    init(_ continuation: CheckedContinuation<Swift.Result<CurlTransfer.Result, RainError>, Never>) {
        self.continuation = Mutex(continuation)
    }

    func resume(_ result: Swift.Result<CurlTransfer.Result, RainError>) {
        continuation.withLock { $0.take() }?.resume(returning: result)
    }
}

/// Whether a transfer's body was handed over, and whether its caller stopped waiting: one lock,
/// so that a transfer abandoned before the hand-off never hands the rest over.
final class TransferGate: Sendable {
    private struct State {
        var isBodyHandedOver = false
        var isAbandoned = false
    }
    private let state = Mutex(State())

    /// True once libcurl took the whole body.
    var isBodyHandedOver: Bool { state.withLock { $0.isBodyHandedOver } }

    /// Stops handing the body over; returns whether it already was (wholly).
    func abandon() -> Bool {
        state.withLock {
            $0.isAbandoned = true
            return $0.isBodyHandedOver
        }
    }

    /// Runs `hand` (which returns whether the body is now wholly handed over) unless the transfer
    /// was abandoned; returns false when it was.
    func handOver(_ hand: () -> Bool) -> Bool {
        state.withLock {
            guard !$0.isAbandoned else { return false }
            if hand() { $0.isBodyHandedOver = true }
            return true
        }
    }
}

/// The body being sent and the response being read, for libcurl's callbacks. Touched only by the
/// thread running `curl_easy_perform` (the hand-over state lives in the locked `TransferGate`).
private final class TransferIO {
    let body: [UInt8]
    let gate: TransferGate
    var offset = 0
    var response: [UInt8] = []
    static let responseLimit = 16 << 10

    init(body: [UInt8], gate: TransferGate) {
        self.body = body
        self.gate = gate
    }

    static let read: rain_curl_io_callback = { buffer, size, count, context in
        guard let buffer, let context else { return 0 }
        let io = Unmanaged<TransferIO>.fromOpaque(context).takeUnretainedValue()
        var n = 0
        let isGoingOn = io.gate.handOver {
            n = min(size * count, io.body.count - io.offset)
            if n > 0 {
                io.body.withUnsafeBytes { bytes in
                    guard let base = bytes.baseAddress else { return }
                    UnsafeMutableRawPointer(buffer).copyMemory(from: base + io.offset, byteCount: n)
                }
                io.offset += n
            }
            return io.offset == io.body.count
        }
        // Abandoned: libcurl ends the transfer without the rest of the body.
        return isGoingOn ? n : Int(CURL_READFUNC_ABORT)
    }

    static let write: rain_curl_io_callback = { buffer, size, count, context in
        guard let context else { return 0 }
        let io = Unmanaged<TransferIO>.fromOpaque(context).takeUnretainedValue()
        let n = size * count
        if let buffer, io.response.count < responseLimit {
            let take = min(n, responseLimit - io.response.count)
            buffer.withMemoryRebound(to: UInt8.self, capacity: take) {
                io.response.append(contentsOf: UnsafeBufferPointer(start: $0, count: take))
            }
        }
        return n
    }
}
