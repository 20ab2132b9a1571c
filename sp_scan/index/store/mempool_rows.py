"""The node's mempool in the index file: the `mempool` table a running `sync --mempool` keeps.

`mempool(seq, txid, tweak33, out_vouts, out_keys, out_values, sum)`: the eligible txs of the node's
mempool as the sync last saw them, `seq` ascending in the order they were added, `sum` the CRC of the
row's MEMPOOL_COLUMNS values. Meta `mempool_version` is bumped by every change of the table. A block
appended removes its txs in the same transaction. The rows are trusted only while the writer that keeps
them holds the file (`Store.writer_active`). Functions here run inside the caller's transaction or read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ...crc import crc_row

if TYPE_CHECKING:
    from .reader import StoreReader

MEMPOOL_COLUMNS = ("txid", "tweak33", "out_vouts", "out_keys", "out_values")
SCHEMA = (
    "CREATE TABLE mempool(seq INTEGER PRIMARY KEY, txid BLOB NOT NULL UNIQUE, "
    + ", ".join(f"{c} BLOB NOT NULL" for c in MEMPOOL_COLUMNS[1:])
    + ", sum INTEGER NOT NULL)"
)
_IN_CHUNK = 4096  # values bound in one `IN (...)` (SQLite allows 32,766)


def _row_ok(row: Sequence) -> bool:
    """A row's fields are blobs of their widths: txid 32, tweak 33, k outputs (k >= 1) of vout 4, key 32 and
    value 8 bytes."""
    if not all(isinstance(v, bytes) for v in row):
        return False
    txid, tweak33, vouts, keys, values = row
    k = len(vouts) // 4
    return (len(txid), len(tweak33)) == (32, 33) and k >= 1 and (len(vouts), len(keys), len(values)) == (4 * k, 32 * k, 8 * k)


def version(store: StoreReader) -> int:
    """The table's version (0 before any change)."""
    return int(store._meta("mempool_version") or 0)


def _bump(store: StoreReader) -> int:
    new = version(store) + 1
    store._set_meta("mempool_version", new)
    return new


def empty(store: StoreReader) -> bool:
    """True when the table has no row."""
    return store._conn.execute("SELECT 1 FROM mempool LIMIT 1").fetchone() is None


def delete(store: StoreReader, txids: bytes) -> int:
    """Delete the rows of these txids (n × 32 bytes), bumping the version when any went; returns how many."""
    if empty(store):
        return 0  # (a sync without --mempool: the IN list's cost saved)
    txids32 = [txids[i : i + 32] for i in range(0, len(txids), 32)]
    before = store._conn.total_changes
    for i in range(0, len(txids32), _IN_CHUNK):
        chunk = txids32[i : i + _IN_CHUNK]
        store._conn.execute(f"DELETE FROM mempool WHERE txid IN ({', '.join('?' * len(chunk))})", chunk)
    gone = store._conn.total_changes - before
    if gone:
        _bump(store)
    return gone


def update(store: StoreReader, added: Sequence[Sequence[bytes]], removed: Sequence[bytes], clear: bool) -> int:
    """Change the table and bump its version; returns the new version.

    Args:
        added: rows in MEMPOOL_COLUMNS order, in the order they entered the mempool (a txid already in the
            table keeps its row).
        removed: txids32 to delete (absent ones are ignored).
        clear: delete every row first.
    """
    if clear:
        store._conn.execute("DELETE FROM mempool")
    delete(store, b"".join(removed))
    store._conn.executemany(
        f"INSERT OR IGNORE INTO mempool({', '.join(MEMPOOL_COLUMNS)}, sum) VALUES ({', '.join('?' * (len(MEMPOOL_COLUMNS) + 1))})",
        [(*row, crc_row(row, 0)) for row in added],
    )
    return _bump(store)


def read(store: StoreReader) -> list[tuple] | None:
    """Every row in MEMPOOL_COLUMNS order, oldest first; None when one is malformed (a damaged index)."""
    rows = store._conn.execute(f"SELECT {', '.join(MEMPOOL_COLUMNS)}, sum FROM mempool ORDER BY seq").fetchall()
    if any(crc_row(row[:-1], 0) != row[-1] or not _row_ok(row[:-1]) for row in rows):
        return None
    return [row[:-1] for row in rows]
