"""Sync: blocks from a source (Core over REST or RPC, or block files) into the store, following reorgs.

One loop, after Bitcoin Core's `BaseIndex::Sync`: the next height's block is fetched and
computed (in worker processes when jobs > 1, several blocks in flight), and the parent
commits blocks in height order, each in one transaction with the new tip.

A source never shrinks the index. A reorg is a competing branch with at least as much work;
the node's active chain is its best, and this side sees only that chain's heights, so a branch
is followed when the node's block at a height the index holds is another AND the node's chain
is at least as long as the index's: then the loop walks back to the highest height where the
stored hash is the node's, rolls back above it (blocks, txloc entries and the spending marks
they made) and goes on from there. A node whose chain is shorter (still syncing, reindexing,
another node behind a load balancer) is waited for when following and refused otherwise.
Block files only ever extend the index: files that end below its tip, hold another block at
its tip or do not link to it are refused. A node whose block at the next height does not name
its own block below as parent (a stale cache in front of it) is asked again a bounded number
of times, then refused naming both hashes. The stored tip is checked against the source before
each round, so a reorg between runs or while following is seen too.

A source is any object with `chain()`, `tip_height()`, `block_hash(height)` (display hex)
and `block(hash_hex)` -> (block_bytes, spent_bytes): `sp_scan.node.RestNode`, `RpcNode`,
`corefiles.CoreBlocks` (Core's own blocks folder; followed as a node is, an empty index starts at
its `start`) or `BlockFiles` below. It is pickled to the workers.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NoReturn, Protocol

from .. import filters, wire, workers
from ..errors import HeightError, IndexStoreError, ServerError, SPError
from ..headers import fork_point
from ..network import TAPROOT_ACTIVATION
from ..node import block_data, fetch_block
from ..retry import Retry
from ..types import BlockData
from .corefiles import CoreBlocks
from .store import NETWORKS, BlockRow, Store, block_row


class Source(Protocol):
    """Where blocks come from: a node client or block files."""

    def chain(self) -> str: ...
    def tip_height(self) -> int: ...
    def block_hash(self, height: int) -> str: ...
    def block(self, hash_hex: str) -> tuple[bytes, bytes]: ...


class BlockLoader(Protocol):
    """One block file: `name` for messages, `load()` -> (block_bytes, spent_bytes)."""

    name: str

    def load(self) -> tuple[bytes, bytes]: ...


class BlockFiles:
    """Block files with their spent outputs as a source; heights come from the BIP34 coinbase push
    (a block without a previous block is the genesis block, height 0).

    Args:
        loaders: the files, in any order (e.g. the CLI's `FileBlock`s).
        network: the network they belong to (files do not say).

    Raises:
        HeightError: two files at one height, or a gap between heights.
        MalformedBlockError: a block does not parse or states no height.
        ServerError: a block does not link to the one below it.
        OSError: a file cannot be read.
    """

    def __init__(self, loaders: Sequence[BlockLoader], network: str) -> None:
        self.network = network
        found: dict[int, tuple[BlockLoader, bytes, bytes]] = {}
        for loader in loaders:
            raw, _ = loader.load()
            try:
                height = 0 if raw[4:36] == bytes(32) else wire.bip34_height(raw)
            except SPError as exc:
                raise type(exc)(f"{loader.name}: {exc}") from None
            if height in found:
                raise HeightError(f"{found[height][0].name} and {loader.name} are both at height {height}")
            found[height] = (loader, wire.sha256d(raw[:80]), raw[4:36])
        self.heights = sorted(found)
        if self.heights and self.heights[-1] - self.heights[0] + 1 != len(self.heights):
            missing = next(h for h in range(self.heights[0], self.heights[-1]) if h not in found)
            raise HeightError(f"no block file at height {missing} (the files cover {self.heights[0]}..{self.heights[-1]})")
        for h in self.heights[1:]:
            if found[h][2] != found[h - 1][1]:
                raise ServerError(f"{found[h][0].name} (height {h}) does not link to {found[h - 1][0].name}")
        self._by_height = {h: (loader, hash32) for h, (loader, hash32, _) in found.items()}
        self._by_hash = {hash32[::-1].hex(): loader for loader, hash32 in self._by_height.values()}

    def chain(self) -> str:
        return self.network

    def tip_height(self) -> int:
        if not self.heights:
            raise HeightError("no block files")
        return self.heights[-1]

    def block_hash(self, height: int) -> str:
        """The display hash of the file at `height`; HeightError when no file is at that height."""
        if height not in self._by_height:
            raise HeightError(f"no block file at height {height}")
        return self._by_height[height][1][::-1].hex()

    def block(self, hash_hex: str) -> tuple[bytes, bytes]:
        return self._by_hash[hash_hex].load()


@dataclass(frozen=True)
class Fetched:
    """One block fetched and computed, ready to commit (pickled back from a worker)."""

    height: int
    row: BlockRow
    """The block as Store.append takes it: its index data, filters, spent hashes and spent P2TR keys' prefixes."""
    fetch_s: float
    compute_s: float


def fetch(source: Source, height: int, retry: Retry, stop: threading.Event | None = None) -> Fetched:
    """Fetch the source's block at `height` and compute its index data (once `stop` is set, a failing call
    is not retried).

    Raises:
        ServerError: the source fails after the retries, or serves a block of another hash.
        MalformedDataError, PrevoutsError: the block or its spent outputs are bad (message names the height).
    """
    start = time.perf_counter()
    hash_hex, raw, spent = fetch_block(source, height, retry, stop)
    fetched = time.perf_counter()
    data = block_data(height, hash_hex, raw, spent)
    return Fetched(height, index_row(height, data), fetched - start, time.perf_counter() - fetched)


def index_row(height: int, data: BlockData) -> BlockRow:
    """Block `height`'s row as `Store.append` takes it: its index data, new-UTXO filter, spent-index hashes
    and spent P2TR keys' prefixes (the spent filter is built from the hashes when asked)."""
    hashes8 = b"".join(filters.spent_hashes(data.hash32, data.spent_outpoints))
    return block_row(height, data, (filters.new_utxos_filter(data.hash32, data.taproot_keys), hashes8, data.spent_key_prefixes))


@dataclass
class SyncStats:
    """What a sync did so far (passed to the progress callback after every block).

    Attributes:
        height: the index's tip height (None while empty).
        target: the height being synced to.
        start: the first height this run committed or will commit.
        blocks, txs, eligible: blocks, transactions and eligible transactions committed.
        fetch_s, compute_s: seconds spent fetching and computing (summed over workers).
        store_s: seconds spent committing.
        reorgs, rolled_back: branch switches seen and blocks removed by them.
        waiting: True while following and caught up, or while the source is behind the index.
        behind: the source's tip height while it is below the index's (following waits for it), else None.
        mempool: what the mempool follower did (sync with mempool=True), else None.
    """

    height: int | None = None
    target: int = 0
    start: int = 0
    blocks: int = 0
    txs: int = 0
    eligible: int = 0
    fetch_s: float = 0.0
    compute_s: float = 0.0
    store_s: float = 0.0
    reorgs: int = 0
    rolled_back: int = 0
    waiting: bool = False
    behind: int | None = None
    began: float = field(default_factory=time.monotonic)
    mempool: object | None = None


def network_of(source: Source, retry: Retry) -> str:
    """The index network name of the source's chain: Core's chain name (getblockchaininfo / chaininfo
    `chain`), which the index's NETWORKS use as they are.

    Raises:
        ServerError: unreachable, or a chain name that is not one of Core's.
    """
    chain = retry.call(source.chain)
    if chain not in NETWORKS:
        raise ServerError(f"the node's chain {chain!r} is not one of {', '.join(NETWORKS)}")
    return chain


class _Unlinked(ServerError):
    """The node's block at the next height names another parent than the node's own block below it."""


class Syncer:
    """One sync run of a store from a source (see `run`)."""

    def __init__(
        self,
        store: Store,
        source: Source,
        jobs: int,
        retry: Retry,
        progress: Callable[[SyncStats], None] | None,
        idle: Callable[[float], None] = time.sleep,
    ) -> None:
        """`idle(interval)` is called while following and caught up, instead of sleeping (the mempool's hook)."""
        self.store, self.source, self.jobs, self.retry = store, source, jobs, retry
        self.progress = progress or (lambda stats: None)
        self.idle = idle
        self.stats = SyncStats()
        self._fetch = functools.partial(fetch, source, retry=retry)
        self._files = isinstance(source, BlockFiles)

    def _source_hash(self, height: int) -> bytes | None:
        """The source's hash32 at `height`; None when block files have no file there."""
        try:
            return bytes.fromhex(self.retry.call(self.source.block_hash, height))[::-1]
        except HeightError:
            if self._files:
                return None
            raise

    def _refuse_files(self, what: str) -> NoReturn:
        raise ServerError(f"{what}: block files must extend the index; they never roll it back")

    def _behind(self, source_tip: int, tip: int, follow: bool) -> None:
        """The source's chain is shorter than the index's: refused, or waited for when following.

        Raises:
            ServerError: block files, or a node without `follow`.
        """
        if self._files:
            self._refuse_files(f"the block files end at height {source_tip}, below the index's tip {tip}")
        if not follow:
            raise ServerError(
                f"the node's chain ends at height {source_tip}, below the index's tip {tip} (a node still syncing or "
                "reindexing, or another node?): nothing is rolled back; --follow waits for it"
            )
        self.stats.behind = source_tip

    def _switch_branch(self, tip: tuple[int, bytes]) -> None:
        """The source holds another block at the index's tip height: roll back to the highest block both hold
        (`fork_point`, each source call retried).

        Called only when the source's chain is at least as long as the index's (a competing branch).

        Raises:
            ServerError: block files (they never roll the index back).
        """
        if self._files:
            theirs = self._source_hash(tip[0])
            self._refuse_files(f"the block file at height {tip[0]} is {theirs[::-1].hex()}, not the index's {tip[1][::-1].hex()}")
        first = self.store.first_height
        ours = ((h, self.store.row(h, ["hash"])[0]) for h in range(tip[0], first - 1, -1))
        keep = fork_point(ours, self._source_hash)
        if self.retry.call(self.source.tip_height) < tip[0]:
            return  # the node went behind while the fork was looked for: the next round waits or refuses
        self.stats.rolled_back += self.store.rollback(first - 1 if keep is None else keep)
        self.stats.reorgs += 1
        self.stats.height = keep

    def _not_linked(self, got: Fetched, tip: tuple[int, bytes]) -> None:
        """A fetched block whose parent is not the index's tip: the source switched branches (return) or is inconsistent.

        Raises:
            ServerError: block files that do not link to the tip.
            _Unlinked: the node's block at tip + 1 does not link to the node's own block at the tip.
        """
        block = f"block {got.height} ({got.row.hash32[::-1].hex()}) names {got.row.prev32[::-1].hex()} as its parent"
        if self._files:
            self._refuse_files(f"the block file at height {got.height} does not link to the index's tip {tip[1][::-1].hex()}: {block}")
        if self._source_hash(tip[0]) == tip[1]:
            raise _Unlinked(f"the node's {block}, but its block {tip[0]} is {tip[1][::-1].hex()}")

    def _commit_range(self, pool: workers.Workers | None, heights: range) -> None:
        """Commit heights in order; stop early when a block does not link to the tip (see `_not_linked`).

        Without worker processes the next block is fetched and computed in a thread while this one is
        committed. The range's commits leave the WAL checkpoints to a thread (`Store.checkpoints_aside`);
        the mempool's writes between ranges checkpoint as SQLite does by itself.
        """
        if pool is None:
            fetched = workers.Ahead(functools.partial(self._fetch, stop=(halt := threading.Event())), heights, 2, halt)
        else:
            fetched = pool.in_order(heights, 2 * self.jobs)
        try:
            with self.store.checkpoints_aside():
                for got in fetched:
                    tip = self.store.tip()
                    if tip is not None and got.row.prev32 != tip[1]:
                        if pool is None:
                            fetched.close(wait=True)  # the source answers one caller at a time
                        self._not_linked(got, tip)
                        return
                    began = time.perf_counter()
                    self.store.append(got.row)
                    s = self.stats
                    s.store_s += time.perf_counter() - began
                    s.fetch_s += got.fetch_s
                    s.compute_s += got.compute_s
                    s.height, s.blocks, s.txs, s.eligible = got.height, s.blocks + 1, s.txs + got.row.block_txs, s.eligible + got.row.n_tx
                    self.progress(s)
        finally:
            fetched.close()  # now: the workers' answers still to come are skipped by the next round; a thread ends after its block

    def run(self, start: int | None, stop: int | None, follow: bool, interval: float) -> SyncStats:
        """Sync up to `stop` (default: the source's tip), then keep following when `follow`.

        Raises:
            IndexStoreError: another network, or a start that contradicts the index's first height.
            HeightError: `stop` is beyond the source's tip (without follow).
            ServerError: the source fails after the retries, is behind the index (without follow), does not
                link, or is block files that do not extend the index (the message names the height to resume at).
            MalformedDataError, PrevoutsError: a bad block (nothing of it is stored).
            WorkerDiedError: a worker process was killed.
        """
        try:
            network = network_of(self.source, self.retry)
        except ServerError as exc:
            raise ServerError(f"{exc} ({self._resume_hint(start)})") from None
        if network != self.store.network:
            raise IndexStoreError(f"{self.store.path} is an index of network {self.store.network}; the source is on {network}")
        first = self.store.first_height
        if first is not None and start is not None and start != first:
            raise IndexStoreError(f"{self.store.path} starts at height {first}; it resumes from its tip (drop --from or give {first})")
        begin = first if first is not None else start if start is not None else self._default_start(network)
        pool = workers.Workers(self.jobs, self._fetch) if self.jobs > 1 else None
        try:
            self.store.lock_writer()  # after the fork: workers must not inherit the lock
            self.store.mempool_clear()  # a mempool a killed sync left is never trusted
            tip = self.store.tip()
            self.stats.height = tip[0] if tip else None
            self.stats.start = tip[0] + 1 if tip else begin
            return self._loop(pool, begin, stop, follow, interval)
        except ServerError as exc:
            raise ServerError(f"{exc} ({self._resume_hint(begin)})") from None
        finally:
            if pool is not None:
                pool.close()  # kills the workers whatever they wait for: a stop never waits for the node

    def _resume_hint(self, begin: int | None) -> str:
        """Where a failed sync leaves the index, and the height the next one starts at."""
        tip = self.store.tip()
        if tip:
            return f"the index is intact up to height {tip[0]}; sync again to resume at {tip[0] + 1}"
        return f"the index is empty; sync again to start at {begin}" if begin is not None else "the index is empty; sync again to start"

    def _default_start(self, network: str) -> int:
        if self._files and self.source.heights:
            return self.source.heights[0]
        default = TAPROOT_ACTIVATION if network == "main" else 0
        return max(default, self.source.start) if isinstance(self.source, CoreBlocks) else default

    def _wait(self, interval: float) -> None:
        self.stats.waiting = True
        self.progress(self.stats)
        (time.sleep if self.stats.behind is not None else self.idle)(interval)  # the mempool waits while caught up

    def _loop(self, pool: workers.Workers | None, begin: int, stop: int | None, follow: bool, interval: float) -> SyncStats:
        unlinked = 0
        while True:
            source_tip = self.retry.call(self.source.tip_height)
            tip = self.store.tip()
            for height in (stop, begin if tip is None else None):
                if height is not None and height > source_tip and not follow:
                    raise HeightError(f"height {height} is beyond the source's tip {source_tip}")
            self.stats.behind = None
            if tip is not None and source_tip < tip[0]:
                self._behind(source_tip, tip[0], follow)
                self._wait(interval)
                continue
            if tip is not None and self._source_hash(tip[0]) not in (None, tip[1]):
                self._switch_branch(tip)
                continue  # look again: the node may have moved on meanwhile
            nxt = tip[0] + 1 if tip else begin
            target = source_tip if stop is None else min(stop, source_tip)
            self.stats.target, self.stats.waiting = target, False
            if nxt <= target:
                committed = self.stats.blocks
                try:
                    self._commit_range(pool, range(nxt, target + 1))
                except _Unlinked as exc:
                    unlinked = 1 if self.stats.blocks > committed else unlinked + 1
                    if unlinked > self.retry.attempts:
                        raise ServerError(f"{exc}; seen {unlinked} times (a stale cache or proxy in front of the node?)") from None
                    time.sleep(self.retry.delay * 2 ** (unlinked - 1))
                continue  # look again: the source may have moved on or switched branches meanwhile
            if not follow or (stop is not None and nxt > stop):
                return self.stats
            self._wait(interval)
