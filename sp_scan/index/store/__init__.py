"""The tweak index's store: SQLite, one row per block in each of three tables. The only SQL of the index.

Format version 4 (`PRAGMA user_version`, `PRAGMA application_id` = "SPSX"). The tables and how their
values are packed are in `rows`; how spends are resolved and marked in `spends`; the checks of a whole
file in `check`; the upgrade of older files in `upgrade`; the node's mempool rows in `mempool_rows`;
the file's life (made aside, the writer lock) in `file`; reading with every check in `reader`.

- `meta(key, value, sum)`: `network` (main, test, testnet4, signet, regtest), `format`, `first_height`
  (set by the first block), `tip` (the highest block's height, written with it), `folded` (the height up
  to which marks are in the spends bitmaps), `mempool_version` (bumped by every change of `mempool`);
  `sum` is the CRC of key and value.
- `blocks`, `spent`, `spends`: one row per block (`rows`).
- `mempool`: the eligible txs of the node's mempool as a running `sync --mempool` last saw them.

Every read checks each value against its row's checksum, its widths, and that the heights run from the
first to the tip with none missing: damage (a flipped bit, a row deleted or changed) is an IndexStoreError
on the read that meets it, never a wrong answer; `check` reads everything. A block's rows, the marks it
makes (with a fold when one is due), its txs leaving the mempool table and the new tip are one
transaction, so a killed writer leaves the file as of its last block. Formats 1 to 3 are upgraded by the
next writer into a file built beside them (`upgrade`); readers refuse them, saying so.

Bytes in, bytes out. Every SQLite failure is raised as `IndexStoreError` naming the file.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from ... import backend, workers
from ...errors import IndexStoreError
from ...network import NETWORKS
from . import file, mempool_rows, upgrade
from .check import check_file
from .checkpoint import Checkpointer
from .mempool_rows import MEMPOOL_COLUMNS
from .reader import StoreReader, checked
from .rows import APPLICATION_ID, BLOCK_FIELDS, FIELDS, FORMAT_VERSION, SPENT_FIELDS, BlockRow, bits_sum, block_row, pack_marks, sums
from .schema import PAGE_SIZE, new_file
from .spends import Pending, Resolver, fold_interval

__all__ = ["FIELDS", "FORMAT_VERSION", "MEMPOOL_COLUMNS", "NETWORKS", "PAGE_SIZE", "BlockRow", "Store", "block_row"]

WRITER_CACHE_KIB = 64 << 10
"""The writer's page cache."""
_LOAD_BATCH = 256  # blocks read per statement while the writer's output map is built
_IN_CHUNK = 4096  # values bound in one `IN (...)` (SQLite allows 32,766)


class Store(StoreReader):
    """An open index file. Build with `Store.create` or `Store.open`; reads come from `StoreReader`.

    Attributes:
        path: the file.
        readonly: True for a reader (it never writes and takes no lock).
        network: the network the index was built for.
    """

    def __init__(self, path: Path, conn: sqlite3.Connection, readonly: bool, check: bool = False) -> None:
        """`check`: refuse a truncated or damaged file before reading anything of it."""
        super().__init__(path, conn, readonly, check)
        self._resolver: Resolver | None = None  # the writer's unspent tracked outputs, built at its first block
        self._checkpointer: Checkpointer | None = None

    @classmethod
    def create(cls, path: str | os.PathLike, network: str) -> Store:
        """Create an empty index for `network` at `path` (built aside, then linked into place).

        Raises:
            IndexStoreError: the file exists, the network is unknown, or SQLite fails.
        """
        path = Path(path)
        if network not in NETWORKS:
            raise IndexStoreError(f"unknown network {network!r} (one of {', '.join(NETWORKS)})")
        if path.exists():
            raise IndexStoreError(f"{path} already exists")
        try:
            with file.built_aside(path) as scratch:
                conn = new_file(scratch, network)
                conn.close()
                file.place(scratch, path)
        except sqlite3.Error as exc:
            raise IndexStoreError(f"{path}: cannot create the index ({exc})") from None
        return cls.open(path)

    @classmethod
    def open(cls, path: str | os.PathLike, *, readonly: bool = False, network: str | None = None) -> Store:
        """Open an existing index.

        Args:
            path: the index file.
            readonly: open for reading only (a server beside a running sync).
            network: when given, the index must be for this network.

        A reader in a directory it cannot write opens the file as immutable (see `file.reader_uri`). The
        file must be as long as its pages (a truncated copy is refused), and one of up to
        QUICK_CHECK_BYTES gets SQLite's quick_check. A writer upgrades a file of format 1 to 3 first (see
        `upgrade`: it reads every block once and builds the new file beside the old).

        Raises:
            IndexStoreError: missing, not an sp-scan index, truncated or damaged, another format version
                (an older one opened read-only: the message says how to upgrade it), another network;
                a reader: as `file.reader_uri`.
        """
        path = Path(path)
        if not path.is_file():
            raise IndexStoreError(f"no index at {path}")
        file.refuse_truncated(path)
        try:
            if readonly:
                conn = sqlite3.connect(file.reader_uri(path), uri=True, isolation_level=None, check_same_thread=False)
            else:
                conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA busy_timeout = 10000")
            app_id, version = (conn.execute(f"PRAGMA {p}").fetchone()[0] for p in ("application_id", "user_version"))
        except sqlite3.Error as exc:
            raise IndexStoreError(f"{path}: {file.reason(exc)}") from None
        try:
            if app_id != APPLICATION_ID:
                raise IndexStoreError(f"{path} is not an sp-scan index")
            if version != FORMAT_VERSION and version not in upgrade.UPGRADABLE:
                raise IndexStoreError(f"{path} is an index of format version {version}; this sp-scan reads version {FORMAT_VERSION}")
            if version != FORMAT_VERSION and readonly:
                raise IndexStoreError(
                    f"{path} is an index of format version {version}: `sp-scan index sync` upgrades it to "
                    f"version {FORMAT_VERSION} (it reads every block once and writes the index anew beside it), then it can be read"
                )
            if version != FORMAT_VERSION:
                conn.close()
                upgrade.upgrade(path, version)
                conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
                conn.execute("PRAGMA busy_timeout = 10000")
            store = cls(path, conn, readonly, check=True)
        except BaseException:
            conn.close()
            raise
        if not readonly:
            store._execute("PRAGMA synchronous = NORMAL")  # WAL: a commit survives a killed process
            store._execute(f"PRAGMA cache_size = -{WRITER_CACHE_KIB}")
        if network is not None and store.network != network:
            store.close()
            raise IndexStoreError(f"{path} is an index of network {store.network}, not {network}")
        return store

    @checked
    def lock_writer(self) -> None:
        """Become the only writer of the file until `close` (readers are not affected).

        Raises:
            IndexStoreError: opened read-only, or another process (a sync) is writing it.
        """
        if self.readonly:
            raise IndexStoreError(f"{self.path} is open read-only")
        if not self._writer:
            file.lock_writer(self._file_lock, self.path)
            self._writer = True

    @checked
    def check(self, batch: int = 256) -> int:
        """Check the whole file (see `check_file`).

        Returns:
            The number of blocks checked.

        Raises:
            IndexStoreError: the first problem found.
        """
        return check_file(self, batch)

    @contextlib.contextmanager
    def checkpoints_aside(self) -> Iterator[None]:
        """While the block runs, `append`'s commits leave copying the write-ahead log into the file to a
        thread (see `checkpoint.Checkpointer`): a sync's writer does not wait for it."""
        self._checkpointer = Checkpointer(self.path, self._conn)
        try:
            yield
        finally:
            self._checkpointer.close()
            self._checkpointer = None

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        """One write transaction; when it fails (its commit included), the writer's memory of the rows is
        dropped with it: the output map and the pending marks are read from the file again."""
        self.lock_writer()
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
            self._conn.execute("COMMIT")
        except BaseException:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            self._forget()
            raise
        if self._checkpointer is not None:
            self._checkpointer.committed()

    def _forget(self) -> None:
        """Drop what the writer keeps in memory of the rows (after a transaction that failed)."""
        self._pending = None
        self._resolver = None

    def _resolver_loaded(self, first: int, tip: int | None) -> Resolver:
        """The writer's output map, built from the whole file at its first use (every block's unspent outputs;
        the rows read a batch ahead in a thread).

        Raises:
            IndexStoreError: a damaged row.
        """
        if self._resolver is not None:
            return self._resolver
        resolver = Resolver()
        batches = range(first, tip + 1, _LOAD_BATCH) if tip is not None else ()
        columns = ("txids", "out_counts", "out_vouts")
        read = workers.Ahead(lambda start: self._rows(columns, start, start + _LOAD_BATCH - 1, spent=True, bounds=(first, tip)), batches, 1, threading.Event())
        try:
            for rows in read:  # the next batch read (SQLite, zlib: without the GIL) while this one is put in the map
                for height, (txids, counts, vouts), _, bits in rows:
                    resolver.load(height, txids, counts, vouts, bits)
        finally:
            read.close(wait=True)
        self._resolver = resolver
        return resolver

    @checked
    def append(self, row: BlockRow) -> int:
        """Add the next block and mark what it spends, in one transaction with the new tip.

        Args:
            row: from `block_row`; its height is tip + 1 (the first block of an empty index sets
                `first_height`), its prev32 the tip's hash.

        Returns:
            How many outputs of indexed txs this block marked spent.

        Raises:
            IndexStoreError: the height does not follow the tip, the block does not link to it, or a row
                read is damaged.
        """
        height = row.height
        with self._transaction():
            first, tip = bounds = self._bounds()
            expected = tip + 1 if tip is not None else first if first is not None else height
            if height != expected:
                raise IndexStoreError(f"{self.path}: block {height} does not follow the index (next is {expected})")
            tip_hash = None
            if tip is not None:
                tip_hash = self._rows(("hash",), tip, tip, bounds=bounds)[0][1][0]
                if row.prev32 != tip_hash:
                    raise IndexStoreError(f"{self.path}: block {height} does not link to the tip {tip_hash[::-1].hex()}")
            if first is None:
                first = height
                self._set_meta("first_height", height)
            pending = self._pending_marks(first, tip, tip_hash) if tip is not None else Pending(first - 1, first - 1, b"")
            own, places = self._resolver_loaded(first, tip).spend(height, row.txids, row.counts, row.vouts, row.outpoints)
            spent = (*row.spent[:3], pack_marks(places))
            self._conn.execute(f"INSERT INTO blocks VALUES ({', '.join('?' * (len(BLOCK_FIELDS) + 2))})", (height, row.sums, *row.block))
            self._conn.execute(f"INSERT INTO spent VALUES ({', '.join('?' * (len(SPENT_FIELDS) + 2))})", (height, sums(height, "spent", spent), *spent))
            self._conn.execute("INSERT INTO spends VALUES (?, ?, ?)", (height, own, bits_sum(height, own)))
            self._set_meta("tip", height)
            mempool_rows.delete(self, row.txids)
            pending.add(height, row.hash32, places)
            self._pending = pending
            if height - pending.key[0] >= fold_interval(height - first + 1):
                self._fold(pending)
        return len(places)

    def _fold(self, pending: Pending) -> None:
        """Set the pending marks in the spends bitmaps they hit (each rewritten once) and raise the fold
        height to the tip, in the caller's transaction.

        Raises:
            IndexStoreError: a spends row the marks hit is damaged, or a mark names an output its block lacks.
        """
        places = list(itertools.chain.from_iterable(pending.places))
        targets = sorted({p >> 32 for p in places})
        bitmaps: dict[int, bytearray] = {}
        for lo in range(0, len(targets), _IN_CHUNK):
            chunk = targets[lo : lo + _IN_CHUNK]
            for height, bits, crc_ in self._conn.execute(f"SELECT height, bits, sum FROM spends WHERE height IN ({', '.join('?' * len(chunk))})", chunk):
                if type(bits) is not bytes or bits_sum(height, bits) != crc_:
                    raise self._damaged(f"block {height}'s spent outputs do not match their checksum")
                bitmaps[height] = bytearray(bits)
        if len(bitmaps) != len(targets):
            raise self._damaged(f"block {min(set(targets) - set(bitmaps))}'s spends row is missing")
        try:
            backend.mark_spent(places, bitmaps)
        except IndexError:
            raise self._damaged("a block's marks name an output beyond its block's bitmap") from None
        updates = [(bytes(bits), bits_sum(height, bits), height) for height, bits in bitmaps.items()]  # each one marked
        self._conn.executemany("UPDATE spends SET bits = ?, sum = ? WHERE height = ?", updates)
        _, tip, tip_hash = pending.key
        self._set_meta("folded", tip)
        self._pending = Pending(tip, tip, tip_hash)

    # ---- the mempool table ----

    @checked
    def mempool_update(self, added: Sequence[Sequence[bytes]], removed: Sequence[bytes], clear: bool = False) -> int:
        """Change the mempool table in one transaction and bump its version (see `mempool_rows.update`).

        Returns:
            The new mempool version.
        """
        with self._transaction():
            return mempool_rows.update(self, added, removed, clear)

    @checked
    def mempool_clear(self) -> bool:
        """Empty the mempool table (one transaction, version bumped) unless it is empty; True when it was not."""
        if mempool_rows.empty(self):
            return False
        self.mempool_update([], [], clear=True)
        return True

    @checked
    def mempool_version(self) -> int:
        """The mempool table's version: it changes with every change of the table (0 before any)."""
        return mempool_rows.version(self)

    @checked
    def mempool_rows(self) -> tuple[int, tuple[int, bytes] | None, list[tuple]]:
        """One consistent read: (mempool version, (height, hash32) of the tip or None, the rows in
        MEMPOOL_COLUMNS order, oldest first).

        Raises:
            IndexStoreError: a damaged row.
        """
        with self._read():
            version = mempool_rows.version(self)
            tip = self.tip()
            rows = mempool_rows.read(self)
        if rows is None:
            raise IndexStoreError(f"{self.path}: a malformed mempool row (a damaged index)")
        return version, tip, rows

    @checked
    def rollback(self, height: int) -> int:
        """Remove every block above `height` with its rows and the marks it made, in one transaction with
        the new tip; the writer's output map takes back what they spent and drops what they made.

        Returns:
            The number of blocks removed.

        Raises:
            IndexStoreError: a row it reads is damaged (nothing is removed).
        """
        with self._transaction():
            first, tip = bounds = self._bounds()
            if tip is None or height >= tip:
                return 0
            folded = self._folded(first, tip)
            rolled = self._rows(("txids", "out_counts", "out_vouts", "marks"), height + 1, tip, bounds=bounds)
            resolver = self._resolver
            undo: dict[int, list[int]] = {}  # the outputs below `height` the rolled blocks spent, by block
            cleared: dict[int, list[int]] = {}  # those whose marks are folded into bitmaps
            for h, (txids, counts, vouts, marks), _, _ in reversed(rolled):
                if resolver is not None:
                    resolver.outputs.drop_block(h, txids, counts, vouts)
                for place in self._marks(h, marks):
                    target, ordinal = place >> 32, place & 0xFFFFFFFF
                    if target <= height:
                        undo.setdefault(target, []).append(ordinal)
                        if h <= folded:
                            cleared.setdefault(target, []).append(ordinal)
            if resolver is not None and undo:
                self._put_back(resolver, undo, bounds)
            for target, ordinals in cleared.items():
                bits = bytearray(self._stored_bits(target, bounds))
                for ordinal in ordinals:
                    if ordinal >> 3 >= len(bits) or not bits[ordinal >> 3] >> (ordinal & 7) & 1:
                        raise self._damaged(f"output {ordinal} of block {target} is marked by a block above {height} but not spent")
                    bits[ordinal >> 3] &= ~(1 << (ordinal & 7))
                self._conn.execute("UPDATE spends SET bits = ?, sum = ? WHERE height = ?", (bytes(bits), bits_sum(target, bits), target))
            for table in ("blocks", "spent", "spends"):
                self._conn.execute(f"DELETE FROM {table} WHERE height > ?", (height,))
            if height >= first:
                self._set_meta("tip", height)
                if folded > height:
                    self._set_meta("folded", height)
            else:
                self._conn.execute("DELETE FROM meta WHERE key IN ('tip', 'folded')")
            self._pending = None
        return len(rolled)

    def _put_back(self, resolver: Resolver, undo: dict[int, list[int]], bounds: tuple[int, int]) -> None:
        """Give the output map back the outputs the rolled blocks spent (`undo`: ordinals by block)."""
        for target in sorted(undo):
            (txids, counts, vouts), = [values for _, values, _, _ in self._rows(("txids", "out_counts", "out_vouts"), target, target, bounds=bounds)]
            firsts = [0]
            for c in memoryview(counts).cast("I"):
                firsts.append(firsts[-1] + c)
            outpoints, places = [], []
            for ordinal in undo[target]:
                tx = next(i for i in range(len(firsts) - 1) if firsts[i] <= ordinal < firsts[i + 1])
                outpoints.append(txids[32 * tx : 32 * tx + 32] + vouts[4 * ordinal : 4 * ordinal + 4])
                places.append((target << 32 | ordinal).to_bytes(8, "little"))
            resolver.outputs.put(b"".join(outpoints), b"".join(places))
