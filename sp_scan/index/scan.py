"""Scanning an index: a height range read as one packed `Partition`, scanned in C in one call.

A Partition holds only bytes (and its two bounding heights), so it pickles cheaply and can be
scanned anywhere (a Dask worker) by `scan_partition`, which needs no database.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from .. import scan as sp_scan
from ..scan import Receiver
from ..types import FoundOutput, IndexMatch

DEFAULT_PARTITION_BLOCKS = 200
"""Blocks per partition when scanning: ~400k mainnet txs, ~60 MB of packed buffers."""
DASK_PARTITION_BLOCKS = 20
"""Blocks per partition (one task each) on a Dask cluster: ~40k mainnet txs, ~6 MB, ~1 s per wallet and core."""


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
        tweaks33: n × 33, input_hash·A compressed.
        counts: n × u32, taproot outputs per tx.
        outputs32: Σ × 32, x-only output keys, tx then vout order.
        vouts: Σ × u32.
        values: Σ × u64, satoshis.
        spent: ⌈Σ/8⌉ bytes; bit j (least significant first) is set when output j is spent.
        mempool: True for the node's mempool as the index holds it (one pseudo-block, start = end =
            the tip height when read, -1 for an empty index): its matches have height None.
    """

    start: int
    end: int
    heights: bytes
    tx_starts: bytes
    out_starts: bytes
    txids: bytes
    tweaks33: bytes
    counts: bytes
    outputs32: bytes
    vouts: bytes
    values: bytes
    spent: bytes
    mempool: bool = False

    @property
    def n_tx(self) -> int:
        """The number of transactions (tweaks) in the partition."""
        return len(self.txids) // 32


def _found(p: Partition, receiver: Receiver, threads: int, first_height: int | None = None) -> list[tuple[int, int, bytes, int | None]]:
    """(tx, k, tweak32, label) per output paying `receiver` in the partition's blocks from first_height on."""
    tx0 = out0 = 0
    if first_height is not None and p.heights:
        heights = memoryview(p.heights).cast("I")
        b = bisect.bisect_left(heights, first_height)
        if b == len(heights):
            return []
        tx0, out0 = memoryview(p.tx_starts).cast("I")[b], memoryview(p.out_starts).cast("I")[b]
    if tx0 == 0:
        return sp_scan.scan_tweaks_packed(p.tweaks33, 33, p.outputs32, p.counts, receiver, threads)
    found = sp_scan.scan_tweaks_packed(p.tweaks33[33 * tx0 :], 33, p.outputs32[32 * out0 :], p.counts[4 * tx0 :], receiver, threads)
    return [(tx0 + tx, k, tweak32, label) for tx, k, tweak32, label in found]


def _located(p: Partition, found: list[tuple[int, int, bytes, int | None]]) -> list[tuple[int, IndexMatch]]:
    """Each found output as (tx, IndexMatch), in tx then vout order."""
    counts = memoryview(p.counts).cast("I")
    heights, tx_starts, out_starts = (memoryview(b).cast("I") for b in (p.heights, p.tx_starts, p.out_starts))
    vouts, values = memoryview(p.vouts).cast("I"), memoryview(p.values).cast("Q")
    matches = []
    for tx, k, tweak32, label in found:
        b = bisect.bisect_right(tx_starts, tx) - 1
        j = out_starts[b] + sum(counts[tx_starts[b] : tx]) + k
        output32 = p.outputs32[32 * j : 32 * j + 32]
        spent = bool(p.spent[j >> 3] >> (j & 7) & 1)
        match = IndexMatch(None if p.mempool else heights[b], p.txids[32 * tx : 32 * tx + 32], vouts[j], values[j], FoundOutput(output32, tweak32, label), spent)
        matches.append((tx, match))
    # The scan reports a tx's matches in k order; they are listed in vout order.
    return sorted(matches, key=lambda t: (t[0], t[1].vout))


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
    return [m for _, m in _located(partition, _found(partition, receiver, threads))]


def scan_partition_txs(partition: Partition, receiver: Receiver, threads: int = 1, first_height: int | None = None) -> list[int]:
    """The transactions of a partition that pay `receiver`, as their positions in its per-tx arrays
    (ascending, each once): what a caller that reports transactions, not outputs, needs.

    Args:
        partition: from `Index.partition`.
        receiver: the wallet's keys.
        threads: native scanning threads (results do not depend on it).
        first_height: the first height to scan, or None for the whole partition.

    Raises:
        InvalidKeyError: a stored tweak is not a valid point (a damaged index).
    """
    return sorted({tx for tx, _, _, _ in _found(partition, receiver, threads, first_height)})


def _starts(starts: Sequence[int | None] | None, receivers: Sequence[Receiver]) -> Sequence[int | None]:
    """One first height (or None) per receiver; None for all when `starts` is None. Raises ValueError."""
    if starts is None:
        return [None] * len(receivers)
    if len(starts) != len(receivers):
        raise ValueError(f"{len(starts)} starts for {len(receivers)} receivers")
    return starts


def scan_partition_entries(
    partition: Partition, receivers: Sequence[Receiver], threads: int = 1, starts: Sequence[int | None] | None = None
) -> list[list[tuple[int, bytes, bytes]]]:
    """Per wallet, the transactions of a partition that pay it as (height, txid32, tweak33): a server's
    history entries, at a constant cost each.

    Args:
        partition: from `Index.partition`.
        receivers: the wallets' keys.
        threads: native scanning threads per wallet (results do not depend on it).
        starts: per wallet, the first height to scan, or None for the whole partition.

    Returns:
        One list per receiver, in tx order, each tx once.

    Raises:
        InvalidKeyError: a stored tweak is not a valid point (a damaged index).
        ValueError: starts not one per receiver.
    """
    starts = _starts(starts, receivers)
    tx_starts, heights = memoryview(partition.tx_starts).cast("I"), memoryview(partition.heights).cast("I")

    def entry(tx: int) -> tuple[int, bytes, bytes]:
        height = heights[bisect.bisect_right(tx_starts, tx) - 1]
        return height, partition.txids[32 * tx : 32 * tx + 32], partition.tweaks33[33 * tx : 33 * tx + 33]

    return [[entry(tx) for tx in scan_partition_txs(partition, r, threads, first)] for r, first in zip(receivers, starts)]


def scan_partition_wallets(
    partition: Partition, receivers: Sequence[Receiver], threads: int = 1, starts: Sequence[int | None] | None = None
) -> list[tuple[int, IndexMatch]]:
    """Find the outputs in a partition that pay any of several wallets: the buffers are read once for all.

    Args:
        partition: from `Index.partition`.
        receivers: the wallets' keys.
        threads: native scanning threads per wallet (results do not depend on it).
        starts: per wallet, the first height to scan (its birthday) or None for the whole partition.

    Returns:
        (wallet's position in receivers, match), in height, block, vout, then wallet order.

    Raises:
        InvalidKeyError: a stored tweak is not a valid point (a damaged index).
        ValueError: starts not one per receiver.
    """
    starts = _starts(starts, receivers)
    rows = [(tx, m.vout, w, m) for w, (receiver, first) in enumerate(zip(receivers, starts)) for tx, m in _located(partition, _found(partition, receiver, threads, first))]
    return [(w, m) for _, _, w, m in sorted(rows, key=lambda r: r[:3])]
