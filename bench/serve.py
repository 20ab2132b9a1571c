"""`sp-scan serve` under load: requests/s and p50/p99 latency of /tweak-index and /filter/new-utxos.

    python -m bench.serve                     # 200 concurrent clients, then 1; 4,000 requests per route
    python -m bench.serve --clients 50 --requests 10000 --no-gzip

Indexes vectors/blocks/mainnet.bin (a mainnet-sized block: 3,001 txs, 1,412 eligible, 2,062 P2TR
outputs) into a scratch file with `sp-scan index sync`, starts `sp-scan serve` on it in a child
process (port 0) and drives it from this process with aiohttp clients on 127.0.0.1, each
sending its next request when the previous answer is read. Client and server share the
machine: on 2 cores the client's own parsing is part of what is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
BLOCK = ROOT / "vectors" / "blocks" / "mainnet.bin"
HEIGHT = 930_000  # the BIP34 height in mainnet.bin's coinbase


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "sp_scan.cli", *args]


def start_server(db: Path) -> tuple[subprocess.Popen, str]:
    """`sp-scan serve --db DB --port 0` in a child; its base URL from the first stderr line."""
    proc = subprocess.Popen(cli("serve", "--db", str(db), "--port", "0"), stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()
    found = re.search(r"http://\S+", line)
    if not found:
        proc.kill()
        raise SystemExit(f"serve did not start: {line}{proc.stderr.read()}")
    return proc, found.group(0)


async def drive(url: str, clients: int, requests: int, gzip: bool) -> tuple[float, list[float], int]:
    """`requests` GETs of url from `clients` concurrent clients: (seconds, latencies, errors)."""
    latencies: list[float] = []
    errors = 0
    left = requests
    headers = {"Accept-Encoding": "gzip" if gzip else "identity"}
    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=connector, headers=headers, auto_decompress=True) as session:

        async def client() -> None:
            nonlocal left, errors
            while left > 0:
                left -= 1
                began = time.perf_counter()
                async with session.get(url) as response:
                    await response.read()
                    errors += response.status != 200
                latencies.append(time.perf_counter() - began)

        began = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(clients)))
        return time.perf_counter() - began, latencies, errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[200, 1], help="concurrency levels, in turn")
    parser.add_argument("--requests", type=int, default=4000, help="per route")
    parser.add_argument("--no-gzip", dest="gzip", action="store_false")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        db = Path(scratch) / "bench.db"
        subprocess.run(cli("index", "sync", "--db", str(db), "--network", "main", str(BLOCK)), check=True, capture_output=True)
        proc, base = start_server(db)
        try:
            print(f"sp-scan serve on {base}: {args.requests} requests per route and concurrency, gzip {'on' if args.gzip else 'off'}")
            print(f"{'route':<26}{'clients':>8}{'req/s':>8}{'p50 ms':>9}{'p99 ms':>9}{'JSON B':>8}{'sent B':>8}  errors")
            for route in (f"/tweak-index/{HEIGHT}?dustLimit=0", f"/filter/new-utxos/{HEIGHT}", "/block-height"):
                json_size, sent_size = asyncio.run(_sizes(base + route, args.gzip))
                for clients in args.clients:
                    asyncio.run(drive(base + route, clients, min(args.requests, 400), args.gzip))  # warm up
                    seconds, lat, errors = asyncio.run(drive(base + route, clients, args.requests, args.gzip))
                    q = statistics.quantiles(lat, n=100)
                    print(
                        f"{route.split('?')[0]:<26}{clients:>8}{len(lat) / seconds:>8.0f}{q[49] * 1e3:>9.2f}{q[98] * 1e3:>9.2f}"
                        f"{json_size:>8}{sent_size:>8}  {errors}"
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
