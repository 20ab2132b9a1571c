"""The node's mempool beside the index: `sync --follow --mempool` keeps the store's mempool table in step.

Core gives no prevouts for a mempool tx, so each input's is looked up: a parent in the same batch
or seen recently gives its outputs; a confirmed parent's output comes from the UTXO set of the
node's tip (`utxos`: REST getutxos without checkmempool, so outputs that mempool txs spend are
still given; RPC gettxout … false); an unconfirmed parent is fetched itself (`transactions`:
REST /rest/tx, RPC getrawtransaction, which find mempool txs without -txindex). Only txs with a
taproot output are looked up. Each batch of new txs then goes through the block code in one
call (`block.block_index` over a pseudo-block of the batch: the same native path as blocks),
and its eligible txs are written in one transaction with the txids that left.

Two ways to learn of changes:
- polling: every `interval` the node's txids are listed (REST /rest/mempool/contents.json,
  RPC getrawmempool) and compared with what is known;
- ZMQ (`zmq_url`, Core's `-zmqpubsequence`): each A(cceptance)/R(emoval) message is applied as
  it arrives; C/D (a block (dis)connected) hands back to the sync loop. The full listing still
  runs every SAFETY_POLLS intervals, after each block, at a reconnection (the node may have
  restarted with an empty mempool: then no message comes) and again at its first message (once
  the subscription is live), and after a gap in the messages' numbers (a restart numbers from 0).
  A connection that drops means polling every `interval` until it is back (logged once).

The table is never trusted across runs: the first call empties it and lists everything again.
A tx the node answers with bytes that are not that tx is skipped with one log line. A tx whose
parent cannot be found is skipped, counted in `MempoolStats.missing` and tried again
at the next poll. Txs that confirm leave the table in their block's commit (`Store.append`);
replaced or evicted ones when the node no longer lists them (or at their R message); a reorg's
disconnected txs come back when the node lists them again.
"""

from __future__ import annotations

import collections
import contextlib
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from .. import block, wire
from ..errors import MalformedDataError, ServerError, SPError
from ..types import BlockData
from .store import Store

SAFETY_POLLS = 6
"""With ZMQ connected, the whole mempool is listed again every this many intervals."""
BATCH_TXS = 5_000
"""New txs looked up and computed together (one block_index call, one store transaction)."""
_RECENT = 20_000  # outputs of this many recent mempool txs are kept, so a child finds its parent without a request
_NULL_OUTPOINT = b"\x00" * 32 + b"\xff" * 4
# The pseudo-block's header and coinbase: what block_index needs around a batch of mempool txs.
_HEADER = b"\x00" * 80
_COINBASE = b"\x01\x00\x00\x00" + b"\x01" + _NULL_OUTPOINT + b"\x02\x01\x00" + b"\xff" * 4 + b"\x01" + b"\x00" * 8 + b"\x00" + b"\x00" * 4


class MempoolSource(Protocol):
    """What the mempool needs of a node: `sp_scan.node.RestNode` and `RpcNode` give it."""

    def mempool_txids(self) -> list[bytes]: ...
    def transactions(self, txids32: Sequence[bytes]) -> dict[bytes, bytes]: ...
    def utxos(self, outpoints36: Sequence[bytes]) -> list[wire.TxOut | None]: ...


@dataclass
class MempoolStats:
    """What the mempool follower did (in `SyncStats.mempool`).

    Attributes:
        txs: txids of the node's mempool known now (eligible or not).
        eligible: eligible txs of the node's mempool at the last full listing.
        added, removed: eligible txs written to and removed from the table over the run.
        missing: txs of the last batch skipped because a parent was not found (tried again).
        polls: full listings of the node's mempool.
        events: ZMQ A/R messages applied.
        zmq: "off" (no --zmq), "connected", or "polling" (not connected: dropped or not yet up).
        batch_s: seconds the last batch of new txs took (fetching, prevouts, tweaks, commit).
    """

    txs: int = 0
    eligible: int = 0
    added: int = 0
    removed: int = 0
    missing: int = 0
    polls: int = 0
    events: int = 0
    zmq: str = "off"
    batch_s: float = 0.0


def _pseudo_block(raws: Sequence[bytes]) -> bytes:
    """The raw txs as a block block_index reads: a zero header, a minimal coinbase, then the txs."""
    return b"".join([_HEADER, wire.compact_size(len(raws) + 1), _COINBASE, *raws])


def eligible_rows(raws: Sequence[bytes], prevouts: Sequence[Sequence[wire.TxOut]]) -> list[tuple[bytes, ...]]:
    """The mempool rows (Store MEMPOOL_COLUMNS) of the eligible txs among `raws`, in their order,
    computed in one `block.block_index` call (the native path blocks take).

    Args:
        raws: serialized txs.
        prevouts: per tx, the outputs its inputs spend, in input order.

    Raises:
        MalformedDataError, PrevoutsError: a tx does not parse or its prevouts do not match.
    """
    if not raws:
        return []
    data: BlockData = block.block_index(_pseudo_block(raws), wire.serialize_spent([[], *prevouts]))
    counts = memoryview(data.out_counts).cast("I")
    rows, o = [], 0
    for i, c in enumerate(counts):
        rows.append((
            data.txids[32 * i : 32 * i + 32], data.tweaks33[33 * i : 33 * i + 33],
            data.out_vouts[4 * o : 4 * (o + c)], data.out_keys[32 * o : 32 * (o + c)], data.out_values[8 * o : 8 * (o + c)],
        ))  # fmt: skip
        o += c
    return rows


def _is_taproot(script: bytes) -> bool:
    return len(script) == 34 and script[0] == 0x51 and script[1] == 0x20


class MempoolFollower:
    """Keeps a store's mempool table in step with a node (see the module doc); the sync loop calls `wait`.

    Args:
        store: the index being synced (its writer).
        source: the node.
        retry: how failing node calls are retried (`sp_scan.retry.Retry`).
        zmq_url: Core's -zmqpubsequence endpoint, e.g. tcp://127.0.0.1:28332, or None to poll.
        log: where one-line notices go (a ZMQ connection that drops or comes back, a tx skipped).

    Raises:
        ServerError: zmq_url given without pyzmq installed, or not a ZMQ endpoint.
    """

    def __init__(self, store: Store, source: MempoolSource, retry, zmq_url: str | None = None, log: Callable[[str], None] | None = None) -> None:
        self.store, self.source, self.retry = store, source, retry
        self.log = log or (lambda line: None)
        self.stats = MempoolStats()
        self.known: dict[bytes, bool] = {}  # txid32 -> eligible, for every tx of the node's mempool looked at
        self._recent: collections.OrderedDict[bytes, tuple[wire.TxOut, ...]] = collections.OrderedDict()
        self._retry: list[bytes] = []  # txs skipped for a missing parent, tried at the next wait
        self._tip: tuple[int, bytes] | None | bool = False  # the tip at the last full listing (False: none yet)
        self._last_poll = 0.0
        self._zmq = ZmqSequence(zmq_url) if zmq_url else None
        if self._zmq is not None:
            self.stats.zmq = "polling"

    def close(self) -> None:
        """Close the ZMQ socket and empty the table (nothing keeps it in step any more)."""
        if self._zmq is not None:
            self._zmq.close()
        with contextlib.suppress(SPError):  # ending on another error: that one is reported
            self.store.mempool_clear()

    # ---- the sync loop's hook ----

    def wait(self, interval: float) -> None:
        """Bring the table in step, then wait up to `interval` s, applying ZMQ messages as they come.

        Returns early when a block is (dis)connected (ZMQ), so the loop looks for blocks.

        Raises:
            ServerError: the node fails after the retries.
        """
        deadline = time.monotonic() + interval
        zmq = self._zmq
        live = zmq is not None and zmq.connected
        if self._tip != self.store.tip() or not live or time.monotonic() - self._last_poll >= SAFETY_POLLS * interval:
            self.poll()
        elif self._retry:
            self._apply(self._retry, [])
        while (left := deadline - time.monotonic()) > 0:
            if zmq is None:
                time.sleep(left)
                return
            events = zmq.receive(min(left, 1.0))
            self._zmq_state(zmq, interval)
            if zmq.resync:
                zmq.resync = False
                self.poll()
                continue
            added: dict[bytes, None] = {}
            removed: list[bytes] = []
            for label, hash32 in events:
                if label == "A":
                    added[hash32] = None
                elif label == "R":
                    if added.pop(hash32, False) is False:
                        removed.append(hash32)
            self.stats.events += sum(label in "AR" for label, _ in events)
            if added or removed:
                self._apply(list(added), removed)
            if any(label in "CD" for label, _ in events):
                return

    def _zmq_state(self, zmq: ZmqSequence, interval: float) -> None:
        state = "connected" if zmq.connected else "polling"
        if state != self.stats.zmq:
            if state == "polling":
                self.log(f"sp-scan: ZMQ {zmq.url} dropped; polling the mempool every {interval:g} s until it is back")
            elif zmq.dropped:
                self.log(f"sp-scan: ZMQ {zmq.url} is back")
            self.stats.zmq = state

    # ---- listing and applying ----

    def poll(self) -> None:
        """List the node's mempool and apply the difference with what is known (the first call
        empties the table and starts from nothing).

        Raises:
            ServerError: the node fails after the retries.
        """
        first = self._tip is False
        tip = self.store.tip()
        listed = self.retry.call(self.source.mempool_txids)
        self._last_poll = time.monotonic()
        if first:
            self.known.clear()
            self.store.mempool_clear()
        now = set(listed)
        gone = [t for t in self.known if t not in now]
        self._retry.clear()
        self._apply([t for t in listed if t not in self.known], gone)
        self._tip = tip
        self.stats.polls += 1
        self.stats.eligible = sum(self.known.values())

    def _apply(self, added: Sequence[bytes], removed: Sequence[bytes]) -> None:
        """Forget `removed`, look up and compute `added` (in batches), and write the table."""
        dropped = [t for t in removed if self.known.pop(t, False)]
        new = [t for t in dict.fromkeys(added) if t not in self.known]
        if not new:
            if dropped:
                self._write([], dropped)
            return
        self._retry = []
        for lo in range(0, len(new), BATCH_TXS):
            began = time.perf_counter()
            rows = self._batch(new[lo : lo + BATCH_TXS])
            self._write(rows, dropped)
            dropped = []
            self.stats.batch_s = time.perf_counter() - began

    def _write(self, rows: list[tuple[bytes, ...]], removed: list[bytes]) -> None:
        self.store.mempool_update(rows, removed)
        self.stats.added += len(rows)
        self.stats.removed += len(removed)
        self.stats.txs = len(self.known)

    def _batch(self, txids: Sequence[bytes]) -> list[tuple[bytes, ...]]:
        """Fetch, look up the prevouts of and compute a batch of new txids; mark them known."""
        raws = self.retry.call(self.source.transactions, txids)  # a txid gone meanwhile is simply absent
        parsed: dict[bytes, tuple[bytes, wire.RawTx]] = {}
        for txid32 in txids:
            raw = raws.get(txid32)
            if raw is None:
                continue
            try:
                tx = wire.parse_tx(raw)
            except MalformedDataError:
                tx = None
            if tx is None or tx.txid32 != txid32:
                self.known[txid32] = False  # nothing to compute
                self.log(f"sp-scan: mempool tx {txid32[::-1].hex()}: the node's answer is not this transaction; skipped")
                continue
            self._remember(txid32, tx.outputs)
            if any(_is_taproot(o.script) for o in tx.outputs):
                parsed[txid32] = (raw, tx)
            else:
                self.known[txid32] = False
        prevouts = self._prevouts([tx for _, tx in parsed.values()])
        ready_raws, ready_prevouts, ready = [], [], []
        missing = []
        for txid32, (raw, tx) in parsed.items():
            spent = [prevouts.get(i.outpoint.to_bytes()) for i in tx.inputs]
            if any(p is None for p in spent):
                missing.append(txid32)
                continue
            ready.append(txid32)
            ready_raws.append(raw)
            ready_prevouts.append(spent)
        self.stats.missing = len(missing)
        self._retry.extend(missing)
        try:
            rows = eligible_rows(ready_raws, ready_prevouts)
        except SPError as exc:
            raise ServerError(f"mempool txs do not compute with the prevouts the node gave ({exc})") from None
        eligible = {r[0] for r in rows}
        for txid32 in ready:
            self.known[txid32] = txid32 in eligible
        return rows

    def _remember(self, txid32: bytes, outputs: tuple[wire.TxOut, ...]) -> None:
        self._recent[txid32] = outputs
        self._recent.move_to_end(txid32)
        if len(self._recent) > _RECENT:
            self._recent.popitem(last=False)

    def _prevouts(self, txs: Sequence[wire.RawTx]) -> dict[bytes, wire.TxOut]:
        """outpoint36 -> the output it spends, for every input of `txs` whose output was found."""
        found: dict[bytes, wire.TxOut] = {}
        confirmed: list[bytes] = []
        parents: dict[bytes, None] = {}
        for tx in txs:
            for i in tx.inputs:
                op = i.outpoint
                outputs = self._recent.get(op.txid32)
                if outputs is not None:
                    if op.vout < len(outputs):
                        found[op.to_bytes()] = outputs[op.vout]
                elif op.txid32 in self.known:
                    parents[op.txid32] = None  # unconfirmed: fetch the parent itself
                else:
                    confirmed.append(op.to_bytes())
        confirmed = list(dict.fromkeys(confirmed))
        for op36, out in zip(confirmed, self.retry.call(self.source.utxos, confirmed) if confirmed else []):
            if out is None:
                parents[op36[:32]] = None  # not confirmed (or spent by a block): perhaps a parent new to the mempool
            else:
                found[op36] = out
        if parents:
            for txid32, raw in self.retry.call(self.source.transactions, list(parents)).items():
                try:
                    outputs = wire.parse_tx(raw).outputs
                except MalformedDataError:
                    continue
                self._remember(txid32, outputs)
        for tx in txs:
            for i in tx.inputs:
                op = i.outpoint
                outputs = self._recent.get(op.txid32)
                if op.to_bytes() not in found and outputs is not None and op.vout < len(outputs):
                    found[op.to_bytes()] = outputs[op.vout]
        return found


class ZmqSequence:
    """A subscription to Core's ZMQ `sequence` topic, with its connection state.

    A message is three frames: b"sequence"; a 32-byte hash (display order) then a label byte
    (C/D: block (dis)connected; A/R: tx added to/removed from the mempool, then its u64 LE mempool
    sequence); a u32 LE message number that counts every message the publisher sent.

    Attributes:
        url: the endpoint.
        connected: True while the TCP connection is up.
        dropped: True once a connection was lost.
        resync: set when messages may have been missed or the node restarted (a reconnection, the first
            message after a (re)connection, a gap in message numbers): the caller lists the mempool
            again and clears it.

    Raises:
        ServerError: pyzmq is not installed, or the URL is not a ZMQ endpoint.
    """

    def __init__(self, url: str) -> None:
        try:
            import zmq
        except ImportError:
            raise ServerError("--zmq needs pyzmq: pip install 'sp-scan[zmq]'") from None
        self._zmq = zmq
        self.url = url
        self.connected = self.dropped = False
        self.resync = False
        self._fresh = True
        self._number: int | None = None
        self._ctx = zmq.Context()
        self._sub = self._ctx.socket(zmq.SUB)
        self._sub.setsockopt(zmq.SUBSCRIBE, b"sequence")
        self._sub.setsockopt(zmq.RCVHWM, 0)
        self._sub.setsockopt(zmq.LINGER, 0)
        self._monitor = self._sub.get_monitor_socket(zmq.EVENT_CONNECTED | zmq.EVENT_DISCONNECTED)
        try:
            self._sub.connect(url)
        except zmq.ZMQError as exc:
            self.close()
            raise ServerError(f"--zmq {url}: {exc}") from None
        self._poller = zmq.Poller()
        self._poller.register(self._sub, zmq.POLLIN)
        self._poller.register(self._monitor, zmq.POLLIN)

    def close(self) -> None:
        """Close the sockets."""
        self._sub.disable_monitor()
        self._monitor.close(linger=0)
        self._sub.close(linger=0)
        self._ctx.term()

    def receive(self, timeout: float) -> list[tuple[str, bytes]]:
        """Wait up to `timeout` s for messages; return every one waiting as (label, hash32 internal order)."""
        from zmq.utils.monitor import recv_monitor_message

        zmq = self._zmq
        ready = dict(self._poller.poll(max(0, int(timeout * 1000))))
        if self._monitor in ready:
            while self._monitor.poll(0):
                event = recv_monitor_message(self._monitor)["event"]
                if event == zmq.EVENT_CONNECTED:
                    self.connected, self._fresh = True, True
                    self.resync |= self.dropped  # perhaps a restarted node, whose empty mempool announces nothing
                elif event == zmq.EVENT_DISCONNECTED:
                    self.connected, self.dropped = False, True
        events = []
        while self._sub.poll(0):
            frames = self._sub.recv_multipart()
            if len(frames) != 3 or frames[0] != b"sequence" or len(frames[1]) not in (33, 41) or len(frames[2]) != 4:
                continue
            number = struct.unpack("<I", frames[2])[0]
            if self._fresh or (self._number is not None and number != (self._number + 1) & 0xFFFFFFFF):
                self.resync, self._fresh = True, False
            self._number = number
            events.append((chr(frames[1][32]), frames[1][31::-1]))
        return events
