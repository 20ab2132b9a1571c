"""The check of a whole index file: every row read once, and what only a pass over all of them shows.

Each block's rows are read as every read does (sums, widths, `outs` unpacked); across rows: each block
links to the one below; every block's marks name an output of a block at or below it, no output twice;
each stored spends bitmap is exactly the marks of its own block and of the blocks up to the fold height
that name it (the pending ones above are ORed in by readers); every table holds one row per height; the
mempool rows are well formed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import mempool_rows
from .rows import FIELDS, FORMAT_VERSION

if TYPE_CHECKING:
    from .reader import StoreReader


class _Walk:
    """The state a pass over the blocks in height order carries from row to row."""

    def __init__(self, store: StoreReader, folded: int) -> None:
        self.store, self.folded = store, folded
        self.prev: bytes | None = None
        self.outputs: dict[int, int] = {}  # height -> its taproot outputs Σ
        self.marked: dict[int, bytearray] = {}  # height -> every output marked spent, by any block
        self.folded_bits: dict[int, bytearray] = {}  # height -> what its stored bitmap must be

    def block(self, height: int, row: dict, outputs: int) -> None:
        """Take the next block's FIELDS (as a dict) and taproot outputs Σ.

        Raises:
            IndexStoreError: it does not link to the block below, or its marks are not as above.
        """
        damaged = self.store._damaged
        if self.prev is not None and row["prev"] != self.prev:
            raise damaged(f"block {height} does not link to block {height - 1}")
        self.prev = row["hash"]
        self.outputs[height] = outputs
        self.marked[height] = bytearray((outputs + 7) // 8)
        self.folded_bits[height] = bytearray((outputs + 7) // 8)
        for place in self.store._marks(height, row["marks"]):
            target, ordinal = place >> 32, place & 0xFFFFFFFF
            bits = self.marked.get(target)
            if bits is None or ordinal >= self.outputs[target]:
                raise damaged(f"block {height}'s marks name output {ordinal} of block {target}, which is not indexed")
            if bits[ordinal >> 3] >> (ordinal & 7) & 1:
                raise damaged(f"output {ordinal} of block {target} is marked spent twice (again by block {height})")
            bits[ordinal >> 3] |= 1 << (ordinal & 7)
            if height <= self.folded or target == height:
                self.folded_bits[target][ordinal >> 3] |= 1 << (ordinal & 7)


def check_file(store: StoreReader, batch: int) -> int:
    """Check the file `store` holds (see the module doc): SQLite's quick_check, then every row, in one read.

    Returns:
        The number of blocks checked.

    Raises:
        IndexStoreError: the first problem found.
    """
    with store._read():
        store._quick_check()
        return _check_rows(store, batch)


def _check_rows(store: StoreReader, batch: int) -> int:
    damaged = store._damaged
    for key in ("network", "format"):
        if store._meta(key) is None:
            raise damaged(f"its meta row {key} is missing")
    if store._meta("format") != FORMAT_VERSION:
        raise damaged(f"its meta row format is {store._meta('format')!r}, not {FORMAT_VERSION}")
    first, tip = bounds = store._bounds()
    count = 0 if tip is None else tip - first + 1
    walk = _Walk(store, store._folded(first, tip))
    stored: dict[int, bytes] = {}
    for start in range(first, tip + 1, batch) if count else ():
        for height, values, outputs, _ in store._rows(FIELDS, start, start + batch - 1, bounds=bounds):
            walk.block(height, dict(zip(FIELDS, values)), outputs)
            stored[height] = store._stored_bits(height, bounds)
    for height, bits in walk.folded_bits.items():
        if stored[height] != bits:
            raise damaged(f"block {height}'s spent outputs are not the marks the blocks above it made")
    for table in ("blocks", "spent", "spends"):
        rows = store._conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
        if rows != count:
            raise damaged(f"{table} has {rows} rows for {count} blocks")
    if mempool_rows.read(store) is None:
        raise damaged("a malformed mempool row")
    return count
