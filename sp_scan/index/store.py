"""The tweak index's store: SQLite, one row per block of packed column blobs. The only module with SQL.

Format version 3 (`PRAGMA user_version`, `PRAGMA application_id` = "SPSX"). Every row carries a
CRC-32 of what a reader gets from it, checked on each read, and the heights run from the first
to the tip with none missing: damage (a flipped bit, a row deleted or changed) is an
IndexStoreError on the read that meets it, never a wrong answer; `check` reads everything.

- `meta(key, value, sum)`: `network` (main, test, testnet4, signet, regtest), `format`,
  `first_height` (set by the first block), `tip` (the highest block's height, written with it),
  `mempool_version` (bumped by every change of `mempool`); `sum` is the CRC of key and value.
- `blocks`: one row per block (see `COLUMNS`): header fields, then per eligible tx in block
  order its packed columns, the block's filters and spent-index hashes, and `marks`: the
  (height u32, ordinal u32) pairs of the outputs this block marked spent, undone with it.
- `sums(height, columns)`: per block, the CRC-32 of each of its FIELDS (its columns and its
  `spent_keys` row, None included), each seeded with the height and the field's position.
- `spends(height, bits, sum)`: per block, one bit per taproot output of its eligible txs
  (ordinal j is bit j % 8 of byte j // 8) set once a later block (or a later tx of the block)
  spent it: the union of every block's `marks`; `sum` is the bitmap's CRC seeded with the height.
- `txloc(prefix, height, tx)`: the first 47 bits of every indexed txid -> where it is, so a
  later spend finds the tx it spends; prefixes that collide are told apart by the full txid
  in the block's row.
- `spent_keys(hash, keys8)`: per block (by hash), the first 8 bytes of the key of every P2TR
  output its inputs spend (BlindBit v2's spent outputs); absent for a block stored without them.
- `mempool(seq, txid, tweak33, tweak64, out_vouts, out_keys, out_values, sum)`: the eligible txs
  of the node's mempool as a running `sync --mempool` last saw them, `seq` ascending in the order
  they were added. A block appended removes its txs from it in the same transaction. Its rows
  are trusted only while the writer that keeps them holds the file (`writer_active`).

A block, its sums and spends rows, its txloc rows, the marks it makes and the new tip are one
transaction. Versions 1 and 2 (no checksums; spends as one row per spent output) are upgraded
in place by a writer, in one transaction (a killed upgrade leaves the file as it was), reading
and checking every block once; a reader refuses them, saying so.

Bytes in, bytes out: the store packs and unpacks nothing beyond what the rows need.
Every SQLite failure is raised as `IndexStoreError` naming the file.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import functools
import itertools
import operator
import os
import sqlite3
import struct
import threading
import time
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from .. import backend
from ..errors import HeightError, IndexStoreError
from ..network import NETWORKS
from ..types import BlockData
from .checkpoint import Checkpointer

FORMAT_VERSION = 3
_UPGRADABLE = (1, 2)  # older versions a writer upgrades in place
APPLICATION_ID = 0x53505358  # "SPSX"
PAGE_SIZE = 16384
_PREFIX_SHIFT = 17  # txloc keeps a txid's first 47 bits: 6 bytes in SQLite's record format
_LOCATOR_CACHE = 512  # blocks whose txids and outputs stay in memory to resolve spends
_RECENT_BLOCKS = 32  # the writer keeps the taproot outputs of the last 32 to 64 blocks it wrote in memory (~19 MB at 2,000 a block)
_IN_CHUNK = 4096  # values bound in one `IN (...)` (SQLite allows 32,766)
_VALUES_ROWS = 256  # rows per multi-row INSERT: one statement costs less than executemany's reset and bind per row

# blocks' columns, small and often read ones first (a column behind a large blob costs its pages).
COLUMNS = (
    "height", "hash", "prev", "time", "block_txs", "n_tx", "max_values", "out_counts", "out_vouts", "txids",
    "tweaks33", "spent_hashes", "filter_new", "filter_spent", "marks", "out_values", "out_keys", "tweaks64",
)  # fmt: skip
FIELDS = (*COLUMNS[1:], "spent_keys")
"""What a block's `sums` row covers, in its order: every column but the height (the seed), and its spent_keys."""
_FIELD = {name: i for i, name in enumerate(FIELDS)}
_SPENDS_SEED = len(FIELDS)  # the position a spends bitmap's CRC is seeded with
_BLOB_NULLABLE = ("filter_new", "filter_spent", "spent_hashes", "spent_keys")
_META_SCHEMA = "CREATE TABLE meta(key TEXT PRIMARY KEY, value NOT NULL, sum INTEGER NOT NULL) WITHOUT ROWID"
_SUMS_SCHEMA = "CREATE TABLE sums(height INTEGER PRIMARY KEY, columns BLOB NOT NULL)"
_SPENDS_SCHEMA = "CREATE TABLE spends(height INTEGER PRIMARY KEY, bits BLOB NOT NULL, sum INTEGER NOT NULL)"
_SPENT_KEYS_SCHEMA = "CREATE TABLE IF NOT EXISTS spent_keys(hash BLOB PRIMARY KEY, keys8 BLOB NOT NULL) WITHOUT ROWID"
MEMPOOL_COLUMNS = ("txid", "tweak33", "tweak64", "out_vouts", "out_keys", "out_values")
_MEMPOOL_SCHEMA = (
    "CREATE TABLE mempool(seq INTEGER PRIMARY KEY, txid BLOB NOT NULL UNIQUE, "
    + ", ".join(f"{c} BLOB NOT NULL" for c in MEMPOOL_COLUMNS[1:])
    + ", sum INTEGER NOT NULL)"
)
_SCHEMA = (
    _META_SCHEMA,
    "CREATE TABLE blocks(height INTEGER PRIMARY KEY, "
    + ", ".join(f"{c} {'BLOB' if c in _BLOB_NULLABLE else 'NOT NULL'}" for c in COLUMNS[1:])
    + ")",
    _SUMS_SCHEMA,
    _SPENDS_SCHEMA,
    "CREATE TABLE txloc(prefix INTEGER NOT NULL, height INTEGER NOT NULL, tx INTEGER NOT NULL,"
    " PRIMARY KEY(prefix, height, tx)) WITHOUT ROWID",
    _SPENT_KEYS_SCHEMA,
    _MEMPOOL_SCHEMA,
)
_WRITER_LOCK_TRIES = 100  # a reader's liveness probe holds a shared lock for microseconds: retry 1 ms apart
_MARK = struct.Struct("<II")
_TXLOC = struct.Struct("<qII")
_SEED = struct.Struct("<qB")
_SUMS = struct.Struct(f"<{len(FIELDS)}I")
_BOUNDS = (
    "SELECT (SELECT value FROM meta WHERE key = 'first_height'), (SELECT sum FROM meta WHERE key = 'first_height'),"
    " (SELECT value FROM meta WHERE key = 'tip'), (SELECT sum FROM meta WHERE key = 'tip'),"
    " (SELECT MIN(height) FROM blocks), (SELECT MAX(height) FROM blocks)"
)
_M31 = 2**31 - 1
_TXLOC_TERM = f"((prefix & 16777215) * 1000003 + (prefix >> 24)) % {_M31} * ((height * 65599 + tx) % {_M31} + 1) % {_M31}"
"""A txloc row's term of the sum `check` compares with its blocks' (the same arithmetic as `_txloc_term`)."""
WRITER_CACHE_KIB = 64 << 10
"""The writer's page cache: txloc's pages stay in it while each block's row (~16 pages on mainnet) passes through."""
QUICK_CHECK_BYTES = 64 << 20
"""An index up to this size (with its write-ahead log) gets SQLite's `PRAGMA quick_check` on every open."""

# What every block row holds, checked on each read after its sums: the widths the unpacking relies on.
_INTS = ("height", "time", "block_txs", "n_tx")
_HASHES = ("hash", "prev")
_PER_TX = {"txids": 32, "tweaks33": 33, "tweaks64": 64, "max_values": 8, "out_counts": 4}  # bytes per eligible tx
_PER_OUTPUT = {"out_vouts": 4, "out_values": 8, "out_keys": 32}  # bytes per taproot output of those txs
_PAIRS = ("marks", "spent_hashes", "spent_keys")  # 8-byte records


def _crc(value, seed: int) -> int:
    """The CRC-32 of a stored value (bytes, int, str or None, tagged by its type) continuing `seed`; -1 for
    any other type (no CRC equals it)."""
    if type(value) is bytes:
        return zlib.crc32(value, zlib.crc32(b"b", seed))
    if type(value) is int and -(2**63) <= value < 2**63:
        return zlib.crc32(b"i" + value.to_bytes(8, "little", signed=True), seed)
    if type(value) is str:
        return zlib.crc32(b"s" + value.encode(errors="surrogatepass"), seed)
    if value is None:
        return zlib.crc32(b"n", seed)
    return -1


def _seed(height: int, position: int) -> int:
    """The CRC a block's field starts from: its height and the field's position, so a row moved is a row damaged."""
    return zlib.crc32(_SEED.pack(height, position))


def _meta_sum(key: str, value) -> int:
    return _crc(value, zlib.crc32(key.encode()))


def _spends_sum(height: int, bits: bytes) -> int:
    return _crc(bytes(bits), _seed(height, _SPENDS_SEED))


def _mempool_sum(row: Sequence) -> int:
    """The CRC of a mempool row's MEMPOOL_COLUMNS values, in order (their widths are checked apart)."""
    crc = 0
    for value in row:
        crc = _crc(value, crc)
    return crc


def _txloc_term(prefix: int, height: int, tx: int) -> int:
    """What one txloc row adds to the sum of `_TXLOC_TERM` (below 2^31; a row changed changes it)."""
    return ((prefix & 16777215) * 1000003 + (prefix >> 24)) % _M31 * ((height * 65599 + tx) % _M31 + 1) % _M31


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


@dataclass(frozen=True, slots=True)
class BlockRow:
    """A block as the store writes it, prepared by `block_row` away from the writer (in a sync worker).

    Attributes:
        height: the block's height.
        values: its COLUMNS[1:] values, `marks` empty (the writer knows which outputs it spends).
        sums: the CRC-32 of each of FIELDS (`_SUMS` packed), `marks`'s that of no marks.
        spent_keys: the 8-byte key prefixes of the P2TR outputs it spends, or None.
        txloc: its txloc rows (prefix, height, tx), `_TXLOC` packed, in prefix order.
        outputs: k × 36, the outpoint of each of its eligible txs' taproot outputs, in ordinal order.
        outpoints: m × 36, the outpoints of its inputs that spend P2TR outputs, tx then vin order.
        prefixes: m × i64, each of those outpoints' txloc prefix.
    """

    height: int
    values: tuple
    sums: bytes
    spent_keys: bytes | None
    txloc: bytes
    outputs: bytes
    outpoints: bytes
    prefixes: bytes

    @property
    def hash32(self) -> bytes:
        return self.values[0]

    @property
    def prev32(self) -> bytes:
        return self.values[1]

    @property
    def block_txs(self) -> int:
        return self.values[3]

    @property
    def n_tx(self) -> int:
        return self.values[4]


_MARKS = FIELDS.index("marks")


def block_row(height: int, data: BlockData, filters: tuple[bytes, ...] | None) -> BlockRow:
    """Prepare block `height` for `Store.append`: its row's values, their checksums, its txloc rows and its spends' lookups.

    Args:
        height: the block's height.
        data: the block's index data.
        filters: (new-UTXO filter, spent filter, spent hashes k × 8[, spent P2TR keys' prefixes m × 8]), or None.
    """
    filter_new, filter_spent, spent_hashes, *spent_keys = filters or (None, None, None)
    values = (
        data.hash32, data.prev32, data.time, data.block_txs, data.n_tx, data.max_values, data.out_counts, data.out_vouts,
        data.txids, data.tweaks33, spent_hashes, filter_new, filter_spent, b"", data.out_values, data.out_keys, data.tweaks64,
    )  # fmt: skip
    keys = spent_keys[0] if spent_keys else None
    sums = _SUMS.pack(*(_crc(v, _seed(height, i)) for i, v in enumerate((*values, keys))))
    txids = _prefixes(data.txids, 32)
    order = sorted(range(len(txids)), key=txids.__getitem__)
    txloc = struct.pack(f"<{'qII' * len(order)}", *itertools.chain.from_iterable(zip(map(txids.__getitem__, order), itertools.repeat(height), order)))
    vouts = memoryview(data.out_vouts).cast("I")
    owners = itertools.chain.from_iterable(map(itertools.repeat, _split(data.txids, 32), memoryview(data.out_counts).cast("I")))
    outputs = struct.pack(f"<{'32sI' * len(vouts)}", *itertools.chain.from_iterable(zip(owners, vouts)))
    prefixes = _prefixes(data.spent_outpoints, 36)
    return BlockRow(height, values, sums, keys, txloc, outputs, data.spent_outpoints, struct.pack(f"<{len(prefixes)}q", *prefixes))


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


def _writer_lock(path: Path) -> int:
    """An open descriptor of `path` holding its exclusive writer lock (closing it releases the lock).

    Raises:
        IndexStoreError: another process (a sync) holds it.
    """
    fd = os.open(path, os.O_RDONLY)
    for _ in range(_WRITER_LOCK_TRIES):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            time.sleep(0.001)
    os.close(fd)
    raise IndexStoreError(f"{path} is being written by another process (a sync is running)")


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
    if "not a database" in text or "malformed" in text or "no such table" in text or "no such column" in text:
        return f"not a readable sp-scan index ({text})"
    if "locked" in text or "busy" in text:
        return f"{text} (another process is writing it)"
    if "readonly" in text or "unable to open" in text:
        return f"{text} (the file or its directory is read-only: the index can be read there, not synced)"
    return text


def _damage(path: Path, what: str) -> IndexStoreError:
    return IndexStoreError(f"{path} is damaged: {what} (`sp-scan index info --check` checks the whole file)")


@functools.lru_cache(maxsize=64)
def _rows_sql(columns: tuple[str, ...], outputs: bool, spent: bool) -> tuple[tuple[str, ...], str]:
    """(the names `Store._rows` reads: `columns`, then n_tx and out_counts when Σ is needed; its SELECT).

    Raises:
        ValueError: an unknown column name.
    """
    unknown = set(columns) - set(COLUMNS) - set(FIELDS)
    if unknown:
        raise ValueError(f"unknown columns {sorted(unknown)}")
    names = list(columns)
    if outputs or any(c in _PER_TX or c in _PER_OUTPUT for c in columns):
        names += [c for c in ("n_tx", "out_counts") if c not in columns]
    select = ["k.keys8" if c == "spent_keys" else f"b.{c}" for c in names]
    joins = "LEFT JOIN sums s ON s.height = b.height"
    if "spent_keys" in names:
        joins += " LEFT JOIN spent_keys k ON k.hash = b.hash"
    if spent:
        joins += " LEFT JOIN spends p ON p.height = b.height"
        select += ["p.bits", "p.sum"]
    return tuple(names), f"SELECT b.height, s.columns, {', '.join(select)} FROM blocks b {joins} WHERE b.height BETWEEN ? AND ? ORDER BY b.height"


class _Locator:
    """Where an indexed block's taproot outputs are: its txids, each tx's first ordinal (n + 1 of them: the
    last is Σ), the vouts (read by `Store._mark_spends`)."""

    __slots__ = ("txids", "first", "counts", "vouts")

    def __init__(self, txids: bytes, out_counts: bytes, out_vouts: bytes) -> None:
        self.txids = txids
        self.counts = memoryview(out_counts).cast("I")
        self.first = (0, *itertools.accumulate(self.counts))
        self.vouts = memoryview(out_vouts).cast("I")


class _Walk:
    """What a pass over every block row in height order checks across rows: each block links to the one
    below; every block's marks name an output of a block at or below it, none twice, and together they
    are the spent bits (`spent` per height: the bitmap they make); txloc holds one row per eligible tx."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.prev: bytes | None = None
        self.outputs: dict[int, int] = {}
        self.spent: dict[int, bytearray] = {}
        self.n_tx = self.txloc = self.keys = 0

    def block(self, height: int, row: dict, outputs: int) -> None:
        """Take the next block's FIELDS (as a dict) and taproot outputs Σ.

        Raises:
            IndexStoreError: it does not link to the block before, or its marks are not as above.
        """
        if self.prev is not None and row["prev"] != self.prev:
            raise _damage(self.path, f"block {height} does not link to block {height - 1}")
        self.prev = row["hash"]
        self.outputs[height] = outputs
        self.spent[height] = bytearray((outputs + 7) // 8)
        for target, ordinal in _MARK.iter_unpack(row["marks"]):
            bits = self.spent.get(target)
            if bits is None or ordinal >= self.outputs[target]:
                raise _damage(self.path, f"block {height}'s marks name output {ordinal} of block {target}, which is not indexed")
            if bits[ordinal >> 3] >> (ordinal & 7) & 1:
                raise _damage(self.path, f"output {ordinal} of block {target} is marked spent twice (again by block {height})")
            bits[ordinal >> 3] |= 1 << (ordinal & 7)
        self.n_tx += row["n_tx"]
        self.txloc += sum(_txloc_term(p, height, n) for n, p in enumerate(_prefixes(row["txids"], 32)))
        self.keys += row.get("spent_keys") is not None

    def check_txloc(self, conn: sqlite3.Connection) -> None:
        """Compare the txloc table with the rows the blocks walked need.

        Raises:
            IndexStoreError: a row more, fewer, or changed.
        """
        stray = conn.execute(
            "SELECT t.height, t.tx FROM txloc t LEFT JOIN blocks b ON b.height = t.height"
            " WHERE b.height IS NULL OR typeof(t.tx) != 'integer' OR t.tx < 0 OR t.tx >= b.n_tx LIMIT 1"
        ).fetchone()
        if stray is not None:
            raise _damage(self.path, f"a txloc row names transaction {stray[1]!r} of block {stray[0]}, which is not indexed")
        rows, total = conn.execute(f"SELECT COUNT(*), SUM({_TXLOC_TERM}) FROM txloc").fetchone()
        if rows != self.n_tx:
            raise _damage(self.path, f"txloc has {rows} rows for {self.n_tx} eligible transactions")
        if (total or 0) != self.txloc:
            raise _damage(self.path, "a txloc row does not name its transaction (their sum differs from the blocks')")


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


_UPGRADE_BATCH = 256  # blocks read per statement while upgrading


def _upgrade(conn: sqlite3.Connection, path: Path, version: int) -> None:
    """Bring a version-1 or -2 file to FORMAT_VERSION in one transaction under the writer lock, so a killed
    upgrade leaves the file as it was (`_migrate`).

    Raises:
        IndexStoreError: another process writes the file, or it is damaged (then nothing is changed).
    """
    fd = _writer_lock(path)
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute("PRAGMA user_version").fetchone()[0] in _UPGRADABLE:  # another writer may have done it
                _migrate(conn, path)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    except IndexStoreError as exc:
        raise IndexStoreError(f"{path} stays at format version {version}, not upgraded to {FORMAT_VERSION}: {exc}") from None
    finally:
        os.close(fd)


def _migrate(conn: sqlite3.Connection, path: Path) -> None:
    """The upgrade's changes (inside its transaction): meta gains its sums and `tip`; every block row is read
    once and checked (widths, links, its marks against the old spends rows) and gets its sums row; the old
    spends rows (one per spent output) become the per-block bitmaps; the mempool table (a running sync's,
    emptied when one starts) is made anew.

    Raises:
        IndexStoreError: a damaged row, or rows that disagree.
    """
    meta = dict(conn.execute("SELECT key, value FROM meta"))
    network, first = meta.get("network"), meta.get("first_height")
    if network not in NETWORKS:
        raise _damage(path, f"its network is {network!r}")
    lo, hi, count = conn.execute("SELECT MIN(height), MAX(height), COUNT(*) FROM blocks").fetchone()
    if count and (first != lo or hi - lo + 1 != count):
        raise _damage(path, f"its {count} blocks at {lo}..{hi} are not the heights from its first height {first!r} on")
    meta["format"] = FORMAT_VERSION
    if count:
        meta["tip"] = hi
    conn.execute("DROP TABLE meta")
    conn.execute(_META_SCHEMA)
    conn.executemany("INSERT INTO meta VALUES (?, ?, ?)", [(k, v, _meta_sum(k, v)) for k, v in meta.items()])
    conn.execute("DROP TABLE IF EXISTS mempool")
    for statement in (_MEMPOOL_SCHEMA, _SPENT_KEYS_SCHEMA, "ALTER TABLE spends RENAME TO spends_v2", _SUMS_SCHEMA, _SPENDS_SCHEMA):
        conn.execute(statement)
    walk = _Walk(path)
    select = f"SELECT b.height, {', '.join(f'b.{c}' for c in COLUMNS[1:])}, k.keys8 FROM blocks b LEFT JOIN spent_keys k ON k.hash = b.hash"
    for start in range(lo, hi + 1, _UPGRADE_BATCH) if count else ():
        sums = []
        for height, *values in conn.execute(f"{select} WHERE b.height BETWEEN ? AND ? ORDER BY b.height", (start, start + _UPGRADE_BATCH - 1)):
            problem, outputs = _row_problem(FIELDS, values)
            if problem is not None:
                raise _damage(path, f"block {height}'s {problem}")
            walk.block(height, dict(zip(FIELDS, values)), outputs)
            sums.append((height, _SUMS.pack(*(_crc(v, _seed(height, i)) for i, v in enumerate(values)))))
        conn.executemany("INSERT INTO sums VALUES (?, ?)", sums)
    walk.check_txloc(conn)
    marked = {h: bytearray(len(bits)) for h, bits in walk.spent.items()}
    for height, ordinal in conn.execute("SELECT height, ordinal FROM spends_v2"):
        bits = marked.get(height)
        if bits is None or type(ordinal) is not int or not 0 <= ordinal < walk.outputs[height]:
            raise _damage(path, f"a spends row names output {ordinal!r} of block {height}, which is not indexed")
        bits[ordinal >> 3] |= 1 << (ordinal & 7)
    for height, bits in walk.spent.items():
        if marked[height] != bits:
            raise _damage(path, f"the spends rows of block {height} are not the marks the blocks above it made")
    conn.executemany("INSERT INTO spends VALUES (?, ?, ?)", ((h, bytes(bits), _spends_sum(h, bits)) for h, bits in walk.spent.items()))
    conn.execute("DROP TABLE spends_v2")
    conn.execute(f"PRAGMA user_version = {FORMAT_VERSION}")


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
        self._recent: list[dict[bytes, int]] = [{}, {}]  # taproot outputs it wrote (outpoint36 -> height << 32 | ordinal): newer, older
        self._recent_blocks = 0  # blocks in the newer
        self._checkpointer: Checkpointer | None = None
        if check:
            self._check_pages()
        self.network = self._meta_checked("network")
        if self.network is None:
            raise self._damaged("its meta row network is missing")
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
                for statement in _SCHEMA:
                    conn.execute(statement)
                meta = [("network", network), ("format", FORMAT_VERSION)]
                conn.executemany("INSERT INTO meta VALUES (?, ?, ?)", [(k, v, _meta_sum(k, v)) for k, v in meta])
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
        QUICK_CHECK_BYTES gets SQLite's quick_check. A writer upgrades a version-1 or -2 file in place
        first (see `_upgrade`: it reads every block once).

        Raises:
            IndexStoreError: missing, not an sp-scan index, truncated or damaged, another format version
                (an older one opened read-only: the message says how to upgrade it), another network;
                a reader: as `_reader_uri`.
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
        try:
            if app_id != APPLICATION_ID:
                raise IndexStoreError(f"{path} is not an sp-scan index")
            if version != FORMAT_VERSION and version not in _UPGRADABLE:
                raise IndexStoreError(f"{path} is an index of format version {version}; this sp-scan reads version {FORMAT_VERSION}")
            if version != FORMAT_VERSION and readonly:
                raise IndexStoreError(
                    f"{path} is an index of format version {version}: `sp-scan index sync` upgrades it in place to "
                    f"version {FORMAT_VERSION} (it reads every block once), then it can be read"
                )
            if version != FORMAT_VERSION:
                try:
                    _upgrade(conn, path, version)
                except sqlite3.Error as exc:
                    raise IndexStoreError(f"{path} stays at format version {version}: {_reason(exc)}") from None
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
        if self._writer_fd is None:
            self._writer_fd = _writer_lock(self.path)

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

    # ---- reading: every row checked against its sums ----

    def _execute(self, sql: str, params: Sequence = ()) -> sqlite3.Cursor:
        try:
            return self._conn.execute(sql, params)
        except sqlite3.Error as exc:
            raise IndexStoreError(f"{self.path}: {_reason(exc)}") from None

    @contextlib.contextmanager
    def _read(self) -> Iterator[None]:
        """One read snapshot for what is read inside (the writer's transaction when one is open)."""
        if self._conn.in_transaction:
            yield
            return
        self._conn.execute("BEGIN")
        try:
            yield
        finally:
            self._conn.execute("COMMIT")

    def _meta(self, key: str):
        """The meta row's value, checked against its sum; None when there is no such row.

        Raises:
            IndexStoreError: the row does not match its sum.
        """
        row = self._conn.execute("SELECT value, sum FROM meta WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        if _meta_sum(key, row[0]) != row[1]:
            raise self._damaged(f"its meta row {key} does not match its checksum")
        return row[0]

    @_checked
    def _meta_checked(self, key: str):
        return self._meta(key)

    def _set_meta(self, key: str, value) -> None:
        self._conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?, ?)", (key, value, _meta_sum(key, value)))

    def _damaged(self, what: str) -> IndexStoreError:
        return _damage(self.path, what)

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

    def _bounds(self) -> tuple[int | None, int | None]:
        """(first height, tip height) from meta, each None before any block, checked against the lowest and
        highest block rows (a first or last block deleted is seen here; one between, by `_rows`).

        Raises:
            IndexStoreError: a meta row damaged or missing, or the blocks' ends are not the ones meta names.
        """
        first, first_sum, tip, tip_sum, lo, hi = self._conn.execute(_BOUNDS).fetchone()  # (one statement: every read runs it)
        for key, value, crc in (("first_height", first, first_sum), ("tip", tip, tip_sum)):
            if crc is not None and _meta_sum(key, value) != crc:
                raise self._damaged(f"its meta row {key} does not match its checksum")
            if value is not None and (type(value) is not int or value < 0):
                raise self._damaged(f"its meta row {key} is {value!r}")
        if tip is None:
            if hi is not None:
                raise self._damaged(f"its meta row tip is missing (it holds blocks up to {hi})")
            return first, None
        if first is None:
            raise self._damaged("its meta row first_height is missing")
        if lo is None or lo > first or hi < tip:
            raise self._damaged(f"block {first if lo is None or lo > first else tip} is missing")
        if lo < first or hi > tip or first > tip:
            raise self._damaged(f"it holds blocks {lo}..{hi}, not its heights {first}..{tip}")
        return first, tip

    def _rows(
        self,
        columns: Sequence[str],
        start: int,
        end: int,
        *,
        outputs: bool = False,
        spent: bool = False,
        bounds: tuple[int | None, int | None] | None = None,
    ) -> list[tuple[int, tuple, int | None, bytes | None]]:
        """(height, the columns' values, its taproot outputs Σ, its spent bitmap) of each block from start to end.

        Every row is checked: each value read against its sum, then widths (`_row_problem`), the bitmap
        against its sum and Σ; and every height between the index's first and tip is there. Σ is
        there when per-tx or per-output columns are read, or `outputs` or `spent`; the bitmap with `spent`.

        Args:
            columns: names among COLUMNS and FIELDS.
            bounds: `_bounds()` when the caller has it.

        Raises:
            IndexStoreError: a damaged or missing row.
            ValueError: an unknown column name.
        """
        names, sql = _rows_sql(tuple(columns), outputs or spent, spent)
        first, tip = self._bounds() if bounds is None else bounds
        expected, last = (max(start, first), min(end, tip)) if tip is not None else (0, -1)
        found = []
        for height, sums, *values in self._conn.execute(sql, (start, end)):
            if height != expected:
                raise self._damaged(f"block {expected} is missing")
            expected += 1
            bits = values[-2:] if spent else None
            values = values[: len(names)]
            if type(sums) is not bytes or len(sums) != _SUMS.size:
                raise self._damaged(f"block {height}'s sums row is {'missing' if sums is None else 'malformed'}")
            stored = _SUMS.unpack(sums)
            for name, value in zip(names, values):
                i = _FIELD.get(name)  # None for the height, which seeds the others
                if i is not None and _crc(value, _seed(height, i)) != stored[i]:
                    raise self._damaged(f"block {height}'s {name} does not match its checksum")
            problem, total = _row_problem(names, values)
            if problem is not None:
                raise self._damaged(f"block {height}'s {problem}")
            found.append((height, tuple(values[: len(columns)]), total, None if bits is None else self._bits(height, *bits, total)))
        if expected <= last:
            raise self._damaged(f"block {expected} is missing")
        return found

    def _bits(self, height: int, bits, crc, outputs: int) -> bytes:
        """A block's spends bitmap checked against its sum and its `outputs` taproot outputs.

        Raises:
            IndexStoreError: missing, or not matching its sum or the outputs.
        """
        if bits is None:
            raise self._damaged(f"block {height}'s spends row is missing")
        if _crc(bits, _seed(height, _SPENDS_SEED)) != crc:
            raise self._damaged(f"block {height}'s spent outputs do not match their checksum")
        if len(bits) != (outputs + 7) // 8 or (outputs % 8 and bits[-1] >> (outputs % 8)):
            raise self._damaged(f"block {height}'s spends row does not fit its {outputs} taproot outputs")
        return bits

    @property
    def first_height(self) -> int | None:
        """The height of the first indexed block; None before any block."""
        return self._first_height()

    @_checked
    def _first_height(self) -> int | None:
        with self._read():
            return self._bounds()[0]

    @_checked
    def tip(self) -> tuple[int, bytes] | None:
        """(height, hash32) of the highest block; None when empty."""
        with self._read():
            first, tip = bounds = self._bounds()
            if tip is None:
                return None
            return tip, self._rows(("hash",), tip, tip, bounds=bounds)[0][1][0]

    @_checked
    def row(self, height: int, columns: Sequence[str]) -> tuple:
        """The named COLUMNS and FIELDS of the block at `height`.

        Raises:
            HeightError: the height is not indexed.
            IndexStoreError: the row is damaged.
            ValueError: an unknown column name.
        """
        with self._read():
            found = self._rows(columns, height, height)
            if not found:
                raise HeightError(f"height {height} is not in the index ({self._range_text()})")
        return found[0][1]

    @_checked
    def hashes(self, start: int, end: int) -> list[tuple[int, bytes]]:
        """(height, hash32) of every block from start to end, ascending."""
        with self._read():
            return [(height, values[0]) for height, values, _, _ in self._rows(("hash",), start, end)]

    def spent_keys(self, height: int) -> bytes | None:
        """The 8-byte key prefixes of the P2TR outputs block `height` spends (tx then vin order), or None
        when the block was stored without them.

        Raises:
            HeightError: the height is not indexed.
        """
        return self.row(height, ("spent_keys",))[0]

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
            IndexStoreError: the row or its spends row is damaged.
        """
        with self._read():
            found = self._rows(columns, height, height, spent=True)
            if not found:
                raise HeightError(f"height {height} is not in the index ({self._range_text()})")
        _, values, _, bits = found[0]
        return values, {8 * i + j for i, byte in enumerate(bits) if byte for j in range(8) if byte >> j & 1}

    @_checked
    def scan_rows(self, start: int, end: int, columns: Sequence[str]) -> list[tuple[tuple, bytes]]:
        """One consistent read of heights start..end: per block in height order, its columns' values and
        its spent bitmap (⌈Σ/8⌉ bytes, bit j of ordinal j set when spent).

        Raises:
            IndexStoreError: a damaged or missing row.
        """
        with self._read():
            return [(values, bits) for _, values, _, bits in self._rows(columns, start, end, spent=True)]

    @_checked
    def check(self, batch: int = 256) -> int:
        """Check the whole file: SQLite's quick_check, the meta rows, every block's row, sums and spends row
        (each value against its sum, widths, the link to the block below), the marks of all blocks against
        the spent bits (`_Walk`), the txloc and spent_keys rows against the blocks, and the mempool rows.

        Returns:
            The number of blocks checked.

        Raises:
            IndexStoreError: the first problem found.
        """
        with self._read():
            self._quick_check()
            for key in ("network", "format"):
                if self._meta(key) is None:
                    raise self._damaged(f"its meta row {key} is missing")
            if self._meta("format") != FORMAT_VERSION:
                raise self._damaged(f"its meta row format is {self._meta('format')!r}, not {FORMAT_VERSION}")
            first, tip = bounds = self._bounds()
            count = 0 if tip is None else tip - first + 1
            walk, sums = _Walk(self.path), {}
            for start in range(first, tip + 1, batch) if count else ():
                for height, values, outputs, bits in self._rows(FIELDS, start, start + batch - 1, spent=True, bounds=bounds):
                    walk.block(height, dict(zip(FIELDS, values)), outputs)
                    sums[height] = _spends_sum(height, bits)
            for height, bits in walk.spent.items():
                if _spends_sum(height, bits) != sums[height]:
                    raise self._damaged(f"block {height}'s spent outputs are not the marks the blocks above it made")
            walk.check_txloc(self._conn)
            for table, expected in (("sums", count), ("spends", count), ("spent_keys", walk.keys)):
                rows = self._conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
                if rows != expected:
                    raise self._damaged(f"{table} has {rows} rows for {expected} blocks")
            self._mempool_checked(self._conn.execute(f"SELECT {', '.join(MEMPOOL_COLUMNS)}, sum FROM mempool").fetchall())
        return count

    @_checked
    def stats(self, batch: int = 4096) -> dict:
        """Counts and size: blocks, first/tip height, transactions (all and eligible), bytes on disk.

        Raises:
            IndexStoreError: a damaged or missing row.
        """
        txs = eligible = 0
        with self._read():
            first, tip = bounds = self._bounds()
            for start in range(first, tip + 1, batch) if tip is not None else ():
                for _, (block_txs, n_tx), _, _ in self._rows(("block_txs", "n_tx"), start, start + batch - 1, bounds=bounds):
                    txs, eligible = txs + block_txs, eligible + n_tx
        pages, page_size = (self._conn.execute(f"PRAGMA {p}").fetchone()[0] for p in ("page_count", "page_size"))
        wal = Path(f"{self.path}-wal")
        size = pages * page_size + (wal.stat().st_size if wal.exists() else 0)
        blocks = 0 if tip is None else tip - first + 1
        return {"blocks": blocks, "first": first if tip is not None else None, "tip": tip, "transactions": txs, "eligible": eligible, "bytes": size}

    # ---- writing: one transaction per call ----

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
        self.lock_writer()
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            self._forget()
            raise
        self._conn.execute("COMMIT")

    @_checked
    def append(self, row: BlockRow) -> int:
        """Add the next block and mark what it spends, in one transaction with the new tip.

        Args:
            row: from `block_row`; its height is tip + 1 (the first block of an empty index sets
                `first_height`), its prev32 the tip's hash.

        Returns:
            How many outputs of indexed txs this block marked spent.

        Raises:
            IndexStoreError: the height does not follow the tip, the block does not link to it, or a row
                the marks read is damaged.
        """
        height = row.height
        with self._transaction():
            first, tip = bounds = self._bounds()
            expected = tip + 1 if tip is not None else first if first is not None else height
            if height != expected:
                raise IndexStoreError(f"{self.path}: block {height} does not follow the index (next is {expected})")
            if tip is not None:
                tip_hash = self._rows(("hash",), tip, tip, bounds=bounds)[0][1][0]
                if row.prev32 != tip_hash:
                    raise IndexStoreError(f"{self.path}: block {height} does not link to the tip {tip_hash[::-1].hex()}")
            if first is None:
                self._set_meta("first_height", height)
            txloc = struct.unpack(f"<{'qII' * (len(row.txloc) // _TXLOC.size)}", row.txloc)
            self._insert("txloc", 3, txloc)
            self._remember_outputs(height, row.outputs)
            values = dict(zip(FIELDS, row.values))
            self._remember(height, _Locator(values["txids"], values["out_counts"], values["out_vouts"]))
            packed, bits = self._mark_spends(row)
            sums = list(_SUMS.unpack(row.sums))
            sums[_MARKS] = _crc(packed, _seed(height, _MARKS))
            self._conn.execute(
                f"INSERT INTO blocks VALUES ({', '.join('?' * len(COLUMNS))})", (height, *row.values[:_MARKS], packed, *row.values[_MARKS + 1 :])
            )
            self._conn.execute("INSERT INTO sums VALUES (?, ?)", (height, _SUMS.pack(*sums)))
            self._conn.execute("INSERT INTO spends VALUES (?, ?, ?)", (height, bits, _spends_sum(height, bits)))
            if row.spent_keys is not None:
                self._conn.execute("INSERT OR REPLACE INTO spent_keys VALUES (?, ?)", (row.hash32, row.spent_keys))
            self._set_meta("tip", height)
            self._mempool_delete(values["txids"])
        if self._checkpointer is not None:
            self._checkpointer.committed(sum(len(v) for v in row.values if isinstance(v, bytes)) + len(row.txloc))
        return len(packed) // _MARK.size

    def _insert(self, table: str, width: int, flat: Sequence) -> None:
        """INSERT OR IGNORE the rows of `width` values each laid end to end in `flat`, _VALUES_ROWS to a statement."""
        step = width * _VALUES_ROWS
        for i in range(0, len(flat), step):
            chunk = flat[i : i + step]
            values = ", ".join([f"({', '.join('?' * width)})"] * (len(chunk) // width))
            self._conn.execute(f"INSERT OR IGNORE INTO {table} VALUES {values}", chunk)

    def _remember_outputs(self, height: int, outputs36: bytes) -> None:
        """Keep where a block's taproot outputs are in memory: `_mark_spends` asks SQLite only for older blocks'."""
        newer, _ = self._recent
        if self._recent_blocks == _RECENT_BLOCKS:
            self._recent, self._recent_blocks = [{}, newer], 0
            newer = self._recent[0]
        base = height << 32
        newer.update(zip(_split(outputs36, 36), range(base, base + len(outputs36) // 36)))
        self._recent_blocks += 1

    def _forget(self) -> None:
        """Drop what the writer keeps in memory of the rows (after a rollback, or a transaction that failed)."""
        self._locators.clear()
        self._recent, self._recent_blocks = [{}, {}], 0

    def _locator(self, height: int) -> _Locator:
        loc = self._locators.get(height)
        if loc is None:
            found = self._rows(("txids", "out_counts", "out_vouts"), height, height)
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

    def _mark_spends(self, row: BlockRow) -> tuple[bytes, bytes]:
        """Set the spent bit of every output the block's outpoints spend that is tracked and not yet spent.

        Each outpoint is looked up among the taproot outputs of the recent blocks kept in memory (the
        block's own included), the others through their txloc prefixes (`_look_up`). The spends row of
        each block hit is read once, checked, and written once.

        Returns:
            The marks made, in input order (`marks`: (height, ordinal) u32 LE pairs), and the block's own
            spends bitmap (its outputs that later txs of the block spend).

        Raises:
            IndexStoreError: a txloc row names a tx that is not indexed, or a spends row is damaged.
        """
        height = row.height
        newer, older = self._recent
        outpoints = _split(row.outpoints, 36)
        found = list(map(newer.get, outpoints))
        missing = [i for i, at in enumerate(found) if at is None]
        for i in missing:
            found[i] = older.get(outpoints[i])
        missing = [i for i in missing if found[i] is None]
        if missing:
            self._look_up(row, outpoints, missing, found)
        spent = {height: bytearray((len(row.outputs) // 36 + 7) // 8)}
        for h in {at >> 32 for at in found if at is not None} - {height}:
            spent[h] = self._spent_bits(h, self._locator(h).first[-1])
        marks = backend.mark_spent(found, spent)
        hit = [h for h in spent if h != height]  # (a block whose outputs were all spent before is written unchanged)
        self._conn.executemany("UPDATE spends SET bits = ?, sum = ? WHERE height = ?", [(bytes(spent[h]), _spends_sum(h, spent[h]), h) for h in hit])
        return marks, bytes(spent[height])

    def _look_up(self, row: BlockRow, outpoints: list[bytes], missing: list[int], found: list[int | None]) -> None:
        """Set found[i] to height << 32 | ordinal of the tracked output outpoints[i] spends, for each i of
        `missing`, from SQLite's txloc rows of its prefix (read in one statement per _IN_CHUNK): the first
        tx (by height, then position) whose full txid is the outpoint's and that tracks its vout.

        Raises:
            IndexStoreError: a txloc row names a tx that is not indexed.
        """
        prefixes = memoryview(row.prefixes).cast("q")
        probes = sorted({prefixes[i] for i in missing})
        hits = []
        for chunk in _chunks(probes, _IN_CHUNK):
            hits += self._conn.execute(f"SELECT prefix, height, tx FROM txloc WHERE prefix IN ({', '.join('?' * len(chunk))})", chunk)
        txs = list(map(operator.itemgetter(2), hits))
        if set(map(type, txs)) - {int} or min(txs, default=0) < 0:
            bad = next(r for r in hits if type(r[2]) is not int or r[2] < 0)
            raise self._damaged(f"a txloc row names transaction {bad[2]!r} of block {bad[1]}")
        where: dict[int, list[tuple[int, int]]] = {}  # prefix -> its rows' (height, tx), in key order
        for prefix, h, tx in hits:
            where.setdefault(prefix, []).append((h, tx))
        for i in missing:
            txid32, vout = outpoints[i][:32], int.from_bytes(outpoints[i][32:], "little")
            for h, tx in where.get(prefixes[i], ()):
                loc = self._locator(h)
                if loc.txids[32 * tx : 32 * tx + 32] != txid32:
                    if tx >= len(loc.counts):
                        raise self._damaged(f"a txloc row names transaction {tx!r} of block {h}, which has {len(loc.counts)}")
                    continue  # another tx whose txid starts alike
                ordinal = next((o for o in range(loc.first[tx], loc.first[tx + 1]) if loc.vouts[o] == vout), None)
                if ordinal is not None:  # a tracked output of that tx
                    found[i] = h << 32 | ordinal
                    break

    def _spent_bits(self, height: int, outputs: int) -> bytearray:
        """The spends bitmap of block `height` (of `outputs` taproot outputs), checked.

        Raises:
            IndexStoreError: missing or damaged.
        """
        found = self._conn.execute("SELECT bits, sum FROM spends WHERE height = ?", (height,)).fetchone()
        return bytearray(self._bits(height, *(found or (None, None)), outputs))

    # ---- the mempool table ----

    def _mempool_version(self) -> int:
        return int(self._meta("mempool_version") or 0)

    def _mempool_bump(self) -> int:
        version = self._mempool_version() + 1
        self._set_meta("mempool_version", version)
        return version

    def _mempool_delete(self, txids: Sequence[bytes] | bytes) -> int:
        """Delete the rows of these txids (32-byte items, or n × 32 bytes; inside a transaction), bumping
        the version when any went."""
        if not self._conn.execute("SELECT EXISTS (SELECT 1 FROM mempool)").fetchone()[0]:
            return 0  # (a sync without --mempool: the IN list's cost saved)
        txids32 = [txids[i : i + 32] for i in range(0, len(txids), 32)] if isinstance(txids, bytes) else txids
        before = self._conn.total_changes
        for chunk in _chunks(txids32, _IN_CHUNK):
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
                f"INSERT OR IGNORE INTO mempool({', '.join(MEMPOOL_COLUMNS)}, sum) VALUES ({', '.join('?' * (len(MEMPOOL_COLUMNS) + 1))})",
                [(*row, _mempool_sum(row)) for row in added],
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
        MEMPOOL_COLUMNS order, oldest first).

        Raises:
            IndexStoreError: a damaged row.
        """
        with self._read():
            version = self._mempool_version()
            tip = self.tip()
            rows = self._conn.execute(f"SELECT {', '.join(MEMPOOL_COLUMNS)}, sum FROM mempool ORDER BY seq").fetchall()
        return version, tip, self._mempool_checked(rows)

    def _mempool_checked(self, rows: list[tuple]) -> list[tuple]:
        """The mempool rows (MEMPOOL_COLUMNS, then sum) without their sums, each checked against it and its widths."""
        for row in rows:
            if _mempool_sum(row[:-1]) != row[-1] or not _mempool_row_ok(row[:-1]):
                raise IndexStoreError(f"{self.path}: a malformed mempool row (a damaged index)")
        return [row[:-1] for row in rows]

    @_checked
    def rollback(self, height: int) -> int:
        """Remove every block above `height` with its sums, spends and txloc rows and the marks it made,
        in one transaction with the new tip.

        Returns:
            The number of blocks removed.

        Raises:
            IndexStoreError: a row it reads is damaged (nothing is removed).
        """
        with self._transaction():
            first, tip = bounds = self._bounds()
            if tip is None or height >= tip:
                return 0
            rows = self._rows(("hash", "txids", "marks"), height + 1, tip, bounds=bounds)
            undo: dict[int, list[int]] = collections.defaultdict(list)
            for h, (hash32, txids, marks), _, _ in rows:
                for target, ordinal in _MARK.iter_unpack(marks):
                    if target <= height:
                        undo[target].append(ordinal)
                self._conn.execute("DELETE FROM spent_keys WHERE hash = ?", (hash32,))
                self._conn.executemany(
                    "DELETE FROM txloc WHERE prefix = ? AND height = ? AND tx = ?", [(p, h, n) for n, p in enumerate(_prefixes(txids, 32))]
                )
            for target, ordinals in undo.items():
                bits = bytearray(self._rows((), target, target, spent=True, bounds=bounds)[0][3])
                for ordinal in ordinals:
                    if not bits[ordinal >> 3] >> (ordinal & 7) & 1:
                        raise self._damaged(f"output {ordinal} of block {target} is marked by a block above {height} but not spent")
                    bits[ordinal >> 3] &= ~(1 << (ordinal & 7))
                self._conn.execute("UPDATE spends SET bits = ?, sum = ? WHERE height = ?", (bytes(bits), _spends_sum(target, bits), target))
            for table in ("blocks", "sums", "spends"):
                self._conn.execute(f"DELETE FROM {table} WHERE height > ?", (height,))
            if height >= first:
                self._set_meta("tip", height)
            else:
                self._conn.execute("DELETE FROM meta WHERE key = 'tip'")
            self._forget()
        return len(rows)


def _mempool_row_ok(row: Sequence) -> bool:
    """A mempool row's fields are blobs of their widths: txid 32, tweaks 33 and 64, k outputs (k >= 1)
    of vout 4, key 32 and value 8 bytes."""
    if not all(isinstance(v, bytes) for v in row):
        return False
    txid, tweak33, tweak64, vouts, keys, values = row
    k = len(vouts) // 4
    return (len(txid), len(tweak33), len(tweak64)) == (32, 33, 64) and k >= 1 and (len(vouts), len(keys), len(values)) == (4 * k, 32 * k, 8 * k)


def _split(packed: bytes, width: int) -> list[bytes]:
    """The `width`-byte records laid end to end in `packed`."""
    return list(map(operator.itemgetter(0), struct.iter_unpack(f"{width}s", packed)))


def _chunks(items: Sequence, n: int) -> Iterator[Sequence]:
    for i in range(0, len(items), n):
        yield items[i : i + n]
