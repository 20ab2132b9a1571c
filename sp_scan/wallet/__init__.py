"""The receiving wallet: silent payments found through any source, kept in a file, resumed anywhere.

```python
from sp_scan.wallet import Wallet, sources
from sp_scan.wallet.broadcast import Broadcaster

wallet = Wallet.from_keys("alice.wallet", "main", scan_key32, spend_pubkey33, labels=[1], birthday=900_000)  # or from_descriptor, open
wallet.listen(print)   # events (sp_scan.wallet.events): found, spent, rolled back, unconfirmed in and out, own sends
with sources.open("tweaks.db") as source:   # or rest+http://…, http://… (BlindBit), grpc://…, tcp://…, cake+tcp://…
    wallet.sync(source, scan_key32, cancel=stop_event)   # or await wallet.sync_async(source, scan_key32)
wallet.balance()     # Balance(confirmed, unverified, reserved, outgoing, incoming), sats
wallet.unspent()     # [WalletOutput], each with its spend tweak (BIP376)
psbt, spend = wallet.create_psbt([("tsp1q…", 50_000)], fee_rate="2.5")   # BIP370/375/376 PSBT; its coins held (spend.pending)
signed = sp_scan.psbt.sign_sp_inputs(psbt, spend_key32)                  # then finalize_sp_inputs, extract
wallet.broadcast(signed, Broadcaster("rpc+http://127.0.0.1:8332", wallet.network, cookie_file=cookie))   # recorded until its block
```

Design: three parts, as the index has. The **store** (`store`, SQLite, the only SQL, a checksum on
every row) holds the wallet's public keys, labels and birthday, the synced tip with the hashes of the
blocks below it, every output found with its spend tweak, spend and whether a source proved it, and
the pending spends that hold coins. The **sources** (`sources/`, one module
each) answer per block: hash, tweaks, and the outputs of the txs that may pay (a filtering source
is handed the k = 0 keys to look for, never the scan key) and which of the wallet's outputs the
block spends; a source never writes the wallet. The **sync** (`sync`) checks every answer, scans
with the native batch scan the index uses, and commits each block (or a run of empty ones) in one
transaction with the new tip; forks are found by comparing stored hashes with the source's. The
scan private key is never stored: `sync` takes it each time and refuses one whose public key is
not the wallet's. Spending (`create_psbt`, `plan_spend`) needs only public data: the tweaks, the
change label's spend key B_0 (stored at creation, or by the first sync) and, when known, the
spend key's origin for PSBT_IN_SP_SPEND_BIP32_DERIVATION. Models: spdk's scanner behind its ChainBackend, bdk-sp's oracles beside its
wallet, Electrum's synchronizer / wallet_db split.
"""

from __future__ import annotations

import asyncio
import dataclasses
import struct
import threading
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from pathlib import Path

from coincurve import PrivateKey

from .. import crypto
from .. import descriptor as sp_descriptor
from .. import psbt as sp_psbt
from ..address import SPAddress, encode, labelled_spend_pubkey
from ..errors import InvalidKeyError, SpendError, WalletStoreError
from ..network import TAPROOT_ACTIVATION
from ..network import MAIN, NETWORKS
from ..network import get as get_network
from ..psbt import Psbt
from ..psbt.fields import OUT_SP_V0_INFO, OUT_SP_V0_LABEL, field_key
from ..wire import parse_tx
from ..scan import CHANGE_LABEL, Receiver
from . import spend
from .events import (
    OutputFound, OutputRolledBack, OutputSpent, PendingSpendChanged, SpendRolledBack, UnconfirmedArrived, UnconfirmedLeft, WalletEvent,
)  # fmt: skip
from .sources import Prover, WalletSource
from .spend import Recipient, SpendPlan
from .store import PendingSpend, WalletOutput, WalletStore
from .sync import WalletSyncStats, WalletSyncer

__all__ = [
    "Balance", "OutputFound", "OutputRolledBack", "OutputSpent", "PendingSpend", "PendingSpendChanged", "Recipient", "SpendPlan",
    "SpendRolledBack", "WalletSyncStats", "UnconfirmedArrived", "UnconfirmedLeft", "Wallet", "WalletEvent", "WalletOutput", "default_birthday",
]  # fmt: skip

CHANGE_SPEND_PUBKEY, SPEND_ORIGIN, LABEL_SPEND_PUBKEYS = "change_spend_pubkey", "spend_origin", "label_spend_pubkeys"
_LABEL_KEY = struct.Struct("<I33s")

MAX_LABEL = 2**32 - 1


@dataclasses.dataclass(frozen=True, slots=True)
class Balance:
    """The wallet's satoshis by state (each coin counted once).

    Attributes:
        confirmed: mined coins a source proved, unspent, not in a pending spend: what `plan_spend` selects from.
        unverified: mined coins only a server's word holds (BlindBit), unspent, not in a pending spend.
        reserved: coins of pending spends not broadcast yet (a PSBT written), freed by `abandon`.
        outgoing: coins the wallet's broadcast transactions spend, until a block spends them.
        incoming: payments not mined yet: the mempool's (a sync with `mempool=True`) and the change of
            the wallet's broadcast transactions.
    """

    confirmed: int = 0
    unverified: int = 0
    reserved: int = 0
    outgoing: int = 0
    incoming: int = 0


def _label_keys_blob(keys: Mapping[int, bytes]) -> bytes:
    return b"".join(_LABEL_KEY.pack(m, k) for m, k in sorted(keys.items()))


def default_birthday(network: str) -> int:
    """The first height a wallet scans when none is given: taproot activation on main, else 0."""
    return TAPROOT_ACTIVATION if network == "main" else 0


class Wallet:
    """An open wallet file. Build with `from_descriptor`, `from_keys`, `create` or `open`; close with `close()` (or `with`).
    Its calls may come from several threads (they hold the store's lock); one process syncs a file at a time."""

    def __init__(self, store: WalletStore) -> None:
        self._store = store
        self._listeners: list[Callable[[WalletEvent], None]] = []

    @classmethod
    def create(
        cls, path: str | Path, network: str, scan_pubkey33: bytes, spend_pubkey33: bytes, labels: Sequence[int] = (), birthday: int | None = None,
        *, change_spend_pubkey33: bytes | None = None, spend_origin: tuple[bytes, Sequence[int]] | None = None,
        label_spend_pubkeys33: Mapping[int, bytes] | None = None,
    ) -> Wallet:  # fmt: skip
        """Create a wallet file.

        Args:
            path: the new file (never an existing one).
            network: Core's chain name (main, test, testnet4, signet, regtest).
            scan_pubkey33: B_scan (the scan private key is never stored).
            spend_pubkey33: B_spend.
            labels: the labels m in use; the change label 0 is always scanned.
            birthday: the first height to scan (default: `default_birthday`).
            change_spend_pubkey33: B_0 = B_spend + ℓ_0·G, where change goes (default: stored by the first sync).
            spend_origin: (fingerprint4, path) of B_spend, for PSBT_IN_SP_SPEND_BIP32_DERIVATION, or None.
            label_spend_pubkeys33: {m: B_m = B_spend + ℓ_m·G} of labels in `labels`, for `address(label=m)` without
                the scan key (default: stored by the first sync, which checks those given).

        Raises:
            InvalidKeyError: a key that is not a compressed point, a label out of range or not in `labels`, a bad origin.
            WalletStoreError: the file exists, or an unknown network.
        """
        crypto.pubkey(scan_pubkey33, "scan_pubkey33")
        crypto.pubkey(spend_pubkey33, "spend_pubkey33")
        if any(not 0 <= m <= MAX_LABEL for m in labels):
            raise InvalidKeyError("labels are integers from 0 to 2**32 - 1")
        if birthday is not None and birthday < 0:
            raise WalletStoreError(f"a birthday is a height, not {birthday}")
        extra = {}
        if change_spend_pubkey33 is not None:
            extra[CHANGE_SPEND_PUBKEY] = bytes(crypto.pubkey(change_spend_pubkey33, "change_spend_pubkey33").format())
        if spend_origin is not None:
            fingerprint4, steps = spend_origin
            if len(fingerprint4) != 4 or any(not 0 <= s < 2**32 for s in steps):
                raise InvalidKeyError("a key origin is a 4-byte fingerprint and 32-bit path steps")
            extra[SPEND_ORIGIN] = bytes(fingerprint4) + struct.pack(f"<{len(steps)}I", *steps)
        all_labels = tuple(dict.fromkeys((CHANGE_LABEL, *labels)))
        if label_spend_pubkeys33:
            if set(label_spend_pubkeys33) - set(all_labels):
                raise InvalidKeyError(f"label keys given for labels not in labels: {sorted(set(label_spend_pubkeys33) - set(all_labels))}")
            extra[LABEL_SPEND_PUBKEYS] = _label_keys_blob({m: bytes(crypto.pubkey(k, f"label_spend_pubkeys33[{m}]").format()) for m, k in label_spend_pubkeys33.items()})
        birthday = default_birthday(network) if birthday is None else birthday
        return cls(WalletStore.create(path, network, bytes(scan_pubkey33), bytes(spend_pubkey33), all_labels, birthday, extra))

    @classmethod
    def from_keys(
        cls, path: str | Path, network: str, scan_key32: bytes, spend_pubkey33: bytes, labels: Sequence[int] = (), birthday: int | None = None,
        *, spend_origin: tuple[bytes, Sequence[int]] | None = None,
    ) -> Wallet:  # fmt: skip
        """Create a wallet file from the scan private key (used, never stored): its public key, the change key and
        every label's spend key are stored, so that the wallet's addresses and spends need no scan key.

        Args and raises: as `create`; scan_key32: b_scan.
        """
        crypto.scalar(scan_key32, "scan_key32")
        all_labels = tuple(dict.fromkeys((CHANGE_LABEL, *labels)))
        if any(not 0 <= m <= MAX_LABEL for m in all_labels):
            raise InvalidKeyError("labels are integers from 0 to 2**32 - 1")
        keys = {m: labelled_spend_pubkey(scan_key32, spend_pubkey33, m) for m in all_labels}
        return cls.create(
            path, network, PrivateKey(bytes(scan_key32)).public_key.format(), spend_pubkey33, labels, birthday,
            change_spend_pubkey33=keys[CHANGE_LABEL], spend_origin=spend_origin, label_spend_pubkeys33=keys,
        )  # fmt: skip

    @classmethod
    def from_descriptor(cls, path: str | Path, descriptor: str | sp_descriptor.SPDescriptor, *, network: str | None = None, birthday: int | None = None) -> Wallet:
        """Create a wallet file from an sp() descriptor (BIP392/393): its keys, labels 1..ml, birthday bh and spend key
        origin (`from_keys`; the descriptor itself is not stored).

        Args:
            descriptor: its text (it holds private keys: read it from a file, never from an argument) or a decoded one.
            network: the chain; default main for a mainnet descriptor, and required for a test-network one.
            birthday: the first height scanned (default: the descriptor's bh, else `default_birthday`).

        Raises:
            DescriptorError: the text is not a valid descriptor.
            WalletStoreError: no network given for a test-network descriptor, or one of the other family; and as `create`.
        """
        d = sp_descriptor.decode(descriptor) if isinstance(descriptor, str) else descriptor
        if network is None:
            if d.network != MAIN:
                raise WalletStoreError("a test-network descriptor needs network= (test, testnet4, signet or regtest)")
            network = "main"
        if network in NETWORKS and get_network(network).family != d.network:
            raise WalletStoreError(f"the descriptor is for {'mainnet' if d.network == MAIN else 'the test networks'}, not {network}")
        receiver = d.receiver()
        origin = d.spend_origin
        return cls.from_keys(
            path, network, receiver.scan_key32, receiver.spend_pubkey33, receiver.labels, d.birthday_height if birthday is None else birthday,
            spend_origin=(origin.fingerprint4, origin.path) if origin is not None else None,
        )  # fmt: skip

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
        """The wallet file."""
        return self._store.path

    @property
    def network(self) -> str:
        """Core's chain name (main, test, testnet4, signet, regtest)."""
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
        """B_scan."""
        return self._store.scan_pubkey33

    @property
    def spend_pubkey33(self) -> bytes:
        """B_spend."""
        return self._store.spend_pubkey33

    @property
    def change_spend_pubkey33(self) -> bytes | None:
        """B_0, the change label's spend key; None until a sync (or `create`) recorded it."""
        return self._store.meta(CHANGE_SPEND_PUBKEY)

    @property
    def spend_origin(self) -> tuple[bytes, tuple[int, ...]] | None:
        """(fingerprint4, path) of B_spend, or None when the wallet does not know it."""
        value = self._store.meta(SPEND_ORIGIN)
        return None if value is None else (value[:4], tuple(memoryview(value[4:]).cast("I")))

    def label_spend_pubkeys33(self) -> dict[int, bytes]:
        """{m: B_m} of the labels whose spend key the wallet holds (from `from_keys`, `create` or a sync)."""
        value = self._store.meta(LABEL_SPEND_PUBKEYS) or b""
        keys = dict(_LABEL_KEY.iter_unpack(value))
        change = self.change_spend_pubkey33
        return keys | ({CHANGE_LABEL: change} if change is not None else {})

    def address(self, label: int | None = None) -> str:
        """The wallet's address, or the one of label m (no scan key needed: the label's spend key is stored).

        Raises:
            InvalidKeyError: a label the wallet does not scan.
            WalletStoreError: the label's spend key is not stored yet (a wallet made by `create` without it: sync once).
        """
        hrp = get_network(self.network).hrp
        if label is None:
            return encode(self.scan_pubkey33, self.spend_pubkey33, hrp)
        if label not in self.labels:
            raise InvalidKeyError(f"{self.path} does not scan label {label} (its labels: {', '.join(map(str, self.labels))})")
        key = self.label_spend_pubkeys33().get(label)
        if key is None:
            raise WalletStoreError(f"{self.path} does not hold label {label}'s spend key yet: sync it once (that records it)")
        return encode(self.scan_pubkey33, key, hrp)

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
        source: WalletSource,
        scan_key32: bytes,
        *,
        stop: int | None = None,
        follow: bool = False,
        interval: float = 10.0,
        mempool: bool = False,
        threads: int = 1,
        progress: Callable[[WalletSyncStats], None] | None = None,
        rescan_from: int | None = None,
        verify_with: Prover | None = None,
        cancel: threading.Event | None = None,
    ) -> WalletSyncStats:
        """Bring the wallet to the source's tip (or `stop`), following forks; with `follow`, keep polling.

        Args:
            source: one of `sp_scan.wallet.sources`' sources.
            scan_key32: b_scan; checked against the wallet's scan public key, never stored.
            stop: the last height (default: the source's tip, re-read every round).
            follow: poll every `interval` seconds until interrupted (and wait for a source behind the wallet).
            mempool: once caught up, keep the outputs paying the wallet in the source's mempool as unconfirmed.
            threads: native scanning threads.
            progress: called with the stats after each block and while waiting (in this thread).
            rescan_from: first forget every block from this height up (what they found and spent, damaged rows
                among them), then sync them again: the way back from damage.
            verify_with: a source that proves outputs (a `NodeSource`, an `ElectrumSource`, …) for what a BlindBit
                source finds; without one (and from a source that proves nothing itself) outputs are kept as
                unverified. The wallet's unverified outputs are shown to it (or to the source, when that proves)
                first: see `sp_scan.wallet.sync`.
            cancel: set (from any thread) to end the sync: it is checked before every block and wakes every wait
                (a request in flight ends within its deadline); what was finished stays committed, and the stats are
                returned with `cancelled` True.

        What the sync changes is told to the listeners (`listen`) after each commit, in this thread.

        Returns:
            What was done.

        Raises:
            InvalidKeyError: the scan key is not this wallet's.
            WrongNetworkError: the source (or verify_with) is on another network.
            WalletStoreError: another process syncs the wallet.
            HeightError: stop is beyond the source's tip (without follow).
            ServerError: the source fails (after the retries it makes itself: see its `retry`), or is behind the wallet (without follow).
            SourceError: an answer the checks refuse, a tweak that is not a point among them, an output the
                prover does not show as the source gave it (the block is not written).
            The message of a failure names the height to resume at.
        """
        receiver = self.receiver(scan_key32)
        self._record_label_keys(scan_key32)
        syncer = WalletSyncer(self._store, source, receiver, threads=threads, progress=progress, emit=self._emit, prover=verify_with, cancel=cancel)
        return syncer.run(stop, follow, interval, mempool, rescan_from)

    async def sync_async(self, source: WalletSource, scan_key32: bytes, **options) -> WalletSyncStats:
        """`sync` in a worker thread (`asyncio.to_thread`), for programs built on asyncio: the event loop runs on.
        Cancelling the awaiting task sets the sync's cancel token and waits for the sync to commit and return
        (the task then ends with CancelledError). The listeners are called in the worker thread: hand events to
        the loop with `loop.call_soon_threadsafe`.

        Args, returns and raises: as `sync` (options: its keyword arguments, `cancel` among them).
        """
        cancel = options.pop("cancel", None) or threading.Event()
        work = asyncio.ensure_future(asyncio.to_thread(self.sync, source, scan_key32, cancel=cancel, **options))
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:
            cancel.set()
            await asyncio.wait([work])
            raise

    def _record_label_keys(self, scan_key32: bytes) -> None:
        """Store B_0 and every label's B_m the wallet lacks, and refuse stored ones the scan key does not give.

        Raises:
            WalletStoreError: a stored label key is not the one the scan key gives (the file was made with other keys).
        """
        keys = {m: labelled_spend_pubkey(scan_key32, self.spend_pubkey33, m) for m in self.labels}
        stored = self.label_spend_pubkeys33()
        wrong = sorted(m for m, k in stored.items() if m in keys and keys[m] != k)
        if wrong:
            raise WalletStoreError(f"{self.path} holds spend keys for labels {wrong} that the scan key does not give: create the wallet again")
        if self.change_spend_pubkey33 is None:
            self._store.set_meta(CHANGE_SPEND_PUBKEY, keys[CHANGE_LABEL])
        if set(keys) - set(stored) - {CHANGE_LABEL}:
            self._store.set_meta(LABEL_SPEND_PUBKEYS, _label_keys_blob(keys))

    def listen(self, listener: Callable[[WalletEvent], None]) -> Callable[[], None]:
        """Tell `listener` every event of this wallet from now on (`sp_scan.wallet.events`): outputs found, spent and
        rolled back, unconfirmed payments arriving and leaving, the wallet's own sends. It is called after the commit
        that holds the change, in the thread that made it (a sync's, or the caller of `create_psbt`, `broadcast`,
        `record_broadcast`, `abandon`); what it raises ends that call.

        Returns:
            A function that stops telling it.
        """
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _emit(self, event: WalletEvent) -> None:
        for listener in list(self._listeners):
            listener(event)

    def _pending_spend(self, pid: int) -> PendingSpend:
        return next(p for p in self._store.pending() if p.id == pid)

    def outputs(self) -> list[WalletOutput]:
        """Every output found (verified or not: see `WalletOutput.verified`), in block order (height, tx, vout), then
        the unconfirmed ones (height None)."""
        return self._store.outputs()

    def unspent(self) -> list[WalletOutput]:
        """The outputs no block spent yet, confirmed ones in block order, then the unconfirmed ones (those a pending
        spend holds included: see `WalletOutput.pending`)."""
        return self._store.outputs(unspent=True)

    def pending(self) -> list[PendingSpend]:
        """The spends of the wallet's coins not mined yet (reserved by `create_psbt`, or broadcast), oldest first."""
        return self._store.pending()

    def abandon(self, ids: Sequence[int] | None = None) -> list[int]:
        """Forget pending spends, freeing their coins (None: all of them, damaged rows included).

        Returns:
            The ids forgotten.

        Raises:
            WalletStoreError: an id the wallet does not hold.
        """
        try:
            before = {p.id: p for p in self._store.pending()}
        except WalletStoreError:
            before = {}  # damaged pending rows: forgotten untold (`abandon()` is their way back)
        gone = self._store.abandon(ids)
        for pid in gone:
            if pid in before:
                self._emit(PendingSpendChanged(before[pid], "abandoned"))
        return gone

    def balance(self) -> Balance:
        """The unspent coins' satoshis by state (see `Balance`).

        Raises:
            WalletStoreError: the file is damaged (the message names the way back).
        """
        pending = self._store.pending()
        broadcast = {op for p in pending if p.txid32 is not None for op, _ in p.coins}
        in_mempool = {o.txid32 for o in self._store.outputs() if o.height is None}
        sums = {"confirmed": 0, "unverified": 0, "reserved": 0, "outgoing": 0, "incoming": 0}
        for o in self._store.outputs(unspent=True):
            if o.pending is not None:
                sums["outgoing" if o.outpoint36 in broadcast else "reserved"] += o.amount
            elif o.height is None:
                sums["incoming"] += o.amount
            else:
                sums["confirmed" if o.verified else "unverified"] += o.amount
        sums["incoming"] += sum(p.change_amount for p in pending if p.txid32 is not None and p.txid32 not in in_mempool)
        return Balance(**sums)

    def check(self) -> dict[str, int]:
        """Read every row of the file and check it (see `sp_scan.wallet.store`).

        Returns:
            {"blocks", "outputs", "unconfirmed", "pending"}: the rows checked.

        Raises:
            WalletStoreError: the first damage found, its message naming the way back.
        """
        return self._store.check()

    def info(self) -> dict:
        """{"network", "address", "labels", "birthday", "height", "hash" (display hex), "outputs", "spent", "pending",
        and the `Balance` fields}."""
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
            "pending": len(self.pending()),
            **dataclasses.asdict(self.balance()),
        }

    def plan_spend(
        self,
        recipients: Sequence[tuple[str, int]],
        fee_rate: str | float | Decimal,
        *,
        coins: Sequence[tuple[bytes, int]] | None = None,
        change: str | None = None,
        unconfirmed: bool = False,
        max_fee_rate: str | float | Decimal | None = None,
        allow_unverified: bool = False,
        replaces: int | None = None,
    ) -> SpendPlan:
        """Plan a spend of the wallet's unspent coins (see `sp_scan.wallet.spend`); coins a pending spend holds are
        left alone, but for the one it `replaces`.

        Args:
            recipients: (address, sats): silent-payments, segwit or base58 addresses of the wallet's network.
            fee_rate: sat/vB, at most 3 decimals; the fee pays at least this and less than 1 sat/vB more.
            coins: (txid32, vout) of the coins to spend, all of them; default: chosen from the confirmed ones.
            change: an address for the change instead of the wallet's change label (m = 0).
            unconfirmed: let the selection take unconfirmed coins too.
            max_fee_rate: sat/vB, the highest fee rate allowed; None: Core's default maxfeerate (0.10 BTC/kvB),
                and a fee above the amount sent refused.
            allow_unverified: let it spend coins only a server's word holds (`WalletOutput.verified` False).
            replaces: the id of a pending spend this one replaces (BIP125): it spends all of that one's coins (and
                `coins`, when given), and when that one was broadcast, pays its fee plus Core's incremental relay
                fee for its own size. Its silent-payment outputs are computed by the signer for its own inputs.

        Raises:
            InvalidAddressError: an address that does not decode, or is another network's.
            SpendError: a coin the wallet does not hold unspent, or an unverified one, or one a pending spend
                holds; no pending spend `replaces`, a replacement that pays too little; not enough funds, dust, a fee rate out of range or above the ceiling, a fee above the
                amount sent, the change label's key not known yet (sync once, or give `change`).
        """
        outputs = [spend.recipient(a, amount, self.network) for a, amount in recipients]
        rate = spend.fee_rate_kvb(fee_rate)
        ceiling = None if max_fee_rate is None else spend.fee_rate_kvb(max_fee_rate)
        spend.check_fee_rate(rate, ceiling)
        if change is not None:
            change_to = spend.recipient(change, 0, self.network)
        elif self.change_spend_pubkey33 is not None:
            sp = SPAddress(get_network(self.network).hrp, 0, self.scan_pubkey33, self.change_spend_pubkey33)
            change_to = Recipient(0, sp=sp, label=CHANGE_LABEL)
        else:
            raise SpendError(f"{self.path} does not know its change address yet: sync it once (that records it), or give a change address")
        unspent = {(o.txid32, o.vout): o for o in self.unspent()}
        replaced = None
        if replaces is not None:
            replaced = next((p for p in self.pending() if p.id == replaces), None)
            if replaced is None:
                raise SpendError(f"{self.path} has no pending spend {replaces} to replace")
            coins = [(op[:32], struct.unpack("<I", op[32:])[0]) for op, _ in replaced.coins] + [c for c in coins or () if c[0] + struct.pack("<I", c[1]) not in dict(replaced.coins)]
        if coins is not None:
            for c in coins:
                o = unspent.get(c)
                name = f"{c[0][::-1].hex()}:{c[1]}"
                if o is None:
                    raise SpendError(f"the wallet holds no unspent coin {name}")
                if o.pending is not None and o.pending != replaces:
                    raise SpendError(f"coin {name} is held by pending spend {o.pending}: `wallet abandon` it first, or replace it")
                if not (o.verified or allow_unverified):
                    raise SpendError(f"coin {name} is unverified (only a server's word holds it): --allow-unverified spends it")
            if len(set(coins)) != len(coins):
                raise SpendError("a coin is given twice")
            candidates = [unspent[c] for c in coins]
        else:
            candidates = [o for o in unspent.values() if (unconfirmed or o.height is not None) and o.pending is None and (o.verified or allow_unverified)]
            unproven = [o for o in unspent.values() if o.height is not None and o.pending is None and not o.verified]
            if not candidates and unproven:
                raise SpendError(f"the wallet's {len(unproven)} coin(s) are unverified (only a server's word holds them): sync with --verify-with, or --allow-unverified spends them")
        tip = self.tip()
        planned = spend.plan_spend(candidates, outputs, rate, change_to, select=coins is None, locktime=tip[0] if tip else 0)
        spend.check_fee(planned, ceiling)
        if replaced is not None and replaced.txid32 is not None:
            spend.check_replacement(planned, replaced.fee)
        return planned

    def create_psbt(self, recipients: Sequence[tuple[str, int]], fee_rate: str | float | Decimal, *, reserve: bool = True, **options) -> tuple[Psbt, SpendPlan]:
        """The PSBT version 2 of a spend (BIP370 with BIP375's silent-payment outputs and BIP376's input fields), its
        coins reserved by a pending spend until `abandon`, a broadcast of another spend of them, or a block that
        spends one of them.

        Args and raises: as `plan_spend` (options: coins, change, unconfirmed, max_fee_rate, allow_unverified, replaces);
            reserve: False plans and builds without holding the coins.

        Returns:
            (the PSBT to sign with `sp_scan.psbt.sign_sp_inputs`, the planned spend, its `pending` id set).
        """
        planned = self.plan_spend(recipients, fee_rate, **options)
        built = spend.build_psbt(planned, self.spend_pubkey33, self.spend_origin)
        if reserve:
            change = planned.outputs[planned.change].amount if planned.change is not None else 0
            pays_sp = any(r.sp is not None for r in planned.outputs)
            replaces = () if options.get("replaces") is None else (options["replaces"],)
            before = {p.id: p for p in self._store.pending()}
            pid = self._store.add_pending([(c.outpoint36, c.amount) for c in planned.coins], planned.fee, planned.change, change, pays_sp, replaces=replaces)
            planned = dataclasses.replace(planned, pending=pid)
            for old in replaces:
                self._emit(PendingSpendChanged(before[old], "replaced"))
            self._emit(PendingSpendChanged(self._pending_spend(pid), "reserved"))
        return built, planned

    def record_broadcast(self, tx: bytes | Psbt) -> PendingSpend | None:
        """Record a transaction spending the wallet's coins as broadcast: the pending spend that reserved exactly
        its coins gets its txid, else a new pending spend replaces those holding any of them. A replacement with
        other inputs than a spend that pays a silent-payments address must have had its outputs computed for its
        own inputs (BIP352's warning): it is taken only as a signed PSBT, whose outputs BIP375's checks prove.

        Args:
            tx: the raw transaction, or the signed PSBT (finalized and extracted here).

        Returns:
            The pending spend, or None when the transaction spends no coin of the wallet.

        Raises:
            MalformedDataError: not a transaction. PSBTError: a PSBT that does not finalize (a BIP375 rule broken).
            SpendError: a replacement of a silent-payments spend with other inputs given as a raw transaction.
        """
        return self._record(*self._final(tx))

    def broadcast(self, tx: bytes | Psbt, via: Callable[[bytes], bytes]) -> bytes:
        """Check a transaction as `record_broadcast` does, send it with `via` (raw tx -> txid32, e.g.
        `sp_scan.wallet.broadcast.via_rpc` bound to a node), then record it.

        Returns:
            Its txid32.

        Raises:
            As `record_broadcast`, and whatever `via` raises (ServerError: the far side refused it; nothing is recorded).
        """
        raw, proven = self._final(tx)
        self._record(raw, proven, dry=True)
        txid32 = via(raw)
        self._record(raw, proven)
        return txid32

    def _final(self, tx: bytes | Psbt) -> tuple[bytes, Psbt | None]:
        """(the raw transaction, the PSBT whose BIP375 checks it passed, or None for a raw one)."""
        if isinstance(tx, Psbt):
            return sp_psbt.extract(sp_psbt.finalize_sp_inputs(tx)), tx
        return bytes(tx), None

    def _record(self, raw: bytes, proven: Psbt | None, dry: bool = False) -> PendingSpend | None:
        parsed = parse_tx(raw)
        held = {o.outpoint36: o.amount for o in self.unspent()}
        ours = [(op, held[op]) for op in (i.outpoint.to_bytes() for i in parsed.inputs) if op in held]
        if not ours:
            return None
        spent = {op for op, _ in ours}
        holders = [p for p in self.pending() if spent & {op for op, _ in p.coins}]
        if len(holders) == 1 and {op for op, _ in holders[0].coins} == spent:
            recorded = dataclasses.replace(holders[0], txid32=parsed.txid32, tx=raw)
            if not dry and holders[0].txid32 != parsed.txid32:
                self._store.set_broadcast(holders[0].id, parsed.txid32, raw)
                self._emit(PendingSpendChanged(recorded, "broadcast"))
            return recorded
        for p in holders:
            if p.pays_sp and proven is None:
                raise SpendError(
                    f"this transaction spends other coins than pending spend {p.id}, which pays a silent-payments address: its outputs must be "
                    f"computed again for the new inputs (BIP352); broadcast the signed PSBT (its outputs are checked), or `wallet abandon {p.id}` first"
                )
        if dry:
            return None
        fee = sum(a for _, a in ours) - sum(o.amount for o in parsed.outputs) if len(ours) == len(parsed.inputs) else 0
        change_vout, change, pays_sp = None, 0, any(len(o.script) == 34 and o.script[:2] == b"\x51\x20" for o in parsed.outputs)
        if proven is not None:
            pays_sp = bool(proven.sp_outputs())
            for i, m in enumerate(proven.outputs):
                info = m.get(field_key(OUT_SP_V0_INFO))
                if info is not None and info[:33] == self.scan_pubkey33 and m.get(field_key(OUT_SP_V0_LABEL)) == struct.pack("<I", CHANGE_LABEL):
                    change_vout, change = i, parsed.outputs[i].amount
        pid = self._store.add_pending(ours, max(fee, 0), change_vout, change, pays_sp, parsed.txid32, raw, replaces=[p.id for p in holders])
        for p in holders:
            self._emit(PendingSpendChanged(p, "replaced"))
        recorded = self._pending_spend(pid)
        self._emit(PendingSpendChanged(recorded, "broadcast"))
        return recorded
