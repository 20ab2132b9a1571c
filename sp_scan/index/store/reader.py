"""Reading an index file: every value checked against its row's checksums, every height there.

`StoreReader` is the read half of `Store` (its front door, in the package's `__init__`): it holds the SQLite
connection and the descriptor of the file's writer lock, and reads rows (`_rows`) with all their checks:
each value against its sum, `outs` unpacked, widths, the spends bitmap against its sum with the pending
marks set (`spends.Pending`), and every height from the first to the tip present.
"""

from __future__ import annotations

import contextlib
import functools
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from ...errors import HeightError, IndexStoreError
from ... import sqlitefile
from ...network import NETWORKS
from . import file
from .rows import BLOCK_FIELDS, FIELDS, OUTPUT_FIELDS, SPENT_FIELDS, bits_sum, crc, meta_sum, row_problem, seed, unpack_marks, unpack_outputs, unpack_sums
from .spends import Pending

QUICK_CHECK_BYTES = 64 << 20
"""An index up to this size (with its write-ahead log) gets SQLite's `PRAGMA quick_check` on every open."""
_BOUNDS = (
    "SELECT (SELECT value FROM meta WHERE key = 'first_height'), (SELECT sum FROM meta WHERE key = 'first_height'),"
    " (SELECT value FROM meta WHERE key = 'tip'), (SELECT sum FROM meta WHERE key = 'tip'),"
    " (SELECT MIN(height) FROM blocks), (SELECT MAX(height) FROM blocks)"
)


checked = sqlitefile.guarded(IndexStoreError, "index")
"""Raise sqlite3 failures of a store method as IndexStoreError naming the file (and hold the store's lock)."""


@functools.lru_cache(maxsize=64)
def _rows_sql(columns: tuple[str, ...], spent: bool) -> tuple[tuple[str, ...], tuple[str, ...], str]:
    """(the `blocks` fields and the `spent` fields `Store._rows` reads for `columns`, its SELECT).

    Raises:
        ValueError: an unknown name.
    """
    unknown = set(columns) - set(FIELDS)
    if unknown:
        raise ValueError(f"unknown columns {sorted(unknown)}")
    wanted = {"outs" if c in OUTPUT_FIELDS else c for c in columns}
    if wanted & {"outs", "out_keys", "txids", "tweaks33"} or spent:
        wanted |= {"n_tx", "n_out"}  # the widths they are checked against
    block = tuple(c for c in BLOCK_FIELDS if c in wanted)
    spent_fields = tuple(c for c in SPENT_FIELDS if c in wanted)
    select = ["b.height", "b.sums", *(f"b.{c}" for c in block)]
    joins = ""
    if spent_fields:
        select += ["s.sums", *(f"s.{c}" for c in spent_fields)]
        joins += " LEFT JOIN spent s ON s.height = b.height"
    if spent:
        select += ["p.bits", "p.sum"]
        joins += " LEFT JOIN spends p ON p.height = b.height"
    return block, spent_fields, f"SELECT {', '.join(select)} FROM blocks b{joins} WHERE b.height BETWEEN ? AND ? ORDER BY b.height"


class StoreReader:
    """An open index file, for reading; `Store` adds opening and writing.

    Attributes:
        path: the file.
        readonly: True for a reader (it never writes and takes no lock).
        network: the network the index was built for.
    """

    def __init__(self, path: Path, conn: sqlite3.Connection, readonly: bool, check: bool = False) -> None:
        """Take over `conn`, open on `path`. `check`: refuse a truncated or damaged file (`_check_pages`) before
        reading anything of it."""
        self.path = path
        self.readonly = readonly
        self._conn = conn
        self._lock = threading.RLock()
        self._file_lock = file.FileLock(path)  # open as long as the store (see `sp_scan.sqlitefile`)
        self._writer = False
        self._pending: Pending | None = None  # the marks above the fold height, as of the file state in its key
        try:
            if check:
                self._check_pages()
            self.network = self._meta_checked("network")
            if self.network is None:
                raise self._damaged("its meta row network is missing")
            if self.network not in NETWORKS:
                raise self._damaged(f"its network is {self.network!r}")
        except BaseException:
            self._file_lock.close()
            raise

    def close(self) -> None:
        """Close the file (and release the writer lock)."""
        self._conn.close()
        self._file_lock.close()

    def writer_active(self) -> bool:
        """True while a writer (this store or another process's) holds the file's writer lock."""
        return self._writer or self._file_lock.busy()

    # ---- reading: every row checked against its sums ----

    def _execute(self, sql: str, params: Sequence = ()) -> sqlite3.Cursor:
        try:
            return self._conn.execute(sql, params)
        except sqlite3.Error as exc:
            raise IndexStoreError(f"{self.path}: {file.reason(exc)}") from None

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
        if meta_sum(key, row[0]) != row[1]:
            raise self._damaged(f"its meta row {key} does not match its checksum")
        return row[0]

    @checked
    def _meta_checked(self, key: str):
        return self._meta(key)

    def _set_meta(self, key: str, value) -> None:
        self._conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?, ?)", (key, value, meta_sum(key, value)))

    def _damaged(self, what: str) -> IndexStoreError:
        return file.damage(self.path, what)

    @checked
    def _check_pages(self) -> None:
        """Refuse a file shorter than its pages (a truncated copy); quick_check one of up to QUICK_CHECK_BYTES."""
        self._conn.execute("BEGIN")
        try:
            self._conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()  # a read snapshot (page 1 only): the WAL stays as it is
            pages, page_size = (self._conn.execute(f"PRAGMA {p}").fetchone()[0] for p in ("page_count", "page_size"))
            file.truncated(self.path, pages, page_size)
            if file.file_size(self.path) + file.file_size(file.wal_of(self.path)) <= QUICK_CHECK_BYTES:
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
        for key, value, crc_ in (("first_height", first, first_sum), ("tip", tip, tip_sum)):
            if crc_ is not None and meta_sum(key, value) != crc_:
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

    def _folded(self, first: int | None, tip: int | None) -> int:
        """The fold height (meta `folded`): marks of blocks up to it are in the spends bitmaps; first - 1 before any fold.

        Raises:
            IndexStoreError: the row is damaged, or names a height outside the index.
        """
        folded = self._meta("folded")
        if folded is None:
            folded = -1 if first is None else first - 1
        low = -1 if first is None else first - 1
        if type(folded) is not int or folded < low or (tip is not None and folded > tip) or (tip is None and folded != low):
            raise self._damaged(f"its meta row folded is {folded!r}")
        return folded

    def _rows(
        self,
        columns: Sequence[str],
        start: int,
        end: int,
        *,
        spent: bool = False,
        bounds: tuple[int | None, int | None] | None = None,
    ) -> list[tuple[int, tuple, int, bytes | None]]:
        """(height, the columns' values, its taproot outputs Σ, its spent bitmap) of each block from start to end.

        Every row is checked: each value read against its sum, `outs` unpacked, widths (`rows.row_problem`),
        the bitmap against its sum and Σ; and every height between the index's first and tip is there. The
        bitmap (with `spent`) has the pending marks set: it is as of the tip.

        Args:
            columns: names among FIELDS.
            bounds: `_bounds()` when the caller has it.

        Raises:
            IndexStoreError: a damaged or missing row.
            ValueError: an unknown column name.
        """
        block_fields, spent_fields, sql = _rows_sql(tuple(columns), spent)
        first, tip = self._bounds() if bounds is None else bounds
        pending = self._pending_marks(first, tip) if spent and tip is not None else None
        expected, last = (max(start, first), min(end, tip)) if tip is not None else (0, -1)
        found = []
        for height, *values in self._conn.execute(sql, (start, end)):
            if height != expected:
                raise self._damaged(f"block {expected} is missing")
            expected += 1
            row = self._checked_values(height, "blocks", block_fields, values[: len(block_fields) + 1])
            values = values[len(block_fields) + 1 :]
            if spent_fields:
                row.update(self._checked_values(height, "spent", spent_fields, values[: len(spent_fields) + 1]))
                values = values[len(spent_fields) + 1 :]
            if "outs" in row:
                try:
                    row.update(zip(OUTPUT_FIELDS, unpack_outputs(row.pop("outs"), row["n_tx"], row["n_out"])))
                except ValueError as exc:
                    raise self._damaged(f"block {height}'s {exc}") from None
            problem = row_problem(list(row), list(row.values()))
            if problem is not None:
                raise self._damaged(f"block {height}'s {problem}")
            bits = None
            if spent:
                bits = self._with_pending(pending, height, self._bits(height, *values, row["n_out"]))
            found.append((height, tuple(row[c] for c in columns), row.get("n_out"), bits))
        if expected <= last:
            raise self._damaged(f"block {expected} is missing")
        return found

    def _checked_values(self, height: int, table: str, fields: Sequence[str], values: Sequence) -> dict:
        """A row's fields (its `sums` first in `values`) checked against their sums, by name.

        Raises:
            IndexStoreError: the row is missing, or a value does not match its sum.
        """
        stored = unpack_sums(table, values[0])
        if stored is None:
            raise self._damaged(f"block {height}'s {table} row is missing" if values[0] is None else f"block {height}'s {table} row's sums are malformed")
        order = BLOCK_FIELDS if table == "blocks" else SPENT_FIELDS
        row = {}
        for name, value in zip(fields, values[1:]):
            i = order.index(name)
            if crc(value, seed(height, table, i)) != stored[i]:
                raise self._damaged(f"block {height}'s {name} does not match its checksum")
            row[name] = value
        return row

    def _bits(self, height: int, bits, crc_, outputs: int) -> bytes:
        """A block's stored spends bitmap checked against its sum and its `outputs` taproot outputs.

        Raises:
            IndexStoreError: missing, or not matching its sum or the outputs.
        """
        if bits is None:
            raise self._damaged(f"block {height}'s spends row is missing")
        if type(bits) is not bytes or bits_sum(height, bits) != crc_:
            raise self._damaged(f"block {height}'s spent outputs do not match their checksum")
        if len(bits) != (outputs + 7) // 8 or (outputs % 8 and bits[-1] >> (outputs % 8)):
            raise self._damaged(f"block {height}'s spends row does not fit its {outputs} taproot outputs")
        return bits

    def _stored_bits(self, height: int, bounds: tuple[int, int]) -> bytes:
        """Block `height`'s spends bitmap as stored (without the pending marks), checked.

        Raises:
            IndexStoreError: missing or damaged.
        """
        (n_out,), = [values for _, values, _, _ in self._rows(("n_out",), height, height, bounds=bounds)]
        found = self._conn.execute("SELECT bits, sum FROM spends WHERE height = ?", (height,)).fetchone()
        return self._bits(height, *(found or (None, None)), n_out)

    def _pending_marks(self, first: int, tip: int, tip_hash: bytes | None = None) -> Pending:
        """The marks above the fold height as of this read's tip (its hash when the caller read it): the
        cached ones, taken on by the blocks committed since, or read again (another fold height, or another
        branch).

        Raises:
            IndexStoreError: a damaged row or meta.
        """
        folded = self._folded(first, tip)
        if tip_hash is None:
            tip_hash = self._rows(("hash",), tip, tip, bounds=(first, tip))[0][1][0]
        cached = self._pending
        if cached is not None and cached.key == (folded, tip, tip_hash):
            return cached
        lo = folded
        if cached is not None and cached.key[0] == folded and folded <= cached.key[1] < tip:
            held = self._rows(("hash",), cached.key[1], cached.key[1], bounds=(first, tip)) if cached.key[1] >= first else []
            if held and held[0][1][0] == cached.key[2]:
                lo = cached.key[1]  # the same branch: only the blocks since
        pending = cached if lo > folded else Pending(folded, folded, b"")
        for height, (hash32, marks), _, _ in self._rows(("hash", "marks"), lo + 1, tip, bounds=(first, tip)):
            pending.add(height, hash32, self._marks(height, marks))
        self._pending = pending
        return pending

    def _with_pending(self, pending: Pending, height: int, bits: bytes) -> bytes:
        """Block `height`'s stored bitmap with its pending marks set.

        Raises:
            IndexStoreError: a pending mark names an output the block does not have.
        """
        try:
            return pending.bits(height, bits)
        except IndexError:
            raise self._damaged(f"a block's marks name an output of block {height} beyond its {len(bits) * 8} bits") from None

    def _marks(self, height: int, marks: bytes) -> memoryview:
        """A block's marks unpacked (u64 places).

        Raises:
            IndexStoreError: they do not unpack.
        """
        try:
            return unpack_marks(marks)
        except ValueError as exc:
            raise self._damaged(f"block {height}'s {exc}") from None

    @property
    def first_height(self) -> int | None:
        """The height of the first indexed block; None before any block."""
        return self._first_height()

    @checked
    def _first_height(self) -> int | None:
        with self._read():
            return self._bounds()[0]

    @checked
    def tip(self) -> tuple[int, bytes] | None:
        """(height, hash32) of the highest block; None when empty."""
        with self._read():
            first, tip = bounds = self._bounds()
            if tip is None:
                return None
            return tip, self._rows(("hash",), tip, tip, bounds=bounds)[0][1][0]

    @checked
    def row(self, height: int, columns: Sequence[str]) -> tuple:
        """The named FIELDS of the block at `height`.

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

    @checked
    def hashes(self, start: int, end: int) -> list[tuple[int, bytes]]:
        """(height, hash32) of every block from start to end, ascending."""
        with self._read():
            return [(height, values[0]) for height, values, _, _ in self._rows(("hash",), start, end)]

    @checked
    def data_version(self) -> int:
        """A number that changes whenever another connection (a sync) commits to the file."""
        return self._conn.execute("PRAGMA data_version").fetchone()[0]

    def _range_text(self) -> str:
        lo, hi = self._conn.execute("SELECT MIN(height), MAX(height) FROM blocks").fetchone()
        return "it is empty" if lo is None else f"it holds {lo}..{hi}"

    @checked
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

    @checked
    def scan_rows(self, start: int, end: int, columns: Sequence[str]) -> list[tuple[int, tuple, bytes]]:
        """One consistent read of heights start..end: per block in height order, its height, its columns'
        values and its spent bitmap (⌈Σ/8⌉ bytes, bit j of ordinal j set when spent).

        Raises:
            IndexStoreError: a damaged or missing row.
        """
        with self._read():
            return [(height, values, bits) for height, values, _, bits in self._rows(columns, start, end, spent=True)]

    @checked
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
        size = pages * page_size + file.file_size(file.wal_of(self.path))
        blocks = 0 if tip is None else tip - first + 1
        return {"blocks": blocks, "first": first if tip is not None else None, "tip": tip, "transactions": txs, "eligible": eligible, "bytes": size}

    # ---- writing: one transaction per call ----
