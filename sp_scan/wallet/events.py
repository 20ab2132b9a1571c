"""What changed a wallet's coins: one typed stream of events, told to the listeners of `Wallet.listen`.

A listener is called in the thread that made the change (a sync's, or the one that called `create_psbt`,
`broadcast`, `abandon`), after the commit that holds the change: what it is told is on disk. It may
hand the event to another thread (`queue.Queue.put` is a listener).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .store import PendingSpend, WalletOutput

__all__ = [
    "OutputFound", "OutputRolledBack", "OutputSpent", "PendingSpendChanged", "SpendRolledBack", "UnconfirmedArrived",
    "UnconfirmedLeft", "WalletEvent",
]  # fmt: skip


@dataclass(frozen=True, slots=True)
class WalletEvent:
    """The base of every event."""


@dataclass(frozen=True, slots=True)
class OutputFound(WalletEvent):
    """A block paid the wallet: `output` (see `WalletOutput.verified`: a BlindBit server's word alone, or proven)."""

    output: WalletOutput


@dataclass(frozen=True, slots=True)
class OutputSpent(WalletEvent):
    """A block spent the wallet's `output` (`spent_height`, and `spent_txid32` when the source told it)."""

    output: WalletOutput


@dataclass(frozen=True, slots=True)
class OutputRolledBack(WalletEvent):
    """The wallet no longer holds `output`: the payment is reversed. A fork took away the block that paid it (an
    `OutputFound` follows when the new branch pays it too), a rescan forgot it, or a source that proves outputs
    showed that its block does not hold it (a server's word refuted)."""

    output: WalletOutput


@dataclass(frozen=True, slots=True)
class SpendRolledBack(WalletEvent):
    """A fork took away the block that spent `output` (as it was before that spend): it is unspent again until the
    new branch spends it."""

    output: WalletOutput


@dataclass(frozen=True, slots=True)
class UnconfirmedArrived(WalletEvent):
    """A transaction in the source's mempool pays the wallet: `output` (height None)."""

    output: WalletOutput


@dataclass(frozen=True, slots=True)
class UnconfirmedLeft(WalletEvent):
    """An unconfirmed payment left the mempool the wallet knew.

    Attributes:
        output: the payment (height None).
        reason: "confirmed" (a block holds it: an `OutputFound` tells which), "replaced" (a transaction paying the
            same output key took its place: `replacement`), "evicted" (gone without a block or such a replacement:
            evicted, expired, or replaced by a transaction that does not pay the wallet) or "reorg" (a fork cleared
            the mempool the wallet knew; the next mempool sync tells what is there again).
        replacement: the output that replaced it ("replaced" only), else None.
    """

    output: WalletOutput
    reason: Literal["confirmed", "replaced", "evicted", "reorg"]
    replacement: WalletOutput | None = None


@dataclass(frozen=True, slots=True)
class PendingSpendChanged(WalletEvent):
    """One of the wallet's own sends changed.

    Attributes:
        spend: the pending spend (as it was before it ended, for "settled" and "abandoned").
        state: "reserved" (`create_psbt` holds its coins), "broadcast" (`broadcast` or `record_broadcast`: its
            transaction is known), "replaced" (a spend of some of its coins took its place), "settled" (a block
            spent one of its coins: its transaction mined, or a conflicting one) or "abandoned" (`abandon`: its
            coins are free again).
    """

    spend: PendingSpend
    state: Literal["reserved", "broadcast", "replaced", "settled", "abandoned"]
