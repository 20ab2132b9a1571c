"""The fold at mainnet's height: the writer's own fold (`Store._fold`) over a `spends` table of N blocks.

Usage:
    python -m bench.fold                                      # 20,000 and 270,000 blocks (~2 min)
    python -m bench.fold --blocks 20000 65536 131072 270000 540000 --folds 3

The fold is the one part of the store whose work grows with the index (bench/README.md, "After: format
4"), and it reads and writes the `spends` table alone. A sync to mainnet's height takes a day on this
machine; this builds only that table, N rows as the writer leaves them (each the bitmap of the sample
block's 1,968 tracked outputs, with its checksum), in an index made by `Store.create`. Then, for each
fold, the marks of the blocks a fold takes at that height (`fold_interval(N)` blocks of `--spends`, each a
height drawn by `bench.chain.Ages`, the bench chain's spread: 40% the last 6 blocks, 30% the last 1,000,
30% any; an ordinal uniform over the block's outputs), folded in one transaction as `Store.append` does,
timed, and the `-wal` bytes it wrote (the log is emptied between folds). Prints a row per N: the interval,
bitmaps rewritten per fold, ms per fold and per block of the interval, WAL MB per fold and per block.
`--interval K` folds every K blocks instead (64: format 4 as first measured).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from array import array
from pathlib import Path

from bench.chain import Ages
from sp_scan import native
from sp_scan.index.store import Store, rows, spends

OUTPUTS = 1968
"""Tracked outputs per block: the sample block's (`bench.chain`)."""


def build(path: Path, blocks: int) -> Store:
    """An index whose `spends` table holds `blocks` empty bitmaps (heights 0..blocks-1), nothing else."""
    store = Store.create(path, "regtest")
    empty = bytes((OUTPUTS + 7) // 8)
    with store._transaction():
        store._conn.executemany("INSERT INTO spends VALUES (?, ?, ?)", ((h, empty, rows.bits_sum(h, empty)) for h in range(blocks)))
    store._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return store


def marks(rng: random.Random, tip: int, interval: int, per_block: int, ages: Ages) -> list[memoryview]:
    """Each of `interval` blocks above `tip`: its places (u64 `height << 32 | ordinal`, at or below `tip`), ascending."""
    return [memoryview(array("Q", sorted({ages.height(rng, tip + 1) << 32 | rng.randrange(OUTPUTS) for _ in range(per_block)}))) for _ in range(interval)]


def run(blocks: int, folds: int, per_block: int, workdir: Path, seed: int, interval: int | None) -> str:
    """One row of the table for an index of `blocks` blocks, folding every `interval` blocks (default the writer's)."""
    interval = interval or spends.fold_interval(blocks)
    rng, ages = random.Random(seed), Ages()
    with tempfile.TemporaryDirectory(dir=workdir, prefix="fold-") as tmp:
        path = Path(tmp) / "index.db"
        store = build(path, blocks)
        wal = Path(f"{path}-wal")
        seconds, wal_bytes, rewritten = [], [], []
        tip = blocks - 1
        for _ in range(folds):
            pending = spends.Pending(tip, tip, b"")
            for places in marks(rng, tip, interval, per_block, ages):
                pending.add(tip, b"", places)
            rewritten.append(len({p >> 32 for block in pending.places for p in block}))
            start = time.perf_counter()
            with store._transaction():
                store._fold(pending)
            seconds.append(time.perf_counter() - start)
            wal_bytes.append(wal.stat().st_size)
            store._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        table_mb = path.stat().st_size / 1e6
        store.close()
    ms, mb = 1000 * statistics.median(seconds), statistics.median(wal_bytes) / 1e6
    return (
        f"| {blocks:,} | {table_mb:.0f} | {interval} | {statistics.median(rewritten):,.0f} | {ms:,.0f} | {ms / interval:.2f} | "
        f"{mb:.1f} | {mb / interval:.2f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, nargs="+", default=[20000, 270000], help="index sizes (default 20000 270000)")
    parser.add_argument("--folds", type=int, default=3, help="folds timed per size; the median is printed (default 3)")
    parser.add_argument("--spends", type=int, default=1600, help="marks per block (default 1,600, bench.chain's)")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--interval", type=int, help="fold every K blocks instead of the writer's `fold_interval` (format 4 before it grew: 64)")
    parser.add_argument("--seed", type=int, default=39)
    args = parser.parse_args()
    cpu = {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in Path("/proc/cpuinfo").read_text().splitlines()[:30])}
    print(f"Machine: {cpu.get('model name', '?')} (family {cpu.get('cpu family', '?')} model {cpu.get('model', '?')}), nproc {os.cpu_count()}, EC engine {native.ec_engine()}, load {os.getloadavg()[0]:.1f}; {args.spends} marks a block")
    print("| blocks indexed | spends table MB | fold interval | bitmaps rewritten a fold | ms a fold | ms a block | WAL MB a fold | WAL MB a block |")
    print("|---|---|---|---|---|---|---|---|")
    for blocks in args.blocks:
        print(run(blocks, args.folds, args.spends, args.workdir, args.seed, args.interval), flush=True)


if __name__ == "__main__":
    main()
