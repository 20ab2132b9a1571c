"""The Electrum listener's subscriptions against `sp-scan index scan` over the same index and keys.

Usage:
    python -m bench.electrum                  # 71 linked copies of mainnet.bin (~100,000 eligible txs)
    python -m bench.electrum --blocks 24 --threads 1 2 --repeat 3
    python -m bench.electrum --dask --subscriptions 8   # serve --dask: 1 and 2 single-threaded workers

Rows (wall time, best of --repeat):
- one full-history `blockchain.silentpayments.subscribe` from a raw socket client until its first
  `progress` 1.0 notification, against `Index.scan` (what `sp-scan index scan` runs) over the same
  range with the same receiver, native threads and partition size (goal ≤ 1.2×);
- 10 subscriptions sent at once on 10 connections until each has its 1.0, against one
  `Index.scan_wallets` pass (`index scan --wallets`) for the same 10 wallets (goal ≤ 1.5×);
- with `--dense N`: the first row again over a chain of N blocks of 1,500 generated txs (tests/txgen.py:
  every input kind) of which ~17% pay one wallet (labels 1, 2, 1001337), the cost per history entry.
- with `--dask`, instead: N subscriptions sent at once until each has its 1.0, scanned by the server
  (one native thread) and by a LocalCluster of 1 and 2 single-threaded worker processes (`serve
  --dask`); subscriptions completed per minute, and 2 workers against 1 (goal ≥ 1.7×); beside it the
  machine's own ceiling: two `Index.scan_wallets` processes at once against one (what two cores give
  when other work shares them).
The index is bench.index's chain (copies of the mainnet-sized sample block; copy 0 pays the test
wallet), built once in a temporary directory. Client and server share the machine's cores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

from coincurve import PrivateKey

from sp_scan import native
from sp_scan.index import Index
from sp_scan.index.scan import DASK_PARTITION_BLOCKS, DEFAULT_PARTITION_BLOCKS
from sp_scan.scan import Receiver
from sp_scan.server.electrum import ElectrumServer

from .index import ROOT, BlockList, LinkedChain
from .test_block import _receiver

SP = "blockchain.silentpayments.subscribe"


def build_index(chain, db: Path) -> Path:
    """An index of `chain` (a cli_support.ChainView) at `db`."""
    from cli_support import NodeServer, RestHandler

    from sp_scan.node import RestNode

    with NodeServer(RestHandler, chain) as server, Index.create(db, "regtest") as idx:
        idx.sync(RestNode(server.url), jobs=2)
    return db


DENSE_TXS, DENSE_SHARE = 1_500, 0.17


class DenseChain(BlockList):
    """`count` blocks of DENSE_TXS generated txs, ~DENSE_SHARE of them paying `wallet` (a cli_support.ChainView)."""

    def __init__(self, count: int) -> None:
        import blockfactory
        import txgen
        from bitcoin.core import COutPoint, CScript, CScriptWitness, CTxIn, CTxInWitness, CTxOut, CTxWitness, CMutableTransaction

        from sp_scan.wire import TxOut

        target, *others = txgen.wallets(7)
        self.wallet = target.receiver
        blocks, prev = [], b"\x00" * 32
        for h in range(count):
            paying = round(DENSE_TXS * DENSE_SHARE)
            generated = txgen.generate(2 * h, paying, [target]) + txgen.generate(2 * h + 1, DENSE_TXS - paying, others)
            txs, spent = [], []
            for n, g in enumerate(generated):
                vin = [CTxIn(COutPoint(i.outpoint.txid32, i.outpoint.vout), CScript(i.script_sig), 0xFFFFFFFD) for i in g.inputs]
                tx = CMutableTransaction(vin, [CTxOut(1000 + n, CScript(b"\x51\x20" + x)) for x in g.outputs32], nVersion=2)
                if any(i.witness for i in g.inputs):
                    tx.wit = CTxWitness([CTxInWitness(CScriptWitness(list(i.witness))) for i in g.inputs])
                txs.append(tx)
                spent.append([TxOut(5000, i.prevout_script) for i in g.inputs])
            block = blockfactory.assemble(txs, spent, h, prev)
            prev = block.header.GetHash()
            blocks.append((prev, block.raw, block.spent_bytes))
        super().__init__(blocks)


def wallets(n: int) -> list[Receiver]:
    """The sample's test wallet first, then n - 1 wallets of fresh keys (they find nothing; the work is the same)."""
    return [_receiver()] + [Receiver(PrivateKey().secret, PrivateKey().public_key.format(), (1,)) for _ in range(n - 1)]


def subscribe_until_done(port: int, receiver: Receiver, ready: threading.Barrier, out: list, i: int, start=0) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock, sock.makefile("rb") as lines:
        send = lambda obj: sock.sendall(json.dumps(obj).encode() + b"\n")  # noqa: E731
        send({"jsonrpc": "2.0", "id": 0, "method": "server.version", "params": ["bench", "1.4"]})
        lines.readline()
        ready.wait()
        began = time.perf_counter()
        params = [receiver.scan_key32.hex(), receiver.spend_pubkey33.hex(), start, [m for m in receiver.labels if m]]
        send({"jsonrpc": "2.0", "id": 1, "method": SP, "params": params})
        found = 0
        while True:
            message = json.loads(lines.readline())
            if message.get("method") == SP:
                found += len(message["params"]["history"])
                if message["params"]["progress"] == 1.0:
                    out[i] = (time.perf_counter() - began, found)
                    return


def electrum_time(db: Path, receivers: list[Receiver], threads: int, cluster=None, partition_blocks: int | None = None) -> tuple[float, int]:
    """Seconds until every subscription reached progress 1.0 (all sent at once), and the txs they reported;
    `cluster`: a `sp_scan.index.cluster.Pool` that scans the histories in tasks of `partition_blocks`."""
    server = ElectrumServer(db, port=0, threads=threads, cluster=cluster, partition_blocks=partition_blocks)
    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever, daemon=True)
    runner.start()
    asyncio.run_coroutine_threadsafe(server.start(), loop).result(30)
    try:
        # Warm-up, untimed: a subscribe over the tip block alone has the scanner and the reader threads open
        # the index (an index Index.scan is timed over is open already too).
        with Index.open(db, readonly=True) as idx:
            tip = idx.tip()[0]
        subscribe_until_done(server.port, wallets(2)[1], threading.Barrier(1), [None], 0, f"{tip}-{tip}")
        out: list = [None] * len(receivers)
        ready = threading.Barrier(len(receivers))
        clients = [threading.Thread(target=subscribe_until_done, args=(server.port, r, ready, out, i)) for i, r in enumerate(receivers)]
        for c in clients:
            c.start()
        for c in clients:
            c.join()
        return max(t for t, _ in out), sum(n for _, n in out)
    finally:
        asyncio.run_coroutine_threadsafe(server.close(), loop).result(60)
        loop.call_soon_threadsafe(loop.stop)
        runner.join()
        loop.close()


def index_scan_time(db: Path, receivers: list[Receiver], threads: int) -> tuple[float, int]:
    """Seconds of `Index.scan` (one wallet) or `Index.scan_wallets` (several), and the distinct txs found."""
    with Index.open(db, readonly=True) as idx:
        began = time.perf_counter()
        if len(receivers) == 1:
            txs = {m.txid32 for m in idx.scan(receivers[0], threads=threads, partition_blocks=DEFAULT_PARTITION_BLOCKS)}
            count = len(txs)
        else:
            pairs = {(w, m.txid32) for w, m in idx.scan_wallets(receivers, threads=threads, partition_blocks=DEFAULT_PARTITION_BLOCKS)}
            count = len(pairs)
        return time.perf_counter() - began, count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=71)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, os.cpu_count() or 1])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dense", type=int, default=0, metavar="N", help="Also the dense-wallet row over N generated blocks (0: none).")
    parser.add_argument("--only-dense", action="store_true", help="Only the dense-wallet row.")
    parser.add_argument("--dask", action="store_true", help="Only the cluster rows: the server's pass against 1 and 2 Dask workers.")
    parser.add_argument("--subscriptions", type=int, default=8, metavar="N", help="With --dask: subscriptions sent at once.")
    parser.add_argument("--partition-blocks", type=int, default=None, metavar="N", help="With --dask: blocks per task [default: serve --dask's, 20].")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    print(f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, EC engine: {native.ec_engine()}")
    if args.dask:
        with tempfile.TemporaryDirectory() as tmp:
            dask_rows(build_index(LinkedChain(args.blocks), Path(tmp) / "linked.db"), args)
        return
    print("| row | threads | sp-scan index scan | electrum subscribe(s) to progress 1.0 | ratio | goal |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        if not args.only_dense:
            db = build_index(LinkedChain(args.blocks), Path(tmp) / "linked.db")
            print(f"| (index: {args.blocks} linked copies of mainnet.bin, {_eligible(db):,} eligible txs) |||||")
            for n, goal in ((1, 1.2), (10, 1.5)):
                name = "1 full-history subscribe" if n == 1 else f"{n} concurrent subscribes vs one --wallets pass"
                _rows(name, db, wallets(n), args, goal)
        if args.dense:
            chain = DenseChain(args.dense)
            db = build_index(chain, Path(tmp) / "dense.db")
            print(f"| (index: {args.dense} generated blocks, {_eligible(db):,} eligible txs) |||||")
            _rows("1 subscribe, dense wallet", db, [chain.wallet], args, 1.2)


def dask_rows(db: Path, args) -> None:
    """N subscriptions at once: the server's own pass (one thread) against 1 and 2 single-threaded Dask workers."""
    import distributed

    from sp_scan.index import cluster

    receivers = wallets(args.subscriptions)
    blocks = args.partition_blocks or DASK_PARTITION_BLOCKS
    print(f"| (index: {args.blocks} linked copies of mainnet.bin, {_eligible(db):,} eligible txs; {len(receivers)} subscriptions at once; tasks of {blocks} blocks) ||||")
    print("| scans on | seconds until every subscription has progress 1.0 | subscriptions per minute | vs 1 worker | server's CPU s |")
    print("|---|---|---|---|---|")
    local = min((_with_cpu(electrum_time, db, receivers, 1) for _ in range(args.repeat)), key=lambda r: r[0])
    print(f"| this process, 1 thread | {local[0]:.2f} s | {60 * len(receivers) / local[0]:.1f} | | {local[2]:.2f} |", flush=True)
    rates = {}
    for workers in (1, 2):
        with (
            distributed.LocalCluster(n_workers=workers, processes=True, threads_per_worker=1, host="127.0.0.1", dashboard_address=None) as c,
            distributed.Client(c, set_as_default=False) as client,
        ):
            pool = cluster.Pool(client)
            try:
                run = min((_with_cpu(electrum_time, db, receivers, 1, pool, args.partition_blocks) for _ in range(args.repeat)), key=lambda r: r[0])
            finally:
                pool.close()
        assert run[1] == local[1], f"the cluster's subscriptions reported {run[1]} txs, the local pass {local[1]}"
        rates[workers] = 60 * len(receivers) / run[0]
        ratio = f"{rates[workers] / rates[1]:.2f}× (goal ≥ 1.7×)" if workers == 2 else "1.00×"
        print(f"| Dask, {workers} worker{'s' if workers > 1 else ''} × 1 thread | {run[0]:.2f} s | {rates[workers]:.1f} | {ratio} | {run[2]:.2f} |", flush=True)
    alone, pair = (_processes_time(db, len(receivers), n) for n in (1, 2))
    print(f"| (ceiling: 2 `index scan` processes at once against 1, each {len(receivers)} wallets) | {alone:.2f} s vs {pair:.2f} s | | {2 * alone / pair:.2f}× |")


def _with_cpu(timed, *args) -> tuple[float, int, float]:
    """`timed(*args)`'s (seconds, count) and the CPU seconds this process (the server and its clients) spent meanwhile."""
    began = time.process_time()
    seconds, count = timed(*args)
    return seconds, count, time.process_time() - began


def _processes_time(db: Path, wallet_count: int, processes: int) -> float:
    """Seconds for `processes` processes, started together, to each scan the index for `wallet_count` wallets."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    procs = [context.Process(target=index_scan_time, args=(db, wallets(wallet_count), 1)) for _ in range(processes)]
    began = time.perf_counter()
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    return time.perf_counter() - began


def _eligible(db: Path) -> int:
    with Index.open(db, readonly=True) as idx:
        return idx.info()["eligible_transactions"]


def _rows(name: str, db: Path, receivers: list[Receiver], args, goal: float) -> None:
    for threads in sorted(set(args.threads)):
        scan = min((index_scan_time(db, receivers, threads) for _ in range(args.repeat)), key=lambda r: r[0])
        sub = min((electrum_time(db, receivers, threads) for _ in range(args.repeat)), key=lambda r: r[0])
        assert sub[1] == scan[1], f"the subscriptions reported {sub[1]} txs, index scan found {scan[1]}"
        print(f"| {name} ({scan[1]:,} txs) | {threads} | {scan[0]:.2f} s | {sub[0]:.2f} s | {sub[0] / scan[0]:.2f} | ≤ {goal} |", flush=True)


if __name__ == "__main__":
    main()
