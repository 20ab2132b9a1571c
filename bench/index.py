"""The tweak index: sync throughput from a local Core REST stand-in, store figures, index scan vs the raw batch scan.

Usage:
    python -m bench.index                 # 24 linked copies of vectors/blocks/mainnet.bin, jobs 1 and 2
    python -m bench.index --blocks 48 --jobs 1 2
    python -m bench.index --blocks-dir    # also the same chain synced from Core-format block files

The chain is `--blocks` copies of the mainnet-sized sample block (3,001 txs, 1,412 eligible), each
header relinked to the one before, served by `tests/cli_support.py`'s REST stand-in on 127.0.0.1 from a
process of its own (as Core serves from its own).
Its spends are of invented outputs, so cut-through lookups all miss (their cost on mainnet, where
most taproot spends hit an indexed tx, is not in these figures). Prints markdown tables; the full-rescan
projections (bench/README.md, docs/index.md) use the per-tx times printed here.

With --blocks-dir the chain is also written as Core's blocks/ folder (blk/rev records, an xor.dat key,
undo data compressed as Core's compressor does) and synced with `CoreBlocks`, beside the REST rows.

The stage columns are wall-clock time: with more busy processes than free cores (--jobs 2 is two workers
and the writer, beside the REST stand-in) they include time spent waiting for a core. "CPU ms/block" is
the CPU time of this process and the sync's workers per block (the stand-in's not counted): the work
itself, which other programs on the machine do not change.
"""

from __future__ import annotations

import argparse
import multiprocessing
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path

from sp_scan import block, native, wire
from sp_scan.index import Index
from sp_scan.index.corefiles import MAGIC, CoreBlocks, unxor
from sp_scan.index.store import Store
from sp_scan.index.sync import index_row
from sp_scan.node import RestNode

from .test_block import BLOCK, SPENT, _receiver

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
    """n copies of the sample block, each header linked to the one before (a cli_support.ChainView).

    Copy 0 is the sample (it pays the test wallet 84 outputs). Copy h > 0's inputs spend other
    outpoints, so its txids are its own (and its payments are no longer the wallet's: tweaks
    change with the outpoints): inputs that spend P2TR outputs spend the taproot outputs of copy
    h - 1's eligible txs (one each, as far as they go; committing a copy then marks ~1,970 outputs
    spent through txloc lookups, as mainnet's taproot spends do), the others an outpoint salted
    with h. Signatures are not re-made (the index does not verify them); the spent outputs stay
    the sample's.
    """

    def __init__(self, n: int) -> None:
        raw, self.spent = BLOCK.read_bytes(), SPENT.read_bytes()
        taproot = set(_split(block.block_index(raw, self.spent).spent_outpoints, 36))
        inputs = [i.outpoint.to_bytes() for tx in wire.parse_block(raw).txs[1:] for i in tx.inputs]
        blocks, prev, targets = [], b"\x00" * 32, []
        for h in range(n):
            body = _recommit(_repoint(raw[80:], inputs, taproot, targets, h)) if h else raw[80:]
            root = wire.merkle_root([tx.txid32 for tx in wire.parse_block(raw[:80] + body).txs])
            header = raw[:4] + prev + root + raw[68:76] + h.to_bytes(4, "little")
            prev = wire.sha256d(header)
            blocks.append((prev, header + body, self.spent))
            targets = _outpoints(block.block_index(header + body, self.spent))
        super().__init__(blocks)


def _outpoints(data) -> list[bytes]:
    """The outpoint of every taproot output of the block's eligible txs."""
    out, first = [], 0
    vouts = memoryview(data.out_vouts).cast("I")
    for i, count in enumerate(memoryview(data.out_counts).cast("I")):
        out.extend(data.txids[32 * i : 32 * i + 32] + vouts[o].to_bytes(4, "little") for o in range(first, first + count))
        first += count
    return out


def _split(data: bytes, width: int) -> list[bytes]:
    return [data[i : i + width] for i in range(0, len(data), width)]


def _recommit(body: bytes) -> bytes:
    """body with its coinbase's witness commitment made again for its transactions' wtxids."""
    block = bytes(80) + body
    spans = wire.tx_spans(block)
    reserved = wire.parse_block(block).txs[0].inputs[0].witness[0]
    commitment = wire.sha256d(wire.merkle_root([bytes(32), *(wire.sha256d(block[a:b]) for a, b in spans[1:])]) + reserved)
    at = block.rindex(bytes.fromhex("6a24aa21a9ed"), *spans[0]) + 6
    return (block[:at] + commitment + block[at + 32 :])[80:]


def _repoint(body: bytes, inputs36: list[bytes], taproot: set[bytes], targets36: list[bytes], salt: int) -> bytes:
    """body with each input's outpoint replaced: a P2TR spend by the next of targets36, any other salted."""
    out, pos, targets = bytearray(body), 0, iter(targets36)
    for op in inputs36:
        pos = out.index(op, pos)
        new = next(targets, None) if op in taproot else None
        out[pos : pos + 36] = new or (int.from_bytes(op[:4], "little") ^ salt).to_bytes(4, "little") + op[4:]
        pos += 36
    return bytes(out)


def _cpu_s() -> float:
    """CPU seconds used so far by this process and by its ended (reaped) children: the sync's workers."""
    return sum(r.ru_utime + r.ru_stime for r in map(resource.getrusage, (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)))


def _row(what: str, s, wall: float, cpu: float) -> str:
    per = 1e3 / s.blocks
    return (
        f"| {what} | {s.blocks / wall:.1f} | {s.txs / wall:,.0f} | {s.eligible / wall:,.0f} "
        f"| {s.fetch_s * per:.1f} | {s.compute_s * per:.1f} | {s.store_s * per:.1f} | {cpu * per:.1f} |"
    )


def _serve(chain: LinkedChain, conn) -> None:
    """The REST stand-in over `chain` in a process of its own, as Core is: sends its URL, serves until told to stop."""
    sys.path.insert(0, str(ROOT / "tests"))
    from cli_support import NodeServer, RestHandler

    with NodeServer(RestHandler, chain) as server:
        conn.send(server.url)
        conn.recv()


def sync_rows(chain: LinkedChain, jobs_list: list[int], workdir: Path) -> tuple[list[str], Path]:
    rows, path = [], workdir / "jobs1.db"
    ours, theirs = multiprocessing.Pipe()
    server = multiprocessing.get_context("fork").Process(target=_serve, args=(chain, theirs), daemon=True)
    server.start()  # (this process stays single-threaded: the sync's workers are its children, their CPU time counted)
    try:
        url = ours.recv()
        for jobs in jobs_list:
            db = workdir / f"jobs{jobs}.db"
            with Index.create(db, "regtest") as idx:
                began, cpu = time.perf_counter(), _cpu_s()
                s = idx.sync(RestNode(url), jobs=jobs)
                wall, cpu = time.perf_counter() - began, _cpu_s() - cpu
            rows.append(_row(f"REST sync, --jobs {jobs}", s, wall, cpu))
            path = db
    finally:
        ours.send(None)  # (the server holds a copy of this end too: it is told, not closed on)
        server.join()
    return rows, path


def _varint(n: int) -> bytes:
    """Core's VARINT (serialize.h WriteVarInt)."""
    out = [n & 0x7F]
    while n > 0x7F:
        n = (n >> 7) - 1
        out.append(n & 0x7F | 0x80)
    return bytes(reversed(out))


def _compress_amount(n: int) -> int:
    """Core's CompressAmount (compressor.cpp)."""
    if n == 0:
        return 0
    e = 0
    while n % 10 == 0 and e < 9:
        n, e = n // 10, e + 1
    if e < 9:
        n, d = divmod(n, 10)
        return 1 + (n * 9 + d - 1) * 10 + e
    return 1 + (n - 1) * 10 + 9


def _compress_script(script: bytes) -> bytes:
    """Core's ScriptCompression for P2PKH, P2SH and compressed P2PK; any other script as length + 6, then itself."""
    if len(script) == 25 and script[:3] == b"\x76\xa9\x14" and script[23:] == b"\x88\xac":
        return b"\x00" + script[3:23]
    if len(script) == 23 and script[:2] == b"\xa9\x14" and script[22] == 0x87:
        return b"\x01" + script[2:22]
    if len(script) == 35 and script[0] == 33 and script[1] in (2, 3) and script[34] == 0xAC:
        return script[1:34]
    return _varint(len(script) + 6) + script


def undo_data(spent_bytes: bytes) -> bytes:
    """A block's spent outputs (REST form) as Core's CBlockUndo serialization (every coin at height 1)."""
    parts = [wire.compact_size(len(spent := wire.parse_spent(spent_bytes)) - 1)]
    for outs in spent[1:]:
        parts.append(wire.compact_size(len(outs)))
        parts.extend(_varint(2) + b"\x00" + _varint(_compress_amount(o.amount)) + _compress_script(o.script) for o in outs)
    return b"".join(parts)


def write_blocks_dir(chain: LinkedChain, directory: Path) -> Path:
    """The chain as Core's blocks/ folder: blk00000.dat and rev00000.dat (regtest magic) and xor.dat."""
    directory.mkdir()
    key8 = bytes.fromhex("5a1e2f3c4d6e7f80")
    (directory / "xor.dat").write_bytes(key8)
    magic = MAGIC["regtest"]
    blk, rev, prev = bytearray(), bytearray(), b"\x00" * 32
    for hash32, raw, spent in chain.blocks:  # block 0 spends too: it gets undo data, as genesis never does
        undo = undo_data(spent)
        blk += magic + len(raw).to_bytes(4, "little") + raw
        rev += magic + len(undo).to_bytes(4, "little") + undo + wire.sha256d(prev + undo)
        prev = hash32
    (directory / "blk00000.dat").write_bytes(unxor(bytes(blk), key8, 0))
    (directory / "rev00000.dat").write_bytes(unxor(bytes(rev), key8, 0))
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
