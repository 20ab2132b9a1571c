"""Older index files (formats 1 to 3) made into format 4 by a writer, in a new file built beside the old one.

Every block of the old file is read once, checked as far as its format allows (format 3: every value
against its checksum; all: widths and links), and written in format 4 with its marks, spent keys and
spends bitmap (format 1 and 2: one row per spent output) carried over; the txloc rows are left behind
(the writer resolves spends in memory). The new file must then pass the whole-file check (marks against
bitmaps included) before it takes the old one's name, so a damaged old file is refused and stays as it
was, as does one whose upgrade is killed midway (the half-built file beside it is removed by the next
upgrade). The old file's log is emptied first: no stale `-wal` can meet the new file. Readers that have
the old file open go on reading it until they open the path again.
"""

from __future__ import annotations

import os
import sqlite3
import struct
import zlib
from pathlib import Path

from ...errors import IndexStoreError
from ...network import NETWORKS
from . import check, file
from .reader import StoreReader
from .rows import FORMAT_VERSION, bits_sum, crc, meta_sum, pack_marks, pack_outputs, sums
from .schema import new_file

UPGRADABLE = (1, 2, 3)
"""The older formats a writer upgrades."""
_BATCH = 256  # blocks read per statement
_V3_COLUMNS = (
    "hash", "prev", "time", "block_txs", "n_tx", "max_values", "out_counts", "out_vouts", "txids",
    "tweaks33", "spent_hashes", "filter_new", "filter_spent", "marks", "out_values", "out_keys", "tweaks64",
)  # fmt: skip
_V3_FIELDS = (*_V3_COLUMNS, "spent_keys")  # what a format-3 sums row covers, in its order
_V3_SUMS = struct.Struct(f"<{len(_V3_FIELDS)}I")
_V3_NULLABLE = ("filter_new", "filter_spent", "spent_hashes", "spent_keys")


def _v3_seed(height: int, position: int) -> int:
    return zlib.crc32(struct.pack("<qB", height, position))


def upgrade(path: Path, version: int) -> None:
    """Replace the format-`version` index at `path` by the same index in format FORMAT_VERSION (see the module doc).

    Raises:
        IndexStoreError: another process writes the file, or it is damaged (then it stays as it was).
    """
    lock = file.FileLock(path)  # closed once no connection to the file is left (see `sp_scan.sqlitefile`)
    try:
        file.lock_writer(lock, path)
        for stale in path.parent.glob(f".{path.name}.*.new*"):  # a killed upgrade's (the lock keeps any other away)
            stale.unlink(missing_ok=True)
        with file.built_aside(path) as scratch:
            old = sqlite3.connect(path, isolation_level=None)
            try:
                old.execute("PRAGMA busy_timeout = 10000")
                if old.execute("PRAGMA user_version").fetchone()[0] == FORMAT_VERSION:
                    return  # another writer upgraded it meanwhile
                _convert(old, path, version, scratch)
                old.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            finally:
                old.close()
            for stale in (file.wal_of(path), Path(f"{path}-shm")):
                stale.unlink(missing_ok=True)
            file.place(scratch, path, replace=True)
    except sqlite3.Error as exc:
        raise IndexStoreError(f"{path} stays at format version {version}, not upgraded to {FORMAT_VERSION}: {file.reason(exc)}") from None
    except IndexStoreError as exc:
        raise IndexStoreError(f"{path} stays at format version {version}, not upgraded to {FORMAT_VERSION}: {exc}") from None
    finally:
        lock.close()


def _convert(old: sqlite3.Connection, path: Path, version: int, scratch: Path) -> None:
    """Write the blocks of `old` (format `version`) into a new file at `scratch`, checked (see the module doc).

    Raises:
        IndexStoreError: the old file is damaged, or the new one fails its check.
    """
    old.execute("BEGIN")
    tables = {name for (name,) in old.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    meta = _old_meta(old, path, version)
    network, first = meta.get("network"), meta.get("first_height")
    if network not in NETWORKS:
        raise file.damage(path, f"its network is {network!r}")
    lo, hi, count = old.execute("SELECT MIN(height), MAX(height), COUNT(*) FROM blocks").fetchone()
    tip = meta.get("tip", hi) if version == 3 else hi
    if count and (first != lo or tip != hi or hi - lo + 1 != count):
        raise file.damage(path, f"its {count} blocks at {lo}..{hi} are not the heights from its first height {first!r} on")
    new = new_file(scratch, network)
    try:
        new.execute("PRAGMA journal_mode = OFF")  # a scratch file: a killed upgrade removes it
        new.execute("PRAGMA synchronous = OFF")
        keys = "LEFT JOIN spent_keys k ON k.hash = b.hash" if "spent_keys" in tables else ""
        select = f"SELECT b.height, {', '.join(f'b.{c}' for c in _V3_COLUMNS)}, {'k.keys8' if keys else 'NULL'}"
        if version == 3:
            select += ", s.columns, p.bits, p.sum FROM blocks b LEFT JOIN sums s ON s.height = b.height LEFT JOIN spends p ON p.height = b.height"
        else:
            select += ", NULL, NULL, NULL FROM blocks b"
        spent_rows = {} if version == 3 else _old_spent_bits(old)
        prev = None
        for start in range(lo, hi + 1, _BATCH) if count else ():
            new.execute("BEGIN")
            for height, *values in old.execute(f"{select} {keys} WHERE b.height BETWEEN ? AND ? ORDER BY b.height", (start, start + _BATCH - 1)):
                *fields, sums_v3, bits, bits_crc = values
                row = dict(zip(_V3_FIELDS, fields))
                if version == 3:
                    _check_v3(path, height, fields, sums_v3, bits, bits_crc)
                n_out = _check_widths(path, height, row)
                if prev is not None and row["prev"] != prev:
                    raise file.damage(path, f"block {height} does not link to block {height - 1}")
                prev = row["hash"]
                if version != 3:
                    bits = bytes(spent_rows.pop(height, bytearray((n_out + 7) // 8)))
                    if len(bits) != (n_out + 7) // 8:
                        raise file.damage(path, f"a spends row names an output of block {height} beyond its {n_out} outputs")
                _write(new, height, row, n_out, bits)
            new.execute("COMMIT")
        if spent_rows:
            raise file.damage(path, f"a spends row names block {min(spent_rows)}, which is not indexed")
        new.execute("BEGIN")
        for key, value in (("first_height", first), ("tip", tip), ("folded", tip)) if count else (("first_height", first),) if first is not None else ():
            new.execute("INSERT INTO meta VALUES (?, ?, ?)", (key, value, meta_sum(key, value)))
        new.execute("COMMIT")
        new.execute("PRAGMA journal_mode = WAL")
        reader = StoreReader(scratch, new, readonly=True)
        try:
            check.check_file(reader, _BATCH)
        except IndexStoreError as exc:  # said of the old file: what it holds is what the check found wrong
            raise IndexStoreError(str(exc).replace(str(scratch), str(path))) from None
        finally:
            reader.close()
    finally:
        new.close()
    old.execute("COMMIT")
    with open(scratch, "rb") as f:
        os.fsync(f.fileno())


def _old_meta(old: sqlite3.Connection, path: Path, version: int) -> dict:
    """The old file's meta rows (format 3: checked against their sums)."""
    if version != 3:
        return dict(old.execute("SELECT key, value FROM meta"))
    meta = {}
    for key, value, crc_ in old.execute("SELECT key, value, sum FROM meta"):
        if meta_sum(key, value) != crc_:
            raise file.damage(path, f"its meta row {key} does not match its checksum")
        meta[key] = value
    return meta


def _old_spent_bits(old: sqlite3.Connection) -> dict[int, bytearray]:
    """Formats 1 and 2: the spends rows (one per spent output) as bitmaps by height."""
    bits: dict[int, bytearray] = {}
    for height, ordinal in old.execute("SELECT height, ordinal FROM spends"):
        if type(height) is not int or type(ordinal) is not int or ordinal < 0:
            continue  # (an odd row names no output: the check of the new file finds its marks unmatched)
        b = bits.setdefault(height, bytearray())
        if len(b) <= ordinal >> 3:
            b.extend(bytes((ordinal >> 3) + 1 - len(b)))
        b[ordinal >> 3] |= 1 << (ordinal & 7)
    return bits


def _check_v3(path: Path, height: int, fields: list, sums_v3, bits, bits_crc) -> None:
    """A format-3 row's values against its sums row, and its spends bitmap against its sum."""
    if type(sums_v3) is not bytes or len(sums_v3) != _V3_SUMS.size:
        raise file.damage(path, f"block {height}'s sums row is {'missing' if sums_v3 is None else 'malformed'}")
    for i, (name, value, stored) in enumerate(zip(_V3_FIELDS, fields, _V3_SUMS.unpack(sums_v3))):
        if crc(value, _v3_seed(height, i)) != stored:
            raise file.damage(path, f"block {height}'s {name} does not match its checksum")
    if bits is None:
        raise file.damage(path, f"block {height}'s spends row is missing")
    if type(bits) is not bytes or crc(bits, _v3_seed(height, len(_V3_FIELDS))) != bits_crc:
        raise file.damage(path, f"block {height}'s spent outputs do not match their checksum")


def _check_widths(path: Path, height: int, row: dict) -> int:
    """An old row's values have their widths; returns its taproot outputs Σ."""
    for name, value in row.items():
        if name in ("time", "block_txs", "n_tx"):
            if type(value) is not int or value < 0:
                raise file.damage(path, f"block {height}'s {name} is {value!r}, not a count")
        elif value is None and name in _V3_NULLABLE:
            continue
        elif type(value) is not bytes:
            raise file.damage(path, f"block {height}'s {name} is {type(value).__name__}, not bytes")
    n = row["n_tx"]
    if len(row["out_counts"]) != 4 * n:
        raise file.damage(path, f"block {height}'s out_counts holds {len(row['out_counts'])} bytes for {n} transactions")
    outputs = sum(memoryview(row["out_counts"]).cast("I"))
    widths = {"hash": 32, "prev": 32, "txids": 32 * n, "tweaks33": 33 * n, "out_vouts": 4 * outputs, "out_values": 8 * outputs, "out_keys": 32 * outputs}
    for name, width in widths.items():
        if len(row[name]) != width:
            raise file.damage(path, f"block {height}'s {name} holds {len(row[name])} bytes, not {width}")
    for name in ("marks", "spent_hashes", "spent_keys"):
        if row[name] is not None and len(row[name]) % 8:
            raise file.damage(path, f"block {height}'s {name} is {len(row[name])} bytes")
    return outputs


def _write(new: sqlite3.Connection, height: int, row: dict, n_out: int, bits: bytes) -> None:
    """Block `height` of an old file as format-4 rows."""
    outs = pack_outputs(row["out_counts"], row["out_vouts"], row["out_values"])
    block = (row["hash"], row["prev"], row["time"], row["block_txs"], row["n_tx"], n_out, row["tweaks33"], outs, row["txids"], row["out_keys"])
    places = [target << 32 | ordinal for target, ordinal in struct.iter_unpack("<II", row["marks"])]
    spent = (row["filter_new"], row["spent_hashes"], row["spent_keys"], pack_marks(places))
    new.execute(f"INSERT INTO blocks VALUES ({', '.join('?' * (len(block) + 2))})", (height, sums(height, "blocks", block), *block))
    new.execute(f"INSERT INTO spent VALUES ({', '.join('?' * (len(spent) + 2))})", (height, sums(height, "spent", spent), *spent))
    new.execute("INSERT INTO spends VALUES (?, ?, ?)", (height, bits, bits_sum(height, bits)))
