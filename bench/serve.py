"""`sp-scan serve` under load: requests/s and p50/p99 latency of every BlindBit v1 route.

    python -m bench.serve                                   # every route, 50/200/1,000 clients, gzip on and off
    python -m bench.serve --routes tweak-index --clients 200 --gzip on --requests 10000
    python -m bench.serve --serve-arg=--per-ip-rate=0       # pass options to `sp-scan serve`
    python -m bench.serve --python-only --routes tweak-index utxos --gzip on --requests 50000

Indexes vectors/blocks/mainnet.bin (a mainnet-sized block: 3,001 txs, 1,412 eligible, 2,062 P2TR
outputs) into a scratch file with `sp-scan index sync`, starts `sp-scan serve` on it in a child
process (port 0) and drives it from this process over keep-alive connections on 127.0.0.1, each
sending its next request when the previous answer has arrived whole (bodies are neither kept nor
decompressed: the client stays light, so the server's CPU is what is measured). Client and server are separate
processes on the same 2 cores. One loopback address is every client's, so the per-IP limits are
lifted for the run (BENCH_SERVE_ARGS). `srv µs` is the server process's CPU time per request (user +
system, from /proc): what a busy shared machine disturbs least. `--python-only` measures, without
sockets, the server's Python CPU per cache hit instead: the client's request fed to one keep-alive
connection (`HttpConnection.data_received`) of an in-process server whose writes are dropped.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import zlib
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
BLOCK = ROOT / "vectors" / "blocks" / "mainnet.bin"
HEIGHT = 930_000  # the BIP34 height in mainnet.bin's coinbase
ROUTES = {
    "info": "/info",
    "block-height": "/block-height",
    "block-hash": f"/block-hash/{HEIGHT}",
    "tweak-index": f"/tweak-index/{HEIGHT}?dustLimit=0",
    "tweaks": f"/tweaks/{HEIGHT}?dustLimit=1000",
    "filter-new-utxos": f"/filter/new-utxos/{HEIGHT}",
    "filter-spent": f"/filter/spent/{HEIGHT}",
    "utxos": f"/utxos/{HEIGHT}",
    "spent-index": f"/spent-index/{HEIGHT}",
}
BENCH_SERVE_ARGS = ["--per-ip-connections", "0", "--per-ip-rate", "0", "--max-connections", "4000"]
"""Every bench client comes from 127.0.0.1: no per-IP limits, room for 1,000 clients and the warm-up's."""


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "sp_scan.cli", *args]


def start_server(db: Path, extra: list[str]) -> tuple[subprocess.Popen, str]:
    """`sp-scan serve --db DB --port 0 EXTRA` in a child; its base URL from the first stderr line."""
    proc = subprocess.Popen(cli("serve", "--db", str(db), "--port", "0", *extra), stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()
    found = re.search(r"http://\S+", line)
    if not found:
        proc.kill()
        raise SystemExit(f"serve did not start: {line}{proc.stderr.read()}")
    return proc, found.group(0)


class _Client(asyncio.Protocol):
    """One keep-alive connection sending `request` again each time the previous answer has arrived whole."""

    def __init__(self, request: bytes, plan: dict, done: asyncio.Future) -> None:
        self.request, self.plan, self.done = request, plan, done
        self.head = b""
        self.left = -1  # body bytes still to come; -1 while reading a head
        self.began = 0.0

    def connection_made(self, transport) -> None:  # type: ignore[override]
        self.transport = transport
        self._send()

    def _send(self) -> None:
        if self.plan["left"] <= 0:
            self.transport.close()
            return
        self.plan["left"] -= 1
        self.began = time.perf_counter()
        self.transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        while data:
            if self.left < 0:
                self.head += data
                end = self.head.find(b"\r\n\r\n")
                if end < 0:
                    return
                head, data = self.head[:end], self.head[end + 4 :]
                self.head = b""
                self.plan["errors"] += not head.startswith(b"HTTP/1.1 200 ")
                self.left = int(head.split(b"Content-Length: ", 1)[1].split(b"\r\n", 1)[0])
            take = min(self.left, len(data))
            self.left -= take
            data = data[take:]
            if self.left == 0:
                self.left = -1
                self.plan["latencies"].append(time.perf_counter() - self.began)
                self._send()

    def connection_lost(self, exc) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def drive(url: str, clients: int, requests: int, gzip: bool) -> tuple[float, list[float], int]:
    """`requests` GETs of url from `clients` concurrent keep-alive connections: (seconds, latencies, errors).

    A plain HTTP/1.1 client on asyncio protocols, far lighter than a full client library, so that
    the server rather than the client is what runs out of CPU: each answer is received whole (by its
    Content-Length) and its status checked; the body is not kept, decompressed or parsed.
    """
    parts = urllib.parse.urlsplit(url)
    request = _request(url, gzip)
    plan = {"left": requests, "errors": 0, "latencies": []}
    loop = asyncio.get_running_loop()
    began = time.perf_counter()
    finished = []
    for _ in range(clients):
        done = loop.create_future()
        await loop.create_connection(lambda done=done: _Client(request, plan, done), parts.hostname, parts.port)
        finished.append(done)
    await asyncio.gather(*finished)
    return time.perf_counter() - began, plan["latencies"], plan["errors"]


def _request(url: str, gzip: bool) -> bytes:
    """The bench client's GET of url."""
    parts = urllib.parse.urlsplit(url)
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    return f"GET {target} HTTP/1.1\r\nHost: {parts.netloc}\r\nAccept-Encoding: {'gzip' if gzip else 'identity'}\r\n\r\n".encode()


class _DropWrites(asyncio.Transport):
    """A connected transport whose writes go nowhere: `--python-only` serves into it."""

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 1) if name == "peername" else default

    def set_write_buffer_limits(self, high=None, low=None) -> None:
        pass

    def write(self, data) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        pass


async def python_only(db: Path, names: list[str], gzip_modes: list[str], requests: int) -> None:
    """Print the server's Python CPU per cache hit of each route (best of 7 rounds of `requests`), no sockets."""
    from sp_scan.server import Limits, Server
    from sp_scan.server.http import HttpConnection

    server = Server(db, "127.0.0.1", 0, limits=Limits(per_ip_rate=0, per_ip_connections=0), log=lambda line: None)
    await server.start()
    try:
        print(f"{'route':<22}{'gzip':>5}{'Python µs per hit':>19}")
        for name in names:
            for gzip in gzip_modes:
                connection = HttpConnection(server.http)
                connection.connection_made(_DropWrites())
                request = _request(f"http://127.0.0.1:8000{ROUTES[name]}", gzip == "on")
                connection.data_received(request)  # the miss: built on a reader thread
                while connection.task is not None:
                    await asyncio.sleep(0.01)
                rounds = []
                for _ in range(7):
                    began = time.process_time()
                    for _ in range(requests):
                        connection.data_received(request)
                    rounds.append((time.process_time() - began) / requests * 1e6)
                print(f"{ROUTES[name].split('?')[0].replace(str(HEIGHT), 'H'):<22}{gzip:>5}{min(rounds):>19.2f}", flush=True)
                connection.connection_lost(None)
    finally:
        await server.close()


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds the process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[50, 200, 1000], help="concurrency levels, in turn")
    parser.add_argument("--requests", type=int, default=3000, help="per row (at least 2 per client)")
    parser.add_argument("--gzip", nargs="+", choices=["on", "off"], default=["on", "off"])
    parser.add_argument("--routes", nargs="+", choices=sorted(ROUTES), default=list(ROUTES))
    parser.add_argument("--serve-arg", action="append", default=[], help="an extra `sp-scan serve` option (repeat)")
    parser.add_argument("--python-only", action="store_true", help="the server's Python CPU per cache hit, in-process, no sockets")
    args = parser.parse_args()
    version = subprocess.run(cli("--version"), capture_output=True, text=True).stdout.strip()
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    print(f"{version}; CPU {cpu}; {os.cpu_count()} cores; load {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as scratch:
        db = Path(scratch) / "bench.db"
        subprocess.run(cli("index", "sync", "--db", str(db), "--network", "main", str(BLOCK)), check=True, capture_output=True)
        if args.python_only:
            asyncio.run(python_only(db, args.routes, args.gzip, args.requests))
            return
        proc, base = start_server(db, BENCH_SERVE_ARGS + args.serve_arg)
        try:
            print(f"sp-scan serve on {base}: {args.requests} requests per row")
            print(f"{'route':<22}{'gzip':>5}{'clients':>8}{'req/s':>8}{'p50 ms':>9}{'p99 ms':>9}{'JSON B':>8}{'sent B':>8}{'srv µs':>8}  errors")
            for name in args.routes:
                route = ROUTES[name]
                for gzip in args.gzip:
                    on = gzip == "on"
                    json_size, sent_size = asyncio.run(_sizes(base + route, on))
                    for clients in args.clients:
                        requests = max(args.requests, 2 * clients)
                        asyncio.run(drive(base + route, clients, min(requests, 2 * clients), on))  # warm up
                        cpu = cpu_seconds(proc.pid)
                        seconds, lat, errors = asyncio.run(drive(base + route, clients, requests, on))
                        server_us = (cpu_seconds(proc.pid) - cpu) / len(lat) * 1e6
                        q = statistics.quantiles(lat, n=100)
                        print(
                            f"{route.split('?')[0].replace(str(HEIGHT), 'H'):<22}{gzip:>5}{clients:>8}{len(lat) / seconds:>8.0f}"
                            f"{q[49] * 1e3:>9.2f}{q[98] * 1e3:>9.2f}{json_size:>8}{sent_size:>8}{server_us:>8.0f}  {errors}",
                            flush=True,
                        )
        finally:
            proc.terminate()
            proc.wait(30)


async def _sizes(url: str, gzip: bool) -> tuple[int, int]:
    """(JSON body bytes, bytes on the wire) of one answer."""
    headers = {"Accept-Encoding": "gzip" if gzip else "identity"}
    async with aiohttp.ClientSession(auto_decompress=False) as session, session.get(url, headers=headers) as response:
        sent = await response.read()
    return len(zlib.decompress(sent, wbits=31) if response.headers.get("Content-Encoding") == "gzip" else sent), len(sent)


if __name__ == "__main__":
    main()
