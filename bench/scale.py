"""The index at mainnet's shape: a first sync over a chain of `bench.chain`, one row per window of blocks.

Usage:
    python -m bench.scale --chain /work/benchchain/main                   # 500 blocks over REST, --jobs 1 (a few minutes)
    python -m bench.scale --chain /work/benchchain/main --blocks 3000 --window 250 --source rest --jobs 1
    python -m bench.scale --chain /work/benchchain/main --blocks 20000 --window 1000 --jobs 2 --source blocks-dir
    python -m bench.scale --chain … --drop-cache 50 --serve-probe

The chain (made first with `python -m bench.chain`) is served from its files: `--source rest` and `rpc`
by `tests/cli_support.py`'s RestHandler / RpcHandler in a process of their own, over a ChainView that
reads each block and its undo record on demand (`CoreBlocks.block`); `blocks-dir` hands the sync the
folder itself (`CoreBlocks`). The sync runs in this process, `Index.create` + `Index.sync(source,
jobs=J, stop=N - 1)` into a new index in a temporary folder beside the chain (`--workdir`), and prints
after each window of `--window` blocks:

- heights, and the eligible txs indexed so far;
- blocks/s over the window (wall clock);
- fetch / compute / store ms per block: `SyncStats`' deltas (fetch and compute are summed over the
  workers with --jobs 2; with --jobs 1 they run in a thread beside the writer's store);
- MB written and read per block: this process's `write_bytes` / `read_bytes` (/proc/self/io: what it
  sent to or fetched from the disk, page-cache hits not counted): the writer, the WAL checkpoint thread
  and, with `blocks-dir --jobs 1`, the thread that reads the block files;
- the largest `-wal` file seen in the window (sampled after each block) and, at the window's end, the
  bytes on disk per eligible tx ((index + WAL) / eligible txs);
- RSS of this process (the writer) and its CPU ms per block, the sync's worker processes included.

`--drop-cache K` drops the index's and the WAL's pages from the OS page cache every K blocks
(`posix_fadvise(DONTNEED)`), so that the MB read are what the store reads when the index does not fit
in RAM. `--serve-probe` starts `sp-scan serve` on the index being written and a client in another
process asking `/tweak-index/H` (gzip) for random indexed heights at `--probe-rate` requests/s on one
kept-alive connection: p50 / p99 / max latency per window. After the sync: `Index.scan` of the test
wallet over the first 24 blocks, then the whole index (eligible tx/s and their ratio), unless `--no-scan`.
"""

from __future__ import annotations

import argparse
import base64
import collections
import contextlib
import functools
import http.client
import io
import json
import multiprocessing
import os
import random
import shutil
import statistics
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

from sp_scan import native, wire
from sp_scan.index import Index, SyncStats
from sp_scan.index.corefiles import CoreBlocks
from sp_scan.node import RestNode, RpcNode

from . import chain
from .index import stand_in
from .serve import BENCH_SERVE_ARGS, cpu_seconds, start_server
from .test_block import _receiver

RPC_USER = "bench"
SCAN_BLOCKS = 24
"""The small index scan's blocks: bench.index's default chain."""


def lean_rpc() -> type:
    """RpcHandler answering `getblock <hash> 3` with only what sp-scan's RPC client reads of it (per input its
    prevout's value and script; the coinbase marked), built from the spent outputs: the stand-in's own
    block JSON (python-bitcoinlib, ~1.5 s of CPU a block here) would be the bottleneck of the run, not the
    sync. Core's answer carries more (every tx's hex, decoded scripts, prevout heights) and costs it more."""
    import cli_support

    class LeanRpcHandler(cli_support.RpcHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            request = json.loads(body)
            if isinstance(request, dict) and request.get("method") == "getblock" and request["params"][1] == 3 and self._authorized():
                found = self.server.chain.lookup(bytes.fromhex(request["params"][0])[::-1])
                if found is not None:
                    result = _lean_block_json(request["params"][0], found[0], wire.parse_spent(found[2]))
                    return self.reply(200, f'{{"result":{result},"error":null,"id":{json.dumps(request["id"])}}}\n'.encode(), "application/json")
            self.rfile = io.BytesIO(body)  # anything else as RpcHandler answers it
            super().do_POST()

        def _authorized(self) -> bool:
            return self.headers.get("Authorization") == "Basic " + base64.b64encode(self.server.credentials.encode()).decode()

    return LeanRpcHandler


def _lean_block_json(hash_hex: str, height: int, spent: list) -> str:
    def prevout(o) -> str:
        return f'{{"prevout":{{"value":{o.amount // 10**8}.{o.amount % 10**8:08d},"scriptPubKey":{{"hex":"{o.script.hex()}"}}}}}}'

    txs = ['{"vin":[{"coinbase":""}]}'] + ['{"vin":[' + ",".join(map(prevout, outs)) + "]}" for outs in spent[1:]]
    return f'{{"hash":"{hash_hex}","height":{height},"tx":[{",".join(txs)}]}}'


class FolderChain:
    """A cli_support.ChainView over the first `blocks` blocks of a `bench.chain` chain, each read on demand
    from its blocks folder (`CoreBlocks.block`: checked against its header, spent outputs from its undo
    record); one reader at a time, the last few kept (REST asks for a block, then for its spent outputs)."""

    KEPT = 8

    def __init__(self, chain_dir: Path, blocks: int) -> None:
        self.source = CoreBlocks(chain_dir / "blocks", "regtest")
        self.hashes = [entry[0] for entry in chain.places(chain_dir, blocks)]
        self.heights = {hash32: h for h, hash32 in enumerate(self.hashes)}
        self.lock = threading.Lock()
        self.kept: collections.OrderedDict[bytes, tuple[int, bytes, bytes]] = collections.OrderedDict()

    def best(self) -> tuple[int, bytes]:
        return len(self.hashes) - 1, self.hashes[-1]

    def hash_at(self, height: int) -> bytes | None:
        return self.hashes[height] if 0 <= height < len(self.hashes) else None

    def lookup(self, hash32: bytes) -> tuple[int, bytes, bytes] | None:
        height = self.heights.get(hash32)
        if height is None:
            return None
        with self.lock:
            if hash32 not in self.kept:
                self.kept[hash32] = (height, *self.source.block(hash32[::-1].hex()))
                if len(self.kept) > self.KEPT:
                    self.kept.popitem(last=False)
            return self.kept[hash32]


def _probe(db: Path, rate: float, tip, conn, parent: int) -> None:
    """The probe's process: `sp-scan serve` on `db`, its URL sent, then a request every 1/rate s, each
    answer's (seconds, ok) sent; ends (and ends serve) when told to, or when its parent is gone."""
    proc, base = start_server(db, BENCH_SERVE_ARGS)
    try:
        conn.send(base)
        url = urllib.parse.urlsplit(base)
        client, rng, due = http.client.HTTPConnection(url.hostname, url.port, timeout=60), random.Random(39), time.monotonic()
        while not conn.poll() and os.getppid() == parent:
            if tip.value >= 0:
                began = time.perf_counter()
                try:
                    client.request("GET", f"/tweak-index/{rng.randint(0, tip.value)}?dustLimit=0", headers={"Accept-Encoding": "gzip"})
                    reply = client.getresponse()
                    reply.read()
                    ok = reply.status == 200
                except (OSError, http.client.HTTPException):
                    client.close()
                    ok = False
                conn.send((time.perf_counter() - began, ok))
            due = max(due + 1 / rate, time.monotonic())
            time.sleep(max(0.0, due - time.monotonic()))
    finally:
        proc.terminate()
        proc.wait(30)


class Probe:
    """`sp-scan serve` on the index being written and a client asking `/tweak-index/H` of random indexed
    heights at `rate` requests/s, in a process of their own (see the module doc); a context manager."""

    def __init__(self, db: Path, rate: float) -> None:
        context = multiprocessing.get_context("fork")
        self.tip = context.RawValue("q", -1)
        self._conn, theirs = context.Pipe()
        self.process = context.Process(target=_probe, args=(db, rate, self.tip, theirs, os.getpid()), daemon=True)
        self.process.start()
        self.url = self._conn.recv()

    def answers(self) -> list[tuple[float, bool]]:
        """The (seconds, ok) of the requests answered since the last call.

        Raises:
            EOFError: the probe's process ended.
        """
        out = []
        while self._conn.poll():
            out.append(self._conn.recv())
        return out

    def __enter__(self) -> Probe:
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(BrokenPipeError):
            self._conn.send(None)
        self.process.join(60)


class LowDisk(Exception):
    """The disk the index is on has less free space than asked to keep."""


def _io() -> tuple[int, int]:
    """(read_bytes, write_bytes) of this process so far."""
    fields = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
    return int(fields["read_bytes"]), int(fields["write_bytes"])


def _rss_mb() -> float:
    status = Path("/proc/self/status").read_text()
    return int(status.split("VmRSS:")[1].split()[0]) / 1024


def _children() -> set[int]:
    return {int(pid) for task in os.listdir("/proc/self/task") for pid in Path(f"/proc/self/task/{task}/children").read_text().split()}


def _cpu_s(exclude: set[int]) -> float:
    """CPU seconds of this process (all its threads) and of its live child processes but `exclude`."""
    total = sum(os.times()[:2])
    for pid in _children() - exclude:
        with contextlib.suppress(OSError):
            total += cpu_seconds(pid)
    return total


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _drop_cache(*paths: Path) -> None:
    """Drop the files' clean pages from the OS page cache (dirty ones are queued to be written back, and stay)."""
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            fd = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


class _Mark:
    """Where a window starts: the sync's counters, time, I/O and CPU then."""

    def __init__(self, s: SyncStats | None, exclude: set[int]) -> None:
        self.height = s.height if s else -1
        self.blocks = s.blocks if s else 0
        self.stages = (s.fetch_s, s.compute_s, s.store_s) if s else (0.0, 0.0, 0.0)
        self.time, self.io, self.cpu = time.perf_counter(), _io(), _cpu_s(exclude)


class Meter:
    """The sync's progress callback: after each block the `-wal` file's size, the probe's answers and the
    page-cache drop; a row every `window` blocks (see the module doc).

    Raises (from the call):
        LowDisk: less than `min_free` bytes are free where the index is.
    """

    def __init__(self, db: Path, window: int, drop_every: int, min_free: int, probe: Probe | None) -> None:
        self.db, self.wal = db, Path(f"{db}-wal")
        self.window, self.drop_every, self.min_free, self.probe = window, drop_every, min_free, probe
        self.helpers = _children()  # the stand-in and the probe: not the sync's
        self.mark = _Mark(None, self.helpers)
        self.stats: SyncStats | None = None
        self.wal_max = self.wal_peak = 0
        self.latencies: list[float] = []
        self.failed = 0
        self.probing = probe is not None

    def header(self) -> str:
        probe = " probe p50 / p99 / max ms |" if self.probe else ""
        columns = "| heights | eligible txs (M) | blocks/s | fetch ms | compute ms | store ms | MB written | MB read | WAL max MB | B per eligible tx | RSS MB | CPU ms |"
        return f"{columns}{probe}\n|{'---|' * (12 + bool(self.probe))}"

    def __call__(self, s: SyncStats) -> None:
        if s.waiting:
            return
        self.stats = s
        self.wal_max = max(self.wal_max, _size(self.wal))
        if self.probe is not None and self.probing:
            self.probe.tip.value = s.height
            try:
                for seconds, ok in self.probe.answers():
                    self.latencies.append(seconds)
                    self.failed += not ok
            except EOFError:
                print(f"the probe ended at height {s.height:,} (its error above)", flush=True)
                self.probing = False
        if self.drop_every and s.blocks % self.drop_every == 0:
            _drop_cache(self.db, self.wal)
        if s.blocks % self.window == 0:
            print(self.row(), flush=True)
        if shutil.disk_usage(self.db.parent).free < self.min_free:
            raise LowDisk(f"less than {self.min_free / 2**30:.0f} GiB free beside {self.db}")

    def row(self) -> str:
        """The window since the last row, as a markdown row; the next window starts now."""
        s, mark = self.stats, self.mark
        now = _Mark(s, self.helpers)
        blocks = now.blocks - mark.blocks
        per = 1e3 / blocks
        stages = " | ".join(f"{(b - a) * per:.1f}" for a, b in zip(mark.stages, now.stages))
        read, written = ((b - a) / blocks / 1e6 for a, b in zip(mark.io, now.io))
        on_disk = (_size(self.db) + _size(self.wal)) / max(s.eligible, 1)
        row = (
            f"| {mark.height + 1:,}–{s.height:,} | {s.eligible / 1e6:.2f} | {blocks / (now.time - mark.time):.1f} | {stages} "
            f"| {written:.2f} | {read:.2f} | {self.wal_max / 1e6:,.0f} | {on_disk:,.0f} | {_rss_mb():,.0f} | {(now.cpu - mark.cpu) * per:.1f} |"
        )
        if self.probe is not None:
            lat = sorted(self.latencies) or [0.0]
            p99 = statistics.quantiles(lat, n=100, method="inclusive")[98] if len(lat) > 1 else lat[0]
            failed = f", {self.failed} failed" if self.failed else ""
            ended = "" if self.probing else ", ended"
            row += f" {statistics.median(lat) * 1e3:.1f} / {p99 * 1e3:.1f} / {lat[-1] * 1e3:.1f} ({len(self.latencies)}{failed}{ended}) |"
        self.mark, self.wal_peak = now, max(self.wal_peak, self.wal_max)
        self.wal_max, self.latencies, self.failed = _size(self.wal), [], 0
        return row

    def finish(self) -> None:
        """Print the last window's row when it is not a whole window."""
        if self.stats is not None and self.stats.blocks > self.mark.blocks:
            print(self.row(), flush=True)


def scan_rows(db: Path, threads: int) -> list[str]:
    """`Index.scan` of the test wallet over the first SCAN_BLOCKS blocks (best of 3), then once over the
    whole index: eligible tx/s."""
    receiver = _receiver()
    rows, rates = [], []
    with Index.open(db, readonly=True) as idx:
        top = idx.tip()[0]
        for end, runs in ((min(SCAN_BLOCKS - 1, top), 3), (top, 1)):
            txs = idx.partition(0, end).n_tx if end < SCAN_BLOCKS else idx.info()["eligible_transactions"]
            seconds = []
            for _ in range(runs):
                began = time.perf_counter()
                found = sum(1 for _ in idx.scan(receiver, 0, end, threads=threads))
                seconds.append(time.perf_counter() - began)
            rates.append(txs / min(seconds))
            rows.append(f"| heights 0–{end:,}{' (best of 3)' if runs > 1 else ''} | {txs:,} | {found} | {rates[-1]:,.0f} | {rates[-1] / rates[0]:.2f} |")
    return rows


def machine(args: argparse.Namespace, meta: dict) -> str:
    cpuinfo = Path("/proc/cpuinfo").read_text()
    field = {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in cpuinfo.splitlines()[:30])}
    source = f"{args.source}, --jobs {args.jobs}"
    return (
        f"Machine: {field.get('model name', '?')} (family {field.get('cpu family', '?')} model {field.get('model', '?')}), "
        f"nproc {os.cpu_count()}, EC engine {native.ec_engine()}, load {os.getloadavg()[0]:.1f}; source {source}; "
        f"chain {args.chain} ({args.blocks:,} of its {meta['blocks']:,} blocks); window {args.window}"
        + (f"; page cache dropped every {args.drop_cache} blocks" if args.drop_cache else "")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chain", type=Path, required=True, help="a chain made by python -m bench.chain")
    parser.add_argument("--source", choices=["rest", "rpc", "blocks-dir"], default="rest")
    parser.add_argument("--jobs", type=int, choices=[1, 2], default=1)
    parser.add_argument("--blocks", type=int, default=500, help="sync heights 0..N-1 (default 500)")
    parser.add_argument("--window", type=int, default=250, help="blocks per row (default 250)")
    parser.add_argument("--drop-cache", type=int, default=0, metavar="K", help="drop the index's pages from the page cache every K blocks (default: never)")
    parser.add_argument("--serve-probe", action="store_true", help="time /tweak-index/H of sp-scan serve on the index while it syncs")
    parser.add_argument("--probe-rate", type=float, default=20.0, help="the probe's requests/s (default 20)")
    parser.add_argument("--scan-threads", type=int, default=1)
    parser.add_argument("--no-scan", action="store_true", help="skip the index scan after the sync (~19 min at 20,000 blocks)")
    parser.add_argument("--workdir", type=Path, help="where the index is made (default: beside the chain)")
    parser.add_argument("--keep", action="store_true", help="keep the index (its path is printed)")
    parser.add_argument("--min-free-gb", type=float, default=10.0, help="stop the sync when less is free where the index is (default 10)")
    args = parser.parse_args()
    meta = chain.load(args.chain)
    if not 0 < args.blocks <= meta["blocks"]:
        parser.error(f"{args.chain} holds {meta['blocks']:,} blocks")
    print(machine(args, meta) + "\n", flush=True)
    workdir = Path(tempfile.mkdtemp(prefix="scale-", dir=args.workdir or args.chain.resolve().parent))
    db = workdir / "index.db"
    try:
        with contextlib.ExitStack() as stack:
            if args.source == "blocks-dir":
                source = CoreBlocks(args.chain / "blocks", "regtest")
            else:
                handler = "RestHandler" if args.source == "rest" else lean_rpc
                url = stack.enter_context(stand_in(handler, functools.partial(FolderChain, args.chain, args.blocks), f"{RPC_USER}:{RPC_USER}"))
                source = RestNode(url) if args.source == "rest" else RpcNode(url, user=RPC_USER, password=RPC_USER)
            idx = stack.enter_context(Index.create(db, "regtest"))
            probe = stack.enter_context(Probe(db, args.probe_rate)) if args.serve_probe else None
            meter = Meter(db, args.window, args.drop_cache, int(args.min_free_gb * 2**30), probe)
            print(meter.header(), flush=True)
            began = time.perf_counter()
            try:
                idx.sync(source, jobs=args.jobs, stop=args.blocks - 1, progress=meter)
            except LowDisk as exc:
                print(f"\nstopped: {exc}")
            meter.finish()
            wall, s = time.perf_counter() - began, meter.stats
            print(
                f"\n{s.blocks:,} blocks in {wall:,.0f} s ({s.blocks / wall:.1f} blocks/s, {s.eligible / wall:,.0f} eligible tx/s); at the end "
                f"the index is {_size(db) / 1e9:.2f} GB, its -wal {_size(Path(f'{db}-wal')) / 1e9:.2f} GB (largest seen {meter.wal_peak / 1e9:.2f} GB); "
                f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}"
            )
        if not args.no_scan:
            print(f"\n| index scan, {args.scan_threads} thread(s) | eligible txs | found | eligible tx/s | vs the first {SCAN_BLOCKS} blocks |\n|---|---|---|---|---|")
            print("\n".join(scan_rows(db, args.scan_threads)))
    finally:
        if args.keep:
            print(f"\nindex kept: {db}")
        else:
            shutil.rmtree(workdir)


if __name__ == "__main__":
    main()
