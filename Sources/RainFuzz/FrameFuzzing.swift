import RainCore
import RainWire

/// FuzzFrame: the first input byte chooses how the rest is cut into reads (0: byte by byte;
/// n: pseudo-random reads of 1…n bytes); the rest is the byte stream a connection receives.
enum FrameFuzzing {
    static func run(_ input: [UInt8]) -> FuzzOutcome {
        guard let seed = input.first else { return .accepted }
        let stream = Array(input.dropFirst())
        let whole = feed(stream, sizes: [stream.count])
        let chunked = feed(stream, sizes: chunkSizes(seed: seed, total: stream.count))
        // How reads are cut must not change what comes out.
        guard whole.frames == chunked.frames, (whole.error == nil) == (chunked.error == nil) else {
            return .broken("FrameDecoder: cutting the stream into other reads changed the frames or the error")
        }
        if whole.error == nil {
            guard whole.buffered == chunked.buffered else {
                return .broken("FrameDecoder: cutting the stream into other reads changed the buffered byte count")
            }
            let consumed = whole.frames.reduce(0) { $0 + Frame.headerLength + $1.count }
            guard consumed + whole.buffered == stream.count else {
                return .broken("FrameDecoder: frames plus buffered bytes do not add up to the bytes received")
            }
        }
        // The server's way (complete frames in place while nothing is buffered) gives the same.
        let inPlace = feedInPlace(stream, sizes: chunkSizes(seed: seed, total: stream.count))
        guard inPlace.frames == whole.frames, (inPlace.error == nil) == (whole.error == nil) else {
            return .broken("FrameDecoder.forEachFrame: reading frames in place changed the frames or the error")
        }
        if whole.frames.contains(where: { $0.count > Frame.defaultMaximumLength }) {
            return .broken("FrameDecoder: returned a frame over the maximum length")
        }
        var outcomes = whole.frames.map(envelope)
        if let error = whole.error { outcomes.append(.rejected(error)) }
        return combine(outcomes)
    }

    /// Decodes one frame body as the server and the client do, and checks the envelope re-encodes
    /// to bytes that decode to the same envelope, and that the direct codec agrees with protobuf-c.
    static func envelope(_ body: [UInt8]) -> FuzzOutcome {
        if let broken = quickLane(body) { return broken }
        if let canonical = Envelope.decodeCanonical(body) {
            guard let reference = try? Envelope.decodeReference(body), reference == canonical else {
                return .broken("Envelope: the canonical reader and protobuf-c read these bytes differently")
            }
        }
        return .decoded(by: { () throws(RainError) -> Envelope in try Envelope.decode(body) }) { decoded in
            do throws(RainError) {
                let bytes = try decoded.encode()
                guard try bytes == decoded.encodeReference() else {
                    return .broken("Envelope: the direct writer and protobuf-c wrote different bytes")
                }
                guard try Envelope.decode(bytes) == decoded else { return .broken("Envelope: decode(encode(e)) != e") }
                guard try decoded.encodeFrame() == Frame.encode(bytes) else {
                    return .broken("Envelope: encodeFrame() != Frame.encode(encode())")
                }
            } catch {
                return .broken("Envelope: a decoded envelope does not re-encode (\(error.code), \(error.details.reason ?? "-"))")
            }
            return .accepted
        }
    }

    /// The shape of the request the client library sends for GetState of the default profile.
    private static let usualShape: QuickShape? = {
        var shape: QuickShape?
        let request = WireRequest(
            method: Method.sessionGetState, payload: [],
            metadata: [MetadataEntry(key: profileMetadataKey, value: ProfileName.defaultName)])
        guard let body = try? Envelope(requestID: 1, kind: .request(request)).canonicalBytes(isFramed: false) else {
            return nil
        }
        _ = body.withUnsafeBufferPointer { QuickRequest($0, shape: &shape) }
        return shape
    }()

    /// The quick lane reads a request only as the ordinary path does: same id, method and
    /// profile, no payload, no deadline, at most the one metadata entry.
    static func quickLane(_ body: [UInt8]) -> FuzzOutcome? {
        let quick = body.withUnsafeBufferPointer { buf in
            QuickRequest(buf).map { q in
                (q.requestID, Array(q.method), q.profile.map { Array($0) })
            }
        }
        // Through a connection's shape: the usual request's, then (learned from this body) its own.
        var shape = usualShape
        for _ in 0..<2 {
            let viaShape = body.withUnsafeBufferPointer { buf in
                QuickRequest(buf, shape: &shape).map { q in
                    (q.requestID, Array(q.method), q.profile.map { Array($0) })
                }
            }
            guard viaShape?.0 == quick?.0, viaShape?.1 == quick?.1, viaShape?.2 == quick?.2 else {
                return .broken("QuickRequest: read through a shape, a request reads differently")
            }
        }
        // A method that is not UTF-8 or holds a NUL matches no handler's method name, which is all
        // the quick lane compares it with: the ordinary path refuses it.
        guard let (id, method, profile) = quick, !method.contains(0), String(validating: method, as: UTF8.self) != nil
        else { return nil }
        guard let decoded = try? Envelope.decode(body), case .request(let r) = decoded.kind, decoded.requestID == id,
            Array(r.method.utf8) == method, r.payload.isEmpty, r.timeoutMilliseconds == 0, r.metadata.count <= 1,
            r.profile.map({ Array($0.utf8) }) == profile
        else {
            return .broken("QuickRequest: the quick lane read a request the ordinary path reads differently")
        }
        return nil
    }

    /// Through `FrameDecoder.forEachFrame` (the client's reader; `completeFrames` inside, as the
    /// server reads): complete frames in place while the decoder holds nothing, the decoder otherwise.
    private static func feedInPlace(_ stream: [UInt8], sizes: [Int]) -> (frames: [[UInt8]], error: RainError?) {
        var decoder = FrameDecoder()
        var frames: [[UInt8]] = []
        var offset = 0
        do throws(RainError) {
            for size in sizes {
                let end = min(offset + size, stream.count)
                try stream[offset..<end].withUnsafeBytes { raw in
                    Result { () throws(RainError) in try decoder.forEachFrame(in: raw) { frames.append(Array($0)) } }
                }.get()
                offset = end
            }
        } catch {
            return (frames, error)
        }
        return (frames, nil)
    }

    private static func feed(_ stream: [UInt8], sizes: [Int]) -> (frames: [[UInt8]], error: RainError?, buffered: Int) {
        var decoder = FrameDecoder()
        var frames: [[UInt8]] = []
        var offset = 0
        do {
            for size in sizes {
                let end = min(offset + size, stream.count)
                try decoder.append(stream[offset..<end])
                offset = end
                while let frame = try decoder.nextFrame() { frames.append(frame) }
            }
        } catch {
            return (frames, error, decoder.bufferedByteCount)
        }
        return (frames, nil, decoder.bufferedByteCount)
    }

    private static func chunkSizes(seed: UInt8, total: Int) -> [Int] {
        var sizes: [Int] = []
        var state = UInt32(seed) &* 2_654_435_761 | 1
        var covered = 0
        while covered < total {
            state ^= state << 13
            state ^= state >> 17
            state ^= state << 5
            let size = seed == 0 ? 1 : 1 + Int(state % UInt32(seed))
            sizes.append(size)
            covered += size
        }
        return sizes
    }

    static func seeds() throws(RainError) -> [(name: String, bytes: [UInt8])] {
        var seeds: [(name: String, bytes: [UInt8])] = []
        let profile = MetadataEntry(key: profileMetadataKey, value: "default")
        var requestID: UInt64 = 1
        for (method, payload) in try RequestFuzzing.methodSamples() {
            let request = WireRequest(method: method, payload: payload, timeoutMilliseconds: 5_000, metadata: [profile])
            let frame = try Envelope(requestID: requestID, kind: .request(request)).encodeFrame()
            // "/rain.wallet.v1.Auth/SendLoginCode" → "Auth-SendLoginCode".
            let parts = method.split(separator: "/")
            let name = [parts.first?.split(separator: ".").last, parts.last].compactMap { $0 }.joined(separator: "-")
            seeds.append((name: "request-\(name)", bytes: [UInt8(truncatingIfNeeded: requestID * 7)] + frame))
            requestID += 1
        }
        let failure = RainError(
            .invalidLoginCode, "wrong code", details: .init(attemptsRemaining: 2, reason: "wrong", retryAfterMilliseconds: 1_000))
        let others: [(String, Envelope)] = [
            ("response-ok", Envelope(requestID: 9, kind: .response(.ok(try GetAccountRequest().encode() + [8, 1])))),
            ("response-failure", Envelope(requestID: 10, kind: .response(.failure(failure)))),
            (
                "response-unreachable",
                Envelope(
                    requestID: 11,
                    kind: .response(
                        .failure(
                            RainError(
                                .network, "authority unreachable",
                                details: .init(field: "authority", isAuthorityUnreachable: true)))))
            ),
            ("stream", Envelope(requestID: 12, kind: .stream(payload: [8, 1, 16, 2]))),
            ("cancel", Envelope(requestID: 13, kind: .cancel)),
        ]
        var all: [UInt8] = []
        for (name, envelope) in others {
            let frame = try envelope.encodeFrame()
            all += frame
            seeds.append((name: name, bytes: [3] + frame))
        }
        // The quick lane's shape: GetState as the client library sends it, with and
        // without the profile entry, and two in one read.
        let getState = { (id: UInt64, metadata: [MetadataEntry]) throws(RainError) -> [UInt8] in
            try Envelope(
                requestID: id, kind: .request(WireRequest(method: Method.sessionGetState, payload: [], metadata: metadata))
            ).encodeFrame()
        }
        let quick = try getState(300, [profile])
        seeds.append((name: "quick-GetState", bytes: [5] + quick))
        seeds.append((name: "quick-GetState-no-profile", bytes: [4] + (try getState(1 << 40, []))))
        seeds.append((name: "quick-GetState-twice-in-one-read", bytes: [200] + quick + (try getState(301, [profile]))))
        seeds.append((name: "several-byte-by-byte", bytes: [0] + all))
        seeds.append((name: "several-in-reads-of-up-to-9", bytes: [9] + all))
        seeds.append((name: "invalid-header-over-maximum", bytes: [2, 0x00, 0x10, 0x00, 0x01]))
        seeds.append((name: "invalid-empty-frame", bytes: [1, 0, 0, 0, 0]))
        return seeds
    }
}
