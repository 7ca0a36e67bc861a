import Foundation
import RainTestSupport
import RainWallet
import Synchronization
import Testing

/// Bounded waits, with real processes: a device daemon in front of a `rainwalletd authority` that is
/// stopped (`SIGSTOP`: its kernel still accepts connections, nothing answers) and continued. The
/// device runs with short deadlines (read 600 ms, send 800 ms), so no test waits long on a timeout.
///
/// What is asserted does not depend on the machine's speed: the number of attempts a read makes
/// (one: without its total bound it makes three, 3.3 s here), the error of each kind, that a local
/// call answers while a send is in flight, and the link's states; wall-clock figures only get a
/// generous ceiling.
@Suite("A stopped authority (SIGSTOP): bounded waits, local calls, link state")
struct AuthorityStopTests {
    static let readDeadline = 600
    static let sendDeadline = 800

    @Test(
        "stopped: a read is RAIN_301 within its bound, a send RAIN_501 outcome_unknown within its bound, status answers at once, the link goes unreachable and comes back after SIGCONT"
    )
    func stoppedAuthority() async throws {
        let setup = try DaemonHarness.prepare()
        defer { setup.shutdown() }
        try await AuthorityProcess.with(in: setup.directory, ["--listen", "127.0.0.1:0"]) { authority in
            let device = try await DaemonHarness.start(extraArguments: [
                "--authority", "127.0.0.1:\(authority.port)",
                "--authority-read-deadline", "\(Self.readDeadline)",
                "--authority-send-deadline", "\(Self.sendDeadline)",
                "--authority-refresh-deadline", "\(Self.readDeadline)",
            ])
            defer { device.shutdown() }
            let provider = device.provider()
            try await device.logIn(provider, .email("stopped@example.com"))
            _ = try await provider.account()
            #expect(try await provider.currentSession().authorityLink?.phase == .connected)

            let kinds = Recorder<SessionEvent.Kind>()
            let links = Recorder<AuthorityLinkState.Phase>()
            let events = try provider.events()
            let watcher = Task {
                for try await event in events {
                    kinds.append(event.kind)
                    if event.kind == .authorityLink, let phase = event.state.authorityLink?.phase { links.append(phase) }
                }
            }
            defer { watcher.cancel() }
            #expect(await eventually { kinds.count >= 1 })

            kill(authority.pid, SIGSTOP)
            // Continued whatever happens: a stopped process cannot be stopped by SIGTERM.
            defer { kill(authority.pid, SIGCONT) }

            // A read: RAIN_301 within its bound, its retries included: one attempt used the whole
            // bound, so none followed (without the rule: three attempts, each replacing its
            // connection, and 1.5 s of backoff). Counted from the log, not timed: a machine busy
            // with the rest of the suite stretches every wall-clock figure.
            let replacedBefore = device.log.components(separatedBy: "authority.connection_replaced").count
            let readStart = ContinuousClock.now
            let read = await rainError { _ = try await provider.account() }
            let readTook = ContinuousClock.now - readStart
            #expect(read?.code == .network)
            let replacedByRead = device.log.components(separatedBy: "authority.connection_replaced").count - replacedBefore
            #expect(replacedByRead == 1, "the read made \(replacedByRead) attempts")
            #expect(readTook < .seconds(30), "the read took \(readTook)")

            // A send: RAIN_501 outcome_unknown; a local call answers while it is still in flight.
            let sendDone = Recorder<Bool>()
            let sendStart = ContinuousClock.now
            async let send = rainError {
                defer { sendDone.append(true) }
                try await provider.sendLoginCode(to: .email("stopped@example.com"))
            }
            let local = try await provider.currentSession()
            #expect(sendDone.count == 0, "status waited for the send to the stopped authority")
            #expect(local.authState == .authenticated)
            let sendError = await send
            let sendTook = ContinuousClock.now - sendStart
            #expect(sendError?.code == .provider)
            #expect(sendError?.details.reason == "outcome_unknown")
            #expect(sendTook < .seconds(30), "the send took \(sendTook)")

            // The link, as status --json shows it, and the watchers saw it go.
            let status = try await device.runCLI(["status", "--json"])
            #expect(status.status == 0, "\(status)")
            let link = try jsonObject(status.stdout)["authorityLink"] as? [String: Any]
            #expect(link?["state"] as? String == "unreachable")
            #expect((link?["lastError"] as? String)?.isEmpty == false)
            #expect((link?["since"] as? String).flatMap(parseRFC3339UTC) != nil)
            #expect(await eventually { links.all.contains(.unreachable) })
            // Nothing answered on the connection: it was replaced.
            #expect(device.log.contains("authority.connection_replaced"))

            kill(authority.pid, SIGCONT)
            // The probe (or the next call) finds it back.
            #expect(await eventually { (try? await provider.currentSession().authorityLink?.phase) == .connected })
            #expect(await eventually { links.all.last == .connected })
            _ = try await provider.account()
        }
    }

    @Test(
        "an embedded authority's link is always connected, with no revocation stream; its keys available; info says so in words")
    func embeddedIsConnected() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let status = try await h.runCLI(["status", "--json"])
        #expect(status.status == 0, "\(status)")
        let link = try jsonObject(status.stdout)["authorityLink"] as? [String: Any]
        #expect(link?["state"] as? String == "connected")
        #expect(link?["revocationStream"] is NSNull, "\(status)")
        let storage = try jsonObject(status.stdout)["storage"] as? [String: Any]
        #expect(storage?["state"] as? String == "available", "\(status)")
        let info = try await h.runCLI(["info"])
        #expect(info.stdout.contains("authority:      connected"), "\(info)")
        #expect(info.stdout.contains("keys:           available"), "\(info)")
        #expect(!info.stdout.contains("revocations:"), "\(info)")
    }
}
