"""The wallet's sync loop: a source's blocks, checked, scanned, and committed with the synced height.

One loop, like the index's (`sp_scan.index.sync`): before each round the stored tip hash is
compared with the source's block at that height; when they differ, the stored hashes are walked
down to the highest one the source still has and everything above it is rolled back (outputs
found there, spends seen there), then the loop rescans from there: when the source gives headers
and the wallet kept their nBits, only if the source's branch has more chain work than the wallet's
(Core follows the most work; a branch with no more is waited for with `follow`, else refused). A
source whose chain is shorter than the wallet's is waited for (`follow`) or refused; it never
shrinks the wallet. Every block's hash is checked against the network's checkpoint at its height,
a header a source gives must hash to it and meet its own nBits, and a bare hash from a source that
proves nothing must meet the network's proof-of-work limit (`sp_scan.headers`).

Per block: the tweaks and outputs the source gives are checked (`BlockTxs.check`), scanned with
the native batch scan (`sp_scan.scan.scan_tweaks_packed`), then the block's spends of the wallet's
unspent outputs are asked for (outputs found in the block included) and checked to be outputs the
wallet asked about. The block then goes into the store's open batch with its hash as the new tip;
a batch commits at once when the block changed the wallet, else every `COMMIT_SECONDS`, and
always when the loop ends, fails, is interrupted or cancelled: a killed sync resumes from its last commit.
The events (`sp_scan.wallet.events`) of what a commit changed are told after it: outputs found and spent,
those a fork rolled back, unconfirmed payments arriving and leaving, pending spends a block settled.

A cancel token (a `threading.Event`) is checked before every block and round, wakes every wait (the
follow interval, a retry's backoff: `sp_scan.retry.stopping`), and ends the sync as if it were done:
what it finished is committed and its stats returned (`WalletSyncStats.cancelled`).

Outputs found in a block its source proves (`SourceBlock.proven`) are stored as verified; those a
BlindBit server alone vouches for are proven at once by the `Prover` given (`--verify-with`), the
block refused when it does not show them with that key and amount, or else stored as unverified.
Before the first round, the wallet's unverified outputs are shown to the prover (the one given, or the
source itself when it proves outputs): those it proves become verified with the amount of their block;
those a prover that sees whole blocks does not show in their block (or whose block it does not have)
are deleted: no later sync leaves a forged or inflated coin counted as confirmed.
"""

from __future__ import annotations

import bisect
import dataclasses
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .. import scan as sp_scan
from ..errors import HeightError, InvalidKeyError, ServerError, SourceError, WalletStoreError, WrongNetworkError
from ..headers import Header, fork_point, meets, work
from ..retry import stopping
from ..network import get as get_network
from ..scan import Receiver
from .sources import MAX_BLOCK_TXS, BlockTxs, Keys0, Prover, WalletSource, SourceBlock
from .events import (
    OutputFound, OutputRolledBack, OutputSpent, PendingSpendChanged, SpendRolledBack, UnconfirmedArrived, UnconfirmedLeft, WalletEvent,
)  # fmt: skip
from .store import KEEP_HASHES, Found, WalletOutput, WalletStore

COMMIT_SECONDS = 1.0
"""Blocks that change nothing are committed together at most this often."""
MAX_UNLINKED = 5
"""Rounds in a row whose first block does not link to the wallet's tip while the source still has that tip."""


@dataclass
class WalletSyncStats:
    """What a wallet sync did so far (given to the progress callback after every block and while waiting).

    Attributes:
        height: the wallet's synced height (None before its first block).
        target: the height being synced to.
        start: the first height this run scanned or will scan.
        blocks: blocks scanned; found, spent: outputs found and spends seen.
        reorgs, rolled_back: forks followed and blocks they rolled back.
        waiting: True while following and caught up, or while the source is behind the wallet.
        unconfirmed: outputs paying the wallet in the source's mempool (with mempool=True).
        settled: pending spends a block ended (mined, or a conflicting spend mined).
        unverified: outputs found that only the source's word holds (BlindBit without a prover).
        proven, refuted: unverified outputs of earlier syncs the prover proved, and those it showed do not exist.
        cancelled: True when the cancel token ended the sync.
    """

    height: int | None = None
    target: int = 0
    start: int = 0
    blocks: int = 0
    found: int = 0
    spent: int = 0
    reorgs: int = 0
    rolled_back: int = 0
    waiting: bool = False
    unconfirmed: int = 0
    settled: int = 0
    unverified: int = 0
    proven: int = 0
    refuted: int = 0
    cancelled: bool = False
    began: float = field(default_factory=time.monotonic)


def keys0(tweaks33: bytes, receiver: Receiver, threads: int = 1) -> Keys0:
    """The k = 0 output keys of every tweak for the receiver's address and labels (see `Keys0`).

    Raises:
        InvalidKeyError: a tweak that is not a point.
    """
    return Keys0(sp_scan.k0_outputs(tweaks33, 33, receiver, threads), 1 + len(receiver.labels))


def pair(txs: BlockTxs, tweaks33: bytes, keys: Keys0) -> tuple[BlockTxs, list[int]]:
    """Give each tx of an unpaired answer (BlindBit's /utxos) the tweak whose k = 0 key one of its outputs is.

    Returns:
        (the txs that hold such a key, with their tweaks, in the tweaks' order; each one's tweak
        number, its position in the block).
    """
    owner: dict[bytes, int] = {}
    zero = bytes(32)
    for j, key in enumerate(keys):
        if key != zero:
            owner.setdefault(key, j // keys.per_tweak)
    firsts = txs.firsts()
    picked = []
    for i in range(txs.n_tx):
        hits = [owner[k] for k in (txs.outputs32[32 * o : 32 * o + 32] for o in range(firsts[i], firsts[i + 1])) if k in owner]
        if hits:
            picked.append((min(hits), i))
    picked.sort()
    parts = [(t, txs.txids[32 * i : 32 * i + 32], firsts[i], firsts[i + 1]) for t, i in picked]
    paired = BlockTxs(
        b"".join(p[1] for p in parts),
        b"".join(tweaks33[33 * p[0] : 33 * p[0] + 33] for p in parts),
        33,
        struct.pack(f"<{len(parts)}I", *(b - a for _, _, a, b in parts)),
        b"".join(txs.outputs32[32 * a : 32 * b] for _, _, a, b in parts),
        b"".join(txs.vouts[4 * a : 4 * b] for _, _, a, b in parts),
        b"".join(txs.amounts[8 * a : 8 * b] for _, _, a, b in parts),
    )
    return paired, [p[0] for p in parts]


def scan_txs(txs: BlockTxs, receiver: Receiver, threads: int, positions: list[int] | None = None) -> list[Found]:
    """The outputs of paired `txs` paying the receiver, in tx then vout order.

    Args:
        positions: each tx's position in its block (default: its index in txs).

    Raises:
        InvalidKeyError: a tweak that is not a point (the message names the tx).
    """
    if not txs.n_tx:
        return []
    found = sp_scan.scan_tweaks_packed(txs.tweaks, txs.tweak_width, txs.outputs32, txs.counts, receiver, threads)
    firsts, vouts, amounts = txs.firsts(), memoryview(txs.vouts).cast("I"), memoryview(txs.amounts).cast("Q")
    out = []
    for tx, j, tweak32, label in found:
        o = firsts[tx] + j
        position = tx if positions is None else positions[tx]
        out.append(Found(txs.txids[32 * tx : 32 * tx + 32], vouts[o], position, amounts[o], txs.outputs32[32 * o : 32 * o + 32], tweak32, label))
    return sorted(out, key=lambda f: (f.position, f.vout))


class _Fork(Exception):
    """A block that does not link to the wallet's tip: the source changed branches during the round."""


class _LessWork(Exception):
    """The source's branch has no more chain work than the wallet's: not followed."""


class WalletSyncer:
    """One sync run of a wallet store from a source (see `run`)."""

    def __init__(
        self,
        store: WalletStore,
        source: WalletSource,
        receiver: Receiver,
        *,
        threads: int = 1,
        progress: Callable[[WalletSyncStats], None] | None = None,
        emit: Callable[[WalletEvent], None] | None = None,
        prover: Prover | None = None,
        cancel: threading.Event | None = None,
    ) -> None:
        self.store, self.source, self.receiver, self.threads = store, source, receiver, threads
        self.prover: Prover | None = prover or (source if source.proves else None)
        self.progress = progress or (lambda stats: None)
        self.emit = emit or (lambda event: None)
        self.cancel = cancel or threading.Event()
        self.stats = WalletSyncStats()
        self._unspent: dict[bytes, WalletOutput] = {}
        self._unconfirmed: dict[bytes, WalletOutput] = {}
        self.pow = get_network(store.network).pow
        self._checkpoint32 = bytes.fromhex(self.pow.checkpoint[1])[::-1]

    def run(self, stop: int | None, follow: bool, interval: float, mempool: bool, rescan_from: int | None = None) -> WalletSyncStats:
        """Sync to `stop` (default: the source's tip, re-read every round); with `follow`, keep polling.

        Args:
            rescan_from: first forget every block from this height up (damaged rows among them), then sync them again.

        Raises:
            WrongNetworkError: the source (or verify_with) is on another network.
            WalletStoreError: another process syncs the wallet.
            HeightError: stop is beyond the source's tip (without follow).
            ServerError: the source fails (after the retries it makes itself), or is behind the wallet (without follow).
            SourceError: an answer the checks refuse (a tweak that is not a point among them).
            Every error's message ends with the height the wallet is at and where the next sync resumes. A request
            the cancel token cut short raises nothing: the stats are returned.
        """
        try:
            with stopping(self.cancel):
                return self._run(stop, follow, interval, mempool, rescan_from)
        except ServerError:
            if not self.cancel.is_set():
                raise
            self.stats.cancelled = True
            return self.stats

    def _run(self, stop: int | None, follow: bool, interval: float, mempool: bool, rescan_from: int | None) -> WalletSyncStats:
        try:
            network = self.source.network()
            if network != self.store.network:
                raise WrongNetworkError(f"{self.store.path} is a wallet for {self.store.network}; {self.source.name} is on {network}")
            if self.prover is not None and self.prover is not self.source and self.prover.network() != network:
                raise WrongNetworkError(f"{self.store.path} is a wallet for {network}; {self.prover.name} is on {self.prover.network()}")
            self.store.lock_writer()
            if rescan_from is not None:
                self._rescan(rescan_from)
            if self.prover is not None:
                self._settle()
            self._unspent, self._unconfirmed = {}, {}
            for o in self.store.outputs(unspent=True):
                (self._unspent if o.height is not None else self._unconfirmed)[o.outpoint36] = o
            tip = self.store.tip()
            self.stats.height = tip[0] if tip else None
            self.stats.start = tip[0] + 1 if tip else self.store.birthday
            return self._loop(stop, follow, interval, mempool)
        except (ServerError, SourceError, HeightError) as exc:
            raise type(exc)(f"{exc} ({self.resume_hint()})") from None

    def _rescan(self, height: int) -> None:
        """Forget the blocks from `height` up; below the hashes the store keeps, the source names block height - 1."""
        keep = max(height, self.store.birthday) - 1
        tip = self.store.hashes(keep + 1, 1)
        anchor = None if keep < self.store.birthday or (tip and tip[0][0] == keep) else self.source.block_hash(keep)
        self._forget_above(keep, anchor)

    def _forget_above(self, keep: int, anchor32: bytes | None = None) -> None:
        """Roll the store back to height `keep` (see `WalletStore.rollback_to`), then tell what that undid (nothing
        when a row is damaged: a rescan repairing it cannot tell what the damaged rows held)."""
        try:
            before = self.store.outputs()
        except WalletStoreError:
            before = []
        self.stats.rolled_back += self.store.rollback_to(keep, anchor32)
        events: list[WalletEvent] = []
        for o in before:
            if o.height is None:
                events.append(UnconfirmedLeft(o, "reorg"))
            elif o.height > keep:
                events.append(OutputRolledBack(o))
            elif o.spent_height is not None and o.spent_height > keep:
                events.append(SpendRolledBack(o))
        self._unspent = {o.outpoint36: o for o in self.store.outputs(unspent=True) if o.height is not None}
        self._unconfirmed = {}
        self._tell(events)

    def _settle(self) -> None:
        """Show the wallet's unverified outputs to the prover (see the module docstring)."""
        by_block: dict[tuple[int, bytes], list[WalletOutput]] = {}
        for o in self.store.outputs():
            if o.height is not None and not o.verified:
                by_block.setdefault((o.height, o.block_hash32), []).append(o)
        proven, refuted = {}, []
        top = self.prover.tip_height() if by_block else -1
        for (height, hash32), outputs in sorted(by_block.items()):
            if height > top:
                break
            try:
                shown = self.prover.outputs(height, hash32, sorted({o.txid32 for o in outputs}))
            except HeightError:
                continue  # a prover that does not hold the block proves nothing of it
            for o in outputs:
                real = {vout: (key, amount) for vout, key, amount in (shown or {}).get(o.txid32, ())}.get(o.vout)
                if real is not None and real[0] == o.output32:
                    proven[o.outpoint36] = real[1]
                elif self.prover.complete:
                    refuted.append(o.outpoint36)
        if proven or refuted:
            self.store.settle_outputs(proven, refuted)
            gone = set(refuted)
            self._tell([OutputRolledBack(o) for outputs in by_block.values() for o in outputs if o.outpoint36 in gone])
        self.stats.proven, self.stats.refuted = len(proven), len(refuted)

    def _prove(self, block: SourceBlock, found: list[Found]) -> None:
        """Prove what an unproven source found in a block with the prover given.

        Raises:
            ServerError: the prover has another block at that height (the two chains differ: sync again).
            SourceError: the prover does not show an output with the key and amount the source gave.
        """
        shown = self.prover.outputs(block.height, block.hash32, sorted({f.txid32 for f in found}))
        if shown is None:
            raise ServerError(f"{self.prover.name} has another block {block.height} than {self.source.name}'s {block.hash32[::-1].hex()} (a fork: sync again)")
        for f in found:
            real = {vout: (key, amount) for vout, key, amount in shown.get(f.txid32, ())}.get(f.vout)
            if real is None or real[0] != f.output32:
                what = "does not show it there" if self.prover.complete else "cannot prove it there"
            elif real[1] != f.amount:
                what = f"shows {real[1]:,} sats"
            else:
                continue
            raise SourceError(f"{self.source.name} lists output {f.txid32[::-1].hex()}:{f.vout} of {f.amount:,} sats in block {block.height}; {self.prover.name} {what}")

    def resume_hint(self) -> str:
        """Where the wallet is, and the height the next sync starts at."""
        tip = self.store.tip()
        if tip is None:
            return f"the wallet has synced no block; sync again to start at {self.store.birthday}"
        return f"the wallet is synced to height {tip[0]}; sync again to resume at {tip[0] + 1}"

    def _wait(self, interval: float) -> None:
        self.stats.waiting = True
        self.progress(self.stats)
        self.cancel.wait(interval)

    def _loop(self, stop: int | None, follow: bool, interval: float, mempool: bool) -> WalletSyncStats:
        unlinked = 0
        while True:
            if self.cancel.is_set():
                self.stats.cancelled = True
                return self.stats
            source_tip = self.source.tip_height()
            tip = self.store.tip()
            if stop is not None and stop > source_tip and not follow:
                raise HeightError(f"height {stop} is beyond {self.source.name}'s tip {source_tip}")
            if tip is not None and source_tip < tip[0]:
                if not follow:
                    raise ServerError(f"{self.source.name}'s chain ends at height {source_tip}, below the wallet's {tip[0]}: nothing is rolled back; --follow waits for it")
                self._wait(interval)
                continue
            if tip is not None and self.source.block_hash(tip[0]) != tip[1]:
                try:
                    self._roll_back(tip, source_tip)
                except _LessWork as exc:
                    if not follow:
                        raise ServerError(f"{exc}: nothing is rolled back; --follow waits for it to have more") from None
                    self._wait(interval)
                continue
            nxt = tip[0] + 1 if tip else self.store.birthday
            target = source_tip if stop is None else min(stop, source_tip)
            self.stats.target, self.stats.waiting = target, False
            if nxt <= target:
                done = self.stats.blocks
                try:
                    self._blocks(nxt, target, tip[1] if tip else None)
                except _Fork as exc:
                    unlinked = 1 if self.stats.blocks > done else unlinked + 1
                    if unlinked > MAX_UNLINKED:
                        raise ServerError(f"{exc}, while the wallet's block {tip[0]} is still its own; seen {unlinked} times (a stale cache in front of it?)") from None
                continue  # look again: the source may have moved on or switched branches
            if mempool:
                self._mempool()
            if not follow or (stop is not None and nxt > stop):
                return self.stats
            self._wait(interval)

    def _roll_back(self, tip: tuple[int, bytes], source_tip: int) -> None:
        """The source has another block at the wallet's tip: forget every block above the highest stored one it still has
        (`fork_point`; the source retries its calls itself).

        Raises:
            _LessWork: the source's branch above that block has no more chain work than the wallet's.
        """
        keep = fork_point(self.store.hashes(tip[0], KEEP_HASHES), self.source.block_hash)
        if keep is None:
            keep = self.store.birthday - 1
        bits = self.store.bits(keep)
        theirs = self.source.work(keep + 1, source_tip) if bits is not None else None
        if theirs is not None and theirs <= sum(map(work, bits)):
            raise _LessWork(f"{self.source.name}'s chain leaves the wallet's above block {keep} with no more work than the wallet's {len(bits)} block(s)")
        self._forget_above(keep)
        self.stats.reorgs += 1
        tip = self.store.tip()
        self.stats.height = tip[0] if tip else None

    def _blocks(self, start: int, stop: int, prev32: bytes | None) -> None:
        """Scan and store heights start..stop from the source, committing as the module says.

        Raises:
            _Fork: a block names another parent than the wallet's tip.
        """
        blocks = self.source.blocks(start, stop)
        expected, last_commit, done = start, time.monotonic(), []
        try:
            for block in blocks:
                if self.cancel.is_set():
                    break
                if block.height != expected:
                    raise SourceError(f"{self.source.name} gave block {block.height} where {expected} was asked for")
                if len(block.hash32) != 32 or (block.prev32 is not None and len(block.prev32) != 32):
                    raise SourceError(f"{self.source.name}: block {block.height}'s hash is not 32 bytes")
                if block.prev32 is not None and prev32 is not None and block.prev32 != prev32:
                    raise _Fork(f"{self.source.name}'s block {block.height} names {block.prev32[::-1].hex()} as its parent, not the wallet's {prev32[::-1].hex()}")
                bits = self._check_hash(block)
                found, spends = self._scan(block)
                verified = block.proven or not found or self.prover is not None
                if found and not block.proven and self.prover is not None:
                    self._prove(block, found)
                pending = {p.id: p for p in self.store.pending()} if spends else {}
                ended = self.store.append(block.height, block.hash32, found, [(s.outpoint36, s.txid32) for s in spends], bits=bits, verified=verified)
                self.stats.settled += len(ended)
                outputs = [WalletOutput(block.height, f.txid32, f.vout, f.amount, f.output32, f.tweak32, f.label, block.hash32, verified=verified) for f in found]
                self._unspent.update((o.outpoint36, o) for o in outputs)
                done.extend(UnconfirmedLeft(self._unconfirmed.pop(o.outpoint36), "confirmed") for o in outputs if o.outpoint36 in self._unconfirmed)
                done.extend(OutputFound(o) for o in outputs)
                done.extend(OutputSpent(self._spent(s.outpoint36, s.txid32, block.height)) for s in spends)
                done.extend(PendingSpendChanged(pending[pid], "settled") for pid in ended if pid in pending)
                if done or time.monotonic() - last_commit >= COMMIT_SECONDS:
                    self._commit(done)
                    last_commit = time.monotonic()
                s = self.stats
                s.height, s.blocks, s.found, s.spent = block.height, s.blocks + 1, s.found + len(found), s.spent + len(spends)
                s.unverified += 0 if verified else len(found)
                self.progress(s)
                expected, prev32 = expected + 1, block.hash32
        finally:
            close = getattr(blocks, "close", None)
            if close is not None:
                close()  # stops a source's fetching ahead
            self._commit(done)

    def _check_hash(self, block: SourceBlock) -> int | None:
        """Check a block's hash against the checkpoint, its header or the network's limit (see the module docstring);
        the header's nBits, or None without one.

        Raises:
            SourceError: a check fails.
        """
        what = f"{self.source.name}'s block {block.height}"
        if block.height == self.pow.checkpoint[0] and block.hash32 != self._checkpoint32:
            raise SourceError(f"{what} is not the checkpoint {self.pow.checkpoint[1]}: another chain")
        if block.header80 is not None:
            header = Header.parse(block.header80, f"{what}'s header")
            if header.hash32 != block.hash32 or (block.prev32 is not None and header.prev32 != block.prev32):
                raise SourceError(f"{what}'s header is not the block it names")
            if not meets(header.hash32, header.bits, self.pow):
                raise SourceError(f"{what}'s header does not meet its own nBits {header.bits:08x}")
            return header.bits
        if not block.proven and int.from_bytes(block.hash32, "little") > self.pow.limit:
            raise SourceError(f"{what}'s hash {block.hash32[::-1].hex()} is above the network's proof-of-work limit: no block has it")
        return None

    def _commit(self, done: list[WalletEvent]) -> None:
        """Commit the open batch, then tell the events of what it changed."""
        self.store.commit()
        self._tell(done)

    def _tell(self, events: list[WalletEvent]) -> None:
        for event in events:
            self.emit(event)
        events.clear()

    def _spent(self, outpoint36: bytes, txid32: bytes | None, height: int) -> WalletOutput:
        return dataclasses.replace(self._unspent.pop(outpoint36), spent_height=height, spent_txid32=txid32)

    def _scan(self, block: SourceBlock) -> tuple[list[Found], list]:
        """(outputs found, spends of the wallet's outputs) of one block, every answer checked.

        Raises:
            SourceError: an answer the checks refuse (a tweak that is not a point among them).
        """
        what = f"block {block.height} from {self.source.name}"
        tweaks33 = block.tweaks33
        if len(tweaks33) % 33 or len(tweaks33) // 33 > MAX_BLOCK_TXS:
            raise SourceError(f"{what}: {len(tweaks33)} bytes of tweaks")
        try:
            keys = keys0(tweaks33, self.receiver, self.threads) if block.wants_keys0 and tweaks33 else None
            txs = block.txs(keys)
            txs.check(what)
            positions = None
            if txs.tweak_width == 0 and txs.n_tx:
                if keys is None:
                    raise SourceError(f"{what}: transactions without tweaks from a source that does not filter")
                txs, positions = pair(txs, tweaks33, keys)
            found = scan_txs(txs, self.receiver, self.threads, positions)
        except InvalidKeyError as exc:
            raise SourceError(f"{what}: {exc}") from None
        if len({(f.txid32, f.vout) for f in found}) != len(found):
            raise SourceError(f"{what}: an output paying the wallet is listed twice")
        keys = {op: o.output32 for op, o in self._unspent.items()} | {f.txid32 + struct.pack("<I", f.vout): f.output32 for f in found}
        asked = sorted(keys)
        spends = block.spends(asked, [keys[op] for op in asked]) if asked else []
        seen = set()
        for s in spends:
            i = bisect.bisect_left(asked, s.outpoint36)
            if i == len(asked) or asked[i] != s.outpoint36 or s.outpoint36 in seen:
                raise SourceError(f"{what}: a spend of an output the wallet did not ask about")
            seen.add(s.outpoint36)
        return found, spends

    def _mempool(self) -> None:
        """Replace the wallet's unconfirmed outputs with those among the source's mempool txs."""
        txs = self.source.mempool()
        if txs is None:
            return
        txs.check(f"the mempool of {self.source.name}")
        if txs.tweak_width == 0 and txs.n_tx:
            raise SourceError(f"the mempool of {self.source.name}: transactions without tweaks")
        found = scan_txs(txs, self.receiver, self.threads)
        self.store.set_unconfirmed(found)
        now = {o.outpoint36: o for o in self.store.outputs() if o.height is None}
        by_key = {o.output32: o for o in now.values()}
        events: list[WalletEvent] = []
        for op, o in self._unconfirmed.items():
            if op not in now:
                replacement = by_key.get(o.output32)
                events.append(UnconfirmedLeft(o, "replaced", replacement) if replacement is not None else UnconfirmedLeft(o, "evicted"))
        events.extend(UnconfirmedArrived(o) for op, o in now.items() if op not in self._unconfirmed)
        self._unconfirmed = now
        self._tell(events)
        self.stats.unconfirmed = len(found)
