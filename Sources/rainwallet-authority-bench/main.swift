// rainwallet-authority-bench: authority throughput over TCP, the way device daemons load it.
//
//   rainwallet-authority-bench --authority HOST:PORT [--authority HOST:PORT …] [--logins N] [--workers W] [--seconds S]
//       1. (not timed) sends N login codes, each to a new contact from a new device id, spread over
//          the authorities round-robin, and reads the codes from each one's dev outbox;
//       2. confirms them all with W concurrent connections: confirmations per second (each one
//          creates an account and its wallet, as a first login does);
//       3. refreshes those sessions in a closed loop for S seconds (each refresh rotates the
//          tokens and the next one uses the new pair): refreshes per second.
//       Prints one JSON line. Reports figures, asserts nothing.
//   rainwallet-authority-bench create-database --server URL --name NAME
//       creates an empty PostgreSQL database and prints its URL (for scripts/bench-authority).
import Foundation
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainStore
import RainWire

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("rainwallet-authority-bench: \(message)\n".utf8))
    exit(64)
}

let usage =
    "usage: --authority HOST:PORT [--authority …] [--logins N] [--workers W] [--seconds S] | create-database --server URL --name NAME"
var args = Array(CommandLine.arguments.dropFirst())

if args.first == "create-database" {
    args.removeFirst()
    var server: String?
    var name: String?
    while args.count >= 2 {
        let flag = args.removeFirst()
        let value = args.removeFirst()
        switch flag {
        case "--server": server = value
        case "--name": name = value
        default: fail("unknown option \(flag); \(usage)")
        }
    }
    guard let server, let name, args.isEmpty else { fail(usage) }
    do {
        print(try await PostgresAuthorityStore.createDatabase(named: name, serverURL: server))
        exit(0)
    } catch {
        fail("\(error.code): \(error.message)")
    }
}

var addresses: [String] = []
var logins = 300
var workers = 8
var seconds = 3.0
while !args.isEmpty {
    let flag = args.removeFirst()
    guard !args.isEmpty else { fail("\(flag) needs a value; \(usage)") }
    let value = args.removeFirst()
    switch flag {
    case "--authority": addresses.append(value)
    case "--logins": logins = Int(value) ?? 0
    case "--workers": workers = Int(value) ?? 0
    case "--seconds": seconds = Double(value) ?? 0
    default: fail("unknown option \(flag); \(usage)")
    }
}
guard !addresses.isEmpty, logins > 0, workers > 0, seconds > 0 else { fail(usage) }

/// One pending login: which authority, device, challenge and code.
struct Pending: Sendable {
    var authority: Int
    var deviceID: String
    var challengeID: String
    var contact: String
    var code: String
}

/// One live session and the device key that signs its refreshes.
struct Live: Sendable {
    var authority: Int
    var deviceID: String
    var refreshToken: String
    var key: Ed25519PrivateKey
}

/// Runs the three phases against `addresses` and returns the JSON line.
func benchmark(addresses: [String], logins: Int, workers: Int, seconds: Double) async throws -> String {
    let logger = Logger(label: "authority-bench", minimumLevel: .error)
    let app = "bench"
    let run = UInt32.random(in: 0...UInt32.max)
    // One client per worker and authority: each holds its own TCP connection.
    let clients = try (0..<workers).map { _ in
        try addresses.map { try RemoteAuthority(address: $0, logger: logger) }
    }

    // 1. Send (not timed).
    var pending: [Pending] = []
    try await withThrowingTaskGroup(of: [Pending].self) { group in
        for w in 0..<workers {
            group.addTask {
                var out: [Pending] = []
                for i in stride(from: w, to: logins, by: workers) {
                    let a = i % addresses.count
                    let contact = "b\(run)-\(i)@example.com"
                    let device = "bench-\(run)-\(i)"
                    let sent = try await clients[w][a].sendLoginCode(
                        SendCodeRequest(appID: app, deviceID: device, contact: .email(contact)))
                    out.append(Pending(authority: a, deviceID: device, challengeID: sent.challengeID, contact: contact, code: ""))
                }
                return out
            }
        }
        for try await part in group { pending += part }
    }
    var codes: [String: String] = [:]
    for a in addresses.indices {
        for entry in try await clients[0][a].listOutbox() where entry.appID == app { codes[entry.contact] = entry.code }
    }
    for i in pending.indices {
        guard let code = codes[pending[i].contact] else { fail("no code in the outbox for \(pending[i].contact)") }
        pending[i].code = code
    }
    let work = pending

    // 2. Confirm (timed).
    let clock = ContinuousClock()
    let confirmStart = clock.now
    let live: [Live] = try await withThrowingTaskGroup(of: [Live].self) { group in
        for w in 0..<workers {
            group.addTask {
                var out: [Live] = []
                for i in stride(from: w, to: work.count, by: workers) {
                    let p = work[i]
                    let key = try Ed25519PrivateKey()
                    let result = try await clients[w][p.authority].confirmLoginCode(
                        ConfirmCodeRequest(
                            appID: app, deviceID: p.deviceID, challengeID: p.challengeID, code: p.code,
                            devicePublicKey: key.publicKey.rawRepresentation))
                    out.append(
                        Live(authority: p.authority, deviceID: p.deviceID, refreshToken: result.tokens.refreshToken, key: key))
                }
                return out
            }
        }
        return try await group.reduce(into: [Live]()) { $0 += $1 }
    }
    let confirmSeconds =
        Double((clock.now - confirmStart).components.attoseconds) / 1e18
        + Double((clock.now - confirmStart).components.seconds)

    // 3. Refresh in a closed loop (timed).
    let refreshStart = clock.now
    let end = refreshStart + .milliseconds(Int64(seconds * 1000))
    let sessions = live
    let refreshes = try await withThrowingTaskGroup(of: Int.self) { group in
        for w in 0..<workers {
            group.addTask {
                var mine = stride(from: w, to: sessions.count, by: workers).map { sessions[$0] }
                var count = 0
                var next = 0
                while clock.now < end, !mine.isEmpty {
                    let s = mine[next]
                    let tokens = try await clients[w][s.authority].refreshSession(
                        RefreshRequest.signed(
                            appID: app, deviceID: s.deviceID, refreshToken: s.refreshToken, timestamp: Date(), deviceKey: s.key))
                    mine[next].refreshToken = tokens.refreshToken
                    next = (next + 1) % mine.count
                    count += 1
                }
                return count
            }
        }
        return try await group.reduce(0, +)
    }
    let refreshElapsed = clock.now - refreshStart
    let refreshSeconds = Double(refreshElapsed.components.seconds) + Double(refreshElapsed.components.attoseconds) / 1e18
    for row in clients { for c in row { c.close() } }
    let confirmRate = Double(work.count) / confirmSeconds
    let refreshRate = Double(refreshes) / refreshSeconds
    return
        (String(
            format:
                "{\"instances\":%d,\"workers\":%d,\"confirmations\":%d,\"confirmSeconds\":%.3f,\"confirmsPerSecond\":%.1f,\"refreshes\":%d,\"refreshSeconds\":%.3f,\"refreshesPerSecond\":%.1f}",
            addresses.count, workers, work.count, confirmSeconds, confirmRate, refreshes, refreshSeconds, refreshRate))
}

do {
    print(try await benchmark(addresses: addresses, logins: logins, workers: workers, seconds: seconds))
} catch let error as RainError {
    fail("\(error.code): \(error.message)")
} catch {
    fail("\(error)")
}
