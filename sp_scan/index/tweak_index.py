"""`Index`: one open tweak index file, and the read, scan and sync API over its three parts (store, scan, sync)."""

from __future__ import annotations

import itertools
import struct
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from .. import filters, workers
from ..errors import HeightError, IndexStoreError
from ..proto import blindbit_v1
from ..retry import Retry
from ..scan import Receiver
from ..types import IndexMatch, MempoolTx, MempoolView, Utxo
from .scan import DEFAULT_PARTITION_BLOCKS, Partition, scan_partition, scan_partition_wallets
from .store import Store
from .sync import Source, Syncer, SyncStats

_PARTITION_COLUMNS = ("n_tx", "txids", "tweaks33", "out_counts", "out_keys", "out_vouts", "out_values")
_MEMPOOL_HEIGHT = 0xFFFFFFFF  # the mempool partition's pseudo-block: above every wallet's first height


def _u32(values: list[int]) -> bytes:
    return struct.pack(f"<{len(values)}I", *values)


def _largest(out_counts: bytes, out_values: bytes, spent: set[int]) -> list[int | None]:
    """Per eligible tx, the value the dust rule compares: its largest taproot output, or with `spent`
    (the ordinals of spent outputs; cut-through) its largest unspent one, None when all are spent."""
    values, firsts = memoryview(out_values).cast("Q"), list(itertools.accumulate(memoryview(out_counts).cast("I"), initial=0))
    if not spent:
        return [max(values[a:b], default=None) for a, b in zip(firsts, firsts[1:])]
    return [max((values[o] for o in range(a, b) if o not in spent), default=None) for a, b in zip(firsts, firsts[1:])]


class Index:
    """An open tweak index. Build with `Index.open` or `Index.create`; close with `close()` (or `with`)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    @classmethod
    def open(cls, path: str | Path, *, readonly: bool = False, network: str | None = None) -> Index:
        """Open an existing index.

        Args:
            path: the index file.
            readonly: read only (e.g. a server beside a running sync: readers see each committed block).
            network: when given, the index must be for this network.

        Raises:
            IndexStoreError: missing, corrupt, of another format version, or of another network.
        """
        return cls(Store.open(path, readonly=readonly, network=network))

    @classmethod
    def create(cls, path: str | Path, network: str) -> Index:
        """Create an empty index for `network` (one of NETWORKS); `sync` fills it.

        Raises:
            IndexStoreError: the file exists, or an unknown network.
        """
        return cls(Store.create(path, network))

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the file."""
        self._store.close()

    @property
    def path(self) -> Path:
        """The index file."""
        return self._store.path

    @property
    def network(self) -> str:
        """The network the index was built for: main, test, testnet4, signet or regtest."""
        return self._store.network

    @property
    def first_height(self) -> int | None:
        """The first indexed height; None before the first block."""
        return self._store.first_height

    def tip(self) -> tuple[int, bytes] | None:
        """(height, hash32) of the highest indexed block, or None when empty."""
        return self._store.tip()

    def block_hash(self, height: int) -> bytes:
        """The 32-byte hash of the indexed block at `height` (internal byte order).

        Raises:
            HeightError: not indexed.
        """
        return self._store.row(height, ("hash",))[0]

    def block_hashes(self, start: int, end: int) -> list[tuple[int, bytes]]:
        """(height, hash32) of every indexed block from start to end, ascending (heights not indexed are absent)."""
        return self._store.hashes(start, end)

    def data_version(self) -> int:
        """A number that changes whenever another connection (a sync) commits to the file: a cheap "anything new?"."""
        return self._store.data_version()

    def block_time(self, height: int) -> int:
        """The header timestamp of the indexed block at `height`.

        Raises:
            HeightError: not indexed.
        """
        return self._store.row(height, ("time",))[0]

    def tweaks(self, height: int, dust_limit: int = 0, cut_through: bool = False) -> list[bytes]:
        """The 33-byte tweaks (input_hash·A) of the block's eligible txs, in block order.

        Args:
            height: the block.
            dust_limit: keep a tx only when its largest taproot output is >= this many satoshis;
                with cut_through, its largest unspent one (as BlindBit's cut-through index does).
            cut_through: drop txs whose taproot outputs have all been spent (as of the index's tip).

        Raises:
            HeightError: not indexed.
        """
        columns = ("n_tx", "tweaks33", "out_counts", "out_values")
        if cut_through:
            (n_tx, tweaks33, counts, values), spent = self._store.row_with_spends(height, columns)
        elif dust_limit > 0:
            (n_tx, tweaks33, counts, values), spent = self._store.row(height, columns), set()
        else:
            n_tx, tweaks33 = self._store.row(height, columns[:2])
            return [tweaks33[33 * i : 33 * i + 33] for i in range(n_tx)]
        largest = _largest(counts, values, spent)
        return [tweaks33[33 * i : 33 * i + 33] for i in range(n_tx) if largest[i] is not None and largest[i] >= dust_limit]

    def eligible_txs(self, height: int, dust_limit: int = 0, cut_through: bool = False) -> list[tuple[bytes, bytes, list[Utxo]]]:
        """(txid32, tweak33, taproot outputs in vout order) of the block's eligible txs, in block order,
        kept or dropped per tx exactly as `tweaks` keeps them (a kept tx has all its outputs).

        Raises:
            HeightError: not indexed.
        """
        columns = ("n_tx", "txids", "tweaks33", "out_counts", "out_values", "out_vouts", "out_keys")
        (n_tx, txids, tweaks33, out_counts, out_values, out_vouts, out_keys), spent = self._store.row_with_spends(height, columns)
        largest = _largest(out_counts, out_values, spent if cut_through else set())
        vouts, values = memoryview(out_vouts).cast("I"), memoryview(out_values).cast("Q")
        firsts = list(itertools.accumulate(memoryview(out_counts).cast("I"), initial=0))
        return [
            (
                txids[32 * i : 32 * i + 32],
                tweaks33[33 * i : 33 * i + 33],
                [Utxo(txids[32 * i : 32 * i + 32], vouts[o], values[o], out_keys[32 * o : 32 * o + 32], o in spent) for o in range(firsts[i], firsts[i + 1])],
            )
            for i in range(n_tx)
            if largest[i] is not None and largest[i] >= dust_limit
        ]

    def utxos(self, height: int) -> list[Utxo]:
        """Every taproot output of the block's eligible txs, sorted by (display txid, vout).

        Raises:
            HeightError: not indexed.
        """
        (txids, out_counts, out_vouts, out_values, out_keys), spent = self._store.row_with_spends(
            height, ("txids", "out_counts", "out_vouts", "out_values", "out_keys")
        )
        vouts, values = memoryview(out_vouts).cast("I"), memoryview(out_values).cast("Q")
        firsts = list(itertools.accumulate(memoryview(out_counts).cast("I"), initial=0))
        out = []
        # A tx's outputs are stored in vout order: sorting the txs sorts the outputs.
        for i in sorted(range(len(firsts) - 1), key=lambda i: txids[32 * i : 32 * i + 32][::-1]):
            txid32 = txids[32 * i : 32 * i + 32]
            out.extend(Utxo(txid32, vouts[o], values[o], out_keys[32 * o : 32 * o + 32], o in spent) for o in range(firsts[i], firsts[i + 1]))
        return out

    def filter(self, height: int, kind: str) -> bytes:
        """The block's BIP158-style filter: CompactSize(N) ‖ Golomb-Rice bits (P = 19, M = 784931).

        Args:
            kind: "new-utxos" (every P2TR output key of the block) or "spent" (its spent-index hashes).

        Raises:
            HeightError: not indexed.
            ValueError: an unknown kind.
            IndexStoreError: the block was stored without filters.
        """
        if kind not in blindbit_v1.FILTER_KINDS:
            raise ValueError(f"filter kind must be one of {sorted(blindbit_v1.FILTER_KINDS)}")
        if kind == "new-utxos":
            value = self._store.row(height, ("filter_new",))[0]
        else:
            hash32, hashes8 = self._store.row(height, ("hash", "spent_hashes"))
            value = None if hashes8 is None else filters.spent_filter(hash32, hashes8)
        if value is None:
            raise IndexStoreError(f"{self.path}: block {height} was stored without filters")
        return value

    def spent_index(self, height: int) -> list[bytes]:
        """The 8-byte hashes of the taproot outpoints the block spends, in tx then vin order.

        Raises:
            HeightError: not indexed.
            IndexStoreError: the block was stored without them.
        """
        value = self._store.row(height, ("spent_hashes",))[0]
        if value is None:
            raise IndexStoreError(f"{self.path}: block {height} was stored without its spent index")
        return [value[i : i + 8] for i in range(0, len(value), 8)]

    def spent_keys(self, height: int) -> bytes:
        """The first 8 bytes of the x-only key of every P2TR output the block spends, tx then vin order.

        Raises:
            HeightError: not indexed.
            IndexStoreError: the block was stored without them (by an sp-scan from before they were kept).
        """
        value = self._store.row(height, ("spent_keys",))[0]
        if value is None:
            raise IndexStoreError(f"{self.path}: block {height} was stored without its spent keys (an index built before sp-scan kept them: build it again to serve them)")
        return value

    def partition(self, start: int, end: int) -> Partition:
        """Heights start..end packed for scanning (one consistent read; heights not indexed are absent)."""
        rows = self._store.scan_rows(start, end, _PARTITION_COLUMNS)
        heights, tx_starts, out_starts, n, o, spent = [], [], [], 0, 0, 0
        for height, (n_tx, _, _, _, _, out_vouts, _), bits in rows:
            heights.append(height)
            tx_starts.append(n)
            out_starts.append(o)
            spent |= int.from_bytes(bits, "little") << o
            n, o = n + n_tx, o + len(out_vouts) // 4
        columns = list(zip(*(values for _, values, _ in rows))) if rows else [()] * len(_PARTITION_COLUMNS)
        txids, tweaks33, counts, keys, vouts, values = (b"".join(c) for c in columns[1:])
        spent_bits = spent.to_bytes((o + 7) // 8, "little")
        return Partition(start, end, _u32(heights), _u32(tx_starts), _u32(out_starts), txids, tweaks33, counts, keys, vouts, values, spent_bits)

    def mempool_version(self) -> int:
        """A number that changes whenever `mempool_tweaks()` may answer differently (one cheap read):
        poll it and read the mempool again when it changed. 0 while no sync keeps the mempool."""
        return self._store.mempool_version() if self._store.writer_active() else 0

    def mempool_tweaks(self) -> MempoolView:
        """The node's mempool as the index holds it: its eligible txs with their tweaks and taproot outputs.

        A running `sync(…, mempool=True)` (`sp-scan index sync --follow --mempool`) keeps the table in
        step with the node: a tx appears once its prevouts are known, and leaves when it confirms (in
        the same commit as its block, so a tx is never both mempool and confirmed), is replaced (RBF)
        or is evicted. Without such a sync (none running, or one that was killed) the view is empty
        with version 0. The table is in the file, so any reader process sees the writer's changes.

        Returns:
            A MempoolView: version, the tip height it sits on, the txs oldest first (each txid once).
        """
        version, tip, rows = self._mempool_read()
        txs = []
        for txid32, tweak33, out_vouts, out_keys, out_values in rows:
            vouts, values = memoryview(out_vouts).cast("I"), memoryview(out_values).cast("Q")
            outputs = tuple((vouts[i], out_keys[32 * i : 32 * i + 32], values[i]) for i in range(len(vouts)))
            txs.append(MempoolTx(txid32, tweak33, outputs))
        return MempoolView(version, tip[0] if tip else None, tuple(txs))

    def _mempool_read(self) -> tuple[int, tuple[int, bytes] | None, list[tuple]]:
        version, tip, rows = self._store.mempool_rows()
        if not self._store.writer_active():
            return 0, tip, []
        return version, tip, rows

    def mempool_partition(self) -> Partition:
        """The mempool's eligible txs packed as one Partition (`mempool` True, start = end = the tip
        height it was read on, -1 for an empty index), for `scan_partition` and friends."""
        _, tip, rows = self._mempool_read()
        columns = list(zip(*rows)) if rows else [()] * 5
        txids, tweaks33, vouts, keys, values = (b"".join(c) for c in columns)
        counts = _u32([len(v) // 4 for v in columns[2]])
        at = tip[0] if tip else -1
        return Partition(at, at, _u32([_MEMPOOL_HEIGHT]), _u32([0]), _u32([0]), txids, tweaks33, counts, keys, vouts, values, bytes((len(vouts) // 4 + 7) // 8), mempool=True)

    def partition_ranges(
        self, start: int | None = None, end: int | None = None, partition_blocks: int = DEFAULT_PARTITION_BLOCKS
    ) -> list[tuple[int, int]]:
        """The (first, last) heights of each partition of start..end, ascending; [] for an empty index.

        Args:
            start, end: the heights to scan (default: all that is indexed).
            partition_blocks: blocks per partition, >= 1.

        Raises:
            HeightError: start..end is not inside the indexed heights.
            ValueError: partition_blocks < 1.
        """
        if partition_blocks < 1:
            raise ValueError(f"partition_blocks must be >= 1, not {partition_blocks}")
        tip, first = self.tip(), self.first_height
        if tip is None:
            if start is not None or end is not None:
                raise HeightError(f"{self.path} is empty")
            return []
        if start is not None and start > (tip[0] if end is None else end):
            above = f"the index's tip {tip[0]} (it holds {first}..{tip[0]})" if end is None else f"the last height {end}"
            raise HeightError(f"the first height {start} is above {above}")
        start = first if start is None else start
        end = tip[0] if end is None else end
        if not first <= start <= end <= tip[0]:
            raise HeightError(f"heights {start}..{end} are not all indexed (the index holds {first}..{tip[0]})")
        return [(lo, min(lo + partition_blocks - 1, end)) for lo in range(start, end + 1, partition_blocks)]

    def read_partitions(self, ranges: Sequence[tuple[int, int]]) -> Iterator[tuple[int, int, Partition]]:
        """(first, last, Partition) of each (first, last) range, in order, the next one read in a thread
        while the caller scans this one (the scan runs without the GIL: neither waits for the other).

        Raises:
            HeightError: as `partition`.
        """
        reader = workers.Ahead(lambda r: (*r, self.partition(*r)), ranges, 1, threading.Event())
        try:
            yield from reader
        finally:
            reader.close(wait=True)

    def scan(
        self,
        receiver: Receiver,
        start: int | None = None,
        end: int | None = None,
        threads: int = 1,
        partition_blocks: int = DEFAULT_PARTITION_BLOCKS,
        *,
        mempool: bool = False,
    ) -> Iterator[IndexMatch]:
        """Yield every indexed output paying `receiver`, in height, block, then vout order.

        Args:
            receiver: the wallet's keys.
            start, end: the heights to scan (default: all that is indexed).
            threads: native scanning threads.
            partition_blocks: blocks read and scanned per batch.
            mempool: then the outputs of the mempool's txs (height None, oldest tx first; see
                `mempool_tweaks`): a tx is listed once, unconfirmed or at its height.

        Raises:
            HeightError: start..end is not inside the indexed heights.
            InvalidKeyError: a stored tweak is not a valid point (a damaged index).
        """
        for _, _, partition in self.partitions(start, end, partition_blocks, mempool=mempool):
            yield from scan_partition(partition, receiver, threads)

    def scan_wallets(
        self,
        receivers: Sequence[Receiver],
        start: int | None = None,
        end: int | None = None,
        threads: int = 1,
        partition_blocks: int = DEFAULT_PARTITION_BLOCKS,
        *,
        starts: Sequence[int | None] | None = None,
        progress: Callable[[int, int], None] | None = None,
        mempool: bool = False,
    ) -> Iterator[tuple[int, IndexMatch]]:
        """Yield every indexed output paying any of `receivers`, each partition read once for all of them.

        Args:
            receivers: the wallets' keys.
            start, end: the heights to scan (default: all that is indexed).
            threads: native scanning threads.
            partition_blocks: blocks read and scanned per batch.
            starts: per wallet, the first height to report (its birthday), or None for `start`.
            progress: called with (first, last) height of each partition of blocks once its matches are yielded.
            mempool: then the matches among the mempool's txs (height None), as in `scan`.

        Returns:
            (wallet's position in receivers, match), in height, block, vout, then wallet order.

        Raises:
            HeightError: start..end is not inside the indexed heights.
            InvalidKeyError: a stored tweak is not a valid point (a damaged index).
            ValueError: starts not one per receiver.
        """
        for lo, hi, partition in self.partitions(start, end, partition_blocks, mempool=mempool):
            yield from scan_partition_wallets(partition, receivers, threads, starts)
            if progress is not None and not partition.mempool:
                progress(lo, hi)

    def partitions(
        self, start: int | None, end: int | None, partition_blocks: int, *, mempool: bool = False
    ) -> Iterator[tuple[int, int, Partition]]:
        """(first, last, Partition) of start..end as `read_partitions` gives them; with `mempool`, then
        the mempool's partition, preceded (when `end` is None) by the blocks committed meanwhile: the
        mempool is read with the tip it sits on, so a tx that confirmed during the scan is found once.

        Raises:
            HeightError, ValueError: as `partition_ranges`.
        """
        ranges = self.partition_ranges(start, end, partition_blocks)
        yield from self.read_partitions(ranges)
        if not mempool:
            return
        pool = self.mempool_partition()
        if end is None and pool.end >= 0:
            done = ranges[-1][1] if ranges else None
            if done is None or pool.end > done:
                yield from self.read_partitions(self.partition_ranges(start if done is None else done + 1, pool.end, partition_blocks))
        yield pool.start, pool.end, pool

    def sync(
        self,
        source: Source,
        start: int | None = None,
        stop: int | None = None,
        follow: bool = False,
        *,
        jobs: int = 1,
        interval: float = 10.0,
        retry: Retry = Retry(),
        progress: Callable[[SyncStats], None] | None = None,
        mempool: bool = False,
        zmq: str | None = None,
        log: Callable[[str], None] | None = None,
    ) -> SyncStats:
        """Bring the index to the source's tip (or `stop`), following reorgs; with `follow`, keep polling.

        Each block is committed in one transaction with the new tip, so a killed sync resumes where
        it stopped. Several blocks are fetched and computed in `jobs` worker processes, killed on
        any exit (an interrupt included), so a stop never waits for the node. A source never
        shrinks the index: blocks are rolled back only for a competing branch at least as long
        as the index's; a shorter node is waited for (`follow`) or refused; block files must
        extend the index.

        Args:
            source: a `RestNode`, `RpcNode`, `corefiles.CoreBlocks` (Core's blocks folder, followed as a
                node is) or `BlockFiles`.
            start: the first height of an empty index (default: taproot activation on main, else 0,
                the lowest block file, or a CoreBlocks' start when higher); on a non-empty index it must be its first height.
            stop: the last height (default: the source's tip, re-read every round).
            follow: poll for new blocks every `interval` seconds until interrupted (and wait for a node
                whose chain is shorter than the index's).
            jobs: worker processes (forked while this process runs one thread, else started by a
                server process: see `sp_scan.workers.start_method`).
            retry: how a failing source is retried before giving up.
            progress: called with the stats after each committed block (and while waiting).
            mempool: with follow, keep the index's mempool table in step with the node's mempool
                while caught up (see `mempool_tweaks` and `sp_scan.index.mempool`); the source must
                be a node (RestNode or RpcNode). The table is emptied when the sync ends.
            zmq: with mempool, Core's -zmqpubsequence endpoint (tcp://HOST:PORT) to learn of
                mempool changes at once; polled every `interval` without it (or while it is down).
            log: where the mempool's one-line notices go (a ZMQ connection that drops or comes back, a tx skipped).

        Returns:
            What was done.

        Raises:
            ValueError: mempool without follow or without a node, or zmq without mempool.
            IndexStoreError: another network, another first height, or another sync is writing the file.
            HeightError: stop is beyond the source's tip (without follow).
            ServerError: the source fails after the retries, is behind the index (without follow), serves
                blocks that do not link, or is block files that do not extend the index; the message
                names the height to resume at.
            MalformedDataError, PrevoutsError: a block or its spent outputs do not parse.
            WorkerDiedError: a worker process was killed.
        """
        if zmq is not None and not mempool:
            raise ValueError("zmq goes with mempool=True")
        if not mempool:
            return Syncer(self._store, source, jobs, retry, progress).run(start, stop, follow, interval)
        if not follow:
            raise ValueError("mempool=True needs follow=True (the table is kept only while the sync runs)")
        if not all(callable(getattr(source, m, None)) for m in ("mempool_txids", "transactions", "utxos")):
            raise ValueError("the mempool needs a node (RestNode or RpcNode), not block files")
        from .mempool import MempoolFollower

        follower = MempoolFollower(self._store, source, retry, zmq, log)
        syncer = Syncer(self._store, source, jobs, retry, progress, idle=follower.wait)
        syncer.stats.mempool = follower.stats
        try:
            return syncer.run(start, stop, follow, interval)
        finally:
            follower.close()

    def check(self) -> int:
        """Check the whole file (SQLite's quick_check and every row; `open` checks only its length, and
        quick-checks small files); return the number of blocks checked.

        Raises:
            IndexStoreError: the first problem found.
        """
        return self._store.check()

    def info(self) -> dict:
        """{"network", "first_height", "tip_height", "tip_hash" (display hex), "blocks", "transactions",
        "eligible_transactions", "bytes" (on disk)}."""
        stats = self._store.stats()
        tip = self.tip()
        return {
            "network": self.network,
            "first_height": self.first_height,
            "tip_height": tip[0] if tip else None,
            "tip_hash": tip[1][::-1].hex() if tip else None,
            "blocks": stats["blocks"],
            "transactions": stats["transactions"],
            "eligible_transactions": stats["eligible"],
            "bytes": stats["bytes"],
        }
