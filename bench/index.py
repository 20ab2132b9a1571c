"""The tweak index: sync throughput from a local Core REST stand-in, store figures, index scan vs the raw batch scan.

Usage:
    python -m bench.index                 # 24 linked copies of vectors/blocks/mainnet.bin, jobs 1 and 2
    python -m bench.index --blocks 48 --jobs 1 2
    python -m bench.index --blocks-dir    # also the same chain synced from Core-format block files

The chain is `--blocks` copies of the mainnet-sized sample block (3,001 txs, 1,412 eligible), each
header relinked to the one before, served by `tests/cli_support.py`'s REST stand-in on 127.0.0.1 from a
process of its own (as Core serves from its own).
Each copy's taproot spends hit the copy before (`bench.chain` makes a chain whose spends hit outputs of
every age, and `bench.scale` syncs it). Prints markdown tables; the full-rescan projections
(bench/README.md, docs/index.md) use the per-tx times printed here.

With --blocks-dir the chain is also written as Core's blocks/ folder (blk/rev records, an xor.dat key,
undo data compressed as Core's compressor does) and synced with `CoreBlocks`, beside the REST rows.

The stage columns are wall-clock time: with more busy processes than free cores (--jobs 2 is two workers
and the writer, beside the REST stand-in) they include time spent waiting for a core. "CPU ms/block" is
the CPU time of this process and the sync's workers per block (the stand-in's not counted): the work
itself, which other programs on the machine do not change.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import platform
import resource
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from sp_scan import block, native, wire
from sp_scan.index import Index
from sp_scan.index.corefiles import CoreBlocks
from sp_scan.index.store import Store
from sp_scan.index.sync import index_row
from sp_scan.node import RestNode

from .chain import CoreFiles, Sample
from .test_block import _receiver

ROOT = Path(__file__).resolve().parent.parent
MAINNET_BLOCKS = 270_000  # taproot activation (709,632) to mid-2025
MAINNET_ELIGIBLE = 200_000_000  # the 150-250 million eligible txs since taproot


class BlockList:
    """A cli_support.ChainView over `blocks`: (hash32, raw block, raw spent outputs) in height order."""

    def __init__(self, blocks: list[tuple[bytes, bytes, bytes]]) -> None:
        self.blocks = blocks
        self.heights = {hash32: h for h, (hash32, _, _) in enumerate(blocks)}

    def best(self) -> tuple[int, bytes]:
        return len(self.blocks) - 1, self.blocks[-1][0]

    def hash_at(self, height: int) -> bytes | None:
        return self.blocks[height][0] if 0 <= height < len(self.blocks) else None

    def lookup(self, hash32: bytes) -> tuple[int, bytes, bytes] | None:
        h = self.heights.get(hash32)
        return None if h is None else (h, self.blocks[h][1], self.blocks[h][2])


class LinkedChain(BlockList):
    """n blocks made of the sample block, each header linked to the one before (a cli_support.ChainView).

    Copy 0 is the sample (it pays the test wallet 84 outputs). Copy h > 0 is `bench.chain.Sample`'s block
    h: its inputs that spend P2TR outputs spend the taproot outputs of copy h - 1's eligible txs (one
    each, as far as they go; committing a copy then marks ~1,970 outputs spent through txloc lookups, as
    mainnet's taproot spends do), the others an outpoint salted with h, so its txids are its own (and
    its payments are no longer the wallet's: tweaks change with the outpoints). Signatures are not
    re-made (the index does not verify them). `undos` holds each copy's undo data (every coin created
    at the height below).
    """

    def __init__(self, n: int) -> None:
        sample = Sample.load()
        blocks, self.undos, prev, txids = [], [], b"\x00" * 32, b""
        for h in range(n):
            pairs = zip(sample.p2tr, sample.output_tx) if h else ()
            spends = {i: (txids[32 * k : 32 * k + 32], j) for j, (i, k) in enumerate(pairs)}
            raw, txids = sample.block(h, prev, spends)
            prev = wire.sha256d(raw[:80])
            blocks.append((prev, raw, sample.spent_bytes(spends)))
            self.undos.append(sample.undo(spends, [max(h - 1, 0)] * sample.inputs))
        super().__init__(blocks)


def _split(data: bytes, width: int) -> list[bytes]:
    return [data[i : i + width] for i in range(0, len(data), width)]


def _cpu_s() -> float:
    """CPU seconds used so far by this process and by its ended (reaped) children: the sync's workers."""
    return sum(r.ru_utime + r.ru_stime for r in map(resource.getrusage, (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)))


def _row(what: str, s, wall: float, cpu: float) -> str:
    per = 1e3 / s.blocks
    return (
        f"| {what} | {s.blocks / wall:.1f} | {s.txs / wall:,.0f} | {s.eligible / wall:,.0f} "
        f"| {s.fetch_s * per:.1f} | {s.compute_s * per:.1f} | {s.store_s * per:.1f} | {cpu * per:.1f} |"
    )


def _serve(handler: str | Callable[[], type], chain: Callable[[], object], credentials: str, conn) -> None:
    """The stand-in in its process: sends its URL, serves until told to stop."""
    sys.path.insert(0, str(ROOT / "tests"))
    import cli_support

    handler_class = getattr(cli_support, handler) if isinstance(handler, str) else handler()
    with cli_support.NodeServer(handler_class, chain(), credentials=credentials) as server:
        conn.send(server.url)
        conn.recv()


@contextlib.contextmanager
def stand_in(handler: str | Callable[[], type], chain: Callable[[], object], credentials: str = "") -> Iterator[str]:
    """Core's REST or RPC stand-in (tests/cli_support.py's RestHandler or RpcHandler, by name, or the class
    `handler()` makes there) over the ChainView `chain()` makes, in a process of its own as Core serves from
    its own; yields its URL.

    The process is forked while this one runs a single thread, so the sync's workers started after it
    are forked too: children of this process, their CPU time counted.
    """
    ours, theirs = multiprocessing.Pipe()
    server = multiprocessing.get_context("fork").Process(target=_serve, args=(handler, chain, credentials, theirs), daemon=True)
    server.start()
    try:
        yield ours.recv()
    finally:
        ours.send(None)  # (the server holds a copy of this end too: it is told, not closed on)
        server.join()


def sync_rows(chain: LinkedChain, jobs_list: list[int], workdir: Path) -> tuple[list[str], Path]:
    rows, path = [], workdir / "jobs1.db"
    with stand_in("RestHandler", lambda: chain) as url:
        for jobs in jobs_list:
            db = workdir / f"jobs{jobs}.db"
            with Index.create(db, "regtest") as idx:
                began, cpu = time.perf_counter(), _cpu_s()
                s = idx.sync(RestNode(url), jobs=jobs)
                wall, cpu = time.perf_counter() - began, _cpu_s() - cpu
            rows.append(_row(f"REST sync, --jobs {jobs}", s, wall, cpu))
            path = db
    return rows, path


def write_blocks_dir(chain: LinkedChain, directory: Path) -> Path:
    """The chain as Core's blocks/ folder (`bench.chain.CoreFiles`: regtest magic, an xor.dat key)."""
    files, prev = CoreFiles(directory, "regtest"), b"\x00" * 32
    for (hash32, raw, _), undo in zip(chain.blocks, chain.undos):  # block 0 spends too: it gets undo data, as genesis never does
        files.append(raw, undo, prev)
        prev = hash32
    files.close()
    return directory


def files_rows(chain: LinkedChain, jobs_list: list[int], workdir: Path) -> list[str]:
    blocks_dir = write_blocks_dir(chain, workdir / "blocks")
    rows = []
    for jobs in jobs_list:
        with Index.create(workdir / f"files{jobs}.db", "regtest") as idx:
            began, cpu = time.perf_counter(), _cpu_s()
            s = idx.sync(CoreBlocks(blocks_dir, "regtest"), jobs=jobs)
            wall, cpu = time.perf_counter() - began, _cpu_s() - cpu
        rows.append(_row(f"--blocks-dir sync, --jobs {jobs}", s, wall, cpu))
    return rows


def store_alone_row(chain: LinkedChain, workdir: Path) -> str:
    """The store by itself: every block's row computed first, then appended as a sync's writer does
    (checkpoints in their thread): wall and writer-thread CPU ms per block."""
    rows = []
    for h, (_, raw, spent) in enumerate(chain.blocks):
        rows.append(index_row(h, block.block_index(raw, spent)))
    store = Store.create(workdir / "store.db", "regtest")
    try:
        with store.checkpoints_aside():
            began, cpu = time.perf_counter(), time.thread_time()
            for row in rows:
                store.append(row)
            wall, cpu = time.perf_counter() - began, time.thread_time() - cpu
    finally:
        store.close()
    per = 1e3 / len(rows)
    return f"| store alone (rows computed beforehand), one writer | {wall * per:.1f} ms wall, {cpu * per:.1f} ms CPU per block |"


def store_rows(path: Path, blocks: int) -> list[str]:
    with Index.open(path, readonly=True) as idx:
        info = idx.info()
        top = info["tip_height"]
        timings = {}
        for name, fn in (
            ("block_hash(h)", lambda h: idx.block_hash(h)),
            ("tweaks(h)", lambda h: idx.tweaks(h)),
            ("tweaks(h, dust 1000, cut-through)", lambda h: idx.tweaks(h, 1000, True)),
            ("utxos(h)", lambda h: idx.utxos(h)),
        ):
            began = time.perf_counter()
            for i in range(200):
                fn(i % (top + 1))
            timings[name] = (time.perf_counter() - began) / 200
        began = time.perf_counter()
        partition = idx.partition(0, top)
        read = (time.perf_counter() - began) / partition.n_tx
    rows = [f"| {name} | {t * 1e6:,.0f} µs |" for name, t in timings.items()]
    rows.append(f"| partition read (packed buffers for the scan) | {read * 1e9:,.0f} ns per tx |")
    rows.append(f"| size on disk | {info['bytes'] / info['eligible_transactions']:.0f} B per eligible tx, {info['bytes'] / info['transactions']:.0f} B per block tx |")
    return rows


PARTITION_BLOCKS = 8
"""Blocks per partition in the index scan rows: several partitions, so reading overlaps scanning as
on a long range (a whole mainnet-sized partition is 200 blocks)."""


def scan_rows(path: Path, threads_list: list[int]) -> list[str]:
    """tweaks/s of `Index.scan` over the whole index, against the raw batch scan of the same txs' packed
    buffers held in memory (same thread count), and against `native.scan_tweak` called per tx."""
    receiver = _receiver()
    with Index.open(path, readonly=True) as idx:
        p = idx.partition(0, idx.tip()[0])
        txs, first = [], 0
        for i, count in enumerate(memoryview(p.counts).cast("I")):
            txs.append((p.tweaks33[33 * i : 33 * i + 33], _split(p.outputs32[32 * first : 32 * (first + count)], 32)))
            first += count
        began = time.perf_counter()
        loop_found = sum(len(native.scan_tweak(tweak33, outputs, receiver)) for tweak33, outputs in txs)
        loop_rate = len(txs) / (time.perf_counter() - began)
        rows = [f"| `native.scan_tweak` called per tx ({loop_found} found) | {loop_rate:,.0f} | |"]
        for threads in threads_list:
            began = time.perf_counter()
            raw_found = native.scan_tweaks_packed(p.tweaks33, 33, p.outputs32, p.counts, receiver, threads)
            raw_rate = len(txs) / (time.perf_counter() - began)
            began = time.perf_counter()
            found = list(idx.scan(receiver, threads=threads, partition_blocks=PARTITION_BLOCKS))
            rate = len(txs) / (time.perf_counter() - began)
            rows.append(f"| raw batch: `scan_tweaks_packed` on buffers in memory, threads={threads} ({len(raw_found)} found) | {raw_rate:,.0f} | 1.00 |")
            rows.append(f"| `Index.scan`, threads={threads}, {PARTITION_BLOCKS}-block partitions ({len(found)} found) | {rate:,.0f} | {rate / raw_rate:.2f} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=24)
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--blocks-dir", action="store_true", help="also sync the chain from Core-format block files")
    args = parser.parse_args()
    print(f"Machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}, native: {native.ENABLED}")
    print(f"Chain: {args.blocks} linked copies of mainnet.bin (3,001 txs, 1,412 eligible each)\n")
    chain = LinkedChain(args.blocks)
    with tempfile.TemporaryDirectory() as tmp:
        rows, path = sync_rows(chain, args.jobs, Path(tmp))
        if args.blocks_dir:
            rows += files_rows(chain, args.jobs, Path(tmp))
        print("| sync | blocks/s | tx/s | eligible tx/s | fetch ms/block | compute ms/block | store ms/block | CPU ms/block |")
        print("|---|---|---|---|---|---|---|---|")
        print("\n".join(rows))
        print("\n| store (per call, on this index) | time |\n|---|---|")
        print(store_alone_row(chain, Path(tmp)))
        print("\n".join(store_rows(path, args.blocks)))
        rows = scan_rows(path, sorted({1, *args.jobs}))
        print("\n| scan | tweaks/s | vs raw batch |\n|---|---|---|")
        print("\n".join(rows))


if __name__ == "__main__":
    main()
