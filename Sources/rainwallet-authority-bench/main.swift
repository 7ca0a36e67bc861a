// rainwallet-authority-bench: authority throughput over TCP, the way device daemons load it.
//
//   rainwallet-authority-bench --authority HOST:PORT [--authority HOST:PORT …] [--logins N] [--workers W] [--seconds S]
//       1. (not timed) sends N login codes, each to a new contact from a new device id, spread over
//          the authorities round-robin, and reads the codes from each one's dev outbox;
//       2. confirms them all with W concurrent connections: confirmations per second (each one
//          creates an account and its wallet, as a first login does);
//       3. refreshes those sessions in a closed loop for S seconds (each refresh rotates the
//          tokens and the next one uses the new pair): refreshes per second;
//       4. opens 32 fresh connections, one after another, and times on each the connection
//          (GetInfo), the first GetAccountInfo (the device proof: challenge, signature, check, then
//          the call) and a second one (the call alone): connect and proof cost, per-call cost.
//       Each worker is one device (one Ed25519 key) that proves its key once per connection;
//       its logins use distinct device ids bound to that key.
//       Prints one JSON line. Reports figures, asserts nothing.
//   rainwallet-authority-bench create-database --server URL --name NAME
//       creates an empty PostgreSQL database and prints its URL (for scripts/bench-authority).
//   rainwallet-authority-bench floor --dir DIR [--seconds S]
//       the machine's floor for the authority's write path, one JSON line: how many 4 KiB
//       write + fdatasync pairs per second a file in DIR (the state directory's file system) takes,
//       one after another (what SQLite's synchronous=FULL pays per commit), and how long the key
//       material of one new wallet takes on one core (entropy, BIP-39 seed, BIP-32 and SLIP-10
//       keys, addresses, AES-GCM seal: what a first login derives), with its two big parts (the
//       BIP-39 seed's PBKDF2, one secp256k1 public key). About S seconds each (default 1).
import Foundation
import Glibc
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainStore
import RainWire

func fail(_ message: String) -> Never {
    StandardError.write("rainwallet-authority-bench: \(message)\n")
    exit(64)
}

let usage =
    "usage: --authority HOST:PORT [--authority …] [--logins N] [--workers W] [--seconds S] | create-database --server URL --name NAME | floor --dir DIR [--seconds S]"
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

if args.first == "floor" {
    args.removeFirst()
    var directory: String?
    var floorSeconds = 1.0
    while args.count >= 2 {
        let flag = args.removeFirst()
        let value = args.removeFirst()
        switch flag {
        case "--dir": directory = value
        case "--seconds": floorSeconds = Double(value) ?? 0
        default: fail("unknown option \(flag); \(usage)")
        }
    }
    guard let directory, args.isEmpty, floorSeconds > 0 else { fail(usage) }
    print(machineFloor(directory: directory, seconds: floorSeconds))
    exit(0)
}

/// The `floor` subcommand's JSON line (see the header).
func machineFloor(directory: String, seconds: Double) -> String {
    let clock = ContinuousClock()
    func elapsed(since start: ContinuousClock.Instant) -> Double {
        let d = clock.now - start
        return Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }

    // 1. write + fdatasync of one 4 KiB block, over and over.
    let path = directory + "/fsync-floor.\(getpid())"
    let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
    guard fd >= 0 else { fail("cannot create \(path): \(String(cString: strerror(errno)))") }
    defer {
        close(fd)
        unlink(path)
    }
    let block = [UInt8](repeating: 0x5A, count: 4096)
    var syncs = 0
    let syncStart = clock.now
    while elapsed(since: syncStart) < seconds {
        let written = block.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        guard written == block.count, fdatasync(fd) == 0 else {
            fail("write + fdatasync in \(directory) failed: \(String(cString: strerror(errno)))")
        }
        syncs += 1
    }
    let syncRate = Double(syncs) / elapsed(since: syncStart)

    // 2. One new wallet's key material, as EmbeddedAuthority.newWalletKeyMaterial makes it.
    var wallets = 0
    let deriveStart = clock.now
    do throws(RainError) {
        let walletKey = try SymmetricKey.random(byteCount: 32)
        while elapsed(since: deriveStart) < seconds {
            let entropy = try SecureRandom.bytes(count: 16)
            let derived = try WalletKeys.derive(entropy: entropy)
            let sealed = try AESGCM.seal(entropy, using: walletKey, authenticating: Array("rain.wallet.v1:wal_x".utf8))
            guard !derived.ethereumAddress.isEmpty, !sealed.combined.isEmpty else { fail("empty key material") }
            wallets += 1
        }
    } catch {
        fail("wallet derivation failed: \(error.code): \(error.message)")
    }
    let walletMs = elapsed(since: deriveStart) * 1000 / Double(wallets)

    // 3. Its two big parts: the BIP-39 seed (PBKDF2-HMAC-SHA512, 2048 rounds) and one secp256k1
    //    public key (EC_POINT_mul: m/44'/60'/0'/0/0 needs one for each of its two normal steps,
    //    and one for the address).
    var seeds = 0
    var publicKeys = 0
    let seedStart = clock.now
    var seedMs = 0.0
    var publicKeyMs = 0.0
    do throws(RainError) {
        let mnemonic = try BIP39.mnemonic(fromEntropy: try SecureRandom.bytes(count: 16))
        var seed: [UInt8] = []
        while elapsed(since: seedStart) < seconds / 2 {
            seed = try BIP39.seed(fromMnemonic: mnemonic)
            seeds += 1
        }
        seedMs = elapsed(since: seedStart) * 1000 / Double(seeds)
        let master = try BIP32ExtendedKey.master(seed: seed)
        let keyStart = clock.now
        while elapsed(since: keyStart) < seconds / 2 {
            guard try master.compressedPublicKey.count == 33 else { fail("bad public key") }
            publicKeys += 1
        }
        publicKeyMs = elapsed(since: keyStart) * 1000 / Double(publicKeys)
    } catch {
        fail("seed or public key failed: \(error.code): \(error.message)")
    }
    return String(
        format:
            "{\"fdatasyncsPerSecond\":%.0f,\"walletDerivationMs\":%.3f,\"walletsPerSecondPerCore\":%.0f,\"seedMs\":%.3f,\"publicKeyMs\":%.3f}",
        syncRate, walletMs, 1000 / walletMs, seedMs, publicKeyMs)
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

/// One live session.
struct Live: Sendable {
    var authority: Int
    var deviceID: String
    var refreshToken: String
    var accessToken: String
}

/// A worker's device: one key, proven on each of its connections.
struct BenchDevice: DeviceKeyHolder {
    let deviceID: String
    let signer: SoftwareDeviceSigner
    var signers: [any DeviceSigner] { [signer] }
}

/// Runs the three phases against `addresses` and returns the JSON line.
func benchmark(addresses: [String], logins: Int, workers: Int, seconds: Double) async throws -> String {
    let logger = Logger(label: "authority-bench", minimumLevel: .error)
    let app = "bench"
    let run = UInt32.random(in: 0...UInt32.max)
    // One device per worker, and one client per worker and authority: each holds its own TCP
    // connection, on which the worker's device proves its key once.
    let devices = try (0..<workers).map { w in
        BenchDevice(deviceID: "bench-\(run)-w\(w)", signer: SoftwareDeviceSigner(try Ed25519PrivateKey()))
    }
    let clients = try (0..<workers).map { w in
        try addresses.map { try RemoteAuthority(address: $0, device: devices[w], logger: logger) }
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
                        SendCodeRequest(appID: app, deviceID: device, contact: .email(contact)), caller: .anonymous)
                    out.append(Pending(authority: a, deviceID: device, challengeID: sent.challengeID, contact: contact, code: ""))
                }
                return out
            }
        }
        for try await part in group { pending += part }
    }
    var codes: [String: String] = [:]
    for a in addresses.indices {
        for entry in try await clients[0][a].listOutbox(ListOutboxRequest(), caller: .anonymous).deliveries
        where entry.appID == app {
            codes[entry.contact] = entry.code
        }
    }
    for i in pending.indices {
        guard let code = codes[pending[i].contact] else { fail("no code in the outbox for \(pending[i].contact)") }
        pending[i].code = code
    }
    let work = pending

    // 2. Confirm (timed).
    let clock = ContinuousClock()
    let confirmStart = clock.now
    // The sessions of each worker, in worker order: worker w refreshes them on its own clients.
    let live: [[Live]] = try await withThrowingTaskGroup(of: (Int, [Live]).self) { group in
        for w in 0..<workers {
            group.addTask {
                var out: [Live] = []
                for i in stride(from: w, to: work.count, by: workers) {
                    let p = work[i]
                    let result = try await clients[w][p.authority].confirmLoginCode(
                        ConfirmCodeRequest(
                            appID: app, deviceID: p.deviceID, challengeID: p.challengeID, code: p.code,
                            devicePublicKey: devices[w].signer.publicKey.wireBytes), caller: .anonymous)
                    out.append(
                        Live(
                            authority: p.authority, deviceID: p.deviceID, refreshToken: result.tokens.refreshToken,
                            accessToken: result.tokens.accessToken))
                }
                return (w, out)
            }
        }
        var byWorker = Array(repeating: [Live](), count: workers)
        for try await (w, part) in group { byWorker[w] = part }
        return byWorker
    }
    let confirmSeconds =
        Double((clock.now - confirmStart).components.attoseconds) / 1e18
        + Double((clock.now - confirmStart).components.seconds)

    // 3. Refresh in a closed loop (timed).
    let refreshStart = clock.now
    let end = refreshStart + .milliseconds(Int64(seconds * 1000))
    let (refreshes, worker0) = try await withThrowingTaskGroup(of: (Int, Int, [Live]).self) { group in
        for w in 0..<workers {
            let initial = live[w]
            group.addTask {
                var mine = initial
                var count = 0
                var next = 0
                while clock.now < end, !mine.isEmpty {
                    let s = mine[next]
                    // The caller is not sent: the client's connection proved the worker's key.
                    let tokens = try await clients[w][s.authority].refreshSession(
                        RefreshRequest(appID: app, deviceID: s.deviceID, refreshToken: s.refreshToken),
                        caller: .anonymous
                    ).tokens
                    mine[next].refreshToken = tokens.refreshToken
                    next = (next + 1) % mine.count
                    count += 1
                }
                return (w, count, mine)
            }
        }
        var total = 0
        var first: [Live] = []
        for try await (w, count, mine) in group {
            total += count
            if w == 0 { first = mine }
        }
        return (total, first)
    }
    let refreshElapsed = clock.now - refreshStart
    let refreshSeconds = Double(refreshElapsed.components.seconds) + Double(refreshElapsed.components.attoseconds) / 1e18
    for row in clients { for c in row { c.close() } }

    // 4. Connect + proof, then per call, on fresh connections one after another (timed). Worker 0's
    //    device reads the account of its first session (refreshed above: a fresh access token).
    func milliseconds(_ d: Duration) -> Double {
        Double(d.components.seconds) * 1000 + Double(d.components.attoseconds) / 1e15
    }
    var connectMs: [Double] = []
    var proofMs: [Double] = []
    var callMs: [Double] = []
    if let first = worker0.first {
        let probe = try RemoteAuthority(address: addresses[first.authority], device: devices[0], logger: logger)
        let access = try await probe.refreshSession(
            RefreshRequest(appID: app, deviceID: first.deviceID, refreshToken: first.refreshToken),
            caller: .anonymous
        ).tokens.accessToken
        probe.close()
        for _ in 0..<32 {
            let client = try RemoteAuthority(address: addresses[first.authority], device: devices[0], logger: logger)
            let t0 = clock.now
            _ = try await client.getInfo()
            let t1 = clock.now
            _ = try await client.getAccountInfo(
                AuthorityAccountInfoRequest(appID: app, accessToken: access), caller: .anonymous)
            let t2 = clock.now
            _ = try await client.getAccountInfo(
                AuthorityAccountInfoRequest(appID: app, accessToken: access), caller: .anonymous)
            let t3 = clock.now
            client.close()
            connectMs.append(milliseconds(t1 - t0))
            callMs.append(milliseconds(t3 - t2))
            proofMs.append(milliseconds(t2 - t1) - milliseconds(t3 - t2))
        }
    }
    func median(_ values: [Double]) -> Double { values.isEmpty ? 0 : values.sorted()[values.count / 2] }

    let confirmRate = Double(work.count) / confirmSeconds
    let refreshRate = Double(refreshes) / refreshSeconds
    return
        (String(
            format:
                "{\"instances\":%d,\"workers\":%d,\"confirmations\":%d,\"confirmSeconds\":%.3f,\"confirmsPerSecond\":%.1f,\"refreshes\":%d,\"refreshSeconds\":%.3f,\"refreshesPerSecond\":%.1f,\"connectMs\":%.3f,\"proofMs\":%.3f,\"callMs\":%.3f}",
            addresses.count, workers, work.count, confirmSeconds, confirmRate, refreshes, refreshSeconds, refreshRate,
            median(connectMs), median(proofMs), median(callMs)))
}

do {
    print(try await benchmark(addresses: addresses, logins: logins, workers: workers, seconds: seconds))
} catch let error as RainError {
    fail("\(error.code): \(error.message)")
} catch {
    fail("\(error)")
}
