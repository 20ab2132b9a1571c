"""`--electrum HOST:PORT --share-scan-key`: Frigate's remote scanning (sparrowwallet/frigate) as a wallet's source.

The server is handed the scan private key and the spend public key (`blockchain.silentpayments.subscribe`)
and scans its own index for them: it learns every payment to the wallet, which is why the CLI asks for
--share-scan-key. As Sparrow does: `server.version` first, `server.features` must offer
`silent_payments`; a subscription's answer names the address and labels scanned (both checked), and
its notifications (named params `{"subscription", "progress", "history"}`, or the older positional
array) whose `subscription` differs from that answer are dropped. History entries are `{height,
tx_hash, tweak_key}`; everything before the first `progress` 1.0 is the history.

Rounds are cut into windows of `window` heights, each subscribed as the range "FROM-TO", read to
its progress 1.0 and unsubscribed: a window's history arrives whole before its blocks are
yielded, so each window commits as it is scanned. A mempool payment (height 0) may come again at
its height once mined (Frigate) or not (a server that sends each tx once): windows are new
subscriptions, so every confirmed tx comes at its height. Each block's hash comes from the
server's headers. The txs it reports are fetched (`blockchain.transaction.get`) and proven in
their block (`get_merkle`, which also orders them), and the loop scans their taproot outputs with
the reported tweak: an output is stored only when it is B_spend + t_k·G (or a label's) for that
tweak, whatever the server claimed. Spends come from each output's script history
(`electrum.Spends`). The mempool is a subscription of the tip's height: its height-0 entries, each
tx fetched and hashed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from coincurve import PrivateKey

from sp_scan import address as sp_address
from sp_scan.errors import SourceError
from sp_scan.network import get as get_network
from sp_scan.proto import electrum_sp
from sp_scan.retry import Retry

from .base import MAX_BLOCK_TXS, RETRY, BlockTxs, Keys0, Spend, hex_bytes, integer, taproot_outputs
from .electrum import TIMEOUT, ElectrumSource, Spends, block_hash32, block_txs, parsed_tx, proven_txs

MAX_LABELS = 10
"""Frigate scans at most this many labels besides change."""
WINDOW = 2016
"""Heights subscribed at a time."""
MAX_PAGE = 10_000
"""More history entries in one notification than any server pages (Frigate: 100)."""


@dataclass
class FrigateBlock:
    """One height (a `SourceBlock`): the txs the server reported there, fetched and proven with their window."""

    height: int
    hash32: bytes
    prev32: bytes
    header80: bytes
    tweaks33: bytes
    block_txs: BlockTxs
    retry: Retry = field(repr=False)
    spent: Spends = field(repr=False)
    wants_keys0: bool = False
    proven: bool = True

    def txs(self, keys0: Keys0 | None) -> BlockTxs:
        """The reported txs with their tweaks and taproot outputs, in block order."""
        return self.block_txs

    def spends(self, outpoints36: Sequence[bytes], outputs32: Sequence[bytes] = ()) -> list[Spend]:
        return self.retry.call(self.spent.of_block, self.height, self.header80, outpoints36, outputs32)


class FrigateSource(ElectrumSource):
    """A Frigate (or `sp-scan serve --electrum-port`) server scanning for the wallet.

    Args:
        url: `tcp://HOST:PORT`, or `ssl://HOST:PORT` to connect with TLS.
        scan_key32: b_scan, sent to the server (the caller has the user's consent).
        spend_pubkey33: B_spend.
        labels: the wallet's labels (the change label 0 is always scanned; at most MAX_LABELS others).
        retry: how a failing request is tried again.
        window: heights subscribed at a time.

    Raises:
        SourceURLError: another URL.
        SourceError: more labels than Frigate scans.
    """

    KIND, LISTEN = "Frigate", (electrum_sp.FRIGATE_SUBSCRIBE,)

    def __init__(
        self, url: str, *, scan_key32: bytes, spend_pubkey33: bytes, labels: Sequence[int] = (), retry: Retry = RETRY, window: int = WINDOW,
        timeout: float = TIMEOUT,
    ) -> None:  # fmt: skip
        self.labels = sorted({m for m in labels if m})
        if len(self.labels) > MAX_LABELS:
            raise SourceError(f"Frigate scans at most {MAX_LABELS} labels besides change; this wallet has {len(self.labels)}")
        super().__init__(url, retry=retry, timeout=timeout)
        self._keys = [bytes(scan_key32).hex(), bytes(spend_pubkey33).hex()]
        self._scan_pub33 = PrivateKey(bytes(scan_key32)).public_key.format()
        self._spend33 = bytes(spend_pubkey33)
        self.window = window

    def _chain(self) -> str:
        """The chain of the server's genesis block, once `server.features` offers silent payments.

        Raises:
            SourceError: no `silent_payments` in server.features, or an unknown chain.
        """
        features = self.client.call("server.features", [])
        if not isinstance(features, dict) or "silent_payments" not in features:
            raise SourceError(f"{self.name} offers no silent payments (server.features has no silent_payments)")
        return super()._chain()

    def _history(self, start: str, lo: int, hi: int) -> dict[bytes, tuple[int, bytes]]:
        """{txid32: (height, tweak33)} of one subscription from `start` ("FROM-TO"), read to its progress 1.0 and
        unsubscribed; entries of heights outside lo..hi other than 0 (the mempool) are refused.

        Raises:
            ServerError: the server fails or refuses the subscription.
            SourceError: an answer or notification the checks refuse.
        """
        reply = self.client.call(electrum_sp.FRIGATE_SUBSCRIBE, [*self._keys, start, self.labels])
        self._check_reply(reply)
        found: dict[bytes, tuple[int, bytes]] = {}
        while True:
            params = self.client.note()
            if isinstance(params, list) and len(params) == 3:
                params = dict(zip(("subscription", "progress", "history"), params))
            if not isinstance(params, dict) or params.get("subscription") != reply:
                continue  # another subscription's
            progress, history = params.get("progress"), params.get("history")
            if type(progress) not in (int, float) or not 0 <= progress <= 1 or not isinstance(history, list) or len(history) > MAX_PAGE:
                raise SourceError(f"{self.name}: a notification whose progress or history is malformed")
            for entry in history:
                if not isinstance(entry, dict):
                    raise SourceError(f"{self.name}: a history entry is not an object")
                height = integer(entry.get("height"), 0, 2**31, f"{self.name}: a history entry's height")
                txid32 = hex_bytes(entry.get("tx_hash"), 32, f"{self.name}: a history entry's tx_hash")[::-1]
                tweak33 = hex_bytes(entry.get("tweak_key"), 33, f"{self.name}: a history entry's tweak_key")
                if height and not lo <= height <= hi:
                    raise SourceError(f"{self.name} reported a transaction at height {height} for heights {lo}..{hi}")
                prior = found.get(txid32)
                if prior is not None and prior[0] and height and prior != (height, tweak33):
                    raise SourceError(f"{self.name} reported transaction {txid32[::-1].hex()} twice, differently")
                if prior is None or (height and not prior[0]):  # a mined tx's height replaces its mempool entry
                    found[txid32] = (height, tweak33)
                if len(found) > MAX_BLOCK_TXS * (hi - lo + 1):
                    raise SourceError(f"{self.name} reported more transactions than the blocks hold")
            if progress >= 1:
                break
        self.client.call(electrum_sp.FRIGATE_UNSUBSCRIBE, self._keys)
        return found

    def _check_reply(self, reply: object) -> None:
        if not isinstance(reply, dict):
            raise SourceError(f"{self.name} answered the subscription with {str(reply)[:80]}")
        address = sp_address.encode(self._scan_pub33, self._spend33, get_network(self.network()).hrp)
        if reply.get("address") != address:
            raise SourceError(f"{self.name} subscribed {str(reply.get('address'))[:120]}, not the wallet's {address}")
        scanned = reply.get("labels")
        if not isinstance(scanned, list) or not {0, *self.labels} <= set(x for x in scanned if type(x) is int):
            raise SourceError(f"{self.name} scans labels {str(scanned)[:80]}, not all of the wallet's {[0, *self.labels]}")

    def _window(self, lo: int, hi: int) -> tuple[list[bytes], dict[int, tuple[bytes, BlockTxs]]]:
        """(headers of lo..hi, {height: (its reported tweaks, its reported txs proven)}) of one window, every
        reported tx fetched at once."""
        heads = self.headers.get(lo, hi - lo + 1)
        reported = {txid32: entry for txid32, entry in self._history(f"{lo}-{hi}", lo, hi).items() if entry[0]}
        proven = proven_txs(self.client, [(height, heads[height - lo], txid32) for txid32, (height, _) in reported.items()])
        by_height: dict[int, dict[bytes, tuple[int, object]]] = {}
        for txid32, (height, _) in reported.items():
            by_height.setdefault(height, {})[txid32] = proven[txid32]
        tweaks = {txid32: tweak33 for txid32, (_, tweak33) in reported.items()}
        return heads, {h: (b"".join(tweaks[t] for t in txs), block_txs(txs, tweaks)) for h, txs in by_height.items()}

    def blocks(self, start: int, stop: int) -> Iterator[FrigateBlock]:
        """Heights start..stop, a window's history read before its blocks are yielded.

        Raises:
            ServerError: the server fails after the retries.
            SourceError: an answer the checks refuse.
        """
        spent = Spends(self.client)
        for lo in range(start, stop + 1, self.window):
            hi = min(lo + self.window - 1, stop)
            heads, by_height = self.retry.call(self._window, lo, hi)
            for height, header80 in zip(range(lo, hi + 1), heads):
                tweaks33, txs = by_height.get(height, (b"", BlockTxs()))
                yield FrigateBlock(height, block_hash32(header80), header80[4:36], header80, tweaks33, txs, self.retry, spent)

    def mempool(self) -> BlockTxs | None:
        """The unconfirmed txs the server reports paying the wallet (a subscription of the tip's height), with their tweaks.

        Raises:
            ServerError: the server fails after the retries.
            SourceError: a tx that is not what its txid says.
        """
        return self.retry.call(self._mempool)

    def _mempool(self) -> BlockTxs:
        tip = self._tip()
        pending = {txid32: tweak33 for txid32, (height, tweak33) in self._history(f"{tip}-{tip}", tip, tip).items() if height == 0}
        raws = self.client.calls([("blockchain.transaction.get", [txid32[::-1].hex()]) for txid32 in pending])
        txs = [parsed_tx(raw_hex, txid32, f"unconfirmed transaction {txid32[::-1].hex()}") for txid32, raw_hex in zip(pending, raws)]
        return BlockTxs.of((tx.txid32, pending[tx.txid32], taproot_outputs(tx)) for tx in txs)

    def close(self) -> None:
        super().close()
        self._keys = []
