"""Scanning an index: a height range read as one packed `Partition`, scanned in C in one call.

A Partition holds only bytes (and its two bounding heights), so it pickles cheaply and can be
scanned anywhere (a Dask worker) by `scan_partition`, which needs no database.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from .. import scan as sp_scan
from ..scan import Receiver
from ..types import FoundOutput, IndexMatch

DEFAULT_PARTITION_BLOCKS = 200
"""Blocks per partition when scanning: ~400k mainnet txs, ~60 MB of packed buffers."""


@dataclass(frozen=True, slots=True)
class Partition:
    """Heights start..end of an index, packed: what scanning needs and what maps results back.

    n = eligible txs, Σ = their taproot outputs, m = blocks; integers little-endian.

    Attributes:
        start, end: the heights asked for (inclusive).
        heights: m × u32, the blocks' heights, ascending.
        tx_starts: m × u32, each block's first tx in the per-tx arrays.
        out_starts: m × u32, each block's first output in the per-output arrays.
        txids: n × 32.
        tweaks64: n × 64, input_hash·A uncompressed (x ‖ y).
        counts: n × u32, taproot outputs per tx.
        outputs32: Σ × 32, x-only output keys, tx then vout order.
        vouts: Σ × u32.
        values: Σ × u64, satoshis.
        spent: ⌈Σ/8⌉ bytes; bit j (least significant first) is set when output j is spent.
    """

    start: int
    end: int
    heights: bytes
    tx_starts: bytes
    out_starts: bytes
    txids: bytes
    tweaks64: bytes
    counts: bytes
    outputs32: bytes
    vouts: bytes
    values: bytes
    spent: bytes

    @property
    def n_tx(self) -> int:
        """The number of transactions (tweaks) in the partition."""
        return len(self.txids) // 32


def _scan_packed(tweaks64: bytes, outputs32: bytes, counts: bytes, receiver: Receiver, threads: int) -> list:
    # TEMPORARY adapter until native.scan_tweaks_packed lands on main (same contract, same results):
    # one scan_tweak call per tx. Replace this function's body with the batch call when merging.
    found, first = [], 0
    for tx, count in enumerate(memoryview(counts).cast("I")):
        tweak64 = tweaks64[64 * tx : 64 * tx + 64]
        tweak33 = bytes([2 | (tweak64[63] & 1)]) + tweak64[:32]
        outs = [outputs32[32 * j : 32 * j + 32] for j in range(first, first + count)]
        used: set[int] = set()
        for f in sp_scan.scan_tweak(tweak33, outs, receiver):
            k = next(i for i, o in enumerate(outs) if o == f.output32 and i not in used)
            used.add(k)
            found.append((tx, k, f.tweak32, f.label))
        first += count
    return found


def scan_partition(partition: Partition, receiver: Receiver, threads: int = 1) -> list[IndexMatch]:
    """Find the outputs in a partition that pay `receiver`, in height, block, then vout order.

    Args:
        partition: from `Index.partition`.
        receiver: the wallet's keys.
        threads: native scanning threads (results do not depend on it).

    Returns:
        The matches, each with its spent status as of when the partition was read.

    Raises:
        InvalidKeyError: a stored tweak is not a valid point (a damaged index).
    """
    p = partition
    found = _scan_packed(p.tweaks64, p.outputs32, p.counts, receiver, threads)
    counts = memoryview(p.counts).cast("I")
    heights, tx_starts, out_starts = (memoryview(b).cast("I") for b in (p.heights, p.tx_starts, p.out_starts))
    vouts, values = memoryview(p.vouts).cast("I"), memoryview(p.values).cast("Q")
    matches = []
    for tx, k, tweak32, label in found:
        b = bisect.bisect_right(tx_starts, tx) - 1
        j = out_starts[b] + sum(counts[tx_starts[b] : tx]) + k
        output32 = p.outputs32[32 * j : 32 * j + 32]
        spent = bool(p.spent[j >> 3] >> (j & 7) & 1)
        match = IndexMatch(heights[b], p.txids[32 * tx : 32 * tx + 32], vouts[j], values[j], FoundOutput(output32, tweak32, label), spent)
        matches.append((tx, match))
    # The scan reports a tx's matches in k order; they are listed in vout order.
    return [m for _, m in sorted(matches, key=lambda t: (t[0], t[1].vout))]
