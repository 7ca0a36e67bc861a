// rainwallet-bench: closed-loop round trips of a cheap call (Session/GetState; `--call get-info`,
// `get-account` and `get-wallet` for Daemon/GetInfo, Account/Get and Wallet/Get, which need a
// session), or with `--call sign-message` of a signature (Wallet/SignMessage, EVM personal_sign; the daemon must run
// with --test-confirm-instantly and a session), through the RainWallet client library, one
// RainProvider (one connection) per task; `--reader-scheduling
// normal` keeps the connection threads off SCHED_BATCH (RainWalletConfig.readerScheduling). Prints one JSON line:
// {"calls":…,"seconds":…,"callsPerSecond":…,"p50Micros":…,"p99Micros":…,"connections":…}
// Used by scripts/bench beside the C floor; it reports figures and asserts nothing.
import Foundation
import RainWallet

func fail(_ message: String) -> Never {
    StandardError.write("rainwallet-bench: \(message)\n")
    exit(64)
}

var socket: String?
var connections = 1
var seconds = 3.0
var readerScheduling = RainWalletConfig.ReaderScheduling.batch
/// The call each loop makes.
enum Call {
    case getState, getInfo, getAccount, getWallet, signMessage
}
var call = Call.getState
let usage =
    "usage: --socket PATH --connections N --seconds S [--reader-scheduling batch|normal] "
    + "[--call get-state|get-info|get-account|get-wallet|sign-message]"
var args = Array(CommandLine.arguments.dropFirst())
while !args.isEmpty {
    let flag = args.removeFirst()
    guard !args.isEmpty else { fail("\(flag) needs a value; \(usage)") }
    let value = args.removeFirst()
    switch flag {
    case "--socket": socket = value
    case "--connections": connections = Int(value) ?? 0
    case "--seconds": seconds = Double(value) ?? 0
    case "--call":
        switch value {
        case "get-state": call = .getState
        case "get-info": call = .getInfo
        case "get-account": call = .getAccount
        case "get-wallet": call = .getWallet
        case "sign-message": call = .signMessage
        default: fail("--call takes get-state, get-info, get-account, get-wallet or sign-message, got '\(value)'")
        }
    case "--reader-scheduling":
        switch value {
        case "batch": readerScheduling = .batch
        case "normal": readerScheduling = .normal
        default: fail("--reader-scheduling takes batch or normal, got '\(value)'")
        }
    default: fail("unknown option \(flag)")
    }
}
guard let socket, connections > 0, seconds > 0 else { fail(usage) }
let scheduling = readerScheduling
let measured = call

/// The monotonic clock in nanoseconds, read as the C floor client reads it (`clock_gettime`): the
/// standard library's `ContinuousClock` and `Duration` arithmetic is heavy enough to show in the
/// client's figures although it is the bench's cost, not the library's.
@inline(__always) func nowNanos() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Int64(ts.tv_sec) &* 1_000_000_000 &+ Int64(ts.tv_nsec)
}

/// One connection's figures: each counted call's latency and when its last counted answer came
/// (ns; 0: none yet).
struct Sample: Sendable {
    var latencies: [Int64] = []
    var last: Int64 = 0
}

let start = nowNanos()
let measureFrom = start + 500_000_000  // after a 0.5 s warm-up
let end = measureFrom + Int64(seconds * 1e9)

let samples: [Sample]
do {
    samples = try await withThrowingTaskGroup(of: Sample.self) { group in
        for _ in 0..<connections {
            group.addTask {
                let provider = RainProvider(RainWalletConfig(socketPath: socket, readerScheduling: scheduling))
                // Run the loop on the connection's own thread: no thread hand-off per call.
                return try await withTaskExecutorPreference(try provider.taskExecutor) {
                    var sample = Sample()
                    sample.latencies.reserveCapacity(200_000)
                    while true {
                        let t0 = nowNanos()
                        if t0 >= end { break }
                        switch measured {
                        case .getState: _ = try await provider.currentSession()
                        case .getInfo: _ = try await provider.daemonInfo()
                        case .getAccount: _ = try await provider.account()
                        case .getWallet: _ = try await provider.getWallet()
                        case .signMessage: _ = try await provider.signMessage("rainwallet-bench \(t0)")
                        }
                        let t1 = nowNanos()
                        if t0 >= measureFrom {
                            sample.latencies.append(t1 - t0)
                            sample.last = t1
                        }
                    }
                    return sample
                }
            }
        }
        var all: [Sample] = []
        for try await s in group { all.append(s) }
        return all
    }
} catch let e as RainError {
    StandardError.write("rainwallet-bench: \(e.code): \(e.message)\n")
    exit(1)
}

let all = samples.flatMap(\.latencies).map { Double($0) / 1e3 }.sorted()
guard !all.isEmpty, let lastReply = samples.map(\.last).max(), lastReply > 0 else { fail("no calls completed") }
let windowSeconds = Double(lastReply - measureFrom) / 1e9
func percentile(_ p: Double, of all: [Double]) -> Double {
    let rank = Int((p / 100 * Double(all.count)).rounded(.up))
    return all[max(0, min(all.count - 1, rank - 1))]
}
let line = String(
    format: "{\"calls\":%d,\"seconds\":%.3f,\"callsPerSecond\":%.1f,\"p50Micros\":%.1f,\"p99Micros\":%.1f,\"connections\":%d}",
    all.count, windowSeconds, Double(all.count) / windowSeconds, percentile(50, of: all), percentile(99, of: all), connections)
print(line)
