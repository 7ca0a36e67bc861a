import Foundation
import RainCore
import RainCrypto
import RainTestSupport
import RainWallet
import RainWire
import Testing

/// `status`, `info` (GetInfo) and `Watch` tell the link, the revocation stream and the keys as they
/// are, with real daemons, a real authority, a real TLS handshake and a real software TPM.
@Suite("Status tells the truth (processes)")
struct StatusTruthTests {
    /// `status --json`'s object.
    static func status(_ h: DaemonHarness) async throws -> [String: Any] {
        let result = try await h.runCLI(["status", "--json"])
        guard result.status == 0 else { throw HarnessError("status failed: \(result)") }
        return try jsonObject(result.stdout)
    }

    static func link(_ status: [String: Any]) -> [String: Any]? { status["authorityLink"] as? [String: Any] }
    static func stream(_ status: [String: Any]) -> [String: Any]? { link(status)?["revocationStream"] as? [String: Any] }
    static func keys(_ status: [String: Any]) -> [String: Any]? { status["storage"] as? [String: Any] }

    @Test(
        "the TPM gone: a refresh is RAIN_501 tpm_unavailable (the device's, never RAIN_301), status shows the keys unavailable and the link degraded, the hint names the swtpm TCTI"
    )
    func tpmGone() async throws {
        let setup = try DaemonHarness.prepare()
        defer { setup.shutdown() }
        let first = try await AuthorityProcess.start(in: setup.directory, ["--listen", "127.0.0.1:0"])
        let port = first.port
        let tpm = try SoftwareTPM()
        defer { tpm.stop() }
        let device: DaemonHarness
        do {
            device = try await DaemonHarness.start(
                config: #"{"storage": {"provider": "tpm2", "tcti": "\#(tpm.tcti)"}}"#,
                extraArguments: ["--authority", "127.0.0.1:\(port)"])
        } catch {
            await first.stop()
            throw error
        }
        defer { device.shutdown() }
        let provider = device.provider()
        do {
            try await device.logIn(provider, .email("tpm-gone@example.com"))
            let before = try await Self.status(device)
            #expect(Self.keys(before)?["state"] as? String == "available", "\(before)")
            #expect(await eventually { (try? await Self.stream(Self.status(device)))?["state"] as? String == "up" })
        } catch {
            await first.stop()
            throw error
        }
        // The TPM goes away; the authority restarts, so the next call must prove the device's key
        // on a new connection, which the TPM can no longer sign.
        tpm.stop()
        await first.stop()
        try await AuthorityProcess.with(in: setup.directory, ["--listen", "127.0.0.1:\(port)"]) { _ in
            let refresh = await rainError { _ = try await provider.refreshSession() }
            #expect(refresh?.code == .provider, "\(String(describing: refresh))")
            #expect(refresh?.details.reason == "tpm_unavailable", "\(String(describing: refresh))")
            let message = refresh?.message ?? ""
            #expect(message.contains("this device's key") && message.contains("software TPM (swtpm)"), "\(message)")
            #expect(!message.contains("/dev/tpmrm0") && !message.contains("authority could not be reached"), "\(message)")
            #expect(try await provider.hasActiveSession(), "a TPM that went away ended the session")

            let status = try await Self.status(device)
            let keys = Self.keys(status)
            #expect(keys?["state"] as? String == "unavailable", "\(status)")
            #expect((keys?["lastError"] as? String)?.contains(tpm.tcti) == true, "\(status)")
            #expect(Self.link(status)?["state"] as? String == "degraded", "\(status)")
            #expect((Self.link(status)?["lastError"] as? String)?.hasPrefix("refreshes fail: ") == true, "\(status)")
            let words = try await device.runCLI(["status"])
            #expect(words.stdout.contains("keys:           UNAVAILABLE"), "\(words)")
            #expect(words.stdout.contains("not the authority's"), "\(words)")
            #expect(!words.stdout.contains("authority:      connected"), "\(words)")
            // GetInfo says the same.
            let info = try await device.runCLI(["info", "--json"])
            let infoObject = try jsonObject(info.stdout)
            #expect((infoObject["storage"] as? [String: Any])?["state"] as? String == "unavailable", "\(info)")
        }
    }

    @Test(
        "a wrong CA: status shows the link unreachable with the TLS error and the revocation stream down, before any call and after one; a good device shows both up, and the stream down once the authority stops"
    )
    func wrongCA() async throws {
        let setup = try DaemonHarness.prepare()
        defer { setup.shutdown() }
        let certs = try await TLSAuthorityTests.certificates(in: setup)
        let serve = ["--tls-cert", certs.serverCertificatePath, "--tls-key", certs.serverKeyPath]
        let authority = try await AuthorityProcess.start(in: setup.directory, ["--listen", "127.0.0.1:0"] + serve)
        let port = authority.port
        let good: DaemonHarness
        let wrong: DaemonHarness
        do {
            good = try await DaemonHarness.start(extraArguments: [
                "--authority", "localhost:\(port)", "--authority-ca", certs.caPath,
            ])
            wrong = try await DaemonHarness.start(extraArguments: [
                "--authority", "localhost:\(port)", "--authority-ca", certs.otherCAPath,
            ])
        } catch {
            await authority.stop()
            throw error
        }
        defer {
            good.shutdown()
            wrong.shutdown()
        }
        let goodProvider = good.provider()
        do {
            // Without a call: the revocation stream's connection fails its handshake, and says so.
            #expect(
                await eventually(timeout: .seconds(10)) {
                    (try? await Self.link(Self.status(wrong)))?["state"] as? String == "unreachable"
                })
            let idle = try await Self.status(wrong)
            #expect((Self.link(idle)?["lastError"] as? String)?.contains("--authority-ca") == true, "\(idle)")
            #expect(Self.stream(idle)?["state"] as? String == "down", "\(idle)")
            #expect(Self.keys(idle)?["state"] as? String == "available", "\(idle)")
            // A call: RAIN_501 tls_unknown_ca, and the link stays unreachable with that error.
            let error = await rainError { try await wrong.provider().sendLoginCode(to: .email("ca@example.com")) }
            #expect(error?.details.reason == TLSSession.FailureReason.unknownCA, "\(String(describing: error))")
            let after = try await Self.status(wrong)
            #expect(Self.link(after)?["state"] as? String == "unreachable", "\(after)")
            let words = try await wrong.runCLI(["status"])
            #expect(words.stdout.contains("authority:      unreachable since"), "\(words)")
            #expect(words.stdout.contains("revocations:    stream down since"), "\(words)")
            let info = try jsonObject(try await wrong.runCLI(["info", "--json"]).stdout)
            #expect((info["authorityLink"] as? [String: Any])?["state"] as? String == "unreachable", "\(info)")

            // The good device: connected, stream up.
            try await good.logIn(goodProvider, .email("ca-good@example.com"))
            #expect(await eventually { (try? await Self.stream(Self.status(good)))?["state"] as? String == "up" })
            #expect(try await Self.link(Self.status(good))?["state"] as? String == "connected")
        } catch {
            await authority.stop()
            throw error
        }
        // The authority stops: the good device's stream goes down, and a watcher hears of it.
        let streams = Recorder<Bool>()
        let kinds = Recorder<SessionEvent.Kind>()
        let events = try goodProvider.events()
        let watcher = Task {
            for try await event in events {
                kinds.append(event.kind)
                guard event.kind == .authorityLink, let stream = event.state.authorityLink?.revocationStream else { continue }
                streams.append(stream.isUp)
            }
        }
        defer { watcher.cancel() }
        // Watching: the stream's first event (the current state) has arrived.
        #expect(await eventually { kinds.count >= 1 })
        // Killed: a stop would drain for its whole bound, the stream being a call in flight.
        kill(authority.pid, SIGKILL)
        await authority.stop()
        #expect(
            await eventually(timeout: .seconds(10)) {
                (try? await Self.stream(Self.status(good)))?["state"] as? String == "down"
            })
        #expect(await eventually { streams.all.contains(false) }, "\(kinds.all) \(streams.all) \(good.log.suffix(2500))")
    }
}
