"""bench.fold, made tiny: the writer's own fold over a table the bench builds sets exactly the marks it draws."""

from __future__ import annotations

import random
import sys

from cli_support import ROOT
from sp_scan.index.store import spends

sys.path.insert(0, str(ROOT))  # bench/ is not installed: it is imported from the checkout
from bench import chain, fold  # noqa: E402

BLOCKS = 300


def test_the_fold_sets_exactly_the_marks_drawn_below_the_tip(tmp_path):
    store = fold.build(tmp_path / "index.db", BLOCKS)
    pending = spends.Pending(BLOCKS - 1, BLOCKS - 1, b"")
    for places in fold.marks(random.Random(1), BLOCKS - 1, 8, 200, chain.Ages(recent=2, window=20)):
        pending.add(BLOCKS - 1, b"", places)
    with store._transaction():
        store._fold(pending)
    drawn = {(p >> 32, p & 0xFFFFFFFF) for places in pending.places for p in places}
    bitmaps = store._conn.execute("SELECT height, bits FROM spends").fetchall()
    store.close()
    set_bits = {(h, o) for h, bits in bitmaps for o in range(8 * len(bits)) if bits[o >> 3] >> (o & 7) & 1}
    assert len(bitmaps) == BLOCKS and set_bits == drawn and max(h for h, _ in drawn) < BLOCKS


def test_a_run_prints_a_row_for_its_height(tmp_path):
    row = fold.run(BLOCKS, 1, 100, tmp_path, seed=1, interval=None)
    assert row.startswith(f"| {BLOCKS} | ") and f"| {spends.fold_interval(BLOCKS)} |" in row
    assert not list(tmp_path.iterdir())  # its index is removed
