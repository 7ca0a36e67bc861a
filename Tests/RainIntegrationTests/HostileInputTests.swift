import Foundation
import RainTestSupport
import RainTransport
import RainWallet
import RainWire
import Testing

/// The hostile input catalog. Each test sends the daemon something a correct client
/// never would, checks the clear error (or the closed connection where the stream can no longer be
/// trusted), and then checks that a fresh client is still served (GetInfo and GetState).
/// Cases already in `ProtocolTests`: unknown method, undecodable payload, a 2 MiB header, a garbage
/// envelope, a duplicate request id.
@Suite("Hostile input against the real daemon")
struct HostileInputTests {
    static let maxFrame = Frame.defaultMaximumLength
    static let invalidArgument = RainError.Code.invalidArgument.rawValue

    @Test("a truncated frame (header promises 100 bytes, 10 arrive, then end of stream): closed without an answer")
    func truncatedFrame() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let raw = try RawConnection(path: h.socketPath)
        try raw.write([0, 0, 0, 100] + [UInt8](repeating: 0x41, count: 10))
        raw.shutdownWrite()
        // Nothing is answered for a frame that never completed; the daemon closes its end.
        #expect(try await raw.nextEnvelope() == nil)

        // Same again, but the client vanishes entirely (full close) with the frame half sent.
        do {
            let gone = try RawConnection(path: h.socketPath)
            try gone.write([0, 0, 0, 100] + [UInt8](repeating: 0x41, count: 10))
        }
        try await expectStillServes(h)
    }

    @Test("length 0: an empty envelope is RAIN_102 undecodable_envelope with id 0; the connection stays open")
    func emptyFrame() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let raw = try RawConnection(path: h.socketPath)
        try raw.write(Frame.encode([]))
        let answer = try #require(try await raw.nextEnvelope())
        #expect(answer.requestID == 0)
        #expect(answer.response?.status.code == Self.invalidArgument)
        #expect(answer.response?.reason == "undecodable_envelope")

        try raw.write(try Envelope.requestFrame(id: 1, method: Method.daemonGetInfo, payload: []))
        let next = try #require(try await raw.nextEnvelope())
        #expect(next.requestID == 1)
        #expect(next.response?.status.isOK == true)
        try await expectStillServes(h)
    }

    @Test("a valid envelope with a garbage payload, for many methods: each RAIN_102 under its own id")
    func garbagePayloads() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let raw = try RawConnection(path: h.socketPath)
        let methods = [
            Method.daemonGetInfo, Method.sessionGetState, Method.authSendLoginCode, Method.authConfirmLoginCode,
            Method.authLogout,
            Method.sessionAwaitRestore, Method.sessionWatch, Method.sessionRefresh, Method.accountGet, Method.walletGet,
            Method.walletExportRecoveryPhrase, Method.walletExportPrivateKey, Method.passkeyBeginSignUp, Method.passkeyFinish,
            Method.passkeyCancel, Method.devListOutbox, Method.testSlowEcho,
        ]
        // 0xFF 0xFF: a tag whose varint never ends. 0x0A 0x7F: a field claiming 127 bytes, none
        // present. 0x08: a varint field with no value.
        let garbage: [[UInt8]] = [[0xFF, 0xFF], [0x0A, 0x7F], [0x08]]
        var frames: [UInt8] = []
        var expected: [UInt64: String] = [:]
        var id: UInt64 = 1
        for method in methods {
            for g in garbage {
                frames += try Envelope.requestFrame(id: id, method: method, payload: g)
                expected[id] = method
                id += 1
            }
        }
        try raw.write(frames)
        var wrong: [String] = []
        for _ in 0..<expected.count {
            let answer = try #require(try await raw.nextEnvelope())
            let removed = expected.removeValue(forKey: answer.requestID)
            let method = try #require(removed, "unexpected id \(answer.requestID)")
            let status = answer.response?.status
            if status?.code != Self.invalidArgument || status?.details.reason != "undecodable_payload" {
                wrong.append(
                    "\(method): \(status.map { "\($0.code) \($0.details.reason ?? "-") \($0.message)" } ?? "not a response")")
            }
        }
        #expect(wrong.isEmpty, "not refused as undecodable_payload: \(wrong)")
        #expect(expected.isEmpty)
        try await expectStillServes(h)
    }

    @Test("the wrong payload type: ConfirmLoginCodeRequest to SendLoginCode and the reverse are RAIN_102, nothing sent")
    func wrongPayloadType() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let confirm = try ConfirmLoginCodeRequest(code: "123456").encode()
        let e1 = try #require(await rainError { _ = try await h.call(Method.authSendLoginCode, payload: confirm) })
        #expect(e1.code == .invalidArgument)

        let send = try SendLoginCodeRequest(contact: .email("a@b.co")).encode()
        let e2 = try #require(await rainError { _ = try await h.call(Method.authConfirmLoginCode, payload: send) })
        #expect(e2.code == .invalidArgument)

        #expect(try await h.outbox().isEmpty)
        try await expectStillServes(h)
    }

    @Test("a contact of almost 1 MiB is a clear RAIN_102 under its id; the connection goes on")
    func hugeContact() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let raw = try await Self.admittedConnection(h)
        let value = Array(repeating: UInt8(ascii: "a"), count: Self.maxFrame - 200) + Array("@b.co".utf8)
        let body = RawProto.requestEnvelope(
            id: 3, method: Array(Method.authSendLoginCode.utf8), payload: RawProto.sendLoginCode(emailBytes: value))
        #expect(body.count <= Self.maxFrame)
        try raw.write(Frame.encode(body))
        let answer = try #require(try await raw.nextEnvelope())
        #expect(answer.requestID == 3)
        #expect(answer.response?.status.code == Self.invalidArgument)
        #expect(answer.response?.status.details.field == "email")
        // The message does not echo a megabyte back.
        #expect((answer.response?.status.message.utf8.count ?? 0) < 1024)

        try raw.write(try Envelope.requestFrame(id: 4, method: Method.daemonGetInfo, payload: []))
        #expect(try await raw.nextEnvelope()?.response?.status.isOK == true)
        #expect(try await h.outbox().isEmpty)
        try await expectStillServes(h)
    }

    @Test("an email with an embedded NUL (\"a\\0@b.co\") is RAIN_102 and nothing is sent")
    func embeddedNULInContact() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let raw = try RawConnection(path: h.socketPath)
        try raw.write(
            Frame.encode(
                RawProto.requestEnvelope(
                    id: 1, method: Array(Method.authSendLoginCode.utf8),
                    payload: RawProto.sendLoginCode(emailBytes: Array("a\0@b.co".utf8)))))
        let answer = try #require(try await raw.nextEnvelope())
        #expect(answer.requestID == 1)
        #expect(answer.response?.status.code == Self.invalidArgument)
        #expect(try await h.outbox().isEmpty)
        try await expectStillServes(h)
    }

    /// A string must not be silently cut at an embedded NUL into another, valid value: the code
    /// would go to a contact the client never named (PROTOCOL §2: strings MUST NOT contain NUL).
    /// protobuf-c hands strings over as C strings, so RainWire checks every string field's wire
    /// bytes for NUL after unpacking (`unpackMessage`): this test failed before that check existed.
    @Test("an email with a NUL after a valid address (\"victim@b.co\\0…\") is refused, not truncated and sent")
    func embeddedNULTruncation() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let raw = try RawConnection(path: h.socketPath)
        try raw.write(
            Frame.encode(
                RawProto.requestEnvelope(
                    id: 1, method: Array(Method.authSendLoginCode.utf8),
                    payload: RawProto.sendLoginCode(emailBytes: Array("victim@b.co\0@attacker.example".utf8)))))
        let answer = try #require(try await raw.nextEnvelope())
        #expect(answer.requestID == 1)
        // The same cut applies to the method name: GetInfo followed by NUL and junk.
        try raw.write(Frame.encode(RawProto.requestEnvelope(id: 2, method: Array((Method.daemonGetInfo + "\0junk").utf8))))
        let method = try #require(try await raw.nextEnvelope())
        let delivered = try await h.outbox().compactMap { $0.contact?.value }

        #expect(
            answer.response?.status.code == Self.invalidArgument,
            "SendLoginCode with contact \"victim@b.co\\0@attacker.example\" answered \(String(describing: answer.response?.status))"
        )
        #expect(answer.response?.reason == "nul_in_string")
        #expect(delivered.isEmpty, "a code was sent to \(delivered), a contact the client never named")
        #expect(
            method.response?.status.code == Self.invalidArgument,
            "the method \"\(Method.daemonGetInfo)\\0junk\" was served as \(Method.daemonGetInfo)")
        try await expectStillServes(h)
    }

    @Test("invalid UTF-8 in the method: id 0, RAIN_102 invalid_utf8 field method; the connection stays open")
    func invalidUTF8Method() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let raw = try RawConnection(path: h.socketPath)
        let method = Array("/rain.wallet.v1.Daemon/GetInfo".utf8) + [0xC3, 0x28, 0xFF]
        try raw.write(Frame.encode(RawProto.requestEnvelope(id: 7, method: method)))
        let answer = try #require(try await raw.nextEnvelope())
        #expect(answer.requestID == 0)
        #expect(answer.response?.status.code == Self.invalidArgument)
        #expect(answer.response?.reason == "invalid_utf8")
        #expect(answer.response?.status.details.field == "method")

        try raw.write(try Envelope.requestFrame(id: 8, method: Method.daemonGetInfo, payload: []))
        let next = try #require(try await raw.nextEnvelope())
        #expect(next.requestID == 8)
        #expect(next.response?.status.isOK == true)
        try await expectStillServes(h)
    }

    @Test("invalid UTF-8 in the contact: RAIN_102 under the request's id; nothing is sent")
    func invalidUTF8Contact() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let raw = try RawConnection(path: h.socketPath)
        let value: [UInt8] = Array("al".utf8) + [0xED, 0xA0, 0x80] + Array("ce@b.co".utf8)  // a UTF-16 surrogate
        try raw.write(
            Frame.encode(
                RawProto.requestEnvelope(
                    id: 5, method: Array(Method.authSendLoginCode.utf8), payload: RawProto.sendLoginCode(emailBytes: value))))
        let answer = try #require(try await raw.nextEnvelope())
        #expect(answer.requestID == 5)
        #expect(answer.response?.status.code == Self.invalidArgument)
        #expect(answer.response?.reason == "invalid_utf8")
        #expect(try await h.outbox().isEmpty)
        try await expectStillServes(h)
    }

    @Test("a method string filling a frame of exactly 1 MiB is unknown_method; one byte more is frame_too_large and closed")
    func maximumFrameStrings() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        // Envelope overhead around a method of ~1 MiB: 2 (id) + 1 + 3 (request) + 1 + 3 (method) = 10.
        func body(methodLength: Int) -> [UInt8] {
            RawProto.requestEnvelope(
                id: 1, method: Array("/x/".utf8) + Array(repeating: UInt8(ascii: "y"), count: methodLength - 3))
        }
        let fits = body(methodLength: Self.maxFrame - 10)
        try #require(fits.count == Self.maxFrame)
        let tooBig = body(methodLength: Self.maxFrame - 9)
        try #require(tooBig.count == Self.maxFrame + 1)

        let raw = try await Self.admittedConnection(h)
        try raw.write(Frame.encode(fits))
        let answer = try #require(try await raw.nextEnvelope())
        #expect(answer.requestID == 1)
        #expect(answer.response?.status.code == Self.invalidArgument)
        #expect(answer.response?.reason == "unknown_method")
        #expect((answer.response?.status.message.utf8.count ?? 0) < 1024)
        try raw.write(try Envelope.requestFrame(id: 2, method: Method.daemonGetInfo, payload: []))
        #expect(try await raw.nextEnvelope()?.response?.status.isOK == true)

        // Through the reference client too (its envelope also carries the profile metadata): a
        // clear RAIN_102, not a lost connection because the answer overflowed the frame limit.
        let hugeMethod = "/x/" + String(repeating: "y", count: Self.maxFrame - 60)
        let client = try ClientConnection(path: h.socketPath)
        defer { client.close() }
        _ = try await client.call(method: Method.daemonGetInfo, payload: [])  // admitted
        let e = try #require(
            await rainError {
                _ = try await client.call(
                    method: hugeMethod, payload: [], metadata: [MetadataEntry(key: profileMetadataKey, value: "default")])
            })
        #expect(e.code == .invalidArgument, "\(e.code): \(e.message.prefix(300))")

        // Before that first request, a connection may hold only 4 KiB: the same frame on a fresh
        // connection is refused with RAIN_302 (reason unadmitted_input) and the connection closed.
        let fresh = try RawConnection(path: h.socketPath)
        let freshWriter = Task.detached { try? fresh.write(Frame.encode(fits)) }
        let early = try #require(try await fresh.nextEnvelope())
        #expect(early.requestID == 0)
        #expect(early.response?.status.code == RainError.Code.refused.rawValue)
        #expect(early.response?.reason == "unadmitted_input")
        let freshClosed = try await onThread { fresh.isClosedByPeer() }
        #expect(freshClosed)
        await freshWriter.value

        let over = try RawConnection(path: h.socketPath)
        let frame = Frame.encode(tooBig)
        // The daemon answers after the header and closes: the rest of the write may fail (EPIPE).
        let writer = Task.detached { try? over.write(frame) }
        let refusal = try #require(try await over.nextEnvelope())
        #expect(refusal.requestID == 0)
        #expect(refusal.response?.status.code == Self.invalidArgument)
        #expect(refusal.response?.reason == "frame_too_large")
        let overClosed = try await onThread { over.isClosedByPeer() }
        #expect(overClosed)
        await writer.value
        try await expectStillServes(h)
    }

    /// A raw connection whose first request (GetInfo) was answered: admitted, so it may send frames
    /// of up to 1 MiB (before that, 4 KiB).
    static func admittedConnection(_ h: DaemonHarness) async throws -> RawConnection {
        let raw = try RawConnection(path: h.socketPath)
        try raw.write(try Envelope.requestFrame(id: 99, method: Method.daemonGetInfo, payload: []))
        #expect(try await raw.nextEnvelope()?.response?.status.isOK == true)
        return raw
    }

    @Test("a cancel for an unknown id (and for id 0) is ignored: no answer, the connection goes on")
    func cancelUnknownID() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let raw = try RawConnection(path: h.socketPath)
        try raw.write(RawProto.cancelFrame(id: 77) + RawProto.cancelFrame(id: 0) + RawProto.cancelFrame(id: UInt64.max))
        try raw.write(try Envelope.requestFrame(id: 1, method: Method.daemonGetInfo, payload: []))
        // The first frame back is GetInfo's answer: the cancels produced nothing.
        let answer = try #require(try await raw.nextEnvelope())
        #expect(answer.requestID == 1)
        #expect(answer.response?.status.isOK == true)
        try await expectStillServes(h)
    }

    @Test("a client that sends half a frame and stalls blocks nobody; it can finish the frame later")
    func halfFrameStall() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        // Admitted first: a connection with no request yet has 10 s to make one.
        let stalled = try await Self.admittedConnection(h)
        let frame = try Envelope.requestFrame(id: 1, method: Method.daemonGetInfo, payload: [])
        let half = frame.count / 2
        try stalled.write(Array(frame[..<half]))
        let stalledAt = ContinuousClock.now

        // Others are served while it stalls (several rounds, on fresh connections).
        for _ in 0..<5 { try await expectStillServes(h) }
        let other = try RawConnection(path: h.socketPath)
        try other.write(try Envelope.requestFrame(id: 9, method: Method.daemonGetInfo, payload: []))
        #expect(try await other.nextEnvelope()?.requestID == 9)

        // The stalled client finishes its frame and is answered normally, if it does so within the
        // 10 s a partial frame may go without progress; past that (a very loaded
        // machine), the daemon has dropped it with RAIN_302 frame_stalled.
        if ContinuousClock.now - stalledAt < .seconds(9) {
            try stalled.write(Array(frame[half...]))
            let answer = try #require(try await stalled.nextEnvelope())
            #expect(answer.requestID == 1)
            #expect(answer.response?.status.isOK == true)
        } else {
            let dropped = try #require(try await stalled.nextEnvelope())
            #expect(dropped.requestID == 0)
            #expect(dropped.response?.reason == "frame_stalled")
        }
    }

    @Test("a client that floods requests and never reads is disconnected past 16 MiB of pending answers; others are served")
    func neverReads() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        // Admitted first: before its first request a connection may send only 4 KiB.
        let flooder = try await Self.admittedConnection(h)
        // Each SlowEcho answer carries ~900 KiB; 24 of them exceed the 16 MiB output limit plus what
        // the kernel buffers. Once the daemon disconnects, the remaining writes fail (EPIPE).
        let data = [UInt8](repeating: 0x5A, count: 900 * 1024)
        let frames = try (1...24).map { id in
            try Envelope.requestFrame(
                id: UInt64(id), method: Method.testSlowEcho, payload: SlowEchoRequest(delayMilliseconds: 0, data: data).encode())
        }
        let writer = Task.detached { () -> Int in
            var written = 0
            for f in frames {
                do { try flooder.write(f) } catch { break }
                written += 1
            }
            return written
        }
        // Others are served meanwhile.
        try await expectStillServes(h)
        let hungUp = try await onThread { flooder.waitForHangup(timeout: .seconds(15)) }
        let written = await writer.value
        #expect(hungUp, "the daemon kept a connection that never reads (\(written) requests written)")
        #expect(h.log.contains("connection.not_reading"), "log:\n\(h.log)")
        try await expectStillServes(h)
    }

    @Test("10,000 connections opened and dropped (in batches, some mid-frame): still serving, descriptors back to idle")
    func tenThousandConnections() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        try await expectStillServes(h)
        let pid = try #require(h.pid)
        let idle = try #require(openDescriptorCount(pid: pid))

        let path = h.socketPath
        let start = ContinuousClock.now
        try await onThread {
            let batch = 250
            for _ in 0..<(10_000 / batch) {
                var open: [RawConnection] = []
                open.reserveCapacity(batch)
                for i in 0..<batch {
                    let c = try RawConnection(path: path)
                    // Every eighth sends a whole request, every other fourth a partial frame.
                    if i % 8 == 0 {
                        try? c.write(try Envelope.requestFrame(id: 1, method: Method.daemonGetInfo, payload: []))
                    } else if i % 4 == 0 {
                        try? c.write([0, 0, 0, 50, 8])
                    }
                    open.append(c)
                }
                open.removeAll()  // closes every descriptor of the batch
            }
        }
        let elapsed = ContinuousClock.now - start
        try await expectStillServes(h)
        var last = Int.max
        let settled = await eventually {
            last = openDescriptorCount(pid: pid) ?? Int.max
            return last <= idle + 2
        }
        #expect(settled, "the daemon holds \(last) descriptors, \(idle) when idle")
        print("10,000 connections opened and dropped in \(elapsed); daemon descriptors: \(idle) idle, \(last) after")
    }
}
