#!/usr/bin/python3
"""Times the device daemon's local calls while scripts/netfault injects a network fault.

    status-probe.py --socket PATH --stop-file FILE [--interval-ms 20] [--max-seconds 60] [--slow-ms 10]
    status-probe.py --socket PATH --leak N --hold-seconds S

Until FILE exists, every INTERVAL ms, on one open connection (as an app keeps it): GetState,
AwaitRestore and GetInfo (what `rainwallet status --json` asks), then a Watch stream opened up to
its first event (the current state) and cancelled. Each call is timed on its own in this process,
so a figure is the daemon's answer to one call, not the CLI's process start (~80 ms for a debug
build). Every tenth sample also times a fresh connection and its first call (the CLI's path: the
daemon names the caller then), reported apart. Prints one JSON line at the end: {"samples": N,
"maxMs": the slowest call, "p99Ms", "p95Ms", "p50Ms", "maxMsByCall": {...}, "newConnectionMaxMs",
"slowCalls": the first 20 calls over --slow-ms (10), "errors": N, "firstError": "..."}.

With --leak (scripts/netfault --mutate leak, the self-test of its resources check): N admitted
connections (a GetInfo each), each then holding an unfinished 1 MiB frame of which 900 KiB were
sent, for S seconds: the descriptors and the memory a leaking daemon would keep.

The daemon names this caller "python3 + this script" (per-app access): scripts/netfault approves
that pair in the device's config. Run it by absolute path, without PYTHONPATH.
"""
import json
import os
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.normpath(os.path.join(here, "..", ".."))
sys.path.insert(0, os.path.join(root, "Examples", "python"))
import rainwallet_client as rc  # noqa: E402


CALLS = ("GetState", "AwaitRestore", "GetInfo", "Watch")


def sample(env, w, conn):
    """What an app's status does on its open connection, and a Watch's first event; ms of each."""
    times = []
    t = time.perf_counter()

    def lap():
        nonlocal t
        now = time.perf_counter()
        times.append((now - t) * 1000)
        t = now

    conn.call("/rain.wallet.v1.Session/GetState", w.GetSessionStateRequest(), w.SessionState, deferred=False)
    lap()
    conn.call("/rain.wallet.v1.Session/AwaitRestore", w.AwaitRestoreRequest(), w.SessionState)
    lap()
    rc.get_info(conn, w)
    lap()
    seen = []
    rid = conn.open_stream("/rain.wallet.v1.Session/Watch", w.WatchRequest(), seen.append)
    while not seen and rid in conn.streams:
        conn.pump()
    lap()
    conn.cancel(rid)
    return times


def new_connection(env, w, path):
    """What the CLI's `status` pays first: connect, and its first call (the daemon names the caller)."""
    t = time.perf_counter()
    conn = rc.Connection(env, path, "default", os.getuid(), 2000)
    try:
        rc.get_info(conn, w)
    finally:
        conn.close()
    return (time.perf_counter() - t) * 1000


def leak(env, w, path, count, hold):
    held = []
    for _ in range(count):
        conn = rc.Connection(env, path, "default", os.getuid(), 2000)
        rc.get_info(conn, w)
        conn.sock.sendall((1048000).to_bytes(4, "big") + bytes(921600))
        held.append(conn)
    print("leak held", file=sys.stderr, flush=True)
    time.sleep(hold)


def main():
    args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
    if "--leak" in args:
        with tempfile.TemporaryDirectory(prefix="netfault-probe-") as out:
            env, w = rc.load_messages(os.path.join(root, "proto"), out)
            leak(env, w, args["--socket"], int(args["--leak"]), float(args["--hold-seconds"]))
        return
    path, stop = args["--socket"], args["--stop-file"]
    interval = int(args.get("--interval-ms", "20")) / 1000
    limit = time.monotonic() + float(args.get("--max-seconds", "60"))
    per_call = {name: [] for name in CALLS}
    fresh, slow = [], []
    slow_ms = float(args.get("--slow-ms", "10"))
    started = time.monotonic()
    errors, first_error = 0, ""
    with tempfile.TemporaryDirectory(prefix="netfault-probe-") as out:
        env, w = rc.load_messages(os.path.join(root, "proto"), out)
        conn = rc.Connection(env, path, "default", os.getuid(), 2000)
        rc.get_info(conn, w)
        print("probe ready", file=sys.stderr, flush=True)
        n = 0
        while not os.path.exists(stop) and time.monotonic() < limit:
            try:
                at = time.monotonic()
                for name, ms in zip(CALLS, sample(env, w, conn)):
                    per_call[name].append(ms)
                    if ms > slow_ms:
                        slow.append(f"{name} {ms:.2f} ms at +{at - started:.2f} s")
                if n % 10 == 0:
                    fresh.append(new_connection(env, w, path))
            except (rc.RainError, OSError) as e:
                errors += 1
                first_error = first_error or str(e)
                conn = rc.Connection(env, path, "default", os.getuid(), 2000)
            n += 1
            time.sleep(interval)
        conn.close()
    every = sorted(ms for values in per_call.values() for ms in values)
    print(json.dumps({
        "samples": len(per_call["GetState"]),
        "maxMs": round(every[-1], 2) if every else None,
        "p99Ms": round(every[int(len(every) * 0.99)], 2) if every else None,
        "p95Ms": round(every[int(len(every) * 0.95)], 2) if every else None,
        "p50Ms": round(every[len(every) // 2], 2) if every else None,
        "maxMsByCall": {name: round(max(v), 2) for name, v in per_call.items() if v},
        "newConnectionMaxMs": round(max(fresh), 2) if fresh else None,
        "slowCalls": slow[:20], "errors": errors, "firstError": first_error}))


if __name__ == "__main__":
    main()
