"""The mempool beside the index: new-tx throughput with prevout lookups, memory, and accept→listed latency.

    python -m bench.mempool                    # 50,000 txs over REST and RPC, then latency by ZMQ and polling
    python -m bench.mempool --txs 10000 --latency-rounds 10 --interval 1

Throughput: a stand-in node (tests/cli_support's REST or RPC handler over tests/node_mempool's
NodeMempool) runs in a child process, its mempool filled with --txs synthetic txs: each spends one
or two confirmed outputs of a funding block (P2WPKH or P2TR key path, dummy signatures: extraction
needs no valid signature) or, one in five, an output of an earlier mempool tx; 70% have a P2TR
output. This process runs one full listing (`MempoolFollower.poll`) into a fresh index: fetching
every tx, looking up every prevout (getutxos 15 at a time over REST, gettxout batches over RPC), the
tweaks through block_index, the commits. Reported: wall time, this process's CPU time (its REST
threads included) and the stand-in node's while it served (the two share the machine's cores),
new txs per second of each, and peak RSS.

Latency: `Index.sync(follow, mempool)` in a thread over an in-process stand-in; a tx is accepted
and a reader of the index file waits for it (the event is the reader seeing the txid; it checks
every 2 ms). Median and maximum over --latency-rounds, with ZMQ and with polling every --interval.
"""

from __future__ import annotations

import argparse
import hashlib
import multiprocessing
import os
import random
import resource
import statistics
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from bitcoin.core import CMutableTransaction, COutPoint, CTxIn, CTxInWitness, CTxOut, CTxWitness  # noqa: E402
from bitcoin.core.script import CScript, CScriptWitness  # noqa: E402
from coincurve import PrivateKey  # noqa: E402

from sp_scan import native  # noqa: E402
from sp_scan.wire import TxOut, compact_size, parse_tx, sha256d  # noqa: E402
from sp_scan.crypto import hash160  # noqa: E402

KEYS = [PrivateKey(hashlib.sha256(b"bench mempool %d" % n).digest()) for n in range(64)]


class BenchChain:
    """A ChainView of two blocks: an empty genesis-like block and one whose coinbase funds `n` outputs."""

    def __init__(self, n: int) -> None:
        outs = []
        for i in range(n):
            pub = KEYS[i % len(KEYS)].public_key.format()
            outs.append(TxOut(100_000 + i, b"\x00\x14" + hash160(pub) if i % 2 else b"\x51\x20" + pub[1:]))
        genesis = self._block(b"\x00" * 32, [TxOut(0, b"\x6a")], 0)
        funding = self._block(sha256d(genesis[:80]), outs, 1)
        self.blocks = [genesis, funding]
        self.hashes = [sha256d(b[:80]) for b in self.blocks]
        txid = sha256d(funding[81:])  # the block's only tx
        self.funding = [(txid, i, CTxOut(o.amount, CScript(o.script))) for i, o in enumerate(outs)]

    @staticmethod
    def _block(prev: bytes, outs: list, height: int) -> bytes:
        """A one-tx block: its coinbase (no witness) pays `outs`; its merkle root is that tx's id."""
        coinbase = b"".join([
            struct.pack("<I", 2), b"\x01", b"\x00" * 32, b"\xff" * 4, b"\x02\x01" + bytes([height]), b"\xff" * 4,
            compact_size(len(outs)), *(o.to_bytes() for o in outs), b"\x00" * 4,
        ])  # fmt: skip
        header = struct.pack("<I", 0x20000000) + prev + sha256d(coinbase) + struct.pack("<III", 1_700_000_000 + height, 0x207FFFFF, 0)
        return header + b"\x01" + coinbase

    def best(self):
        return len(self.blocks) - 1, self.hashes[-1]

    def hash_at(self, height: int):
        return self.hashes[height] if 0 <= height < len(self.hashes) else None

    def lookup(self, hash32: bytes):
        if hash32 not in self.hashes:
            return None
        h = self.hashes.index(hash32)
        return h, self.blocks[h], b"\x01\x00" if h == 0 else b"\x01\x00"


def _witness(script: bytes, n: int) -> list[bytes]:
    if script[0] == 0x51:  # P2TR key path: a 64-byte signature
        return [bytes([n % 251]) * 64]
    return [b"\x30" + bytes([n % 251]) * 70, KEYS[n % len(KEYS)].public_key.format()]  # P2WPKH: <sig> <pubkey>


def bench_txs(chain: BenchChain, n: int, pairs: bool = True) -> list[bytes]:
    """`n` synthetic mempool txs over the chain's funding outputs (see the module doc); without
    `pairs`, each spends one output (two inputs can sum to no key: such a tx is not eligible)."""
    funding = iter(chain.funding)
    children: list[tuple[bytes, int, CTxOut]] = []
    raws = []
    for i in range(n):
        if i % 5 == 4 and children:
            spends = [children.pop()]
        else:
            spends = [next(funding) for _ in range(1 + i % 2 if pairs else 1)]
        total = sum(o.nValue for _, _, o in spends)
        taproot = i % 10 < 7
        pay = CScript(b"\x51\x20" + KEYS[(i + 7) % len(KEYS)].public_key.format()[1:]) if taproot else CScript(b"\x00\x14" + bytes(20))
        change_pub = KEYS[(i + 3) % len(KEYS)].public_key.format()
        change = CScript(b"\x00\x14" + hash160(change_pub)) if i % 3 else CScript(b"\x51\x20" + change_pub[1:])
        tx = CMutableTransaction([CTxIn(COutPoint(t, v), CScript(), 0xFFFFFFFD) for t, v, _ in spends], [CTxOut(total // 2, pay), CTxOut(total // 2 - 500, change)], nVersion=2)
        tx.wit = CTxWitness([CTxInWitness(CScriptWitness(_witness(bytes(o.scriptPubKey), i + j))) for j, (_, _, o) in enumerate(spends)])
        raws.append(tx.serialize())
        children.append((tx.GetTxid(), 1, tx.vout[1]))
    return raws


def _serve(kind: str, n: int, conn) -> None:
    """The child: a stand-in node with `n` mempool txs; sends its URL, serves until told to stop, then
    sends the CPU seconds it spent serving (all its threads)."""
    from cli_support import NodeServer, RestHandler, RpcHandler
    from node_mempool import NodeMempool

    chain = BenchChain(2 * n)
    pool = NodeMempool(chain)
    for raw in bench_txs(chain, n):
        pool.accept(raw)
    server = NodeServer(RestHandler if kind == "rest" else RpcHandler, chain, credentials="u:p", mempool=pool)
    began = time.process_time()
    conn.send(server.url)
    conn.recv()
    conn.send(time.process_time() - began)
    server.stop()


def throughput(kind: str, n: int) -> dict:
    from sp_scan.index import Index, Retry
    from sp_scan.index.mempool import MempoolFollower
    from sp_scan.node import RestNode, RpcNode

    parent, child = multiprocessing.Pipe()
    proc = multiprocessing.Process(target=_serve, args=(kind, n, child), daemon=True)
    proc.start()
    url = parent.recv()
    try:
        with tempfile.TemporaryDirectory() as tmp, Index.create(Path(tmp) / "m.db", "regtest") as idx:
            node = RestNode(url) if kind == "rest" else RpcNode(url, user="u", password="p")
            follower = MempoolFollower(idx._store, node, Retry())
            idx._store.lock_writer()
            wall, cpu = time.perf_counter(), time.process_time()
            follower.poll()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            stats = follower.stats
            view = idx.mempool_tweaks()
            assert stats.txs == n and stats.missing == 0 and len(view.txs) == stats.eligible > 0, stats
    finally:
        parent.send("stop")
        node_cpu = parent.recv()
        proc.join(30)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"kind": kind, "txs": n, "eligible": stats.eligible, "wall_s": wall, "cpu_s": cpu, "node_cpu_s": node_cpu, "rss_mb": rss_mb}


def latency(zmq: bool, rounds: int, interval: float) -> list[float]:
    from cli_support import NodeServer, RestHandler
    from node_mempool import NodeMempool, ZmqPublisher

    from sp_scan.index import Index
    from sp_scan.node import RestNode

    chain = BenchChain(4 * rounds + 8)
    publisher = ZmqPublisher() if zmq else None
    pool = NodeMempool(chain, zmq=publisher)
    raws = bench_txs(chain, 2 * rounds + 4, pairs=False)  # one input each: eligible when it has a P2TR output
    stop, seen = threading.Event(), []
    with tempfile.TemporaryDirectory() as tmp, NodeServer(RestHandler, chain, mempool=pool) as server:
        path = Path(tmp) / "l.db"
        idx = Index.create(path, "regtest")
        ready = threading.Event()

        def progress(stats):
            if stats.mempool is not None and stats.mempool.polls and (not zmq or stats.mempool.zmq == "connected"):
                ready.set()
            if stop.is_set():
                raise KeyboardInterrupt

        def run():
            try:
                idx.sync(RestNode(server.url), follow=True, interval=interval, progress=progress, mempool=True, zmq=publisher.url if zmq else None)
            except KeyboardInterrupt:
                pass

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        ready.wait(60)
        with Index.open(path, readonly=True) as reader:
            for raw in raws:  # the first one (ZMQ: the resync after connecting) is a warm-up, not counted
                tx = parse_tx(raw)
                if not any(o.script[:2] == b"\x51\x20" for o in tx.outputs):
                    pool.accept(raw)  # never listed: its children need it in the node's mempool
                    continue
                if len(seen) > rounds:
                    break
                txid = tx.txid32
                time.sleep(random.uniform(0, interval))  # any moment of the poll's cycle
                began = time.perf_counter()
                pool.accept(raw)
                while txid not in {t.txid32 for t in reader.mempool_tweaks().txs}:
                    time.sleep(0.002)
                seen.append(time.perf_counter() - began)
        stop.set()
        thread.join(2 * interval + 30)
        assert not thread.is_alive(), "the sync did not stop"
        idx.close()
    if publisher is not None:
        publisher.close()
    return seen[1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--txs", type=int, default=50_000)
    parser.add_argument("--latency-rounds", type=int, default=20)
    parser.add_argument("--interval", type=float, default=2.0)
    parser.add_argument("--skip-throughput", action="store_true")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores, {open('/proc/cpuinfo').read().split('model name')[1].split(':')[1].splitlines()[0].strip()}; EC engine {native.ec_engine()}")
    if not args.skip_throughput:
        for kind in ("rest", "rpc"):
            r = throughput(kind, args.txs)
            print(
                f"{kind}: {r['txs']:,} new txs ({r['eligible']:,} eligible) in {r['wall_s']:.2f} s wall = {r['txs'] / r['wall_s']:,.0f} tx/s; "
                f"{r['cpu_s']:.2f} s CPU here = {r['txs'] / r['cpu_s']:,.0f} tx/s per core; the stand-in node "
                f"{r['node_cpu_s']:.2f} s CPU = {r['txs'] / r['node_cpu_s']:,.0f} tx/s per core; peak RSS {r['rss_mb']:.0f} MB"
            )
    for zmq in (True, False) if args.latency_rounds else ():
        seen = latency(zmq, args.latency_rounds, args.interval)
        what = "ZMQ" if zmq else f"polling every {args.interval:g} s"
        print(f"latency accept -> listed, {what}: median {statistics.median(seen) * 1000:.0f} ms, max {max(seen) * 1000:.0f} ms over {len(seen)}")


if __name__ == "__main__":
    main()
