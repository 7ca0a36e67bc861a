internal import CProtobufC
internal import CRainProto
import FoundationEssentials
import RainCore

extension Envelope {
    /// Encodes the envelope as protobuf bytes (no frame header).
    /// - Throws: RAIN_102 for a string with an embedded NUL.
    public func encode() throws(RainError) -> [UInt8] {
        try canonicalBytes(isFramed: false)
    }

    /// Encodes the envelope as one frame: 4-byte big-endian length, then the protobuf bytes.
    public func encodeFrame() throws(RainError) -> [UInt8] {
        try canonicalBytes(isFramed: true)
    }

    /// The bytes protobuf-c packs for the envelope: the reference `encode()` is checked against.
    /// - Throws: RAIN_102 for a string with an embedded NUL.
    package func encodeReference() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var env = try cEnvelope(arena)
        return packMessage(&env)
    }

    private func cEnvelope(_ arena: CArena) throws(RainError) -> Rain__Wallet__V1__Envelope {
        var env = Rain__Wallet__V1__Envelope()
        rain__wallet__v1__envelope__init(&env)
        env.request_id = requestID
        switch kind {
        case .request(let r):
            var req = Rain__Wallet__V1__Request()
            rain__wallet__v1__request__init(&req)
            req.method = try arena.string(r.method, field: "method")
            req.payload = arena.bytes(r.payload)
            req.timeout_ms = r.timeoutMilliseconds
            (req.n_metadata, req.metadata) = try arena.list(r.metadata) { (m) throws(RainError) in
                var e = Rain__Wallet__V1__MetadataEntry()
                rain__wallet__v1__metadata_entry__init(&e)
                e.key = try arena.string(m.key, field: "metadata key")
                e.value = try arena.string(m.value, field: "metadata value")
                return arena.box(e)
            }
            env.kind_case = RAIN__WALLET__V1__ENVELOPE__KIND_REQUEST
            env.request = arena.box(req)
        case .response(let r):
            var resp = Rain__Wallet__V1__Response()
            rain__wallet__v1__response__init(&resp)
            resp.payload = arena.bytes(r.payload)
            if !r.status.isOK {
                resp.status = arena.box(try cStatus(r.status, arena))
            }
            env.kind_case = RAIN__WALLET__V1__ENVELOPE__KIND_RESPONSE
            env.response = arena.box(resp)
        case .stream(let payload):
            var s = Rain__Wallet__V1__StreamMessage()
            rain__wallet__v1__stream_message__init(&s)
            s.payload = arena.bytes(payload)
            env.kind_case = RAIN__WALLET__V1__ENVELOPE__KIND_STREAM
            env.stream = arena.box(s)
        case .cancel:
            env.kind_case = RAIN__WALLET__V1__ENVELOPE__KIND_CANCEL
            var c = Rain__Wallet__V1__Cancel()
            rain__wallet__v1__cancel__init(&c)
            env.cancel = arena.box(c)
        }
        return env
    }

    private func cStatus(_ status: WireStatus, _ arena: CArena) throws(RainError) -> Rain__Wallet__V1__Status {
        var s = Rain__Wallet__V1__Status()
        rain__wallet__v1__status__init(&s)
        s.code = status.code
        s.message = try arena.string(status.message, field: "status message")
        let d = status.details
        if !d.isEmpty {
            var cd = Rain__Wallet__V1__ErrorDetails()
            rain__wallet__v1__error_details__init(&cd)
            if let a = d.attemptsRemaining {
                var v = Rain__Wallet__V1__UInt32Value()
                rain__wallet__v1__uint32_value__init(&v)
                v.value = a
                cd.attempts_remaining = arena.box(v)
            }
            if let r = d.retryAfterMilliseconds {
                var v = Rain__Wallet__V1__UInt64Value()
                rain__wallet__v1__uint64_value__init(&v)
                v.value = r
                cd.retry_after_ms = arena.box(v)
            }
            cd.reason = try arena.string(d.reason ?? "", field: "reason")
            cd.field = try arena.string(d.field ?? "", field: "field")
            cd.authority_unreachable = d.isAuthorityUnreachable ? 1 : 0
            cd.limit = try arena.string(d.limit ?? "", field: "limit")
            if let at = d.retryAfter, at.unixMilliseconds >= 0 {
                var v = Rain__Wallet__V1__UInt64Value()
                rain__wallet__v1__uint64_value__init(&v)
                v.value = UInt64(at.unixMilliseconds)
                cd.retry_after_unix_ms = arena.box(v)
            }
            s.details = arena.box(cd)
        }
        return s
    }

    /// Decodes one frame body: its canonical form directly (EnvelopeCodec.swift), anything else
    /// through protobuf-c.
    /// - Throws: RAIN_102 (reason `undecodable_envelope`) for bytes that are not an envelope, or an
    ///   envelope that carries nothing.
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> Envelope {
        if let envelope = decodeCanonical(bytes) { return envelope }
        return try decodeReference(bytes)
    }

    /// `decode` of a frame body lent in place (`FrameDecoder.withNextFrame`).
    public static func decode(_ bytes: UnsafeBufferPointer<UInt8>) throws(RainError) -> Envelope {
        var r = ProtoReader(bytes)
        if let envelope = r.envelope() { return envelope }
        return try decodeReference(Array(bytes))
    }

    /// Decodes one frame body through protobuf-c: the reference `decode` is checked against.
    /// - Throws: as `decode`.
    package static func decodeReference(_ bytes: [UInt8]) throws(RainError) -> Envelope {
        do {
            return try unpackMessage(bytes, name: "envelope", rain__wallet__v1__envelope__init) {
                (p) throws(RainError) -> Envelope in
                let env = p.pointee
                switch env.kind_case {
                case RAIN__WALLET__V1__ENVELOPE__KIND_REQUEST:
                    guard let r = env.request?.pointee else { break }
                    let metadata = try readList(r.metadata, count: r.n_metadata) { (p) throws(RainError) in
                        try p.map { (e) throws(RainError) in
                            MetadataEntry(
                                key: try readString(e.pointee.key, field: "metadata key"),
                                value: try readString(e.pointee.value, field: "metadata value"))
                        }
                    }
                    let req = WireRequest(
                        method: try readString(r.method, field: "method"), payload: readBytes(r.payload),
                        timeoutMilliseconds: r.timeout_ms, metadata: metadata)
                    return Envelope(requestID: env.request_id, kind: .request(req))
                case RAIN__WALLET__V1__ENVELOPE__KIND_RESPONSE:
                    guard let r = env.response?.pointee else { break }
                    // Code 0 is success whatever else the status carries: read it as `.ok`, so the
                    // envelope re-encodes to itself (found by FuzzFrame).
                    let read = try r.status.map { (s) throws(RainError) in try readStatus(s.pointee) } ?? .ok
                    let status = read.isOK ? WireStatus.ok : read
                    return Envelope(
                        requestID: env.request_id,
                        kind: .response(WireResponse(status: status, payload: readBytes(r.payload))))
                case RAIN__WALLET__V1__ENVELOPE__KIND_STREAM:
                    guard let s = env.stream?.pointee else { break }
                    return Envelope(requestID: env.request_id, kind: .stream(payload: readBytes(s.payload)))
                case RAIN__WALLET__V1__ENVELOPE__KIND_CANCEL:
                    return Envelope(requestID: env.request_id, kind: .cancel)
                default:
                    break
                }
                throw RainError(
                    .invalidArgument, "the envelope carries no request, response, stream message or cancel",
                    details: .init(reason: "undecodable_envelope"))
            }
        } catch {
            if error.details.reason == "undecodable_payload" {
                throw RainError(
                    .invalidArgument, "undecodable envelope: the frame is not a protobuf Envelope",
                    details: .init(reason: "undecodable_envelope"))
            }
            throw error
        }
    }

    private static func readStatus(_ s: Rain__Wallet__V1__Status) throws(RainError) -> WireStatus {
        var details = RainError.Details()
        if let d = s.details?.pointee {
            details.attemptsRemaining = d.attempts_remaining?.pointee.value
            details.retryAfterMilliseconds = d.retry_after_ms?.pointee.value
            let reason = try readString(d.reason, field: "reason")
            details.reason = reason.isEmpty ? nil : reason
            let field = try readString(d.field, field: "field")
            details.field = field.isEmpty ? nil : field
            details.isAuthorityUnreachable = d.authority_unreachable != 0
            let limit = try readString(d.limit, field: "limit")
            details.limit = limit.isEmpty ? nil : limit
            if let at = d.retry_after_unix_ms?.pointee.value, at <= UInt64(Int64.max) {
                details.retryAfter = Date(unixMilliseconds: Int64(at))
            }
        }
        return WireStatus(code: s.code, message: try readString(s.message, field: "status message"), details: details)
    }
}
