"""The tweak index's store: SQLite, one row per block of packed column blobs. The only module with SQL.

Format version 2 (`PRAGMA user_version`, `PRAGMA application_id` = "SPSX"):

- `meta(key, value)`: `network` (main, test, testnet4, signet, regtest), `first_height`
  (set by the first block), `format`, `mempool_version` (bumped by every change of `mempool`).
- `blocks`: one row per block (see `COLUMNS`): header fields, then per eligible tx in block
  order its packed columns, the block's filters and spent-index hashes, and `marks`: the
  (height u32, ordinal u32) pairs of the outputs this block marked spent, undone with it.
  The tip is the highest row; it is written in the same transaction as its data.
- `txloc(prefix, height, tx)`: the first 47 bits of every indexed txid -> where it is, so a
  later spend finds the tx it spends; prefixes that collide are told apart by the full txid
  in the block's row.
- `spends(height, ordinal)`: the taproot outputs of indexed txs that later blocks spent,
  keyed by the block and the output's position among that block's taproot outputs.
- `mempool(seq, txid, tweak33, tweak64, out_vouts, out_keys, out_values)`: the eligible txs of
  the node's mempool as a running `sync --mempool` last saw them, `seq` ascending in the order
  they were added. A block appended removes its txs from it in the same transaction. Its rows
  are trusted only while the writer that keeps them holds the file (`writer_active`).
- `spent_keys(hash, keys8)`: per block (by hash), the first 8 bytes of the key of every P2TR
  output its inputs spend (BlindBit v2's spent outputs). Created on opening for writing when
  missing; blocks stored before it have no row.

Version 1 files (no `mempool` table) are upgraded in place when opened for writing; read-only,
they read as an index with an empty mempool.

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
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from ..errors import HeightError, IndexStoreError
from ..network import NETWORKS
from ..types import BlockData

FORMAT_VERSION = 2
_UPGRADABLE = (1,)  # older versions a writer upgrades in place (adding the mempool table)
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
MEMPOOL_COLUMNS = ("txid", "tweak33", "tweak64", "out_vouts", "out_keys", "out_values")
_MEMPOOL_SCHEMA = (
    "CREATE TABLE mempool(seq INTEGER PRIMARY KEY, txid BLOB NOT NULL UNIQUE, "
    + ", ".join(f"{c} BLOB NOT NULL" for c in MEMPOOL_COLUMNS[1:])
    + ")"
)
_SCHEMA.append(_MEMPOOL_SCHEMA)
_WRITER_LOCK_TRIES = 100  # a reader's liveness probe holds a shared lock for microseconds: retry 1 ms apart
_SPENT_KEYS_TABLE = "CREATE TABLE IF NOT EXISTS spent_keys(hash BLOB PRIMARY KEY, keys8 BLOB NOT NULL) WITHOUT ROWID"
_MARK = struct.Struct("<II")
QUICK_CHECK_BYTES = 64 << 20
"""An index up to this size (with its write-ahead log) gets SQLite's `PRAGMA quick_check` on every open."""

# What every block row holds, checked on each read: a malformed row is an IndexStoreError, never a wrong answer.
_INTS = ("height", "time", "block_txs", "n_tx")
_HASHES = ("hash", "prev")
_PER_TX = {"txids": 32, "tweaks33": 33, "tweaks64": 64, "max_values": 8, "out_counts": 4}  # bytes per eligible tx
_PER_OUTPUT = {"out_vouts": 4, "out_values": 8, "out_keys": 32}  # bytes per taproot output of those txs
_PAIRS = ("marks", "spent_hashes")  # 8-byte records


def _prefixes(packed: bytes, stride: int) -> list[int]:
    """The txloc key (the first 47 bits, little-endian) of the txid opening every `stride`-byte record."""
    return [q >> _PREFIX_SHIFT for (q,) in struct.iter_unpack(f"<Q{stride - 8}x", packed)]


def _row_problem(names: Sequence[str], values: Sequence) -> tuple[str | None, int | None]:
    """What is wrong with a block row's named values (None when nothing), and its taproot outputs Σ (when out_counts is there)."""
    row = dict(zip(names, values))
    for name, value in row.items():
        if name in _INTS:
            if type(value) is not int or value < 0:
                return f"{name} is {value!r}, not a count", None
        elif value is None and name in _BLOB_NULLABLE:
            continue
        elif type(value) is not bytes:
            return f"{name} is {type(value).__name__}, not bytes", None
        elif (name in _HASHES and len(value) != 32) or (name in _PAIRS and len(value) % 8):
            return f"{name} is {len(value)} bytes", None
    n_tx, outputs = row.get("n_tx"), None
    if "out_counts" in row:
        if len(row["out_counts"]) != 4 * n_tx:
            return f"out_counts holds {len(row['out_counts'])} bytes for {n_tx} transactions", None
        outputs = sum(memoryview(row["out_counts"]).cast("I"))
    for widths, count, what in ((_PER_TX, n_tx, "transactions"), (_PER_OUTPUT, outputs, "taproot outputs")):
        for name, width in widths.items():
            if name in row and len(row[name]) != width * count:
                return f"{name} holds {len(row[name])} bytes, not {width} for each of {count} {what}", None
    return None, outputs


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _refuse_truncated(path: Path) -> None:
    """Raise IndexStoreError when the SQLite header's page count needs more bytes than the file and its
    WAL hold: read before SQLite parses the schema, which fails as "malformed" when a table's root
    page is cut off."""
    try:
        with open(path, "rb") as f:
            header = f.read(100)
    except OSError:
        return  # SQLite's own open says why
    if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
        return
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1):
        return  # not a header SQLite wrote: its open says "not a database"
    pages = int.from_bytes(header[28:32], "big")
    size = _file_size(path)
    if pages * page_size > size + _file_size(Path(f"{path}-wal")):
        raise IndexStoreError(f"{path} is truncated: its {pages:,} pages of {page_size:,} bytes need {pages * page_size:,}, the file has {size:,}")


def _reader_uri(path: Path) -> str:
    """The SQLite URI a reader opens: mode=ro, and immutable=1 when the directory is not writable.

    SQLite's WAL needs a -shm file beside the index, which a read-only directory cannot get; a
    file there cannot be written either (a writer would need the -wal too), so it is read as
    immutable. A -wal with content beside it without its -shm holds blocks immutable reading
    would miss: refused.

    Raises:
        IndexStoreError: the directory is not writable and a -wal file is there without its -shm.
    """
    uri = f"{path.resolve().as_uri()}?mode=ro"
    if os.access(path.parent, os.W_OK):
        return uri
    wal, shm = Path(f"{path}-wal"), Path(f"{path}-shm")
    if _file_size(wal) == 0:
        return uri + "&immutable=1"
    if shm.exists():
        return uri  # SQLite reads a WAL index in a read-only directory when both files are there
    raise IndexStoreError(
        f"{path}: the directory is not writable and {wal.name} (blocks not yet in the file) is there without "
        f"{shm.name}: open the index once where its directory is writable, or copy both files"
    )


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
    if "readonly" in text or "unable to open" in text:
        return f"{text} (the file or its directory is read-only: the index can be read there, not synced)"
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

    def __init__(self, path: Path, conn: sqlite3.Connection, readonly: bool, check: bool = False) -> None:
        """`check`: refuse a truncated or damaged file (`_check_pages`) before reading anything of it."""
        self.path = path
        self.readonly = readonly
        self._conn = conn
        self._lock = threading.RLock()
        self._writer_fd: int | None = None
        self._locators: collections.OrderedDict[int, _Locator] = collections.OrderedDict()
        self._has_mempool = True
        if check:
            self._check_pages()
        self.network = self._meta("network")
        if self.network not in NETWORKS:
            raise self._damaged(f"its network is {self.network!r}")

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

        A reader in a directory it cannot write opens the file as immutable (see `_reader_uri`). The
        file must be as long as its pages (a truncated copy is refused), and one of up to
        QUICK_CHECK_BYTES gets SQLite's quick_check.

        Raises:
            IndexStoreError: missing, not an sp-scan index, truncated or damaged, another format version,
                another network; a reader: as `_reader_uri`.
        """
        path = Path(path)
        if not path.is_file():
            raise IndexStoreError(f"no index at {path}")
        _refuse_truncated(path)
        try:
            if readonly:
                conn = sqlite3.connect(_reader_uri(path), uri=True, isolation_level=None, check_same_thread=False)
            else:
                conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA busy_timeout = 10000")
            app_id, version = (conn.execute(f"PRAGMA {p}").fetchone()[0] for p in ("application_id", "user_version"))
        except sqlite3.Error as exc:
            raise IndexStoreError(f"{path}: {_reason(exc)}") from None
        if app_id != APPLICATION_ID:
            conn.close()
            raise IndexStoreError(f"{path} is not an sp-scan index")
        if version != FORMAT_VERSION and version not in _UPGRADABLE:
            conn.close()
            raise IndexStoreError(f"{path} is an index of format version {version}; this sp-scan reads version {FORMAT_VERSION}")
        try:
            store = cls(path, conn, readonly, check=True)
            store._has_mempool = version == FORMAT_VERSION
        except BaseException:
            conn.close()
            raise
        if not readonly:
            store._execute("PRAGMA synchronous = NORMAL")  # WAL: a commit survives a killed process
            if version != FORMAT_VERSION:
                store._upgrade()
            store._execute(_SPENT_KEYS_TABLE)  # an index from before the table
        if network is not None and store.network != network:
            store.close()
            raise IndexStoreError(f"{path} is an index of network {store.network}, not {network}")
        return store

    @_checked
    def _upgrade(self) -> None:
        """Bring a version-1 file to FORMAT_VERSION in one transaction: add the (empty) mempool table."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            if self._conn.execute("PRAGMA user_version").fetchone()[0] != FORMAT_VERSION:  # another writer may have done it
                self._conn.execute(_MEMPOOL_SCHEMA)
                self._conn.execute("UPDATE meta SET value = ? WHERE key = 'format'", (FORMAT_VERSION,))
                self._conn.execute(f"PRAGMA user_version = {FORMAT_VERSION}")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")
        self._has_mempool = True

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
        for _ in range(_WRITER_LOCK_TRIES):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                time.sleep(0.001)
        else:
            os.close(fd)
            raise IndexStoreError(f"{self.path} is being written by another process (a sync is running)")
        self._writer_fd = fd

    def writer_active(self) -> bool:
        """True while a writer (this store or another process's) holds the file's writer lock."""
        if self._writer_fd is not None:
            return True
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # also releases the shared lock taken
        return False

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

    def _damaged(self, what: str) -> IndexStoreError:
        return IndexStoreError(f"{self.path} is damaged: {what} (`sp-scan index info --check` checks the whole file)")

    @_checked
    def _check_pages(self) -> None:
        """Refuse a file shorter than its pages (a truncated copy); quick_check one of up to QUICK_CHECK_BYTES."""
        self._conn.execute("BEGIN")
        try:
            self._conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()  # a read snapshot (page 1 only): the WAL stays as it is
            pages, page_size = (self._conn.execute(f"PRAGMA {p}").fetchone()[0] for p in ("page_count", "page_size"))
            size, wal = _file_size(self.path), _file_size(Path(f"{self.path}-wal"))
            if pages * page_size > size + wal:
                raise IndexStoreError(f"{self.path} is truncated: its {pages:,} pages of {page_size:,} bytes need {pages * page_size:,}, the file has {size:,}")
            if size + wal <= QUICK_CHECK_BYTES:
                self._quick_check()
        finally:
            self._conn.execute("COMMIT")

    def _quick_check(self) -> None:
        problem = self._conn.execute("PRAGMA quick_check(1)").fetchone()[0]
        if problem != "ok":
            raise self._damaged(f"SQLite's quick_check says {problem.replace('*** in database main ***', '').strip()!r}")

    @property
    def first_height(self) -> int | None:
        """The height of the first indexed block; None before any block."""
        with self._lock:
            first = self._meta("first_height")
        if first is not None and (type(first) is not int or first < 0):
            raise self._damaged(f"its first height is {first!r}")
        return first

    @_checked
    def tip(self) -> tuple[int, bytes] | None:
        """(height, hash32) of the highest block; None when empty."""
        found = self._conn.execute("SELECT height, hash FROM blocks ORDER BY height DESC LIMIT 1").fetchone()
        if found is not None and (type(found[1]) is not bytes or len(found[1]) != 32):
            raise self._damaged(f"block {found[0]}'s hash is {found[1]!r}")
        return found

    def _rows(self, columns: Sequence[str], where: str, params: Sequence, outputs: bool = False) -> list[tuple[int, tuple, int | None]]:
        """(height, the columns' values, its taproot outputs Σ) of each block row matching `where`, in height order.

        Every row is checked (`_row_problem`); Σ is there when per-tx or per-output columns are read, or `outputs`.

        Raises:
            IndexStoreError: a damaged row.
            ValueError: an unknown column name.
        """
        unknown = set(columns) - set(COLUMNS)
        if unknown:
            raise ValueError(f"unknown columns {sorted(unknown)}")
        names = list(columns)
        if outputs or any(c in _PER_TX or c in _PER_OUTPUT for c in columns):
            names += [c for c in ("n_tx", "out_counts") if c not in columns]
        found = []
        for height, *values in self._conn.execute(f"SELECT height, {', '.join(names)} FROM blocks WHERE {where} ORDER BY height", params):
            problem, total = _row_problem(names, values)
            if problem is not None:
                raise self._damaged(f"block {height}'s {problem}")
            found.append((height, tuple(values[: len(columns)]), total))
        return found

    def _spends(self, start: int, end: int, outputs: dict[int, int]) -> list[tuple[int, int]]:
        """The (height, ordinal) spends rows of heights start..end, each checked against its block's taproot outputs."""
        spends = self._conn.execute("SELECT height, ordinal FROM spends WHERE height BETWEEN ? AND ?", (start, end)).fetchall()
        for height, ordinal in spends:
            if height not in outputs:
                raise self._damaged(f"a spends row names block {height}, which is not indexed")
            if type(ordinal) is not int or not 0 <= ordinal < outputs[height]:
                raise self._damaged(f"a spends row names output {ordinal!r} of block {height}, which has {outputs[height]} taproot outputs")
        return spends

    @_checked
    def row(self, height: int, columns: Sequence[str]) -> tuple:
        """The named columns of the block at `height`.

        Raises:
            HeightError: the height is not indexed.
            IndexStoreError: the row is damaged.
            ValueError: an unknown column name.
        """
        found = self._rows(columns, "height = ?", (height,))
        if not found:
            raise HeightError(f"height {height} is not in the index ({self._range_text()})")
        return found[0][1]

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
            IndexStoreError: the row or a spends row of it is damaged.
        """
        self._conn.execute("BEGIN")
        try:
            found = self._rows(columns, "height = ?", (height,), outputs=True)
            if not found:
                raise HeightError(f"height {height} is not in the index ({self._range_text()})")
            _, values, outputs = found[0]
            spent = {o for _, o in self._spends(height, height, {height: outputs})}
        finally:
            self._conn.execute("COMMIT")
        return values, spent

    @_checked
    def scan_rows(self, start: int, end: int, columns: Sequence[str]) -> tuple[list[tuple], list[tuple[int, int]]]:
        """One consistent read of heights start..end: the rows' columns in height order, and the
        (height, ordinal) spends of those rows.

        Raises:
            IndexStoreError: a damaged row or spends row.
        """
        self._conn.execute("BEGIN")
        try:
            found = self._rows(columns, "height BETWEEN ? AND ?", (start, end), outputs=True)
            spends = self._spends(start, end, {h: total for h, _, total in found})
        finally:
            self._conn.execute("COMMIT")
        return [values for _, values, _ in found], spends

    @_checked
    def check(self, batch: int = 256) -> int:
        """Check the whole file: SQLite's quick_check, the meta rows, every block row (fields, widths, the link to
        the block below), every spends and txloc row against its block, and their counts.

        Returns:
            The number of blocks checked.

        Raises:
            IndexStoreError: the first problem found.
        """
        self._conn.execute("BEGIN")
        try:
            self._quick_check()
            first = self.first_height
            lo, hi, count = self._conn.execute("SELECT MIN(height), MAX(height), COUNT(*) FROM blocks").fetchone()
            if count and (lo != first or hi - lo + 1 != count):
                raise self._damaged(f"its {count} blocks at {lo}..{hi} are not the heights from its first height {first!r} on")
            prev, n_tx, marks = None, 0, 0
            for start in range(lo, hi + 1, batch) if count else ():
                found = self._rows(COLUMNS[1:], "height BETWEEN ? AND ?", (start, start + batch - 1))
                self._spends(start, start + batch - 1, {h: total for h, _, total in found})
                for height, values, _ in found:
                    row = dict(zip(COLUMNS[1:], values))
                    if prev is not None and row["prev"] != prev:
                        raise self._damaged(f"block {height} does not link to block {height - 1}")
                    prev, n_tx, marks = row["hash"], n_tx + row["n_tx"], marks + len(row["marks"]) // 8
            stray = self._conn.execute(
                "SELECT t.height, t.tx FROM txloc t LEFT JOIN blocks b ON b.height = t.height"
                " WHERE b.height IS NULL OR typeof(t.tx) != 'integer' OR t.tx < 0 OR t.tx >= b.n_tx LIMIT 1"
            ).fetchone()
            if stray is not None:
                raise self._damaged(f"a txloc row names transaction {stray[1]!r} of block {stray[0]}, which is not indexed")
            stray = self._conn.execute("SELECT s.height FROM spends s LEFT JOIN blocks b ON b.height = s.height WHERE b.height IS NULL LIMIT 1").fetchone()
            if stray is not None:
                raise self._damaged(f"a spends row names block {stray[0]}, which is not indexed")
            for table, expected, what in (("txloc", n_tx, "eligible transactions"), ("spends", marks, "marks")):
                rows = self._conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
                if rows != expected:
                    raise self._damaged(f"{table} has {rows} rows for {expected} {what}")
        finally:
            self._conn.execute("COMMIT")
        return count

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
            tip = self.tip()
            first = self.first_height
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
            self._mempool_delete([data.txids[i : i + 32] for i in range(0, len(data.txids), 32)])
        return len(marks)

    def _locator(self, height: int) -> _Locator:
        loc = self._locators.get(height)
        if loc is None:
            found = self._rows(("txids", "out_counts", "out_vouts"), "height = ?", (height,))
            if not found:
                raise self._damaged(f"a txloc row names block {height}, which is not indexed")
            return self._remember(height, _Locator(*found[0][1]))
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
                loc = self._locator(height)
                if type(tx) is not int or not 0 <= tx < len(loc.counts):
                    raise self._damaged(f"a txloc row names transaction {tx!r} of block {height}, which has {len(loc.counts)}")
                ordinal = loc.ordinal(tx, txid32, vout)
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

    # ---- the mempool table ----

    def _mempool_version(self) -> int:
        return int(self._meta("mempool_version") or 0)

    def _mempool_bump(self) -> int:
        version = self._mempool_version() + 1
        self._conn.execute("INSERT OR REPLACE INTO meta VALUES ('mempool_version', ?)", (version,))
        return version

    def _mempool_delete(self, txids32: Sequence[bytes]) -> int:
        """Delete the rows of these txids (inside a transaction), bumping the version when any went."""
        before = self._conn.total_changes
        for chunk in _chunks(txids32, 500):
            self._conn.execute(f"DELETE FROM mempool WHERE txid IN ({', '.join('?' * len(chunk))})", chunk)
        gone = self._conn.total_changes - before
        if gone:
            self._mempool_bump()
        return gone

    @_checked
    def mempool_update(self, added: Sequence[Sequence[bytes]], removed: Sequence[bytes], clear: bool = False) -> int:
        """Change the mempool table in one transaction and bump its version.

        Args:
            added: rows in MEMPOOL_COLUMNS order, in the order they entered the mempool (a txid
                already in the table keeps its row).
            removed: txids32 to delete (absent ones are ignored).
            clear: delete every row first.

        Returns:
            The new mempool version.
        """
        with self._transaction():
            if clear:
                self._conn.execute("DELETE FROM mempool")
            self._mempool_delete(removed)
            self._conn.executemany(
                f"INSERT OR IGNORE INTO mempool({', '.join(MEMPOOL_COLUMNS)}) VALUES ({', '.join('?' * len(MEMPOOL_COLUMNS))})", added
            )
            return self._mempool_bump()

    @_checked
    def mempool_clear(self) -> bool:
        """Empty the mempool table (one transaction, version bumped) unless it is empty; True when it was not."""
        if self._conn.execute("SELECT 1 FROM mempool LIMIT 1").fetchone() is None:
            return False
        self.mempool_update([], [], clear=True)
        return True

    @_checked
    def mempool_version(self) -> int:
        """The mempool table's version: it changes with every change of the table (0 before any)."""
        return self._mempool_version()

    @_checked
    def mempool_rows(self) -> tuple[int, tuple[int, bytes] | None, list[tuple]]:
        """One consistent read: (mempool version, (height, hash32) of the tip or None, the rows in
        MEMPOOL_COLUMNS order, oldest first). A version-1 file read-only has no rows."""
        if not self._has_mempool:
            return 0, self.tip(), []
        self._conn.execute("BEGIN")
        try:
            version = self._mempool_version()
            tip = self._conn.execute("SELECT height, hash FROM blocks ORDER BY height DESC LIMIT 1").fetchone()
            rows = self._conn.execute(f"SELECT {', '.join(MEMPOOL_COLUMNS)} FROM mempool ORDER BY seq").fetchall()
        finally:
            self._conn.execute("COMMIT")
        for row in rows:
            if not _mempool_row_ok(row):
                raise IndexStoreError(f"{self.path}: a malformed mempool row (a damaged index)")
        return version, tip, rows

    @_checked
    def rollback(self, height: int) -> int:
        """Remove every block above `height` with its txloc entries and the marks it made, in one transaction.

        Returns:
            The number of blocks removed.
        """
        with self._transaction():
            rows = self._rows(("txids", "marks"), "height > ?", (height,))
            for h, (txids, marks), _ in reversed(rows):
                self._conn.execute("DELETE FROM spent_keys WHERE hash = (SELECT hash FROM blocks WHERE height = ?)", (h,))
                self._conn.executemany("DELETE FROM spends WHERE height = ? AND ordinal = ?", list(_MARK.iter_unpack(marks)))
                self._conn.executemany(
                    "DELETE FROM txloc WHERE prefix = ? AND height = ? AND tx = ?", [(p, h, n) for n, p in enumerate(_prefixes(txids, 32))]
                )
            self._conn.execute("DELETE FROM blocks WHERE height > ?", (height,))
            self._locators.clear()
        return len(rows)


def _mempool_row_ok(row: Sequence) -> bool:
    """A mempool row's fields are blobs of their widths: txid 32, tweaks 33 and 64, k outputs (k >= 1)
    of vout 4, key 32 and value 8 bytes."""
    if not all(isinstance(v, bytes) for v in row):
        return False
    txid, tweak33, tweak64, vouts, keys, values = row
    k = len(vouts) // 4
    return (len(txid), len(tweak33), len(tweak64)) == (32, 33, 64) and k >= 1 and (len(vouts), len(keys), len(values)) == (4 * k, 32 * k, 8 * k)


def _chunks(items: Sequence, n: int) -> Iterator[Sequence]:
    for i in range(0, len(items), n):
        yield items[i : i + n]
