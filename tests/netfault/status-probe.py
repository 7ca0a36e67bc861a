#!/usr/bin/python3
"""Times the device daemon's local calls while scripts/netfault injects a network fault.

    status-probe.py --socket PATH --stop-file FILE [--interval-ms 20] [--max-seconds 60]
    status-probe.py --socket PATH --leak N --hold-seconds S

Until FILE exists: every INTERVAL ms, one fresh connection does what `rainwallet status --json`
does (connect, GetInfo, AwaitRestore, GetState) and opens a Watch stream up to its first event (the
current state), then closes. Each step is timed on its own in this process, so a figure is the
daemon's answer to one call, not the CLI's process start (~80 ms for a debug build). Prints one
JSON line at the end: {"samples": N, "maxMs": the slowest step, "p99Ms", "p50Ms", "maxMsByCall":
{"connect": ..., "GetInfo": ..., ...}, "errors": N, "firstError": "..."}.

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


CALLS = ("connect", "GetInfo", "AwaitRestore", "GetState", "Watch")


def sample(env, w, path):
    """One `rainwallet status --json` and one Watch's first event; the milliseconds of each step."""
    times = []
    t = time.perf_counter()

    def lap():
        nonlocal t
        now = time.perf_counter()
        times.append((now - t) * 1000)
        t = now

    conn = rc.Connection(env, path, "default", os.getuid(), 2000)
    lap()
    try:
        rc.get_info(conn, w)
        lap()
        conn.call("/rain.wallet.v1.Session/AwaitRestore", w.AwaitRestoreRequest(), w.SessionState)
        lap()
        conn.call("/rain.wallet.v1.Session/GetState", w.GetSessionStateRequest(), w.SessionState, deferred=False)
        lap()
        seen = []
        rid = conn.open_stream("/rain.wallet.v1.Session/Watch", w.WatchRequest(), seen.append)
        while not seen and rid in conn.streams:
            conn.pump()
        lap()
        conn.cancel(rid)
    finally:
        conn.close()
    return times


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
    errors, first_error = 0, ""
    with tempfile.TemporaryDirectory(prefix="netfault-probe-") as out:
        env, w = rc.load_messages(os.path.join(root, "proto"), out)
        print("probe ready", file=sys.stderr, flush=True)
        while not os.path.exists(stop) and time.monotonic() < limit:
            try:
                for name, ms in zip(CALLS, sample(env, w, path)):
                    per_call[name].append(ms)
            except (rc.RainError, OSError) as e:
                errors += 1
                first_error = first_error or str(e)
            time.sleep(interval)
    every = sorted(ms for values in per_call.values() for ms in values)
    print(json.dumps({
        "samples": len(per_call["GetState"]),
        "maxMs": round(every[-1], 2) if every else None,
        "p99Ms": round(every[int(len(every) * 0.99)], 2) if every else None,
        "p50Ms": round(every[len(every) // 2], 2) if every else None,
        "maxMsByCall": {name: round(max(v), 2) for name, v in per_call.items() if v},
        "errors": errors, "firstError": first_error}))


if __name__ == "__main__":
    main()
