import Foundation
import RainTestSupport
import RainWallet
import Synchronization
import Testing

/// `authState` and `sessionState` of one provider, recorded in the order the two streams deliver.
final class PairedStreams: Sendable {
    enum Value: Sendable, Equatable {
        case auth(AuthState)
        case session(SessionState)
    }

    let delivered = Recorder<Value>()
    private let tasks: [Task<Void, Never>]

    init(_ provider: RainProvider) {
        let delivered = self.delivered
        let auth = provider.authState
        let session = provider.sessionState
        tasks = [
            Task { for await value in auth { delivered.append(.auth(value)) } },
            Task { for await value in session { delivered.append(.session(value)) } },
        ]
    }

    deinit { for task in tasks { task.cancel() } }

    var auth: [AuthState] {
        delivered.all.compactMap { if case .auth(let v) = $0 { v } else { nil } }
    }
    var session: [SessionState] {
        delivered.all.compactMap { if case .session(let v) = $0 { v } else { nil } }
    }

    /// Waits until the latest value of both streams is `state` (and a session of its kind).
    func waitForBoth(_ state: AuthState) async -> Bool {
        await until { auth.last == state && session.last.map(Self.authState(of:)) == state }
    }

    /// The `authState` that a `sessionState` goes with (docs/swift-library.md "Streams that agree").
    static func authState(of session: SessionState) -> AuthState {
        switch session {
        case .loading: .loading
        case .active: .authenticated
        case .none, .expired: .unauthenticated
        }
    }

    /// `values` without the repeats of a value just seen.
    static func collapsed<T: Equatable>(_ values: [T]) -> [T] {
        values.reduce(into: []) { kept, v in if kept.last != v { kept.append(v) } }
    }
}

/// The library's two state streams as one view of the daemon: they reconnect together after a
/// restart, never deliver the same value twice in a row, and pass through the same states in the
/// same order, against a real daemon restarted under a subscribed provider.
@Suite(.timeLimit(.minutes(2))) struct StreamAgreementTests {
    @Test("authState and sessionState reconnect together, never repeat a value and never contradict each other")
    func streamsAgreeAcrossRestarts() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        // The delays an app's backoff reaches after a few seconds without its daemon (1 to 2 s,
        // jittered): a stream that waited out a delay of its own would reconnect up to a second after
        // the other, which a logout sent the moment the first one shows the session makes visible.
        let p = RainProvider(
            RainWalletConfig(socketPath: h.socketPath),
            reconnectBackoff: ReconnectBackoff(initial: .seconds(1), maximum: .seconds(2)))
        try await h.logIn(p, .email("streams-agree@example.com"))
        let streams = PairedStreams(p)
        #expect(await streams.waitForBoth(.authenticated))
        for _ in 1...3 {
            try await h.stop()
            #expect(await streams.waitForBoth(.loading))
            try await h.start()
            // The moment either stream shows the session again, the session ends: a stream that
            // reconnected later would go from loading straight to unauthenticated.
            #expect(
                await until {
                    streams.auth.last == .authenticated
                        || streams.session.last.map(PairedStreams.authState(of:)) == .authenticated
                })
            try await p.logout()
            #expect(await streams.waitForBoth(.unauthenticated))
            try await h.logIn(p, .email("streams-agree@example.com"))
            #expect(await streams.waitForBoth(.authenticated))
        }
        let auth = streams.auth
        let session = streams.session
        for (name, count, distinct) in [
            ("authState", auth.count, PairedStreams.collapsed(auth).count),
            ("sessionState", session.count, PairedStreams.collapsed(session).count),
        ] {
            #expect(
                count == distinct, "\(name) delivered a value twice in a row: \(name == "authState" ? "\(auth)" : "\(session)")")
        }
        // Both streams passed through the same states in the same order: the session's changes that
        // keep the auth state (a refresh moves expiresAt) aside, one value for one value.
        #expect(PairedStreams.collapsed(session.map(PairedStreams.authState(of:))) == auth)
        #expect(
            auth == [.authenticated]
                + Array(repeating: [.loading, .authenticated, .unauthenticated, .authenticated], count: 3).flatMap { $0 })
    }
}
