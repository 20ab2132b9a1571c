"""The receiving wallet: silent payments found through any source, kept in a file, resumed anywhere.

```python
from sp_scan.wallet import Wallet
from sp_scan.wallet.sources.index import IndexSource

wallet = Wallet.create("alice.wallet", "main", scan_pubkey33, spend_pubkey33, labels=[1], birthday=900_000)
wallet.sync(IndexSource("tweaks.db"), scan_key32, on_output=print)   # or NodeSource, BlindBitSource, ...
wallet.balance()     # {"confirmed": sats, "unconfirmed": sats}
wallet.unspent()     # [WalletOutput], each with its spend tweak (BIP376)
```

Design: three rooms, as the index has. The **store** (`store`, SQLite, the only SQL) holds the
wallet's public keys, labels and birthday, the synced tip with the hashes of the blocks below it,
and every output found with its spend tweak and spend. The **sources** (`sources/`, one module
each) answer per block: hash, tweaks, and the outputs of the txs that may pay (a filtering source
is handed the k = 0 keys to look for, never the scan key) and which of the wallet's outputs the
block spends; a source never writes the wallet. The **sync** (`sync`) checks every answer, scans
with the native batch scan the index uses, and commits each block (or a run of empty ones) in one
transaction with the new tip; forks are found by comparing stored hashes with the source's. The
scan private key is never stored: `sync` takes it each time and refuses one whose public key is
not the wallet's. Models: spdk's scanner behind its ChainBackend, bdk-sp's oracles beside its
wallet, Electrum's synchronizer / wallet_db split.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from coincurve import PrivateKey

from .. import crypto
from ..address import encode
from ..errors import InvalidKeyError, WalletStoreError
from ..index.sync import TAPROOT_ACTIVATION
from ..network import get as get_network
from ..scan import CHANGE_LABEL, Receiver
from .sources import Source
from .store import WalletOutput, WalletStore
from .sync import SyncStats, Syncer

__all__ = ["SyncStats", "Wallet", "WalletOutput", "default_birthday"]

MAX_LABEL = 2**32 - 1


def default_birthday(network: str) -> int:
    """The first height a wallet scans when none is given: taproot activation on main, else 0."""
    return TAPROOT_ACTIVATION if network == "main" else 0


class Wallet:
    """An open wallet file. Build with `Wallet.create` or `Wallet.open`; close with `close()` (or `with`)."""

    def __init__(self, store: WalletStore) -> None:
        self._store = store

    @classmethod
    def create(
        cls, path: str | Path, network: str, scan_pubkey33: bytes, spend_pubkey33: bytes, labels: Sequence[int] = (), birthday: int | None = None
    ) -> Wallet:
        """Create a wallet file.

        Args:
            path: the new file (never an existing one).
            network: Core's chain name (main, test, testnet4, signet, regtest).
            scan_pubkey33: B_scan (the scan private key is never stored).
            spend_pubkey33: B_spend.
            labels: the labels m in use; the change label 0 is always scanned.
            birthday: the first height to scan (default: `default_birthday`).

        Raises:
            InvalidKeyError: a key that is not a compressed point, or a label out of range.
            WalletStoreError: the file exists, or an unknown network.
        """
        crypto.pubkey(scan_pubkey33, "scan_pubkey33")
        crypto.pubkey(spend_pubkey33, "spend_pubkey33")
        if any(not 0 <= m <= MAX_LABEL for m in labels):
            raise InvalidKeyError("labels are integers from 0 to 2**32 - 1")
        if birthday is not None and birthday < 0:
            raise WalletStoreError(f"a birthday is a height, not {birthday}")
        all_labels = tuple(dict.fromkeys((CHANGE_LABEL, *labels)))
        return cls(WalletStore.create(path, network, bytes(scan_pubkey33), bytes(spend_pubkey33), all_labels, default_birthday(network) if birthday is None else birthday))

    @classmethod
    def open(cls, path: str | Path) -> Wallet:
        """Open a wallet file.

        Raises:
            WalletStoreError: missing, not an sp-scan wallet, another format version, or damaged.
        """
        return cls(WalletStore.open(path))

    def __enter__(self) -> Wallet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the file."""
        self._store.close()

    @property
    def path(self) -> Path:
        return self._store.path

    @property
    def network(self) -> str:
        return self._store.network

    @property
    def birthday(self) -> int:
        """The first height the wallet scans."""
        return self._store.birthday

    @property
    def labels(self) -> tuple[int, ...]:
        """The labels scanned, the change label 0 first."""
        return self._store.labels

    @property
    def scan_pubkey33(self) -> bytes:
        return self._store.scan_pubkey33

    @property
    def spend_pubkey33(self) -> bytes:
        return self._store.spend_pubkey33

    def address(self) -> str:
        """The wallet's unlabelled address (labelled ones need the scan private key)."""
        return encode(self.scan_pubkey33, self.spend_pubkey33, get_network(self.network).hrp)

    def tip(self) -> tuple[int, bytes] | None:
        """(height, hash32) of the last synced block; None before the first."""
        return self._store.tip()

    def receiver(self, scan_key32: bytes) -> Receiver:
        """The Receiver that scans for this wallet with `scan_key32`.

        Raises:
            InvalidKeyError: not a valid key, or not the key of this wallet's scan public key.
        """
        crypto.scalar(scan_key32, "scan_key32")
        if PrivateKey(bytes(scan_key32)).public_key.format() != self.scan_pubkey33:
            raise InvalidKeyError(f"the scan key given is not {self.path}'s (its public key differs)")
        return Receiver(bytes(scan_key32), self.spend_pubkey33, self.labels)

    def sync(
        self,
        source: Source,
        scan_key32: bytes,
        *,
        stop: int | None = None,
        follow: bool = False,
        interval: float = 10.0,
        mempool: bool = False,
        threads: int = 1,
        on_output: Callable[[WalletOutput], None] | None = None,
        progress: Callable[[SyncStats], None] | None = None,
    ) -> SyncStats:
        """Bring the wallet to the source's tip (or `stop`), following forks; with `follow`, keep polling.

        Args:
            source: one of `sp_scan.wallet.sources`' sources.
            scan_key32: b_scan; checked against the wallet's scan public key, never stored.
            stop: the last height (default: the source's tip, re-read every round).
            follow: poll every `interval` seconds until interrupted (and wait for a source behind the wallet).
            mempool: once caught up, keep the outputs paying the wallet in the source's mempool as unconfirmed.
            threads: native scanning threads.
            on_output: called with each output found, then again when its spend is seen, after the
                commit that holds it (an app's hook: it runs in this thread, keep it short).
            progress: called with the stats after each block and while waiting.

        Returns:
            What was done.

        Raises:
            InvalidKeyError: the scan key is not this wallet's.
            WalletStoreError: the source is on another network, or another process syncs the wallet.
            HeightError: stop is beyond the source's tip (without follow).
            NodeError: the source fails (after the retries it makes itself: see its `retry`), or is behind the wallet (without follow).
            SourceError: an answer the checks refuse, a tweak that is not a point among them (the block is not written).
            The message of a failure names the height to resume at.
        """
        receiver = self.receiver(scan_key32)
        syncer = Syncer(self._store, source, receiver, threads=threads, progress=progress, on_output=on_output)
        return syncer.run(stop, follow, interval, mempool)

    def outputs(self) -> list[WalletOutput]:
        """Every output found, in block order (height, tx, vout), then the unconfirmed ones (height None)."""
        return self._store.outputs()

    def unspent(self) -> list[WalletOutput]:
        """The outputs not yet spent, confirmed ones in block order, then the unconfirmed ones."""
        return self._store.outputs(unspent=True)

    def balance(self) -> dict[str, int]:
        """{"confirmed": sats, "unconfirmed": sats} of the unspent outputs."""
        confirmed, unconfirmed = self._store.balance()
        return {"confirmed": confirmed, "unconfirmed": unconfirmed}

    def info(self) -> dict:
        """{"network", "address", "labels", "birthday", "height", "hash" (display hex), "outputs", "spent",
        "confirmed", "unconfirmed"}."""
        tip = self.tip()
        found, spent = self._store.counts()
        return {
            "network": self.network,
            "address": self.address(),
            "labels": list(self.labels),
            "birthday": self.birthday,
            "height": tip[0] if tip else None,
            "hash": tip[1][::-1].hex() if tip else None,
            "outputs": found,
            "spent": spent,
            **self.balance(),
        }
