"""A node's mempool for the Core stand-ins (cli_support's REST and RPC handlers), with Core's ZMQ `sequence` topic.

`NodeMempool` holds txs in acceptance order over a ChainView (a KernelChain, or a plain chain of
test blocks), checks each input against the chain's UTXO set and the mempool (conflicts refused
unless replacing, as RBF does), and answers what Core's rest.cpp and RPCs answer: the txids
(with the mempool sequence), the raw txs, getutxos/gettxout with or without the mempool's view.
`chain_moved()` does what Core does when blocks connect or disconnect: mined txs leave without a
removal message, conflicting ones with one, a disconnected block's txs come back.
`ZmqPublisher` sends the three-frame messages of Core's src/zmq/zmqpublishnotifier.cpp:
b"sequence"; hash (display order) ‖ label [‖ u64 LE mempool sequence for A/R]; u32 LE message number.
"""

from __future__ import annotations

import struct
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence

from bitcoin.core import CBlock, CTransaction

from sp_scan.wire import RawTx, TxOut, parse_block, parse_tx, sha256d

MEMPOOL_HEIGHT = 0x7FFFFFFF  # Core's height of a coin that exists only in the mempool
GARBAGE = b"not a transaction"
"""What the stand-ins answer for a garbled tx: these bytes over REST, this text (not hex) over RPC."""
PATIENCE = 120.0  # a failsafe for waits on events (a committed height, a listed tx), never a measured window


def wait_for(what: str, condition: Callable[[], object]) -> object:
    """Wait until condition() is truthy (checked every few ms) and return it; fail after PATIENCE."""
    end = time.monotonic() + PATIENCE
    while not (found := condition()):
        assert time.monotonic() < end, f"gave up waiting for {what}"
        time.sleep(0.01)
    return found


class Rejected(ValueError):
    """The stand-in's mempool refused a tx (Core's reject reason as the message)."""


def _unspendable(script: bytes) -> bool:
    return script[:1] == b"\x6a" or len(script) > 10_000


class NodeMempool:
    """The mempool of a stand-in node over `chain` (thread-safe; the servers read it while tests change it).

    Args:
        chain: a ChainView (best, hash_at, lookup).
        zmq: a ZmqPublisher to announce changes on, or None.
    """

    def __init__(self, chain, zmq: ZmqPublisher | None = None) -> None:
        self.chain = chain
        self.zmq = zmq
        self.lock = threading.RLock()
        self.txs: OrderedDict[bytes, tuple[bytes, RawTx, float]] = OrderedDict()  # txid32 -> (raw, parsed, time)
        self.sequence = 1  # Core's mempool sequence starts at 1
        self.spent_by: dict[bytes, bytes] = {}
        self.garbled: set[bytes] = set()  # txids whose bytes are answered as garbage (see `raw`)
        self._utxos: tuple[bytes, dict[bytes, tuple[int, TxOut, bool]]] | None = None
        self._seen = self._active()

    # ---- the chain ----

    def _active(self) -> list[bytes]:
        height, _ = self.chain.best()
        return [self.chain.hash_at(h) for h in range(height + 1)]

    def utxo_set(self) -> dict[bytes, tuple[int, TxOut, bool]]:
        """outpoint36 -> (height, output, coinbase) of the active chain's tip (genesis's coinbase excluded, as in Core)."""
        with self.lock:
            height, tip = self.chain.best()
            if self._utxos is not None and self._utxos[0] == tip:
                return self._utxos[1]
            utxos: dict[bytes, tuple[int, TxOut, bool]] = {}
            for h in range(1, height + 1):
                blk = parse_block(self.chain.lookup(self.chain.hash_at(h))[1])
                for n, tx in enumerate(blk.txs):
                    for i in tx.inputs if n else ():
                        utxos.pop(i.outpoint.to_bytes(), None)
                    for vout, o in enumerate(tx.outputs):
                        if not _unspendable(o.script):
                            utxos[tx.txid32 + vout.to_bytes(4, "little")] = (h, o, n == 0)
            self._utxos = (tip, utxos)
            return utxos

    # ---- changes ----

    def _spenders(self) -> dict[bytes, bytes]:
        """outpoint36 -> the mempool tx spending it (kept up to date as txs come and go)."""
        return self.spent_by

    def accept(self, raw: bytes, *, replace: bool = False, check: bool = True) -> bytes:
        """Add a tx (announced with A); return its txid32.

        Args:
            replace: replace the txs it conflicts with, and their descendants (RBF: R for each).
            check: refuse inputs that neither the chain's UTXO set nor the mempool has (False: take
                it anyway, as a tx whose parent the node can no longer give).

        Raises:
            Rejected: "txn-already-in-mempool", "txn-mempool-conflict" or "missing-inputs".
        """
        tx = parse_tx(raw)
        with self.lock:
            if tx.txid32 in self.txs:
                raise Rejected("txn-already-in-mempool")
            utxos, spenders = self.utxo_set(), self._spenders()
            conflicts = {spenders[i.outpoint.to_bytes()] for i in tx.inputs if i.outpoint.to_bytes() in spenders}
            if conflicts and not replace:
                raise Rejected("txn-mempool-conflict")
            for t in conflicts:
                self._remove(t)
            if check:
                for i in tx.inputs:
                    op = i.outpoint
                    parent = self.txs.get(op.txid32)
                    if op.to_bytes() not in utxos and (parent is None or op.vout >= len(parent[1].outputs)):
                        raise Rejected("missing-inputs")
            self.txs[tx.txid32] = (raw, tx, time.time())
            self.spent_by.update((i.outpoint.to_bytes(), tx.txid32) for i in tx.inputs)
            self._announce(tx.txid32, "A")
            return tx.txid32

    def evict(self, txid32: bytes) -> None:
        """Remove a tx and its descendants (size limit, expiry), each announced with R."""
        with self.lock:
            self._remove(txid32)

    def _remove(self, txid32: bytes) -> None:
        if txid32 not in self.txs:
            return
        for child in [t for t, (_, tx, _) in self.txs.items() if any(i.outpoint.txid32 == txid32 for i in tx.inputs)]:
            self._remove(child)
        self._forget(txid32)
        self._announce(txid32, "R")

    def _forget(self, txid32: bytes) -> None:
        for i in self.txs.pop(txid32)[1].inputs:
            self.spent_by.pop(i.outpoint.to_bytes(), None)

    def _announce(self, txid32: bytes, label: str) -> None:
        self.sequence += 1
        if self.zmq is not None:
            self.zmq.send(txid32, label, self.sequence)

    def restart(self) -> None:
        """The node restarted without its mempool file: empty, sequence from 1, ZMQ numbering from 0."""
        with self.lock:
            self.txs.clear()
            self.spent_by.clear()
            self.sequence = 1
            if self.zmq is not None:
                self.zmq.restart()

    def chain_moved(self) -> None:
        """Follow the chain as Core does: D per disconnected block, C per connected one; mined txs
        leave silently, conflicting ones with R (and their descendants); txs of disconnected blocks
        that are not in the new blocks come back (A), if their inputs are there."""
        with self.lock:
            active = self._active()
            fork = 0
            while fork < min(len(active), len(self._seen)) and active[fork] == self._seen[fork]:
                fork += 1
            disconnected = [_block_txs(self.chain.lookup(h)[1]) for h in self._seen[fork:]]
            for h in reversed(self._seen[fork:]):
                self._announce_block(h, "D")
            mined: set[bytes] = set()
            for h in active[fork:]:
                blk = parse_block(self.chain.lookup(h)[1])
                mined |= {tx.txid32 for tx in blk.txs}
                self._announce_block(h, "C")
            self._seen = active
            spent = self._chain_spends(active[fork:])
            for t in [t for t in self.txs if t in mined]:
                self._forget(t)
                self.sequence += 1  # Core counts removals for a block, without a message
            for t, (_, tx, _) in list(self.txs.items()):
                if t in self.txs and any(i.outpoint.to_bytes() in spent for i in tx.inputs):
                    self._remove(t)
            for txs in disconnected:  # oldest block first, its txs in block order
                for txid32, raw in txs:
                    if txid32 not in mined and txid32 not in self.txs:
                        try:
                            self.accept(raw)
                        except Rejected:
                            pass

    def _chain_spends(self, hashes: Sequence[bytes]) -> set[bytes]:
        return {i.outpoint.to_bytes() for h in hashes for tx in parse_block(self.chain.lookup(h)[1]).txs[1:] for i in tx.inputs}

    def _announce_block(self, hash32: bytes, label: str) -> None:
        if self.zmq is not None:
            self.zmq.send(hash32, label)

    # ---- what the servers answer ----

    def txids(self) -> list[bytes]:
        """The mempool's txids32, oldest first (parents before children)."""
        with self.lock:
            return list(self.txs)

    def raw(self, txid32: bytes) -> bytes | None:
        """A mempool tx's bytes (Core finds mempool txs without -txindex; confirmed ones need it: None);
        GARBAGE for a txid in `garbled` (a node or proxy answering wrongly)."""
        with self.lock:
            found = self.txs.get(txid32)
            return None if not found else GARBAGE if txid32 in self.garbled else found[0]

    def coins(self, outpoints36: Sequence[bytes], with_mempool: bool) -> list[tuple[int, TxOut, bool] | None]:
        """Each outpoint's coin (height, output, coinbase) or None: the chain's UTXO set as it is
        (without the mempool: outputs mempool txs spend are still there), or with the mempool's view
        (its outputs at MEMPOOL_HEIGHT, the outputs it spends gone)."""
        with self.lock:
            utxos = self.utxo_set()
            spenders = self._spenders() if with_mempool else {}
            out = []
            for op in outpoints36:
                coin = utxos.get(op)
                if with_mempool:
                    parent = self.txs.get(op[:32])
                    vout = int.from_bytes(op[32:], "little")
                    if coin is None and parent is not None and vout < len(parent[1].outputs):
                        coin = (MEMPOOL_HEIGHT, parent[1].outputs[vout], False)
                    if op in spenders:
                        coin = None
                out.append(coin)
            return out

    def info(self) -> dict:
        """getmempoolinfo / /rest/mempool/info.json."""
        with self.lock:
            sizes = [_vsize(raw) for raw, _, _ in self.txs.values()]
            return {
                "loaded": True, "size": len(sizes), "bytes": sum(sizes), "usage": 1000 * len(sizes),
                "total_fee": sum(self.fees().values()) / 10**8, "maxmempool": 300_000_000, "mempoolminfee": 0.00001,
                "minrelaytxfee": 0.00001, "incrementalrelayfee": 0.00001, "unbroadcastcount": 0, "fullrbf": True,
            }  # fmt: skip

    def fees(self) -> dict[bytes, int]:
        """txid32 -> fee in satoshis, for the txs whose inputs are all known."""
        with self.lock:
            utxos = self.utxo_set()
            fees = {}
            for t, (_, tx, _) in self.txs.items():
                values = []
                for i in tx.inputs:
                    coin = utxos.get(i.outpoint.to_bytes())
                    parent = self.txs.get(i.outpoint.txid32)
                    if coin is not None:
                        values.append(coin[1].amount)
                    elif parent is not None and i.outpoint.vout < len(parent[1].outputs):
                        values.append(parent[1].outputs[i.outpoint.vout].amount)
                if len(values) == len(tx.inputs):
                    fees[t] = sum(values) - sum(o.amount for o in tx.outputs)
            return fees

    def verbose(self) -> dict:
        """/rest/mempool/contents.json (verbose): txid -> Core's mempool entry fields."""
        with self.lock:
            fees, height = self.fees(), self.chain.best()[0]
            spenders = self._spenders()
            out = {}
            for t, (raw, tx, when) in self.txs.items():
                fee = fees.get(t, 0) / 10**8
                depends = sorted({i.outpoint.txid32[::-1].hex() for i in tx.inputs if i.outpoint.txid32 in self.txs})
                spentby = sorted({spenders[t + v.to_bytes(4, "little")][::-1].hex() for v in range(len(tx.outputs)) if t + v.to_bytes(4, "little") in spenders})
                out[t[::-1].hex()] = {
                    "vsize": _vsize(raw), "weight": _weight(raw), "time": int(when), "height": height,
                    "descendantcount": 1 + len(spentby), "descendantsize": _vsize(raw), "ancestorcount": 1 + len(depends),
                    "ancestorsize": _vsize(raw), "wtxid": sha256d(raw)[::-1].hex(),
                    "fees": {"base": fee, "modified": fee, "ancestor": fee, "descendant": fee},
                    "depends": depends, "spentby": spentby, "bip125-replaceable": True, "unbroadcast": False,
                }  # fmt: skip
            return out


def _block_txs(raw_block: bytes) -> list[tuple[bytes, bytes]]:
    """(txid32, raw tx) of a block's txs after the coinbase."""
    return [(tx.GetTxid(), tx.serialize()) for tx in CBlock.deserialize(raw_block).vtx[1:]]


def _weight(raw: bytes) -> int:
    stripped = CTransaction.deserialize(raw).serialize({"include_witness": False})
    return 3 * len(stripped) + len(raw)


def _vsize(raw: bytes) -> int:
    return (_weight(raw) + 3) // 4


class ZmqPublisher:
    """Core's ZMQ `sequence` publisher on tcp://127.0.0.1 (a free port); `drop()`/`restart()` as a node going away."""

    def __init__(self) -> None:
        import zmq

        self._zmq = zmq
        self._ctx = zmq.Context()
        self.number = 0
        self.lock = threading.Lock()
        self._socket = self._ctx.socket(zmq.XPUB)  # a PUB that also hears its subscribers' subscriptions
        self._socket.setsockopt(zmq.LINGER, 0)
        self.port = self._socket.bind_to_random_port("tcp://127.0.0.1")
        self.sent: list[tuple[str, bytes]] = []
        self._subscribed = False

    @property
    def url(self) -> str:
        return f"tcp://127.0.0.1:{self.port}"

    def send(self, hash32: bytes, label: str, sequence: int | None = None) -> None:
        """One message: hash32 (internal order; sent in display order), label, the mempool sequence for A/R."""
        with self.lock:
            if self._socket is None:
                return
            body = hash32[::-1] + label.encode() + (struct.pack("<Q", sequence) if sequence is not None else b"")
            self._socket.send_multipart([b"sequence", body, struct.pack("<I", self.number)])
            self.number = (self.number + 1) & 0xFFFFFFFF
            self.sent.append((label, hash32))

    def subscribed(self) -> bool:
        """Whether a subscription has reached the socket since it was bound: messages sent from then on reach
        that subscriber (one sent between its connection and its subscription is dropped, as by Core's)."""
        with self.lock:
            while self._socket is not None and self._socket.poll(0):
                self._subscribed |= self._socket.recv()[:1] == b"\x01"
            return self._subscribed

    def drop(self) -> None:
        """Close the socket: subscribers see the connection drop (messages meanwhile are lost)."""
        with self.lock:
            if self._socket is not None:
                self._socket.close(linger=0)
                self._socket = None

    def restart(self) -> None:
        """Bind again on the same port, numbering from 0 (a restarted node)."""
        self.drop()
        with self.lock:
            for _ in range(100):
                try:
                    socket = self._ctx.socket(self._zmq.XPUB)
                    socket.setsockopt(self._zmq.LINGER, 0)
                    socket.bind(self.url)
                    break
                except self._zmq.ZMQError:
                    socket.close(linger=0)
                    time.sleep(0.05)
            self._socket, self.number, self._subscribed = socket, 0, False

    def close(self) -> None:
        self.drop()
        self._ctx.term()
