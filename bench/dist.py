"""Scanning the tweak index on a Dask cluster and for many wallets: local vs two workers, one pass vs one per wallet.

Usage:
    python -m bench.dist                       # 24 linked copies of vectors/blocks/mainnet.bin, 8 wallets
    python -m bench.dist --blocks 48 --wallets 16

The index is bench.index's chain (copies of the mainnet-sized sample block, 1,412 eligible txs each)
synced from the REST stand-in. The cluster is a scheduler and two single-threaded worker processes on
127.0.0.1, started here (needs the dist extra). Each row is the best of `--repeat` runs. On a shared
2-core machine the client and the scheduler compete with the two workers, so read the ratios, not the
absolute rates. Prints markdown tables and the per-tweak time the
projections (bench/README.md, docs/index.md) use.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import distributed

from sp_scan import native
from sp_scan.index import Index, cluster
from sp_scan.scan import Receiver

from .index import MAINNET_ELIGIBLE, LinkedChain, sync_rows
from .test_block import _receiver


def best(fn: Callable[[], object], repeat: int) -> tuple[float, object]:
    """(fastest wall time in seconds, the result of that run) over `repeat` calls."""
    runs = []
    for _ in range(repeat):
        began = time.perf_counter()
        result = fn()
        runs.append((time.perf_counter() - began, result))
    return min(runs, key=lambda r: r[0])


def wallets(n: int) -> list[Receiver]:
    """The sample block's wallet, then n - 1 random wallets (each costs the same ECDH per tx)."""
    first = _receiver()
    return [first, *(Receiver(os.urandom(32), first.spend_pubkey33, first.labels) for _ in range(n - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=24)
    parser.add_argument("--wallets", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"native: {native.ENABLED} (EC engine {native.ec_engine()}), distributed {distributed.__version__}")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        _, path = sync_rows(LinkedChain(args.blocks), [2], Path(tmp))
        with Index.open(path, readonly=True) as idx:
            run(idx, args)


def run(idx: Index, args: argparse.Namespace) -> None:
    n_tx = idx.info()["eligible_transactions"]
    one, many = wallets(1), wallets(args.wallets)
    read, p = best(lambda: idx.partition(0, idx.tip()[0]), args.repeat)
    shipped = sum(len(getattr(p, f)) for f in p.__slots__ if isinstance(getattr(p, f), bytes))
    print(f"Index: {args.blocks} blocks, {n_tx:,} eligible txs, {shipped / n_tx:.0f} B per tx in a task; times are the best of {args.repeat}")
    print(f"Partition read (this process, SQLite to packed buffers): {1e9 * read / n_tx:,.0f} ns per tx\n")

    def local(receivers: list[Receiver], threads: int, blocks: int = 200) -> Callable[[], list]:
        return lambda: list(idx.scan_wallets(receivers, threads=threads, partition_blocks=blocks))

    t1, found = best(local(one, 1), args.repeat)
    t2, found2 = best(local(one, 2), args.repeat)
    assert found2 == found and found, "threads changed the result"
    rows = [("local, 1 thread", t1, "-"), ("local, --jobs 2 (threads)", t2, "-")]

    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, host="127.0.0.1", dashboard_address="127.0.0.1:0") as c:
        with distributed.Client(c, set_as_default=False) as client:

            def dask(receivers: list[Receiver], blocks: int) -> Callable[[], list]:
                return lambda: list(cluster.scan(client, idx, receivers, partition_blocks=blocks))

            dask_rows, overheads = [], []
            for blocks in (1, 4, 12):
                partitions = len(idx.partition_ranges(partition_blocks=blocks))
                t, result = best(dask(one, blocks), args.repeat)
                assert result == found, "the cluster's result differs from the local scan"
                empty, _ = best(dask([], blocks), args.repeat)
                dask_rows.append((f"Dask, 2 workers, --partition-blocks {blocks}", t, partitions))
                overheads.append((blocks, partitions, empty))
            rows += dask_rows
            print("| one wallet | wall s | tweaks/s | vs local 1 thread | tasks |\n|---|---|---|---|---|")
            for name, t, tasks in rows:
                print(f"| {name} | {t:.2f} | {n_tx / t:,.0f} | {t1 / t:.2f}× | {tasks} |")

            print("\n| Dask per-partition overhead (tasks with no wallet: read, ship, schedule, return) | tasks | ms per task | ns per tx |\n|---|---|---|---|")
            for blocks, partitions, empty in overheads:
                print(f"| --partition-blocks {blocks} | {partitions} | {1e3 * empty / partitions:.1f} | {1e9 * empty / n_tx:,.0f} |")

            w = args.wallets
            pass_local, res = best(local(many, 1), args.repeat)
            each_local = sum(best(local([r], 1), 1)[0] for r in many)
            pass_dask, res_dask = best(dask(many, 4), args.repeat)
            assert res_dask == res
            each_dask = sum(best(dask([r], 4), 1)[0] for r in many)
    print(f"\n| {w} wallets | one pass (s) | one pass per wallet (s) | per wallet ÷ one pass | µs per tweak and wallet (one pass) |\n|---|---|---|---|---|")
    print(f"| local, 1 thread | {pass_local:.2f} | {each_local:.2f} | {each_local / pass_local:.2f}× | {1e6 * pass_local / (n_tx * w):.1f} |")
    print(f"| Dask, 2 workers, --partition-blocks 4 | {pass_dask:.2f} | {each_dask:.2f} | {each_dask / pass_dask:.2f}× | {1e6 * pass_dask / (n_tx * w):.1f} |")

    per_tweak = t1 / n_tx
    best_dask = min(t for _, t, _ in dask_rows)
    efficiency = min(1.0, t1 / best_dask / 2)
    feed = min(empty / n_tx for _, _, empty in overheads)  # the one client reading and shipping partitions
    print(f"\nPer tweak, one wallet, one core: {per_tweak * 1e6:.1f} µs; 2-worker Dask efficiency (speed-up ÷ 2): {efficiency:.2f}; "
          f"client feed: {feed * 1e9:,.0f} ns per tx")  # fmt: skip
    n = MAINNET_ELIGIBLE
    print("\n| full mainnet rescan, one wallet | scan: N·t ÷ (cores·eff) | client feed: N·feed | projected |\n|---|---|---|---|")
    for cores in (1, 16, 64):
        eff = 1.0 if cores == 1 else efficiency
        scan_h = n * per_tweak / (cores * eff) / 3600
        feed_h = 0.0 if cores == 1 else n * feed / 3600
        print(f"| {cores} core{'s' if cores > 1 else ''}{' (local)' if cores == 1 else ' (Dask)'} | {scan_h:.2f} h | {feed_h:.2f} h | {max(scan_h, feed_h):.2f} h |")

if __name__ == "__main__":
    main()
