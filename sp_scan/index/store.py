"""The tweak index's store: SQLite, one row per block of packed column blobs. The only module with SQL.

Format version 1 (`PRAGMA user_version`, `PRAGMA application_id` = "SPSX"):

- `meta(key, value)`: `network` (main, test, testnet4, signet, regtest), `first_height`
  (set by the first block), `format`.
- `blocks`: one row per block (see `COLUMNS`): header fields, then per eligible tx in block
  order its packed columns, the block's filters and spent-index hashes, and `marks`: the
  (height u32, ordinal u32) pairs of the outputs this block marked spent, undone with it.
  The tip is the highest row; it is written in the same transaction as its data.
- `txloc(prefix, height, tx)`: the first 47 bits of every indexed txid -> where it is, so a
  later spend finds the tx it spends; prefixes that collide are told apart by the full txid
  in the block's row.
- `spends(height, ordinal)`: the taproot outputs of indexed txs that later blocks spent,
  keyed by the block and the output's position among that block's taproot outputs.
- `spent_keys(hash, keys8)`: per block (by hash), the first 8 bytes of the key of every P2TR
  output its inputs spend (BlindBit v2's spent outputs). Added after version 1 shipped, so it
  is created on opening for writing when missing; blocks stored before it have no row.

Bytes in, bytes out: the store packs and unpacks nothing beyond what the rows need.
Every SQLite failure is raised as `IndexStoreError` naming the file.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import functools
import itertools
import os
import sqlite3
import struct
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from ..errors import HeightError, IndexStoreError
from ..network import NETWORKS
from ..types import BlockData

FORMAT_VERSION = 1
APPLICATION_ID = 0x53505358  # "SPSX"
PAGE_SIZE = 16384
_PREFIX_SHIFT = 17  # txloc keeps a txid's first 47 bits: 6 bytes in SQLite's record format
_LOCATOR_CACHE = 512  # blocks whose txids and outputs stay in memory to resolve spends

# blocks' columns, small and often read ones first (a column behind a large blob costs its pages).
COLUMNS = (
    "height", "hash", "prev", "time", "block_txs", "n_tx", "max_values", "out_counts", "out_vouts", "txids",
    "tweaks33", "spent_hashes", "filter_new", "filter_spent", "marks", "out_values", "out_keys", "tweaks64",
)  # fmt: skip
_BLOB_NULLABLE = ("filter_new", "filter_spent", "spent_hashes")
_SCHEMA = [
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value NOT NULL) WITHOUT ROWID",
    "CREATE TABLE blocks(height INTEGER PRIMARY KEY, "
    + ", ".join(f"{c} {'BLOB' if c in _BLOB_NULLABLE else 'NOT NULL'}" for c in COLUMNS[1:])
    + ")",
    "CREATE TABLE txloc(prefix INTEGER NOT NULL, height INTEGER NOT NULL, tx INTEGER NOT NULL,"
    " PRIMARY KEY(prefix, height, tx)) WITHOUT ROWID",
    "CREATE TABLE spends(height INTEGER NOT NULL, ordinal INTEGER NOT NULL, PRIMARY KEY(height, ordinal)) WITHOUT ROWID",
]
_SPENT_KEYS_TABLE = "CREATE TABLE IF NOT EXISTS spent_keys(hash BLOB PRIMARY KEY, keys8 BLOB NOT NULL) WITHOUT ROWID"
_MARK = struct.Struct("<II")


def _prefixes(packed: bytes, stride: int) -> list[int]:
    """The txloc key (the first 47 bits, little-endian) of the txid opening every `stride`-byte record."""
    return [q >> _PREFIX_SHIFT for (q,) in struct.iter_unpack(f"<Q{stride - 8}x", packed)]


def _checked(method):
    """Raise sqlite3 failures of a store method as IndexStoreError naming the file."""

    @functools.wraps(method)
    def wrapper(self: Store, *args, **kwargs):
        try:
            with self._lock:
                return method(self, *args, **kwargs)
        except sqlite3.Error as exc:
            raise IndexStoreError(f"{self.path}: {_reason(exc)}") from None

    return wrapper


def _reason(exc: sqlite3.Error) -> str:
    text = str(exc)
    if "not a database" in text or "malformed" in text:
        return f"not a readable sp-scan index ({text})"
    if "locked" in text or "busy" in text:
        return f"{text} (another process is writing it)"
    return text


class _Locator:
    """Where an indexed block's taproot outputs are: its txids, each tx's first ordinal, the vouts."""

    __slots__ = ("txids", "first", "counts", "vouts")

    def __init__(self, txids: bytes, out_counts: bytes, out_vouts: bytes) -> None:
        self.txids = txids
        self.counts = memoryview(out_counts).cast("I")
        self.first = (0, *itertools.accumulate(self.counts))
        self.vouts = memoryview(out_vouts).cast("I")

    def ordinal(self, tx: int, txid32: bytes, vout: int) -> int | None:
        """The ordinal of output `vout` of tx number `tx` if that tx is `txid32` and tracks it."""
        if self.txids[32 * tx : 32 * tx + 32] != txid32:
            return None
        first = self.first[tx]
        for ordinal in range(first, first + self.counts[tx]):
            if self.vouts[ordinal] == vout:
                return ordinal
        return None


def _place(scratch: Path, path: Path) -> None:
    """Give the finished file `scratch` the name `path`, never replacing a file another process put there.

    Raises:
        IndexStoreError: `path` exists.
    """
    try:
        os.link(scratch, path)  # fails if path exists, where a rename would replace it
    except FileExistsError:
        raise IndexStoreError(f"{path} already exists") from None
    except OSError:  # a filesystem without hard links: the check before building is all there is
        if path.exists():
            raise IndexStoreError(f"{path} already exists") from None
        os.rename(scratch, path)


class Store:
    """An open index file. Build with `Store.create` or `Store.open`.

    Attributes:
        path: the file.
        readonly: True for a reader (it never writes and takes no lock).
        network: the network the index was built for.
    """

    def __init__(self, path: Path, conn: sqlite3.Connection, readonly: bool) -> None:
        self.path = path
        self.readonly = readonly
        self._conn = conn
        self._lock = threading.RLock()
        self._writer_fd: int | None = None
        self._locators: collections.OrderedDict[int, _Locator] = collections.OrderedDict()
        self.network = self._meta("network")

    # ---- opening ----

    @classmethod
    def create(cls, path: str | os.PathLike, network: str) -> Store:
        """Create an empty index for `network` at `path` (built aside, then renamed into place).

        Raises:
            IndexStoreError: the file exists, the network is unknown, or SQLite fails.
        """
        path = Path(path)
        if network not in NETWORKS:
            raise IndexStoreError(f"unknown network {network!r} (one of {', '.join(NETWORKS)})")
        if path.exists():
            raise IndexStoreError(f"{path} already exists")
        scratch = path.with_name(f".{path.name}.{os.getpid()}.new")
        try:
            conn = sqlite3.connect(scratch, isolation_level=None)
            try:
                conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")
                conn.execute("BEGIN")
                for statement in (*_SCHEMA, _SPENT_KEYS_TABLE):
                    conn.execute(statement)
                conn.executemany("INSERT INTO meta VALUES (?, ?)", [("network", network), ("format", FORMAT_VERSION)])
                conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                conn.execute(f"PRAGMA user_version = {FORMAT_VERSION}")
                conn.execute("COMMIT")
                conn.execute("PRAGMA journal_mode = WAL")
            finally:
                conn.close()
            _place(scratch, path)
        except sqlite3.Error as exc:
            raise IndexStoreError(f"{path}: cannot create the index ({exc})") from None
        finally:
            scratch.unlink(missing_ok=True)
        return cls.open(path)

    @classmethod
    def open(cls, path: str | os.PathLike, *, readonly: bool = False, network: str | None = None) -> Store:
        """Open an existing index.

        Args:
            path: the index file.
            readonly: open for reading only (a server beside a running sync).
            network: when given, the index must be for this network.

        Raises:
            IndexStoreError: missing, not an sp-scan index, another format version, another network.
        """
        path = Path(path)
        if not path.is_file():
            raise IndexStoreError(f"no index at {path}")
        try:
            if readonly:
                conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None, check_same_thread=False)
            else:
                conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA busy_timeout = 10000")
            app_id, version = (conn.execute(f"PRAGMA {p}").fetchone()[0] for p in ("application_id", "user_version"))
        except sqlite3.Error as exc:
            raise IndexStoreError(f"{path}: {_reason(exc)}") from None
        if app_id != APPLICATION_ID:
            conn.close()
            raise IndexStoreError(f"{path} is not an sp-scan index")
        if version != FORMAT_VERSION:
            conn.close()
            raise IndexStoreError(f"{path} is an index of format version {version}; this sp-scan reads version {FORMAT_VERSION}")
        store = cls(path, conn, readonly)
        if not readonly:
            store._execute("PRAGMA synchronous = NORMAL")  # WAL: a commit survives a killed process
            store._execute(_SPENT_KEYS_TABLE)  # an index from before the table
        if network is not None and store.network != network:
            store.close()
            raise IndexStoreError(f"{path} is an index of network {store.network}, not {network}")
        return store

    def close(self) -> None:
        """Close the file (and release the writer lock)."""
        if self._writer_fd is not None:
            os.close(self._writer_fd)
            self._writer_fd = None
        self._conn.close()

    @_checked
    def lock_writer(self) -> None:
        """Become the only writer of the file until `close` (readers are not affected).

        Raises:
            IndexStoreError: opened read-only, or another process (a sync) is writing it.
        """
        if self.readonly:
            raise IndexStoreError(f"{self.path} is open read-only")
        if self._writer_fd is not None:
            return
        fd = os.open(self.path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise IndexStoreError(f"{self.path} is being written by another process (a sync is running)") from None
        self._writer_fd = fd

    # ---- reading ----

    def _execute(self, sql: str, params: Sequence = ()) -> sqlite3.Cursor:
        try:
            return self._conn.execute(sql, params)
        except sqlite3.Error as exc:
            raise IndexStoreError(f"{self.path}: {_reason(exc)}") from None

    def _meta(self, key: str):
        try:
            row = self._execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        except IndexStoreError as exc:
            raise IndexStoreError(f"{self.path} is not an sp-scan index ({exc})") from None
        return row[0] if row else None

    @property
    def first_height(self) -> int | None:
        """The height of the first indexed block; None before any block."""
        with self._lock:
            return self._meta("first_height")

    @_checked
    def tip(self) -> tuple[int, bytes] | None:
        """(height, hash32) of the highest block; None when empty."""
        return self._conn.execute("SELECT height, hash FROM blocks ORDER BY height DESC LIMIT 1").fetchone()

    @_checked
    def row(self, height: int, columns: Sequence[str]) -> tuple:
        """The named columns of the block at `height`.

        Raises:
            HeightError: the height is not indexed.
            ValueError: an unknown column name.
        """
        unknown = set(columns) - set(COLUMNS)
        if unknown:
            raise ValueError(f"unknown columns {sorted(unknown)}")
        found = self._conn.execute(f"SELECT {', '.join(columns)} FROM blocks WHERE height = ?", (height,)).fetchone()
        if found is None:
            raise HeightError(f"height {height} is not in the index ({self._range_text()})")
        return found

    @_checked
    def hashes(self, start: int, end: int) -> list[tuple[int, bytes]]:
        """(height, hash32) of every block from start to end, ascending."""
        return self._conn.execute("SELECT height, hash FROM blocks WHERE height BETWEEN ? AND ? ORDER BY height", (start, end)).fetchall()

    @_checked
    def spent_keys(self, height: int) -> bytes | None:
        """The 8-byte key prefixes of the P2TR outputs block `height` spends (tx then vin order), or None
        when the block was stored without them.

        Raises:
            HeightError: the height is not indexed.
        """
        (hash32,) = self.row(height, ("hash",))
        try:
            found = self._conn.execute("SELECT keys8 FROM spent_keys WHERE hash = ?", (hash32,)).fetchone()
        except sqlite3.OperationalError:  # an index from before the table, opened read-only
            return None
        return found[0] if found else None

    @_checked
    def data_version(self) -> int:
        """A number that changes whenever another connection (a sync) commits to the file."""
        return self._conn.execute("PRAGMA data_version").fetchone()[0]

    def _range_text(self) -> str:
        lo, hi = self._conn.execute("SELECT MIN(height), MAX(height) FROM blocks").fetchone()
        return "it is empty" if lo is None else f"it holds {lo}..{hi}"

    @_checked
    def row_with_spends(self, height: int, columns: Sequence[str]) -> tuple[tuple, set[int]]:
        """`row` and, read with it, the ordinals of the block's taproot outputs that later blocks spent.

        Raises:
            HeightError: the height is not indexed.
        """
        self._conn.execute("BEGIN")
        try:
            found = self.row(height, columns)
            spent = {o for (o,) in self._conn.execute("SELECT ordinal FROM spends WHERE height = ?", (height,))}
        finally:
            self._conn.execute("COMMIT")
        return found, spent

    @_checked
    def scan_rows(self, start: int, end: int, columns: Sequence[str]) -> tuple[list[tuple], list[tuple[int, int]]]:
        """One consistent read of heights start..end: the rows' columns in height order, and the
        (height, ordinal) spends of those rows."""
        unknown = set(columns) - set(COLUMNS)
        if unknown:
            raise ValueError(f"unknown columns {sorted(unknown)}")
        self._conn.execute("BEGIN")
        try:
            rows = self._conn.execute(
                f"SELECT {', '.join(columns)} FROM blocks WHERE height BETWEEN ? AND ? ORDER BY height", (start, end)
            ).fetchall()
            spends = self._conn.execute("SELECT height, ordinal FROM spends WHERE height BETWEEN ? AND ?", (start, end)).fetchall()
        finally:
            self._conn.execute("COMMIT")
        return rows, spends

    @_checked
    def stats(self) -> dict:
        """Counts and size: blocks, first/tip height, transactions (all and eligible), bytes on disk."""
        blocks, lo, hi, txs, eligible = self._conn.execute(
            "SELECT COUNT(*), MIN(height), MAX(height), TOTAL(block_txs), TOTAL(n_tx) FROM blocks"
        ).fetchone()
        pages, page_size = (self._conn.execute(f"PRAGMA {p}").fetchone()[0] for p in ("page_count", "page_size"))
        wal = Path(f"{self.path}-wal")
        size = pages * page_size + (wal.stat().st_size if wal.exists() else 0)
        return {"blocks": blocks, "first": lo, "tip": hi, "transactions": int(txs), "eligible": int(eligible), "bytes": size}

    # ---- writing: one transaction per call ----

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        self.lock_writer()
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            self._locators.clear()
            raise
        self._conn.execute("COMMIT")

    @_checked
    def append(self, height: int, data: BlockData, filters: tuple[bytes, ...] | None) -> int:
        """Add the next block and mark what it spends, in one transaction with the new tip.

        Args:
            height: tip + 1 (the first block of an empty index sets `first_height`).
            data: the block's index data; its prev32 must be the tip's hash.
            filters: (new-UTXO filter, spent filter, spent hashes k × 8[, spent P2TR keys' prefixes m × 8]), or None.

        Returns:
            How many outputs of indexed txs this block marked spent.

        Raises:
            IndexStoreError: the height does not follow the tip, or the block does not link to it.
        """
        with self._transaction():
            tip = self._conn.execute("SELECT height, hash FROM blocks ORDER BY height DESC LIMIT 1").fetchone()
            first = self._meta("first_height")
            expected = tip[0] + 1 if tip else first if first is not None else height
            if height != expected:
                raise IndexStoreError(f"{self.path}: block {height} does not follow the index (next is {expected})")
            if tip and data.prev32 != tip[1]:
                raise IndexStoreError(f"{self.path}: block {height} does not link to the tip {tip[1][::-1].hex()}")
            if first is None:
                self._conn.execute("INSERT INTO meta VALUES ('first_height', ?)", (height,))
            self._conn.executemany(
                "INSERT OR IGNORE INTO txloc VALUES (?, ?, ?)", [(p, height, n) for n, p in enumerate(_prefixes(data.txids, 32))]
            )
            self._remember(height, _Locator(data.txids, data.out_counts, data.out_vouts))
            marks = self._mark_spends(data.spent_outpoints)
            filter_new, filter_spent, spent_hashes, *spent_keys = filters or (None, None, None)
            if spent_keys:
                self._conn.execute("INSERT OR REPLACE INTO spent_keys VALUES (?, ?)", (data.hash32, spent_keys[0]))
            values = {
                "height": height, "hash": data.hash32, "prev": data.prev32, "time": data.time, "block_txs": data.block_txs,
                "n_tx": data.n_tx, "max_values": data.max_values, "out_counts": data.out_counts, "out_vouts": data.out_vouts,
                "txids": data.txids, "tweaks33": data.tweaks33, "spent_hashes": spent_hashes, "filter_new": filter_new,
                "filter_spent": filter_spent, "marks": b"".join(_MARK.pack(*m) for m in marks), "out_values": data.out_values,
                "out_keys": data.out_keys, "tweaks64": data.tweaks64,
            }  # fmt: skip
            self._conn.execute(f"INSERT INTO blocks VALUES ({', '.join('?' * len(COLUMNS))})", [values[c] for c in COLUMNS])
        return len(marks)

    def _locator(self, height: int) -> _Locator:
        loc = self._locators.get(height)
        if loc is None:
            row = self._conn.execute("SELECT txids, out_counts, out_vouts FROM blocks WHERE height = ?", (height,)).fetchone()
            return self._remember(height, _Locator(*row))
        self._locators.move_to_end(height)
        return loc

    def _remember(self, height: int, loc: _Locator) -> _Locator:
        """Cache a block's locator as the most recently used, dropping the least recent beyond _LOCATOR_CACHE."""
        self._locators[height] = loc
        self._locators.move_to_end(height)
        while len(self._locators) > _LOCATOR_CACHE:
            self._locators.popitem(last=False)
        return loc

    def _mark_spends(self, outpoints36: bytes) -> list[tuple[int, int]]:
        """Insert a spends row for every outpoint that is a tracked output; return those inserted."""
        prefixes = _prefixes(outpoints36, 36)
        where: dict[int, list[tuple[int, int]]] = collections.defaultdict(list)
        for chunk in _chunks(sorted(set(prefixes)), 500):
            sql = f"SELECT prefix, height, tx FROM txloc WHERE prefix IN ({', '.join('?' * len(chunk))})"
            for prefix, height, tx in self._conn.execute(sql, chunk):
                where[prefix].append((height, tx))
        found: dict[tuple[int, int], None] = {}  # (height, ordinal) in input order, each once
        for n, prefix in enumerate(prefixes):
            if prefix not in where:
                continue
            txid32, vout = outpoints36[36 * n : 36 * n + 32], int.from_bytes(outpoints36[36 * n + 32 : 36 * n + 36], "little")
            for height, tx in where[prefix]:
                ordinal = self._locator(height).ordinal(tx, txid32, vout)
                if ordinal is not None:
                    found[height, ordinal] = None
                    break
        marks = list(found)
        self._conn.execute("SAVEPOINT marks")
        before = self._conn.total_changes
        self._conn.executemany("INSERT OR IGNORE INTO spends VALUES (?, ?)", marks)
        if self._conn.total_changes - before != len(marks):
            # Some were marked already (a chain that spends an output twice): keep the ones this block marks.
            self._conn.execute("ROLLBACK TO marks")
            marks = [m for m in marks if self._conn.execute("INSERT OR IGNORE INTO spends VALUES (?, ?)", m).rowcount]
        self._conn.execute("RELEASE marks")
        return marks

    @_checked
    def rollback(self, height: int) -> int:
        """Remove every block above `height` with its txloc entries and the marks it made, in one transaction.

        Returns:
            The number of blocks removed.
        """
        with self._transaction():
            rows = self._conn.execute("SELECT height, txids, marks FROM blocks WHERE height > ? ORDER BY height DESC", (height,)).fetchall()
            for h, txids, marks in rows:
                self._conn.execute("DELETE FROM spent_keys WHERE hash = (SELECT hash FROM blocks WHERE height = ?)", (h,))
                self._conn.executemany("DELETE FROM spends WHERE height = ? AND ordinal = ?", list(_MARK.iter_unpack(marks)))
                self._conn.executemany(
                    "DELETE FROM txloc WHERE prefix = ? AND height = ? AND tx = ?", [(p, h, n) for n, p in enumerate(_prefixes(txids, 32))]
                )
            self._conn.execute("DELETE FROM blocks WHERE height > ?", (height,))
            self._locators.clear()
        return len(rows)


def _chunks(items: Sequence, n: int) -> Iterator[Sequence]:
    for i in range(0, len(items), n):
        yield items[i : i + n]
