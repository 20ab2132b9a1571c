"""`--rest URL` / `--rpc URL`: the user's own Bitcoin Core node as a wallet's source, block by block.

Each block and its spent outputs are fetched (REST `/rest/block` + `/rest/spenttxouts`, or RPC
`getblock` 0 and 3) a few blocks ahead in threads, and computed with the native block code
(`block.block_index`: the eligible txs' tweaks and taproot outputs, and every outpoint the block
spends). The block must hash to what the node named at that height, and names its parent. A
spend of a wallet output is read from the block's inputs, with the spending txid. No mempool:
a node gives no prevouts for mempool txs (keep it with `sp-scan index sync --follow --mempool`
and sync the wallet from that index).
"""

from __future__ import annotations

import concurrent.futures
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from sp_scan import wire
from sp_scan.errors import SourceURLError
from sp_scan.node import RestNode, RpcNode, block_data, fetch_block
from sp_scan.retry import Retry
from sp_scan.types import BlockData
from sp_scan.workers import AheadPool

from .base import DEADLINE, RETRY, BlockTxs, Closes, Keys0, Spend, endpoint, taproot_outputs

AHEAD = 8
"""Blocks fetched ahead of the one being scanned."""
THREADS = 4


@dataclass(frozen=True, slots=True)
class NodeSourceBlock:
    """One block from the node (a `SourceBlock`), computed."""

    height: int
    hash32: bytes
    prev32: bytes
    data: BlockData
    raw: bytes
    tweaks33: bytes = b""
    wants_keys0: bool = False
    header80: bytes | None = None
    proven: bool = True

    def txs(self, keys0: Keys0 | None) -> BlockTxs:
        d = self.data
        return BlockTxs(d.txids, d.tweaks64, 64, d.out_counts, d.out_keys, d.out_vouts, d.out_values)

    def spends(self, outpoints36: Sequence[bytes], outputs32: Sequence[bytes] = ()) -> list[Spend]:
        """The wallet's outpoints among the block's spent taproot outpoints, each with its spending txid."""
        spent = self.data.spent_outpoints
        hits = set(outpoints36).intersection(spent[i : i + 36] for i in range(0, len(spent), 36))
        if not hits:
            return []
        by = {i.outpoint.to_bytes(): tx.txid32 for tx in wire.parse_block(self.raw).txs[1:] for i in tx.inputs}
        return [Spend(op, by.get(op)) for op in sorted(hits)]


class NodeSource(Closes):
    """A Core node as a wallet's source, and a `Prover` (whole blocks).

    Args:
        url: `rest+http://HOST:PORT` (its REST interface: Core 30+ with -rest) or `rpc+http://HOST:PORT` (its JSON-RPC;
            https too).
        cookie_file, user, password: RPC credentials (Core's .cookie, or rpcuser/rpcpassword).
        retry: how a failing call is tried again.
        timeout: seconds a request may wait for the node.

    Raises:
        SourceURLError: another URL; credentials given for REST.
    """

    def __init__(
        self, url: str, *, cookie_file: str | None = None, user: str | None = None, password: str | None = None, retry: Retry = RETRY,
        timeout: float = DEADLINE,
    ) -> None:  # fmt: skip
        kind, _, plain = url.partition("+")
        endpoint(plain if kind in ("rest", "rpc") else url, ("http", "https"), "a node (rest+http:// or rpc+http://)")
        if kind == "rest":
            if cookie_file or user or password:
                raise SourceURLError("RPC credentials go with rpc+http://, not a node's REST interface")
            node: RestNode | RpcNode = RestNode(plain, timeout)
        else:
            node = RpcNode(plain, cookie_file, user, password, timeout)
        self.node, self.retry = node, retry
        self.name = f"the node at {node.url}"
        self.received = 0
        self.proves = self.complete = True

    def network(self) -> str:
        return self.retry.call(self.node.chain)

    def tip_height(self) -> int:
        return self.retry.call(self.node.tip_height)

    def block_hash(self, height: int) -> bytes:
        return bytes.fromhex(self.retry.call(self.node.block_hash, height))[::-1]

    def blocks(self, start: int, stop: int) -> Iterator[NodeSourceBlock]:
        """Heights start..stop, AHEAD blocks fetched in THREADS threads (`AheadPool`) ahead of the one given.

        Raises:
            ServerError: the node fails after the retries, or serves a block of another hash than it named.
            MalformedDataError, PrevoutsError: a block or its spent outputs do not parse.
        """
        pool = AheadPool(THREADS, "sp-scan-wallet-node")
        ahead: deque = deque()
        try:
            for height in range(start, stop + 1):
                ahead.append((height, pool.submit(fetch_block, self.node, height, self.retry, pool.stop)))
                if len(ahead) > AHEAD:
                    yield self._block(*ahead.popleft())
            while ahead:
                yield self._block(*ahead.popleft())
        finally:
            pool.close()

    def _block(self, height: int, future: concurrent.futures.Future) -> NodeSourceBlock:
        hash_hex, raw, spent = future.result()
        self.received += len(raw) + len(spent)
        data = block_data(height, hash_hex, raw, spent)
        return NodeSourceBlock(height, data.hash32, data.prev32, data, raw)

    def mempool(self) -> BlockTxs | None:
        """None: a node gives no prevouts for mempool txs (see the module docstring)."""
        return None

    def outputs(self, height: int, hash32: bytes, txids32: Sequence[bytes]) -> dict[bytes, list[tuple[int, bytes, int]]] | None:
        """The taproot outputs of these txs in the node's block of this height, when it has that hash (see `Prover`).

        Raises:
            ServerError: the node fails after the retries.
            MalformedDataError: the block does not parse.
        """
        if self.block_hash(height) != hash32:
            return None
        raw, _ = self.retry.call(self.node.block, hash32[::-1].hex())
        wanted = set(txids32)
        return {tx.txid32: taproot_outputs(tx) for tx in wire.parse_block(raw).txs if tx.txid32 in wanted}

    def work(self, lo: int, hi: int) -> None:
        """None: the node gives its best chain, checked by itself."""
        return None
