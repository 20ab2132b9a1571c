"""Which indexed outputs are spent: resolved in memory as blocks are written, marked without rewriting old rows.

Resolving. The writer keeps every unspent taproot output of the indexed eligible txs in an `OutputMap`
(outpoint -> height and ordinal, in C: `sp_scan.backend.output_map`), built from the file when it first
writes and kept in step with each block and rollback; a block's P2TR spends are looked up there, whatever
their age, with no read of older blocks. An output is taken out of the map by its first spend, which is
the one that marks it.

Marking. A block's `spent` row records the places it spent (`marks`), written once with the block. The
`spends` bitmaps of the blocks it hit are not rewritten then: the marks of the blocks above the fold
height (meta `folded`) are pending, and every `fold_interval` blocks (more as the index grows) the writer
folds them into the bitmaps they hit, each bitmap rewritten once for all of them. A reader ORs the pending
marks into a bitmap as it reads it (`Pending`, kept in step with the file by each store), so every answer
is as of the tip.
A block's spends of its own outputs go into its own bitmap when it is written.

So `spends[T]` = the marks naming T of T itself and of every block at or below the fold height.
"""

from __future__ import annotations

import collections

from ... import backend

FOLD_MIN, FOLD_MAX = 128, 256
"""The bounds of the fold interval (`fold_interval`)."""
BLOCKS_PER_FOLD_BLOCK = 512
"""Indexed blocks per block of fold interval, between the bounds."""


def fold_interval(blocks: int) -> int:
    """Blocks whose marks stay pending before a fold, in an index of `blocks` blocks: one per
    BLOCKS_PER_FOLD_BLOCK, within FOLD_MIN..FOLD_MAX.

    A fold rewrites every bitmap the pending marks hit, and on mainnet's spread of spends (a third at any age)
    those pages come to most of the `spends` table, whose size grows with the index: an interval that grows
    with it keeps the fold's cost per block flat. A reader keeps this many blocks' marks in memory.
    """
    return min(FOLD_MAX, max(FOLD_MIN, blocks // BLOCKS_PER_FOLD_BLOCK))


class Pending:
    """The marks of the blocks above the fold height, as of one tip: each block's places, and (built when a
    bitmap is first asked for) the ordinals they name by block.

    `key` is (fold height, tip height, tip hash32) of the file state it holds; a store reads the marks of
    new blocks into it, or starts it again when the fold height or the branch changed.
    """

    def __init__(self, folded: int, tip: int, tip_hash32: bytes) -> None:
        self.key = (folded, tip, tip_hash32)
        self.places: list[memoryview] = []  # per block above the fold height, its places (u64)
        self._ordinals: dict[int, list[int]] = collections.defaultdict(list)
        self._sorted = 0  # blocks of `places` already in _ordinals

    def add(self, height: int, hash32: bytes, places: memoryview) -> None:
        """Take the marks of block `height` (the tip's next): its places, u64 `height << 32 | ordinal`."""
        self.places.append(places)
        self.key = (self.key[0], height, hash32)

    def ordinals(self) -> dict[int, list[int]]:
        """The ordinals the marks name, by the block they hit."""
        for places in self.places[self._sorted :]:
            for place in places:
                self._ordinals[place >> 32].append(place & 0xFFFFFFFF)
        self._sorted = len(self.places)
        return self._ordinals

    def bits(self, height: int, bits: bytes) -> bytes:
        """Block `height`'s stored bitmap with its pending marks set.

        Raises:
            IndexError: a mark names an output beyond the bitmap.
        """
        ordinals = self.ordinals().get(height)
        if not ordinals:
            return bits
        out = bytearray(bits)
        for o in ordinals:
            out[o >> 3] |= 1 << (o & 7)
        return bytes(out)


class Resolver:
    """The writer's map of unspent tracked outputs (see the module doc): built by `load`, then kept in step."""

    def __init__(self) -> None:
        self.outputs = backend.output_map()

    def load(self, height: int, txids: bytes, counts: bytes, vouts: bytes, spent_bits: bytes) -> None:
        """Add an indexed block's outputs that are not spent (its bitmap with the pending marks set)."""
        self.outputs.add_block(height, txids, counts, vouts, spent_bits)

    def spend(self, height: int, txids: bytes, counts: bytes, vouts: bytes, outpoints36: bytes) -> tuple[bytes, memoryview]:
        """Add block `height`'s outputs, then take the outputs its spends (m × 36 outpoints) hit.

        Returns:
            (its own spends bitmap: its outputs that its later txs spend, the places it spent ascending, u64).
        """
        own, places = self.outputs.spend(height, txids, counts, vouts, outpoints36)
        return own, memoryview(places).cast("Q")
