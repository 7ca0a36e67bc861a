#!/usr/bin/python3
"""A fault-injecting TCP proxy for scripts/netfault (asyncio, standard library only).

    netfault-proxy.py serve --listen HOST:PORT --upstream HOST:PORT --control PATH
        forwards every connection accepted on HOST:PORT to the upstream; prints "ready port=N" on
        stdout once listening; the fault is set at run time through the Unix socket PATH
    netfault-proxy.py ctl PATH COMMAND [ARG...]
        sends one command, prints the proxy's answer (one JSON line), exits 1 when it is an error

Commands (they apply at once, to open connections and to new ones alike):
    pass                 forward as it comes
    delay MS             hold every chunk MS milliseconds, each way (order kept)
    stall                accept, forward nothing (what is read is held); a close still closes
    drop N [down|up]     close the connection once N more bytes went down (authority to device,
                         the answer: default) or up (the request); bytes before the cut are delivered
    bytewise GAP_MS      deliver one byte per write, GAP_MS apart (TCP_NODELAY: one segment each)
    kill                 close every open connection (the mode stays)
    freeze watch-answered
                         silence, for good, each open connection that opened a WatchRevocations
                         stream (seen in the request, so plain TCP only), right after it passed an
                         answer down (bytes down after bytes up: a read lease just renewed); waits
                         up to 10 s for it. What either side sends then is held and a close is never
                         passed on: a link held open without traffic and without a FIN. New
                         connections pass
    stats                the mode and the counters
Every answer is one JSON line: {"ok": true, "mode": ..., "connections": ..., ...}.
"""

import asyncio
import json
import os
import socket
import sys
import time

UP, DOWN = "up", "down"


class Fault:
    """The current mode, shared by every connection."""

    def __init__(self):
        self.mode = "pass"
        self.delay = 0.0
        self.gap = 0.0
        self.drop_after = 0
        self.drop_direction = DOWN
        self.epoch = 0  # a new mode restarts the drop counters
        self.changed = asyncio.Event()

    def set(self, mode, **values):
        self.mode = mode
        for k, v in values.items():
            setattr(self, k, v)
        self.epoch += 1
        self.changed.set()
        self.changed = asyncio.Event()


class Link:
    """One proxied connection: two directions, each a reader task and a writer task joined by a
    queue of (due time, bytes), so a delay keeps order and a mode change never reorders."""

    def __init__(self, proxy, client_reader, client_writer):
        self.proxy = proxy
        self.fault = proxy.fault
        self.client = (client_reader, client_writer)
        self.upstream = None
        self.closed = False
        self.sent = {UP: 0, DOWN: 0}
        self.sent_epoch = {UP: -1, DOWN: -1}
        self.tasks = []
        # `freeze watch-answered`: held for good; `watch`: the device opened its revocation stream here.
        self.frozen = False
        self.thaw = asyncio.Event()  # never set: a frozen link stays frozen
        self.watch = False
        self.up_tail = b""
        self.up_since_down = False  # bytes went up since the last bytes down
        self.answered = None  # `freeze watch-answered`: set once frozen after an answer

    def close(self):
        if self.closed:
            return
        self.closed = True
        for _, w in filter(None, (self.client, self.upstream)):
            try:
                w.transport.abort()
            except Exception:
                pass
        for t in self.tasks:
            t.cancel()
        self.proxy.links.discard(self)

    async def run(self):
        try:
            host, port = self.proxy.upstream
            self.upstream = await asyncio.open_connection(host, port)
        except OSError:
            self.close()
            return
        for _, w in (self.client, self.upstream):
            sock = w.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        up_q, down_q = asyncio.Queue(), asyncio.Queue()
        self.tasks = [
            asyncio.create_task(self.read(self.client[0], up_q, UP)),
            asyncio.create_task(self.write(up_q, self.upstream[1], UP)),
            asyncio.create_task(self.read(self.upstream[0], down_q, DOWN)),
            asyncio.create_task(self.write(down_q, self.client[1], DOWN)),
        ]
        await asyncio.gather(*self.tasks, return_exceptions=True)
        self.close()

    async def read(self, reader, queue, direction):
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                self.proxy.counters["bytes_" + direction] += len(data)
                if direction == UP and not self.watch:
                    seen = self.up_tail + data
                    self.watch = b"WatchRevocations" in seen
                    self.up_tail = seen[-64:]
                delay = self.fault.delay if self.fault.mode == "delay" else 0.0
                await queue.put((time.monotonic() + delay, data))
        except (OSError, asyncio.IncompleteReadError):
            pass
        # A close is a close whatever the mode: delivered after what was read before it, or at
        # once while stalled (a hung peer's kernel still sees the FIN). A frozen link passes none.
        if self.frozen:
            return
        if self.fault.mode == "stall":
            self.close()
        else:
            await queue.put((time.monotonic(), None))

    async def write(self, queue, writer, direction):
        try:
            while True:
                due, data = await queue.get()
                if data is None:
                    self.close()
                    return
                while self.frozen or self.fault.mode == "stall":
                    await (self.thaw.wait() if self.frozen else self.fault.changed.wait())
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                f = self.fault
                if f.mode == "drop" and f.drop_direction == direction:
                    if self.sent_epoch[direction] != f.epoch:
                        self.sent_epoch[direction], self.sent[direction] = f.epoch, 0
                    left = f.drop_after - self.sent[direction]
                    if len(data) >= left:
                        if left > 0:
                            writer.write(data[:left])
                            await writer.drain()
                        self.proxy.counters["dropped"] += 1
                        self.close()
                        return
                    self.sent[direction] += len(data)
                if f.mode == "bytewise":
                    for i in range(len(data)):
                        writer.write(data[i:i + 1])
                        await writer.drain()
                        await asyncio.sleep(f.gap)
                else:
                    writer.write(data)
                    await writer.drain()
                if direction == UP:
                    self.up_since_down = True
                elif self.answered is not None and self.up_since_down:
                    self.frozen = True
                    self.answered.set()
                else:
                    self.up_since_down = False
        except (OSError, ConnectionError):
            self.close()


class Proxy:
    def __init__(self, upstream):
        self.upstream = upstream
        self.fault = Fault()
        self.links = set()
        self.counters = {"accepted": 0, "bytes_up": 0, "bytes_down": 0, "dropped": 0}

    async def accept(self, reader, writer):
        self.counters["accepted"] += 1
        link = Link(self, reader, writer)
        self.links.add(link)
        await link.run()

    def state(self):
        f = self.fault
        return {"ok": True, "mode": f.mode, "delayMs": round(f.delay * 1000), "gapMs": round(f.gap * 1000),
                "dropAfter": f.drop_after, "dropDirection": f.drop_direction, "connections": len(self.links),
                **self.counters}

    def command(self, words):
        f = self.fault
        if not words:
            raise ValueError("empty command")
        name, args = words[0], words[1:]
        if name == "pass" and not args:
            f.set("pass")
        elif name == "delay" and len(args) == 1:
            f.set("delay", delay=int(args[0]) / 1000)
        elif name == "stall" and not args:
            f.set("stall")
        elif name == "drop" and len(args) in (1, 2):
            direction = args[1] if len(args) == 2 else DOWN
            if direction not in (UP, DOWN):
                raise ValueError("drop N [down|up]")
            f.set("drop", drop_after=int(args[0]), drop_direction=direction)
        elif name == "bytewise" and len(args) == 1:
            f.set("bytewise", gap=int(args[0]) / 1000)
        elif name == "kill" and not args:
            for link in list(self.links):
                link.close()
        elif name == "stats" and not args:
            pass
        else:
            raise ValueError(f"unknown command: {' '.join(words)}")
        return self.state()

    async def freeze_answered(self):
        links = [link for link in self.links if link.watch]
        for link in links:
            link.answered = asyncio.Event()
        try:
            await asyncio.wait_for(asyncio.gather(*(link.answered.wait() for link in links)), 10)
        except asyncio.TimeoutError:
            raise ValueError("no answer passed down a revocation stream within 10 s")
        return {**self.state(), "frozen": len(links)}

    async def control(self, reader, writer):
        try:
            line = await reader.readline()
            try:
                words = line.decode().split()
                if words == ["freeze", "watch-answered"]:
                    answer = await self.freeze_answered()
                else:
                    answer = self.command(words)
            except ValueError as e:
                answer = {"ok": False, "error": str(e)}
            writer.write((json.dumps(answer) + "\n").encode())
            await writer.drain()
        finally:
            writer.close()


def split_address(text):
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


async def serve(listen, upstream, control_path):
    proxy = Proxy(split_address(upstream))
    host, port = split_address(listen)
    server = await asyncio.start_server(proxy.accept, host, port, reuse_address=True)
    if os.path.exists(control_path):
        os.unlink(control_path)
    control = await asyncio.start_unix_server(proxy.control, control_path)
    os.chmod(control_path, 0o600)
    bound = server.sockets[0].getsockname()[1]
    print(f"ready port={bound}", flush=True)
    async with server, control:
        await asyncio.gather(server.serve_forever(), control.serve_forever())


def ctl(path, words):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(path)
        s.sendall((" ".join(words) + "\n").encode())
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    print(data.decode().strip())
    return 0 if json.loads(data or b"{}").get("ok") else 1


def main(argv):
    if len(argv) >= 2 and argv[0] == "ctl":
        return ctl(argv[1], argv[2:])
    if argv and argv[0] == "serve":
        opts, rest = {}, argv[1:]
        while len(rest) >= 2 and rest[0] in ("--listen", "--upstream", "--control"):
            opts[rest[0]], rest = rest[1], rest[2:]
        if not rest and len(opts) == 3:
            try:
                asyncio.run(serve(opts["--listen"], opts["--upstream"], opts["--control"]))
            except KeyboardInterrupt:
                pass
            return 0
    print(__doc__, file=sys.stderr)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
