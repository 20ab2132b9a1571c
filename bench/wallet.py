"""The receiving wallet: sync rate, bytes and CPU per block of each source, beside `index scan` on the same chain.

Usage:
    python -m bench.wallet                    # 24 linked copies of vectors/blocks/mainnet.bin
    python -m bench.wallet --blocks 48 --runs 3

The chain is bench.index's `--blocks` linked copies of the mainnet-sized sample block (3,001 txs,
1,412 eligible, 2,062 P2TR outputs) behind the regtest genesis block, each copy's header carrying
its own merkle root (`RegtestChain`: ElectrumX checks the genesis block, and the Electrum sources
check merkle proofs against the headers). It is served by tests/cli_support.py's Core REST and
RPC stand-ins on 127.0.0.1, indexed once with `Index.sync`, indexed by ElectrumX (e-x) over the
RPC stand-in (told to take the copies' inputs that spend outputs never created as empty ones, and
to send answers at once: ElectrumX 2 holds a small answer up to 1 s to pad it, which Fulcrum and
electrs, the usual backends, do not), and served by `sp_scan.server.Server` in a child process
(`--serve`): BlindBit v1 (HTTP), v2 (gRPC, GetFullBlock from the REST stand-in) and the Electrum
listener (Frigate's and Cake's methods, ElectrumX behind it). Two wallets: "no payments" (fresh keys: no filter ever
matches) and "paid" (mainnet.bin's test wallet, paid 84 outputs in copy 0, spent in copy 1). Each
measurement runs in its own child process (`--measure`): blocks/s of the sync call (wall), CPU per
block (the child's process time, every thread: Frigate's scan runs in the server, which this
does not count), bytes per block read off the wire (HTTP bodies as sent, gzipped; gRPC messages
with their 5-byte prefixes; Electrum lines). Peer: `Index.scan` over the same index, one thread,
also in a child, in the same run. One scanning thread everywhere. "answers" is what a BlindBit
client cannot avoid: each block's /tweak-index and two /filter bodies as the server sends them
with gzip; "raw" is their binary content (33 bytes a tweak, the filters' bytes). Prints markdown
tables with the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from coincurve import PrivateKey

from sp_scan import native, wire
from sp_scan.index import Index
from sp_scan.node import RestNode
from sp_scan.scan import Receiver
from sp_scan.wallet import sources

from .index import ROOT, LinkedChain
from .test_block import _receiver

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
NO_PAYMENTS = Receiver(b"\x5a" * 32, PrivateKey(b"\xa5" * 32).public_key.format())


def _wallet_keys(name: str) -> Receiver:
    return NO_PAYMENTS if name == "no payments" else _receiver()


def measure(spec: dict) -> dict:
    """One measurement, in this (child) process: {"blocks", "wall", "cpu", "received", "found"}."""
    from sp_scan.wallet import Wallet

    receiver = _wallet_keys(spec["wallet"])
    if spec["source"] == "index scan":
        with Index.open(spec["db"], readonly=True) as idx:
            cpu, began = time.process_time(), time.perf_counter()
            found = len(list(idx.scan(receiver, threads=1)))
            wall, cpu = time.perf_counter() - began, time.process_time() - cpu
            blocks = idx.tip()[0] + 1
        return {"blocks": blocks, "wall": wall, "cpu": cpu, "received": 0, "found": found}
    source = _source(spec, receiver)
    scan_pub = PrivateKey(receiver.scan_key32).public_key.format()
    labels = tuple(m for m in receiver.labels if m)
    with tempfile.TemporaryDirectory() as tmp, Wallet.create(Path(tmp) / "w", "regtest", scan_pub, receiver.spend_pubkey33, labels, 0) as w:
        cpu, began = time.process_time(), time.perf_counter()
        stats = w.sync(source, receiver.scan_key32)
        wall, cpu = time.perf_counter() - began, time.process_time() - cpu
        found = len(w.outputs())
    source.close()
    return {"blocks": stats.blocks, "wall": wall, "cpu": cpu, "received": source.received, "found": found}


def _source(spec: dict, receiver: Receiver):
    """The wallet source a measurement syncs from (`sources.open` of its URL)."""
    kind, url = spec["source"], spec.get("url", "")
    if kind == "db":
        return sources.open(spec["db"])
    if kind == "rest":
        return sources.open(f"rest+{url}")
    if kind == "grpc":
        return sources.open(url if "://" in url else f"grpc://{url}")
    if kind == "electrum":
        return sources.open(url, scan_key32=receiver.scan_key32, spend_pubkey33=receiver.spend_pubkey33, labels=receiver.labels)
    if kind == "cake":
        return sources.open(f"cake+{url}")
    return sources.open(url)


class RegtestChain(LinkedChain):
    """bench.index's linked copies behind the regtest genesis block (height 0; copy i at height i + 1), each
    header with its copy's merkle root; a cli_support.ChainView."""

    def __init__(self, n: int) -> None:
        from bitcoin import RegTestParams
        from bitcoin.core import CBlock

        super().__init__(n)
        genesis = RegTestParams.GENESIS_BLOCK.serialize()
        prev = wire.sha256d(genesis[:80])
        copies, self.blocks = self.blocks, [(prev, genesis)]
        for _, raw in copies:
            root = CBlock.build_merkle_tree_from_txids([tx.txid32 for tx in wire.parse_block(raw).txs])[-1]
            header = raw[:4] + prev + root + raw[68:80]
            prev = wire.sha256d(header)
            self.blocks.append((prev, header + raw[80:]))
        self.heights = {hash32: h for h, (hash32, _) in enumerate(self.blocks)}

    def lookup(self, hash32: bytes) -> tuple[int, bytes, bytes] | None:
        found = super().lookup(hash32)
        return found if found is None or found[0] else (0, found[1], wire.serialize_spent([[]]))  # genesis spends nothing


def serve(spec: dict) -> None:
    """The server, in this (child) process: print its listeners' URLs as one JSON line, serve until stdin closes."""
    sys.path.insert(0, str(ROOT / "tests"))
    from serving import ServerThread

    from sp_scan.server.answers import READER_THREADS
    from sp_scan.server.electrum import ElectrumServer

    electrum = ElectrumServer(spec["db"], "127.0.0.1", 0, backend=spec["electrumx"])
    with ServerThread(Path(spec["db"]), READER_THREADS, node=RestNode(spec["rest"]), grpc_port=0, electrum=electrum) as server:
        urls = server.server.urls
        print(json.dumps({"blindbit": server.url, "grpc": urls["grpc"], "electrum": urls["electrum"], "cake": urls["electrum"], "rest": spec["rest"]}), flush=True)
        sys.stdin.read()


def _child(spec: dict) -> dict:
    out = subprocess.run([sys.executable, "-m", "bench.wallet", "--measure", json.dumps(spec)], capture_output=True, text=True, cwd=ROOT, check=False)
    if out.returncode:
        raise SystemExit(f"measurement {spec} failed:\n{out.stderr}")
    return json.loads(out.stdout)


def _gzipped(url: str) -> bytes:
    with _OPENER.open(urllib.request.Request(url, headers={"Accept-Encoding": "gzip"}), timeout=60) as reply:
        return reply.read()


def answers_per_block(url: str, db: Path) -> tuple[float, float]:
    """(gzipped bytes of /tweak-index + both /filter bodies, their binary content) per block, averaged."""
    sent = raw = 0
    with Index.open(db, readonly=True) as idx:
        top = idx.tip()[0]
        for h in range(top + 1):
            sent += sum(len(_gzipped(f"{url}{path}")) for path in (f"/tweak-index/{h}?dustLimit=0", f"/filter/new-utxos/{h}", f"/filter/spent/{h}"))
            raw += 33 * len(idx.tweaks(h)) + len(idx.filter(h, "new-utxos")) + len(idx.filter(h, "spent"))
    return sent / (top + 1), raw / (top + 1)


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=24)
    parser.add_argument("--runs", type=int, default=3, help="Measurements per row; the median is shown.")
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(json.loads(args.measure))))
        return
    if args.serve:
        serve(json.loads(args.serve))
        return
    sys.path.insert(0, str(ROOT / "tests"))
    from cli_support import NodeServer, RestHandler, RpcHandler, transactions
    from electrum_support import ElectrumX

    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores; Python {platform.python_version()}; EC engine {native.ec_engine() if native.ENABLED else 'reference'}")
    print(f"Chain: the regtest genesis block and {args.blocks} linked copies of mainnet.bin (3,001 txs, 1,412 eligible each); medians of {args.runs} runs\n")
    chain = RegtestChain(args.blocks)
    with tempfile.TemporaryDirectory() as tmp, NodeServer(RestHandler, chain) as rest, NodeServer(RpcHandler, chain, credentials="user:pass") as rpc:
        db = Path(tmp) / "index.db"
        with Index.create(db, "regtest") as idx:
            idx.sync(RestNode(rest.url), jobs=2)
        transactions(chain)  # the RPC stand-in's txindex (ElectrumX asks it for every tx it serves), built before any measurement
        (Path(tmp) / "electrumx").mkdir()
        electrumx = ElectrumX(int(rpc.url.rsplit(":", 1)[1]), Path(tmp) / "electrumx", args.blocks, padding_wait=0.0, missing_inputs=True).start()
        spec = {"db": str(db), "rest": rest.url, "electrumx": electrumx.url}
        server = subprocess.Popen([sys.executable, "-m", "bench.wallet", "--serve", json.dumps(spec)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT)
        try:
            urls = json.loads(server.stdout.readline())
            sent, raw = answers_per_block(urls["blindbit"], db)
            for wallet in ("no payments", "paid"):
                rows, peer = [], None
                for source in ("index scan", "db", "rest", "blindbit", "grpc", "electrum", "cake"):
                    spec = {"source": source, "wallet": wallet, "db": str(db), "url": urls.get(source, "")}
                    runs = [_child(spec) for _ in range(args.runs)]
                    r = {k: statistics.median(run[k] for run in runs) for k in ("wall", "cpu", "received")}
                    blocks, found = runs[0]["blocks"], runs[0]["found"]
                    rate = blocks / r["wall"]
                    peer = peer or rate
                    per_block = r["received"] / blocks
                    bytes_cell = f"{per_block:,.0f} ({per_block / sent:.3f}× answers, {per_block / raw:.2f}× raw)" if source == "blindbit" else f"{per_block:,.0f}"
                    name = "`index scan` (peer)" if source == "index scan" else f"wallet sync --{source}" + (" (server scans)" if source == "electrum" else "")
                    rows.append(f"| {name} | {rate:,.1f} | {rate / peer:.2f} | {1e3 * r['cpu'] / blocks:,.1f} | {bytes_cell} | {found} |")
                print(f"Wallet: {wallet}\n")
                print("| source | blocks/s | vs index scan | CPU ms/block | bytes/block received | outputs found |")
                print("|---|---|---|---|---|---|")
                print("\n".join(rows) + "\n")
            print(f"BlindBit answers a client cannot avoid: {sent:,.0f} bytes/block gzipped as sent ({raw:,.0f} raw: tweaks 33 B each + both filters)")
        finally:
            server.stdin.close()
            server.wait(60)
            electrumx.stop()


if __name__ == "__main__":
    main()
