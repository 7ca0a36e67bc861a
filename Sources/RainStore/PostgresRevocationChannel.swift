import Dispatch
import FoundationEssentials
import Glibc
import RainAuthorityAPI
import RainCore
import RainSystem
import RainWire
import Synchronization

/// Carries pushed revocations between authority instances on one PostgreSQL database:
/// what this instance's `RevocationHub` publishes is sent with `pg_notify('rain_revocations', …)`
/// on a connection of its own (queue `rain.authority.postgres.notify`), and a dedicated connection
/// LISTENs on a thread of its own (`rain.pg.listen`, blocked in `poll` on the
/// connection's socket and an eventfd that stops it) and hands what the other instances published
/// to the hub's `deliver`. Each payload carries the sending instance's random id, so an instance
/// skips its own (the hub already delivered it).
///
/// A lost connection is opened again with a capped backoff (1 s doubling to 10 s). Notifications
/// sent while the LISTEN connection was down are lost, so once it LISTENs again (not at the first
/// connect) the channel asks every device stream of this instance to recheck
/// (`RevocationHub.recheckAll`): each device asks once whether its sessions are still live, and a
/// revocation another instance made meanwhile is caught then. Payloads hold app ids, device ids
/// and reasons: never a token.
package final class PostgresRevocationChannel: Sendable {
    /// The LISTEN/NOTIFY channel.
    package static let channelName = "rain_revocations"

    private struct Payload: Codable {
        /// The sending instance.
        var i: String
        /// App id, device id, reason.
        var a: String
        var d: String
        var r: String
    }

    private let url: String
    private let hub: RevocationHub
    private let logger: Logger
    private let instanceID: String
    private let wake: EventFD
    private let isStopped = Mutex(false)
    private let reconnectDelay: Duration
    private let rechecks = Mutex(0)
    /// The NOTIFY connection, used only on `notifyQueue`.
    private let notifier = NotifyConnection()
    private let notifyQueue = DispatchQueue(label: "rain.authority.postgres.notify")

    /// The NOTIFY connection, opened on first use and dropped when it fails. Only `notifyQueue` touches it.
    private final class NotifyConnection: @unchecked Sendable {
        // @unchecked: `connection` is read and written on `notifyQueue` only.
        var connection: PostgresConnection?
    }

    /// Starts carrying `hub`'s revocations through the database at `url`: sets the hub's relay and
    /// starts the LISTEN thread (which connects itself, retrying until it can).
    /// - Parameter reconnectDelay: the first wait before opening a lost LISTEN connection again
    ///   (doubling up to 10 s).
    /// - Throws: RAIN_502 when the eventfd cannot be made.
    package init(url: String, hub: RevocationHub, logger: Logger, reconnectDelay: Duration = .seconds(1)) throws(RainError) {
        self.url = url
        self.reconnectDelay = reconnectDelay
        self.hub = hub
        self.logger = logger
        self.wake = try EventFD()
        self.instanceID = UUID().uuidString
        hub.setRelay { [weak self] revocation in self?.send(revocation) }
        Syscall.startThread { [self] in
            Syscall.setCurrentThreadName(Self.listenThreadName)
            listen()
        }
    }

    /// The LISTEN thread's name, as `top -H` and `ps -L` show it (at most 15 bytes).
    static let listenThreadName = "rain.pg.listen"

    /// Stops the LISTEN thread and the relay (the daemon stops).
    package func stop() {
        hub.setRelay(nil)
        isStopped.withLock { $0 = true }
        wake.signal()
    }

    /// How many times a LISTEN reconnect asked the device streams to recheck (tests).
    package var recheckCount: Int { rechecks.withLock { $0 } }

    // MARK: NOTIFY

    private func send(_ revocation: AuthorityRevocation) {
        let payload = Payload(i: instanceID, a: revocation.appID, d: revocation.deviceID, r: revocation.reason)
        guard let data = try? JSONEncoder().encode(payload), let text = String(data: data, encoding: .utf8) else { return }
        notifyQueue.async { [self] in
            for attempt in 1...2 {
                do throws(RainError) {
                    let connection: PostgresConnection
                    if let open = notifier.connection {
                        connection = open
                    } else {
                        connection = try PostgresConnection(url: url)
                        notifier.connection = connection
                    }
                    _ = try connection.query(
                        "SELECT pg_notify($1, $2)", [.text(Self.channelName), .text(text)], operation: "notify a revocation")
                    return
                } catch {
                    notifier.connection = nil
                    if attempt == 2 {
                        logger.warning("revocations.notify_failed", ["error": error.message])
                    }
                }
            }
        }
    }

    // MARK: LISTEN

    /// The LISTEN thread: connect, LISTEN, then wait for notifications or the stop signal.
    private func listen() {
        var connection: PostgresConnection?
        var delay = reconnectDelay
        var hasListened = false
        while !isStopped.withLock({ $0 }) {
            guard let current = connection else {
                do throws(RainError) {
                    let fresh = try PostgresConnection(url: url)
                    try fresh.executeSimple("LISTEN \(Self.channelName)", operation: "listen for revocations")
                    connection = fresh
                    delay = reconnectDelay
                    logger.info("revocations.listening", ["target": fresh.target, "reconnect": String(hasListened)])
                    if hasListened {
                        // What the other instances NOTIFYed while this one was not listening is
                        // lost: every device stream here checks its sessions instead.
                        rechecks.withLock { $0 += 1 }
                        logger.info("revocations.recheck", ["subscribers": String(hub.subscriberCount)])
                        hub.recheckAll()
                    }
                    hasListened = true
                } catch {
                    logger.warning(
                        "revocations.listen_failed", ["error": error.message, "retryMs": String(delay.milliseconds)])
                    if waitForStop(timeoutMilliseconds: Int32(delay.milliseconds)) { return }
                    delay = min(delay * 2, .seconds(10))
                }
                continue
            }
            var descriptors = [
                pollfd(fd: current.socketDescriptor, events: Int16(POLLIN), revents: 0),
                pollfd(fd: wake.descriptor, events: Int16(POLLIN), revents: 0),
            ]
            do throws(RainError) {
                _ = try Syscall.poll(&descriptors, timeoutMilliseconds: -1)
                if descriptors[1].revents != 0 { return }
                guard descriptors[0].revents != 0 else { continue }
                for (_, text) in try current.takeNotifications(operation: "read revocations") {
                    guard let data = text.data(using: .utf8),
                        let payload = try? JSONDecoder().decode(Payload.self, from: data), payload.i != instanceID
                    else { continue }
                    hub.deliver([AuthorityRevocation(appID: payload.a, deviceID: payload.d, reason: payload.r)])
                }
            } catch {
                logger.warning("revocations.listen_lost", ["error": error.message])
                connection = nil
            }
        }
    }

    /// Waits up to `timeoutMilliseconds` for the stop signal.
    /// - Returns: whether the channel stopped.
    private func waitForStop(timeoutMilliseconds: Int32) -> Bool {
        var descriptors = [pollfd(fd: wake.descriptor, events: Int16(POLLIN), revents: 0)]
        _ = try? Syscall.poll(&descriptors, timeoutMilliseconds: timeoutMilliseconds)
        return isStopped.withLock { $0 }
    }
}
