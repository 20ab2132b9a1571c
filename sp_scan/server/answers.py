"""Answers built once: the index's chain as served, reader threads, and a cache of built answers.

`ChainView` is the server's picture of the index (network, first height, tip, every block's
hash), brought up to date before each request when a sync has committed since (one cheap
`PRAGMA data_version`), so an answer never lags the file. Every cached answer is keyed by the
hash of its block, and answers that depend on the tip (cut-through tweaks, UTXO spent flags,
/info) by the tip's hash too: a block a reorg replaces, or a tip that moves, makes new keys, and
the entries of the old ones are dropped at once. So nothing is cached by height alone, at any
depth. `AnswerCache` keeps the bodies, plain and gzip, within a byte budget (least recently
used first out); concurrent requests for an answer being built wait for the one build.
"""

from __future__ import annotations

import asyncio
import collections
import threading
import zlib
from collections.abc import Awaitable, Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from sp_scan.index import Index

READER_THREADS = 4
GZIP_MIN_BYTES = 256
"""Smaller bodies are sent as they are: gzip would not make them shorter."""
GZIP_LEVEL = 1
"""Hex of random bytes: level 1 compresses it as well as level 9 (to ~57%) at a third of level 4's time."""
CACHE_BYTES = 256 * 2**20
REORG_CHECK = 100
"""Blocks below the old tip compared on a tip change; a branch switch deeper than this reloads every hash."""


async def node_call(fn: Callable, *args):
    """fn(*args) on a daemon thread of its own (a node request): a node that accepts and never answers
    then holds that thread only, never the server's stop (an executor's threads are waited for).

    Raises:
        whatever fn raises.
    """
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    def settle(result, error) -> None:
        if not done.done():
            if error is None:
                done.set_result(result)
            else:
                done.set_exception(error)

    def run() -> None:
        try:
            result, error = fn(*args), None
        except Exception as exc:  # noqa: BLE001 (handed to the awaiting task)
            result, error = None, exc
        try:
            loop.call_soon_threadsafe(settle, result, error)
        except RuntimeError:  # the loop closed meanwhile: nobody waits
            pass

    threading.Thread(target=run, name="sp-scan-node-call", daemon=True).start()
    return await done


class Readers:
    """Read-only `Index` connections for building answers: a thread pool, one connection per thread.

    SQLite calls block, so reads, JSON encoding and gzip run on these threads (SQLite and zlib
    release the GIL) and the event loop only moves bytes. WAL lets them read while a sync writes.
    """

    def __init__(self, path: str | Path, threads: int = READER_THREADS) -> None:
        self.path = Path(path)
        self._local = threading.local()
        self._opened: list[Index] = []
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="sp-scan-reader")

    def _index(self) -> Index:
        index = getattr(self._local, "index", None)
        if index is None:
            index = Index.open(self.path, readonly=True)
            with self._lock:
                self._opened.append(index)
            self._local.index = index
        return index

    async def run(self, fn: Callable, *args):
        """Run fn(index, *args) on a reader thread and return its result."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, lambda: fn(self._index(), *args))

    def close(self) -> None:
        """Wait for running reads, then close every connection."""
        self._pool.shutdown(wait=True)
        with self._lock:
            for index in self._opened:
                index.close()
            self._opened.clear()


class ChainView:
    """The index's blocks as the server answers them: heights and hashes, tip, network.

    Owned by the event loop thread (its own read-only connection, cheap reads only).

    Attributes:
        network: the index's network.
        first: the first indexed height (None while empty).
        tip: (height, hash32) of the highest block, or None.
        changed: called after a refresh that saw the tip move, with the first height a branch
            switch replaced (None when blocks were only added).
    """

    def __init__(self, path: str | Path, changed: Callable[[int | None], None] = lambda replaced: None) -> None:
        self._index = Index.open(path, readonly=True)
        self.network = self._index.network
        self.changed = changed
        self.first: int | None = None
        self.tip: tuple[int, bytes] | None = None
        self._hashes = bytearray()
        self._version: int | None = None
        self._checked = False
        self.refresh()

    def close(self) -> None:
        self._index.close()

    def hash_at(self, height: int) -> bytes | None:
        """The hash of the block at `height`, None when it is not indexed."""
        if self.tip is None or not self.first <= height <= self.tip[0]:
            return None
        i = 32 * (height - self.first)
        return bytes(self._hashes[i : i + 32])

    def range_text(self) -> str:
        return "it is empty" if self.tip is None else f"it holds {self.first}..{self.tip[0]}"

    def refresh(self) -> bool:
        """Catch up with the file if a sync committed since the last look; True when the tip changed.

        Looks once per turn of the running event loop (a PRAGMA data_version), or at every call
        outside one.

        Raises:
            IndexStoreError: the file cannot be read.
        """
        if self._checked:
            return False
        try:
            asyncio.get_running_loop().call_soon(self._uncheck)
            self._checked = True  # until this turn of the loop ends: requests handled in one turn share a look
        except RuntimeError:
            pass
        version = self._index.data_version()
        if version == self._version:
            return False
        self._version = version
        tip = self._index.tip()
        if tip == self.tip:
            return False
        old, replaced = self.tip, None
        if tip is None:
            self.first, self.tip, self._hashes = None, None, bytearray()
        elif old is None or self.first is None:
            self.first = self._index.first_height
            self._load(self.first, tip[0])
        else:
            check = max(self.first, min(old[0], tip[0]) - REORG_CHECK)
            fresh = self._index.block_hashes(check, tip[0])
            fork = next((h for h, hash32 in fresh if h <= old[0] and self.hash_at(h) != hash32), None)
            if fork == check and check > self.first:  # deeper than the window: reload everything
                self._load(self.first, tip[0])
            else:
                del self._hashes[32 * (check - self.first) :]
                self._hashes += b"".join(hash32 for _, hash32 in fresh)
            if fork is not None or tip[0] < old[0]:
                replaced = fork if fork is not None else tip[0] + 1
        self.tip = tip
        self.changed(replaced)
        return True

    def _uncheck(self) -> None:
        self._checked = False

    def _load(self, start: int, end: int) -> None:
        self._hashes = bytearray(b"".join(hash32 for _, hash32 in self._index.block_hashes(start, end)))


@dataclass(frozen=True, slots=True)
class Answer:
    """A built answer: status, JSON body, its gzip form (None when not worth it), and whether it may be cached.

    `wires` is the HTTP app's: each form as a whole keep-alive response, built on its first use.
    """

    status: int
    plain: bytes
    gzip: bytes | None
    cacheable: bool = True
    wires: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def size(self) -> int:
        """Bytes counted against the cache: the bodies twice (room for their `wires`)."""
        return 2 * (len(self.plain) + len(self.gzip or b"")) + 400


def answer(status: int, body: bytes, cacheable: bool = True) -> Answer:
    """An Answer for a JSON body, with its gzip form when the body is long enough to gain from it."""
    gz = zlib.compress(body, GZIP_LEVEL, wbits=31) if len(body) >= GZIP_MIN_BYTES else None
    return Answer(status, body, gz, cacheable)


class AnswerCache:
    """Built answers by key, least recently used dropped first beyond `max_bytes`; builds shared by waiters.

    Keys are tuples (kind, block height or None, ..., tip hash or None): `follow` drops by those two.
    """

    def __init__(self, max_bytes: int = CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self.hits = self.misses = 0
        self._entries: collections.OrderedDict[Hashable, Answer] = collections.OrderedDict()
        self._building: dict[Hashable, asyncio.Task] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Hashable) -> Answer | None:
        """The cached answer for `key`, or None (a hit or a miss is counted)."""
        found = self._entries.get(key)
        if found is None:
            self.misses += 1
            return None
        self.hits += 1
        self._entries.move_to_end(key)
        return found

    def put(self, key: Hashable, value: Answer) -> None:
        """Keep `value` if it is cacheable and fits the budget, dropping the least recently used as needed."""
        if not value.cacheable or value.size > self.max_bytes:
            return
        old = self._entries.pop(key, None)
        if old is not None:
            self.bytes -= old.size
        self._entries[key] = value
        self.bytes += value.size
        while self.bytes > self.max_bytes:
            _, dropped = self._entries.popitem(last=False)
            self.bytes -= dropped.size

    async def build(self, key: Hashable, make: Callable[[], Awaitable[Answer]]) -> Answer:
        """The answer for `key` from one run of `make()` however many ask at once; cached when it may be.

        The build runs as its own task: a requester that goes away (its client hung up) cancels
        its wait, never the build the others wait for.
        """
        task = self._building.get(key)
        if task is None:
            task = self._building[key] = asyncio.ensure_future(self._run(key, make))
            task.add_done_callback(lambda t: t.cancelled() or t.exception())  # retrieved even if nobody waits
        return await asyncio.shield(task)

    async def _run(self, key: Hashable, make: Callable[[], Awaitable[Answer]]) -> Answer:
        try:
            value = await make()
        finally:
            del self._building[key]
        self.put(key, value)
        return value

    def follow(self, view: ChainView) -> None:
        """Drop what `view`'s changes make stale: the answers of replaced blocks (key[1] is the height)
        and those keyed by an old tip (key[-1] is the tip hash, or None for answers that do not depend on it)."""

        def changed(replaced: int | None) -> None:
            tip = view.tip[1] if view.tip else None
            self.drop(lambda key: (key[-1] is None or key[-1] == tip) and (replaced is None or key[1] is None or key[1] < replaced))

        view.changed = changed

    def drop(self, keep: Callable[[Hashable], bool]) -> int:
        """Remove the entries whose key `keep` rejects; return how many."""
        gone = [k for k in self._entries if not keep(k)]
        for key in gone:
            self.bytes -= self._entries.pop(key).size
        return len(gone)
