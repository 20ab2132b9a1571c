"""`--db FILE`: a local sp-scan tweak index as a wallet's source (read-only, beside a running sync).

Blocks are read a partition at a time (`Index.partition`: packed tweaks and outputs, one read; the
next one in a thread while this one is scanned), with the hashes of the partition's heights and the one below read before and after it: a read
that a concurrent reorg of the index overlapped is read again, so each block's hash and parent
belong to its data. Spends come from the block's spent index (8-byte hashes of the outpoints it
spends and its hash, as BlindBit serves them), compared with the wallet's outpoints' hashes; the
spending txid is not in the index. The mempool is the index's (a running `sp-scan index sync
--follow --mempool` keeps it), None without one.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from sp_scan import workers
from sp_scan.errors import HeightError, ServerError
from sp_scan.filters import spent_hashes
from sp_scan.index import Index, Partition

from .base import BlockTxs, Closes, Keys0, Spend

PARTITION_BLOCKS = 50
"""Blocks read together."""
_STABLE_TRIES = 3


@dataclass(frozen=True, slots=True)
class IndexBlock:
    """One indexed block (a `SourceBlock`): its outputs from the partition, its spends from the index."""

    height: int
    hash32: bytes
    prev32: bytes | None
    block_txs: BlockTxs
    index: Index
    tweaks33: bytes = b""
    wants_keys0: bool = False
    header80: bytes | None = None
    proven: bool = True

    def txs(self, keys0: Keys0 | None) -> BlockTxs:
        return self.block_txs

    def spends(self, outpoints36: Sequence[bytes], outputs32: Sequence[bytes] = ()) -> list[Spend]:
        """The wallet's outpoints the block's spent index names; [] when the index replaced the block meanwhile
        (the wallet then sees the fork through the hashes)."""
        hashes = set(self.index.spent_index(self.height))
        if self.index.block_hash(self.height) != self.hash32:
            return []
        return [Spend(op) for op, h in zip(outpoints36, spent_hashes(self.hash32, outpoints36)) if h in hashes]


def _slice(p: Partition, b: int) -> BlockTxs:
    """Block number b of a partition as BlockTxs (tweaks 64 bytes wide)."""
    tx_starts, out_starts = memoryview(p.tx_starts).cast("I"), memoryview(p.out_starts).cast("I")
    t0, o0 = tx_starts[b], out_starts[b]
    t1 = tx_starts[b + 1] if b + 1 < len(tx_starts) else p.n_tx
    o1 = out_starts[b + 1] if b + 1 < len(out_starts) else len(p.vouts) // 4
    return BlockTxs(p.txids[32 * t0 : 32 * t1], p.tweaks33[33 * t0 : 33 * t1], 33, p.counts[4 * t0 : 4 * t1], p.outputs32[32 * o0 : 32 * o1], p.vouts[4 * o0 : 4 * o1], p.values[8 * o0 : 8 * o1])


class IndexSource(Closes):
    """A tweak index file as a wallet's source, and a `Prover` (every eligible tx of a block).

    Args:
        path: the index file (opened read-only): the `url` of the sources' constructor shape, a local file.

    Raises:
        IndexStoreError: as `Index.open`.
    """

    def __init__(self, path: str | Path) -> None:
        self.index = Index.open(path, readonly=True)
        self.name = f"the index {path}"
        self.received = 0
        self.proves = self.complete = True

    def network(self) -> str:
        return self.index.network

    def tip_height(self) -> int:
        """The index's tip height.

        Raises:
            HeightError: the index is empty.
        """
        tip = self.index.tip()
        if tip is None:
            raise HeightError(f"{self.name} is empty")
        return tip[0]

    def block_hash(self, height: int) -> bytes:
        """The indexed block's hash at `height`; HeightError when the index does not hold it."""
        return self.index.block_hash(height)

    def _read(self, lo: int, hi: int) -> tuple[dict[int, bytes], Partition]:
        """(hashes of lo - 1..hi, the partition lo..hi) as one consistent read.

        Raises:
            ServerError: the index kept changing (a reorg of it in progress); retried by the loop.
        """
        for _ in range(_STABLE_TRIES):
            before = self.index.block_hashes(lo - 1, hi)
            partition = self.index.partition(lo, hi)
            if self.index.block_hashes(lo - 1, hi) == before:
                return dict(before), partition
        raise ServerError(f"{self.name} keeps changing around heights {lo}..{hi} (a reorg in progress)")

    def blocks(self, start: int, stop: int) -> Iterator[IndexBlock]:
        """Heights start..stop, read PARTITION_BLOCKS at a time.

        Raises:
            HeightError: the index does not hold every height start..stop.
        """
        first, tip = self.index.first_height, self.index.tip()
        if first is None or tip is None or not first <= start <= stop <= tip[0]:
            held = f"holds {first}..{tip[0]}" if tip else "is empty"
            raise HeightError(f"the wallet needs heights {start}..{stop}; {self.name} {held} (sync the index from the wallet's next height)")
        ranges = [(lo, min(lo + PARTITION_BLOCKS - 1, stop)) for lo in range(start, stop + 1, PARTITION_BLOCKS)]
        reader = workers.Ahead(lambda r: self._read(*r), ranges, 1, threading.Event())  # the next partition read while this one is scanned
        try:
            for (lo, hi), (hashes, partition) in zip(ranges, reader):
                heights = memoryview(partition.heights).cast("I")
                if list(heights) != list(range(lo, hi + 1)):
                    raise ServerError(f"{self.name} no longer holds every height {lo}..{hi} (a reorg in progress)")
                for b, height in enumerate(heights):
                    yield IndexBlock(height, hashes[height], hashes.get(height - 1), _slice(partition, b), self.index)
        finally:
            reader.close(wait=True)

    def mempool(self) -> BlockTxs | None:
        """The index's mempool txs (oldest first); None when no running sync keeps it."""
        view = self.index.mempool_tweaks()
        if view.version == 0:
            return None
        return BlockTxs.of((t.txid32, t.tweak33, t.outputs) for t in view.txs)

    def outputs(self, height: int, hash32: bytes, txids32: Sequence[bytes]) -> dict[bytes, list[tuple[int, bytes, int]]] | None:
        """The taproot outputs of these txs in the indexed block of this height, when it has that hash (see `Prover`;
        an output paying a silent-payments address is in an eligible tx, which the index holds).

        Raises:
            HeightError: the index does not hold that height.
        """
        if self.index.block_hash(height) != hash32:
            return None
        txs = _slice(self.index.partition(height, height), 0)
        wanted, firsts = set(txids32), txs.firsts()
        vouts, amounts = memoryview(txs.vouts).cast("I"), memoryview(txs.amounts).cast("Q")
        out = {}
        for i in range(txs.n_tx):
            txid32 = txs.txids[32 * i : 32 * i + 32]
            if txid32 in wanted:
                out[txid32] = [(vouts[o], txs.outputs32[32 * o : 32 * o + 32], amounts[o]) for o in range(firsts[i], firsts[i + 1])]
        return out

    def work(self, lo: int, hi: int) -> None:
        """None: the index keeps no headers (it follows the node's best chain)."""
        return None

    def close(self) -> None:
        self.index.close()
