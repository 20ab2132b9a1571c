"""Server-side scanning for subscribed wallets: shared passes over the index, live blocks, reorgs, mempool.

One worker thread owns every scan. The index is cut into a fixed grid of partitions (partition_blocks
heights each, from the index's first height); each turn the worker reads one partition and scans it
for every watch whose next height lies in it, so watches over the same range share each read, as
`index scan --wallets` does. The partition most watches wait for goes first (so one that started a
moment earlier is caught up with and then shares), equals in elevator order (the lowest at or above
the last one, then around again), so no watch waits for ever. A watch delivers
its history in height order, then `progress` 1.0, then each new block as the index's sync commits
it. A reorg sends every watch whose scan reached the fork back to it. The mempool the index holds
(`Index.mempool_tweaks`, kept by `sync --follow --mempool`) is scanned for caught-up watches: each
paying transaction is delivered once at height 0 while it stays there, and again with its height
once a block confirms it (Frigate's new-block scan reports every paying tx of the new blocks).

Keys stay in the watches (connection memory) only; the native copy of a watch's keys is wiped by
the worker once the watch is dropped (`native.release_scanner`), never while a scan uses it.
"""

from __future__ import annotations

import bisect
import logging
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from sp_scan import native
from sp_scan.errors import HeightError, IndexStoreError, InvalidKeyError
from sp_scan.index import Index, Partition
from sp_scan.index.scan import DEFAULT_PARTITION_BLOCKS, scan_partition_txs
from sp_scan.scan import Receiver, scan_tweaks
from sp_scan.types import MempoolTx

log = logging.getLogger("sp_scan.server.electrum")

POLL_SECONDS = 0.5
"""How often an idle worker looks for new blocks, reorgs and mempool transactions."""
REORG_WINDOW = 1_000
"""Blocks below the tip whose hashes are remembered to find a fork (deeper reorgs rescan from there)."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One transaction paying a watch: Frigate's history entry (height 0 for a mempool transaction)."""

    height: int
    txid32: bytes
    tweak33: bytes

    def sort_key(self) -> tuple:
        """Frigate's order: by height then display txid, mempool (height 0) last."""
        return (self.height == 0, self.height, self.txid32[::-1])


Deliver = Callable[[list[Entry], float], None]
"""Called on the worker thread with a watch's new entries (sorted) and its progress, 1.0 once caught up."""


@dataclass(eq=False)
class Watch:
    """A subscribed wallet's scan: history from `start` to `end` (default: the tip when it starts), then live.

    Attributes:
        receiver: the keys (connection memory only).
        start: first height of the history scan.
        end: last height of the history scan, or None for the tip at subscribe time.
        deliver: where entries go (see `Deliver`).
        fail: called with a message when the watch cannot go on (a damaged index).
    """

    receiver: Receiver
    start: int
    end: int | None
    deliver: Deliver
    fail: Callable[[str], None]
    cursor: int = field(init=False)
    target: int | None = field(init=False, default=None)
    live: bool = field(init=False, default=False)
    cancelled: bool = field(init=False, default=False)
    mempool_seen: set[bytes] = field(init=False, default_factory=set)

    def __post_init__(self) -> None:
        self.cursor = self.start

    def progress(self) -> float:
        """The share of the history scanned, below 1.0 until it is done."""
        if self.live or self.target is None:
            return 1.0 if self.live else 0.0
        span = self.target - self.start + 1
        done = min(self.cursor, self.target + 1) - self.start
        return min(round(done / span, 4), 0.9999) if span > 0 else 0.9999


class ScanService:
    """The worker that scans the index for every watch.

    Args:
        db: the index file (opened read-only in the worker).
        threads: native scanning threads per scan.
        partition_blocks: heights per grid partition (the read and scan unit).
        mempool: also scan the index's mempool table for caught-up watches.
        poll: seconds between looks at the index's tip (and mempool) when idle.
    """

    def __init__(
        self, db, threads: int = 1, partition_blocks: int = DEFAULT_PARTITION_BLOCKS, mempool: bool = True, poll: float = POLL_SECONDS
    ) -> None:
        self.db, self.threads, self.partition_blocks, self.mempool, self.poll = db, threads, partition_blocks, mempool, poll
        self._mempool_version = 0
        self._mempool_txs: tuple[MempoolTx, ...] = ()
        self._watches: list[Watch] = []
        self._dropped: list[Watch] = []
        self._wake = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._seen: dict[int, bytes] = {}
        self._sweep = 0
        self.passes = 0
        """Partitions read so far (each scanned for all the watches in it): for tests and benches."""

    # --- called from any thread ---

    def start(self) -> None:
        """Start the worker thread."""
        self._thread = threading.Thread(target=self._run, name="sp-scan-electrum-scan", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop the worker after its current scan and wipe the native keys of every watch."""
        with self._wake:
            self._stopping = True
            self._dropped.extend(self._watches)
            self._watches.clear()
            self._wake.notify()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._release()

    def add(self, watch: Watch) -> Watch:
        """Start scanning for `watch`."""
        with self._wake:
            self._watches.append(watch)
            self._wake.notify()
        return watch

    def drop(self, watch: Watch) -> None:
        """Stop scanning for `watch`: nothing more is delivered, its native keys are wiped by the worker."""
        with self._wake:
            watch.cancelled = True
            if watch in self._watches:
                self._watches.remove(watch)
                self._dropped.append(watch)
            self._wake.notify()

    @property
    def watch_count(self) -> int:
        return len(self._watches)

    # --- the worker ---

    def _run(self) -> None:
        index = None
        reader = ThreadPoolExecutor(1, thread_name_prefix="sp-scan-electrum-read")
        ahead: tuple[tuple[int, int], Future] | None = None
        try:
            while True:
                self._release()
                with self._wake:
                    if self._stopping:
                        return
                try:
                    if index is None:
                        index = Index.open(self.db, readonly=True)
                    worked, ahead = self._turn(index, reader, ahead)
                    if worked:
                        continue
                except (IndexStoreError, HeightError) as exc:  # a reorg in progress, or the file went away
                    log.warning("electrum scan: %s; retrying", exc)
                    ahead = None
                with self._wake:
                    if not self._stopping:
                        self._wake.wait(self.poll)
        finally:
            reader.shutdown(wait=True)
            if index is not None:
                index.close()

    def _release(self) -> None:
        with self._wake:
            dropped, self._dropped = self._dropped, []
        for watch in dropped:
            if native.ENABLED:
                native.release_scanner(watch.receiver)

    def _turn(self, index: Index, reader: ThreadPoolExecutor, ahead) -> tuple[bool, tuple | None]:
        """Scan one partition for the watches in it; return (whether there was one, the read-ahead)."""
        tip = index.tip()
        if tip is None:
            return False, None
        tip_height, base = tip[0], index.first_height
        self._check_reorg(index, tip_height)
        with self._wake:
            watches = list(self._watches)
        fresh_mempool = self._read_mempool(index)
        for watch in watches:
            self._settle(watch, tip_height, base)
        if fresh_mempool:
            self._feed_mempool(watches)
        todo = [w for w in watches if not w.cancelled and w.cursor <= self._limit(w, tip_height)]
        if not todo:
            return False, None
        cell = self._pick(todo, base)
        lo, hi = base + cell * self.partition_blocks, min(base + (cell + 1) * self.partition_blocks - 1, tip_height)
        group = [w for w in todo if self._cell(w.cursor, base) == cell]
        # Block hashes are remembered before their rows are read: a reorg in between is then seen next turn.
        if ahead is not None and ahead[0] == (lo, hi):
            partition = ahead[1].result()
        else:
            self._remember(index, max(lo, tip_height - REORG_WINDOW), hi)
            partition = index.partition(lo, hi)
        following = self._following(todo, group, cell, base, tip_height)
        if following:
            self._remember(index, max(following[0], tip_height - REORG_WINDOW), following[1])
        ahead = (following, reader.submit(index.partition, *following)) if following else None
        self.passes += 1
        self._scan(partition, group, lo, hi, tip_height)
        return True, ahead

    def _limit(self, watch: Watch, tip_height: int) -> int:
        return tip_height if watch.live else min(watch.target, tip_height)

    def _cell(self, height: int, base: int) -> int:
        return (height - base) // self.partition_blocks

    def _settle(self, watch: Watch, tip_height: int, base: int) -> None:
        """Resolve a new watch's history range; finish a history that is scanned."""
        if watch.target is None:
            watch.cursor = max(watch.start, base)
            watch.target = min(tip_height if watch.end is None else watch.end, tip_height)
        if not watch.live and watch.cursor > watch.target and not watch.cancelled:
            watch.live = True
            watch.cursor = max(watch.cursor, tip_height + 1) if watch.end is not None else watch.cursor
            watch.deliver(self._mempool_entries(watch), 1.0)

    def _pick(self, todo: list[Watch], base: int) -> int:
        """The partition most watches wait for; among equals the next in elevator order from the last one."""
        counts = Counter(self._cell(w.cursor, base) for w in todo)
        most = max(counts.values())
        cells = sorted(c for c, n in counts.items() if n == most)
        at = bisect.bisect_left(cells, self._sweep)
        self._sweep = cells[at] if at < len(cells) else cells[0]
        return self._sweep

    def _following(self, todo, group, cell, base, tip_height) -> tuple[int, int] | None:
        """The partition the next turn will most likely read, to read it during this one's scan."""
        cells = {self._cell(w.cursor, base) for w in todo if w not in group}
        if any(self._limit(w, tip_height) >= base + (cell + 1) * self.partition_blocks for w in group):
            cells.add(cell + 1)
        if not cells:
            return None
        after = [c for c in cells if c > cell]
        nxt = min(after) if after else min(cells)
        lo = base + nxt * self.partition_blocks
        return lo, min(lo + self.partition_blocks - 1, tip_height)

    def _remember(self, index: Index, lo: int, hi: int) -> None:
        for height in range(lo, hi + 1):
            self._seen[height] = index.block_hash(height)
        for height in [h for h in self._seen if h < hi - REORG_WINDOW]:
            del self._seen[height]

    def _check_reorg(self, index: Index, tip_height: int) -> None:
        """Find the lowest remembered height whose block changed; send watches past it back to it."""
        fork = None
        for height in sorted(self._seen, reverse=True):
            try:
                same = height <= tip_height and index.block_hash(height) == self._seen[height]
            except HeightError:
                same = False
            if same:
                break
            fork = height
        if fork is None:
            return
        log.info("electrum scan: reorg from height %d; rescanning the watches past it", fork)
        for height in [h for h in self._seen if h >= fork]:
            del self._seen[height]
        with self._wake:
            for watch in self._watches:
                watch.cursor = min(watch.cursor, fork)

    def _scan(self, partition: Partition, group: list[Watch], lo: int, hi: int, tip_height: int) -> None:
        entry = _entry_maker(partition)
        for watch in group:
            try:
                txs = scan_partition_txs(partition, watch.receiver, self.threads, max(watch.cursor, lo))
            except InvalidKeyError as exc:  # a damaged index: no answer is better than a wrong one
                for w in group:
                    self.drop(w)
                    w.fail(f"the index cannot be scanned at heights {lo}..{hi}: {exc}")
                return
            if watch.cancelled:
                continue
            limit = self._limit(watch, tip_height)
            mine = [e for e in map(entry, txs) if e.height <= limit]
            watch.cursor = min(hi, limit) + 1
            if mine or not watch.live:
                watch.deliver(sorted(mine, key=Entry.sort_key), watch.progress())

    # --- mempool ---

    def _read_mempool(self, index: Index) -> bool:
        """Read the index's mempool table when its version changed; True when it did."""
        if not self.mempool or index.mempool_version() == self._mempool_version:
            return False
        view = index.mempool_tweaks()
        self._mempool_version, self._mempool_txs = view.version, view.txs
        return True

    def _feed_mempool(self, watches: list[Watch]) -> None:
        for watch in watches:
            if watch.live and not watch.cancelled:
                entries = self._mempool_entries(watch)
                if entries:
                    watch.deliver(entries, 1.0)

    def _mempool_entries(self, watch: Watch) -> list[Entry]:
        """The mempool transactions paying `watch` that it was not given while they were in the mempool."""
        txs = self._mempool_txs
        new = [t for t in txs if t.txid32 not in watch.mempool_seen]
        watch.mempool_seen = {t.txid32 for t in txs}  # forget the txs that left it: one back (a reorg) is sent again
        if not new:
            return []
        found = scan_tweaks([t.tweak33 for t in new], [[key for _, key, _ in t.outputs] for t in new], watch.receiver, threads=self.threads)
        entries = [Entry(0, t.txid32, t.tweak33) for t, outs in zip(new, found) if outs]
        return sorted(entries, key=Entry.sort_key)


def _entry_maker(p: Partition) -> Callable[[int], Entry]:
    """entry(tx): the history entry of the partition's tx at position `tx` (its block's height, its txid, its
    tweak compressed by y's parity from the stored x ‖ y): a constant cost per entry, whatever the partition."""
    tx_starts, heights = memoryview(p.tx_starts).cast("I"), memoryview(p.heights).cast("I")

    def entry(tx: int) -> Entry:
        point64 = p.tweaks64[64 * tx : 64 * tx + 64]
        height = heights[bisect.bisect_right(tx_starts, tx) - 1]
        return Entry(height, p.txids[32 * tx : 32 * tx + 32], bytes([2 + (point64[63] & 1)]) + point64[:32])

    return entry
