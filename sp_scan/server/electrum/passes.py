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

With a Dask cluster (`sp-scan serve --dask`), the histories' partitions are scanned there instead:
each turn the worker reads the partitions that the watches' next `queue` cells need (at most
`queue` pending per watch, the oldest watch's next partition first) and sends each as one task for
every watch waiting for it, at most twice the cluster's worker threads at a time. A watch takes a
task's entries only in height order, as its cursor reaches them, so a task lost, cancelled or
run twice changes nothing delivered; live blocks and the mempool stay on this machine. A failing
cluster (a task lost with its workers too often, the scheduler gone, no worker for `LOST_AFTER`
seconds) is logged once and left: the pending partitions are forgotten and scanned here from each
watch's cursor, so no entry is lost or repeated. A watch dropped cancels the tasks only it waits for.

Keys stay in the watches (connection memory) only, and in the tasks while they run (the cluster's
memory: see `sp_scan.index.cluster`); the native copy of a watch's keys is wiped by the worker
once the watch is dropped (`native.release_scanner`), never while a scan uses it.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

from sp_scan import native
from sp_scan.errors import ClusterError, HeightError, IndexStoreError, InvalidKeyError
from sp_scan.headers import fork_point
from sp_scan.index import Index, Partition
from sp_scan.index.scan import DEFAULT_PARTITION_BLOCKS, scan_partition_entries
from sp_scan.scan import Receiver, scan_tweaks
from sp_scan.types import MempoolTx
from sp_scan.workers import AheadPool

log = logging.getLogger("sp_scan.server.electrum")

POLL_SECONDS = 0.5
"""How often an idle worker looks for new blocks, reorgs and mempool transactions."""
REORG_WINDOW = 1_000
"""Blocks below the tip whose hashes are remembered to find a fork (deeper reorgs rescan from there)."""
DASK_QUEUE = 8
"""Partitions of one watch sent to the cluster and not yet delivered, at most."""
LOST_AFTER = 30.0
"""Seconds a cluster may have no worker while tasks wait before the scans fall back to this machine."""


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
    ahead: dict[int, tuple[int, list[Entry]] | None] = field(init=False, default_factory=dict)
    """Cluster mode: per grid cell sent, None while its task runs, then (its last height, the entries)."""

    def __post_init__(self) -> None:
        self.cursor = self.start

    def progress(self) -> float:
        """The share of the history scanned, below 1.0 until it is done."""
        if self.live or self.target is None:
            return 1.0 if self.live else 0.0
        span = self.target - self.start + 1
        done = min(self.cursor, self.target + 1) - self.start
        return min(round(done / span, 4), 0.9999) if span > 0 else 0.9999


@dataclass(eq=False)
class _Task:
    """A partition sent to the cluster for the watches in `watches` (in the order of its result)."""

    cell: int
    hi: int
    watches: list[Watch]
    future: object = None


class ScanService:
    """The worker that scans the index for every watch.

    Args:
        db: the index file (opened read-only in the worker).
        threads: native scanning threads per scan.
        partition_blocks: heights per grid partition (the read and scan unit; one task on a cluster).
        mempool: also scan the index's mempool table for caught-up watches.
        poll: seconds between looks at the index's tip (and mempool) when idle.
        cluster: a `sp_scan.index.cluster.Pool` to scan the histories on, or None.
        queue: with a cluster, partitions of one watch sent and not yet delivered, at most.
    """

    def __init__(
        self,
        db,
        threads: int = 1,
        partition_blocks: int = DEFAULT_PARTITION_BLOCKS,
        mempool: bool = True,
        poll: float = POLL_SECONDS,
        cluster=None,
        queue: int = DASK_QUEUE,
    ) -> None:
        self.db, self.threads, self.partition_blocks, self.mempool, self.poll = db, threads, partition_blocks, mempool, poll
        self.cluster, self.queue = cluster, queue
        self._tasks: dict[int, _Task] = {}
        self._finished: list[tuple[int, list | None, BaseException | None]] = []
        self._task_ids = itertools.count()
        self._workerless_since: float | None = None
        self.fell_back = False
        """The cluster failed: every scan runs here since."""
        self.partitions_done = 0
        """Partitions whose task's results the cluster returned."""
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

    def cluster_status(self) -> dict | None:
        """The cluster's part of /status: scheduler, workers, tasks in flight, partitions done, fallen back; None without one."""
        if self.cluster is None:
            return None
        return {
            "scheduler": self.cluster.address,
            "workers": self.cluster.workers,
            "worker_threads": self.cluster.worker_threads,
            "tasks_in_flight": len(self._tasks),
            "partitions_done": self.partitions_done,
            "fell_back": self.fell_back,
        }

    def _done(self, task_id: int) -> Callable[[list | None, BaseException | None], None]:
        def done(result: list | None, error: BaseException | None) -> None:  # on a Dask thread
            with self._wake:
                self._finished.append((task_id, result, error))
                self._wake.notify()

        return done

    # --- the worker ---

    def _run(self) -> None:
        index = None
        reader = AheadPool(1, "sp-scan-electrum-read")
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
                    if not self._stopping and not self._finished:
                        self._wake.wait(self.poll)
        finally:
            reader.close(wait=True)  # the partition in hand is read before the index closes
            if index is not None:
                index.close()
            if self._tasks:
                self.cluster.cancel([t.future for t in self._tasks.values()])
                self._tasks.clear()

    def _release(self) -> None:
        with self._wake:
            dropped, self._dropped = self._dropped, []
        for watch in dropped:
            if native.ENABLED:
                native.release_scanner(watch.receiver)

    def _turn(self, index: Index, reader: AheadPool, ahead) -> tuple[bool, tuple | None]:
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
        sent = False
        if self._clustered():
            sent = self._cluster_turn(index, watches, tip_height, base)
        todo = [w for w in watches if not w.cancelled and w.cursor <= self._limit(w, tip_height) and (w.live or not self._clustered())]
        if not todo:
            return sent, None
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
        """Find the lowest remembered height whose block changed (the lowest above `fork_point`); send watches
        past it back to it."""

        def held(height: int) -> bytes | None:
            try:
                return index.block_hash(height) if height <= tip_height else None
            except HeightError:
                return None

        common = fork_point(sorted(self._seen.items(), reverse=True), held)
        fork = min((h for h in self._seen if common is None or h > common), default=None)
        if fork is None:
            return
        log.info("electrum scan: reorg from height %d; rescanning the watches past it", fork)
        for height in [h for h in self._seen if h >= fork]:
            del self._seen[height]
        with self._wake:
            for watch in self._watches:
                watch.cursor = min(watch.cursor, fork)
                watch.ahead.clear()  # tasks sent before the reorg: their results are ignored
        if self._tasks:
            self.cluster.cancel([t.future for t in self._tasks.values() if t.future is not None])
            self._tasks.clear()

    def _scan(self, partition: Partition, group: list[Watch], lo: int, hi: int, tip_height: int) -> None:
        for watch in group:
            try:
                (found,) = scan_partition_entries(partition, [watch.receiver], self.threads, [max(watch.cursor, lo)])
            except InvalidKeyError as exc:  # a damaged index: no answer is better than a wrong one
                self._fail(group, lo, hi, exc)
                return
            if not watch.cancelled:
                self._take(watch, hi, [Entry(*e) for e in found], tip_height)

    def _take(self, watch: Watch, hi: int, entries: list[Entry], tip_height: int) -> None:
        """Deliver a scanned partition's entries (from the watch's cursor to `hi`) and move the cursor past it."""
        limit = self._limit(watch, tip_height)
        mine = [e for e in entries if watch.cursor <= e.height <= limit]
        watch.cursor = min(hi, limit) + 1
        if mine or not watch.live:
            watch.deliver(sorted(mine, key=Entry.sort_key), watch.progress())

    def _fail(self, group: list[Watch], lo: int, hi: int, exc: Exception) -> None:
        for w in group:
            self.drop(w)
            w.fail(f"the index cannot be scanned at heights {lo}..{hi}: {exc}")

    # --- the cluster ---

    def _clustered(self) -> bool:
        return self.cluster is not None and not self.fell_back

    def _cluster_turn(self, index: Index, watches: list[Watch], tip_height: int, base: int) -> bool:
        """Take the finished tasks' entries in each watch's order, cancel tasks no watch waits for, send
        the next partitions; return whether anything was delivered or sent."""
        with self._wake:
            finished, self._finished = self._finished, []
        worked = False
        for task_id, result, error in finished:
            task = self._tasks.pop(task_id, None)
            if task is None:  # cancelled, or sent before a reorg or a fallback
                continue
            if isinstance(error, ClusterError):
                self._fall_back(f"{error}")
                return True
            if error is not None:  # the task's own error: a damaged index
                self._fail(task.watches, base + task.cell * self.partition_blocks, task.hi, error)
                continue
            self.partitions_done += 1
            for watch, found in zip(task.watches, result):
                if task.cell in watch.ahead:
                    watch.ahead[task.cell] = (task.hi, [Entry(*e) for e in found])
            worked = True
        for watch in watches:
            while not watch.cancelled and watch.ahead.get(self._cell(watch.cursor, base)) is not None:
                hi, entries = watch.ahead.pop(self._cell(watch.cursor, base))
                self._take(watch, hi, entries, tip_height)
            self._settle(watch, tip_height, base)
        for task_id, task in list(self._tasks.items()):
            if all(w.cancelled for w in task.watches):
                del self._tasks[task_id]
                self.cluster.cancel([task.future])
        if self._tasks and self.cluster.workers == 0:
            self._workerless_since = self._workerless_since or time.monotonic()
            if time.monotonic() - self._workerless_since > LOST_AFTER:
                self._fall_back(f"no worker for {LOST_AFTER:g} s")
                return True
        else:
            self._workerless_since = None
        return self._send(index, watches, tip_height, base) or worked

    def _send(self, index: Index, watches: list[Watch], tip_height: int, base: int) -> bool:
        """Send the partitions the watches' histories wait for (see the module's docstring)."""
        wanted: dict[int, list[Watch]] = {}
        urgency: dict[int, tuple[int, int]] = {}
        for age, watch in enumerate(watches):
            if watch.live or watch.cancelled or watch.target is None or watch.cursor > watch.target:
                continue
            first = self._cell(watch.cursor, base)
            for cell in range(first, min(self._cell(watch.target, base), first + self.queue - 1) + 1):
                if cell not in watch.ahead:
                    wanted.setdefault(cell, []).append(watch)
                    urgency[cell] = min(urgency.get(cell, (cell - first, age)), (cell - first, age))
        room = max(2, 2 * self.cluster.worker_threads) - len(self._tasks)
        for cell in sorted(wanted, key=lambda c: (*urgency[c], c))[: max(room, 0)]:
            group = wanted[cell]
            lo, hi = base + cell * self.partition_blocks, min(base + (cell + 1) * self.partition_blocks - 1, tip_height)
            self._remember(index, max(lo, tip_height - REORG_WINDOW), hi)
            partition = index.partition(lo, hi)
            task_id = next(self._task_ids)
            task = self._tasks[task_id] = _Task(cell, hi, group)
            for watch in group:
                watch.ahead[cell] = None
            try:
                task.future = self.cluster.submit(partition, [w.receiver for w in group], [max(w.cursor, lo) for w in group], self._done(task_id))
            except ClusterError as exc:
                self._fall_back(f"{exc}")
                return True
        return bool(wanted) and room > 0

    def _fall_back(self, why: str) -> None:
        """Leave the cluster: forget what was sent, scan here from each watch's cursor."""
        log.warning("electrum scan: the Dask cluster at %s failed (%s); scanning on this machine from now on", self.cluster.address, why)
        self.fell_back = True
        self.cluster.cancel([t.future for t in self._tasks.values() if t.future is not None])
        self._tasks.clear()
        with self._wake:
            for watch in self._watches:
                watch.ahead.clear()

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
