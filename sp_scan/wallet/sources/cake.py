"""`--cake HOST:PORT`: Cake Wallet's electrs (cake-tech/blockstream-electrs) as a wallet's source; the scan key stays here.

Each block is one `blockchain.tweaks.subscribe(height, 1, true)` (historical: spent outputs kept, with
electrs's spend marker `{"txid", "vin", "confirmed"}` or `true`), many in flight: its notification
`{"<height>": {"<txid>": {"tweak", "output_pubkeys": {"<vout>": [x-only key, amount, marker?]}}}}`
comes before its answer, then `{"message": "done"}`. One block per call because electrs labels the
last message of a longer range with the range's last height whatever block its txs are from; a
height below the server's first (electrs starts at its first silent-payments height) comes back
under that height or not at all, and holds no tweaks. Block hashes come from the server's headers.

The sync loop hands a block the k = 0 keys of each tweak; a tx whose streamed keys hold one of its
own tweak's is fetched (`blockchain.transaction.get`) and proven in the block (`get_merkle`, which
also orders the block's txs), its streamed outputs must be the tx's own (vout, key, amount), and the
loop scans the tx's taproot outputs with the streamed tweak. Spends come from each output's script
history (`electrum.Spends`): electrs computes its markers only below tip - 5, so they cannot say an
output is unspent. No mempool.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from sp_scan.errors import ServerError, SourceError
from sp_scan.proto import electrum_sp
from sp_scan.retry import Retry

from .base import MAX_BLOCK_OUTPUTS, MAX_BLOCK_TXS, MAX_MONEY, RETRY, BlockTxs, Keys0, Spend, hex_bytes, integer, taproot_outputs
from .electrum import TIMEOUT, ElectrumSource, Spends, block_hash32, block_txs, proven_txs

AHEAD = 32
"""Blocks asked for ahead of the one being scanned."""
HEADERS_AHEAD = 2016


@dataclass
class CakeBlock:
    """One block as electrs streams it (a `SourceBlock`): tweaks and output keys; a hit's tx fetched and proven."""

    height: int
    hash32: bytes
    prev32: bytes
    header80: bytes
    txids: list[bytes]
    tweaks33: bytes
    outputs: list[list[tuple[int, bytes, int]]]
    source: CakeSource = field(repr=False)
    spent: Spends = field(repr=False)
    wants_keys0: bool = True
    proven: bool = True

    def txs(self, keys0: Keys0 | None) -> BlockTxs:
        """The hit txs (a streamed key among the k = 0 keys of its own tweak), proven in this block, in block order.

        Raises:
            ServerError: the server fails after the retries.
            SourceError: a tx that is not in this block, or whose outputs are not what the stream said.
        """
        if keys0 is None:
            return BlockTxs()
        hits = [i for i, outs in enumerate(self.outputs) if {key for _, key, _ in outs}.intersection(keys0.of(i))]
        if not hits:
            return BlockTxs()
        tweaks = {self.txids[i]: self.tweaks33[33 * i : 33 * i + 33] for i in hits}
        proven = self.source.retry.call(proven_txs, self.source.client, [(self.height, self.header80, txid32) for txid32 in tweaks])
        for i in hits:
            outs = {vout: (key, amount) for vout, key, amount in taproot_outputs(proven[self.txids[i]][1])}
            if any(outs.get(vout) != (key, amount) for vout, key, amount in self.outputs[i]):
                raise SourceError(f"{self.source.name}: the outputs streamed for {self.txids[i][::-1].hex()} at block {self.height} are not the transaction's")
        return block_txs(proven, tweaks)

    def spends(self, outpoints36: Sequence[bytes], outputs32: Sequence[bytes] = ()) -> list[Spend]:
        return self.source.retry.call(self.spent.of_block, self.height, self.header80, outpoints36, outputs32)


def _marker(value: object, what: str) -> None:
    """Accept a spend marker as electrs (an object {"txid", "vin", "confirmed"}) or sp-scan's older serve (true) sends it.

    Raises:
        SourceError: anything else.
    """
    if value is True:
        return
    if not isinstance(value, dict):
        raise SourceError(f"{what}: the spend marker is neither true nor an object")
    hex_bytes(value.get("txid"), 32, f"{what}: the spend marker's txid")
    integer(value.get("vin"), 0, 2**32 - 1, f"{what}: the spend marker's vin")
    if value.get("confirmed") is not None and not isinstance(value["confirmed"], dict):
        raise SourceError(f"{what}: the spend marker's confirmed is neither null nor an object")


def parse_block(body: object, what: str) -> tuple[list[bytes], bytes, list[list[tuple[int, bytes, int]]]]:
    """(txids32, tweaks33 packed, per tx [(vout, key32, amount)]) of one block's `{"<txid>": {...}}`, in the order sent.

    Raises:
        SourceError: a malformed or oversized block.
    """
    if not isinstance(body, dict):
        raise SourceError(f"{what} is not an object")
    if len(body) > MAX_BLOCK_TXS:
        raise SourceError(f"{what}: {len(body):,} transactions, more than a block holds")
    txids, tweaks, outputs, total = [], [], [], 0
    of_txid, of_tweak, of_key, of_vout, of_amount = (f"{what}: {x}" for x in ("a txid", "a tweak", "an output key", "a vout", "an amount"))
    for txid, tx in body.items():
        txids.append(hex_bytes(txid, 32, of_txid)[::-1])
        if not isinstance(tx, dict) or not isinstance(tx.get("output_pubkeys"), dict):
            raise SourceError(f"{what}: transaction {txid[:64]} has no output_pubkeys object")
        tweaks.append(hex_bytes(tx.get("tweak"), 33, of_tweak))
        outs = []
        total += len(tx["output_pubkeys"])
        if total > MAX_BLOCK_OUTPUTS:
            raise SourceError(f"{what}: more taproot outputs than a block holds")
        for vout, item in tx["output_pubkeys"].items():
            if not isinstance(vout, str) or not vout.isdigit() or len(vout) > 10 or not isinstance(item, list) or not 2 <= len(item) <= 3:
                raise SourceError(f"{what}: an output of {txid[:64]} is not \"<vout>\": [key, amount, spent?]")
            if len(item) == 3:
                _marker(item[2], what)
            outs.append((integer(int(vout), 0, 2**32 - 1, of_vout), hex_bytes(item[0], 32, of_key), integer(item[1], 0, MAX_MONEY, of_amount)))
        outputs.append(sorted(outs))
    return txids, b"".join(tweaks), outputs


class CakeSource(ElectrumSource):
    """Cake Wallet's electrs (or `sp-scan serve --electrum-port`) streaming tweaks to the wallet.

    Args:
        url: `cake+tcp://HOST:PORT`, or `cake+ssl://HOST:PORT` to connect with TLS.
        retry: how a failing request is tried again.
        ahead: blocks asked for ahead of the one being scanned.

    Raises:
        SourceURLError: another URL.
    """

    KIND, LISTEN, SCHEMES = "Cake's electrs", (electrum_sp.CAKE_TWEAKS_SUBSCRIBE,), ("cake+tcp", "cake+ssl")

    def __init__(self, url: str, *, retry: Retry = RETRY, ahead: int = AHEAD, timeout: float = TIMEOUT) -> None:
        super().__init__(url, retry=retry, timeout=timeout)
        self.ahead = ahead
        self._streamed: dict[int, object] = {}

    def _take(self, height: int, id_: int, last: int):
        """Block `height`'s streamed body ({} when the server sent none for it), once its call is answered; the
        bodies of later blocks asked for (up to `last`) that came meanwhile are kept, others dropped."""
        self.client.answer(id_, electrum_sp.CAKE_TWEAKS_SUBSCRIBE)
        for params in self.client.pending_notes():
            message = params[0] if isinstance(params, list) and len(params) == 1 else params
            if isinstance(message, dict) and "message" in message:
                continue  # the end of a call: {"message": "done"} (sp-scan's adds "max_protocol_version")
            if not isinstance(message, dict) or len(message) != 1:
                raise SourceError(f"{self.name}: a {electrum_sp.CAKE_TWEAKS_SUBSCRIBE} notification is not one object of one key")
            ((key, body),) = message.items()
            if not isinstance(key, str) or not key.isdigit() or len(key) > 10:
                raise SourceError(f"{self.name}: a {electrum_sp.CAKE_TWEAKS_SUBSCRIBE} notification names no height")
            if height <= int(key) <= last and self._streamed.setdefault(int(key), body) != body:
                raise SourceError(f"{self.name} sent block {key} twice, differently")
        return self._streamed.pop(height, {})

    def _stream(self, start: int, stop: int, spent: Spends) -> Iterator[CakeBlock]:
        """Heights start..stop on the current connection, `ahead` calls in flight."""
        client, sent, heads, nxt = self.client, deque(), deque(), start
        try:
            for height in range(start, stop + 1):
                while nxt <= stop and len(sent) < self.ahead:
                    sent.append(client.send(electrum_sp.CAKE_TWEAKS_SUBSCRIBE, [nxt, 1, True]))
                    nxt += 1
                if not heads:
                    heads.extend(self.headers.get(height, min(HEADERS_AHEAD, stop - height + 1)))
                header80 = heads.popleft()
                txids, tweaks33, outputs = parse_block(self._take(height, sent.popleft(), nxt - 1), f"{self.name}: block {height}")
                yield CakeBlock(height, block_hash32(header80), header80[4:36], header80, txids, tweaks33, outputs, self, spent)
        finally:
            if sent:
                client.close()  # answers still on their way belong to no one: a fresh connection next time
            self._streamed.clear()

    def _first(self, height: int, spent: Spends) -> CakeBlock:
        stream = self._stream(height, height, spent)
        try:
            return next(stream)
        finally:
            stream.close()

    def blocks(self, start: int, stop: int) -> Iterator[CakeBlock]:
        """Heights start..stop; a connection that fails is opened again at the block it stopped at.

        Raises:
            ServerError: the server fails after the retries.
            SourceError: an answer the checks refuse.
        """
        spent, height = Spends(self.client), start
        while height <= stop:
            yield self.retry.call(self._first, height, spent)  # a server that is down fails here, where it is retried
            height += 1
            try:
                for block in self._stream(height, stop, spent):
                    yield block
                    height += 1
            except ServerError:
                continue  # broken off: opened again at `height`

    def mempool(self) -> BlockTxs | None:
        """None: Cake's electrs serves no mempool tweaks."""
        return None
