"""Frigate's silent-payments methods (sparrowwallet/frigate, electrum/ElectrumServerService.java): params and notifications.

`blockchain.silentpayments.subscribe(scan_private_key, spend_public_key, start?, labels?)` answers
`{"address", "labels", "start_height"}` and is followed by notifications of the same method with
named params `{"subscription", "progress", "history"}`; `unsubscribe` answers the address. Bad
params are JSON-RPC error -32602, as Frigate's InvalidParamsException.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from aiorpcx import RPCError
from coincurve import PrivateKey

from sp_scan import address as sp_address
from sp_scan import crypto
from sp_scan.errors import InvalidKeyError
from sp_scan.network import get as get_network
from sp_scan.scan import Receiver

from .passes import Entry, Watch

INVALID_PARAMS = -32602
SUBSCRIPTION_LIMIT = -32005
"""Frigate's SubscriptionLimitException: a per-IP or server-wide subscription cap."""
MAX_LABELS = 10
MAX_SUBSCRIPTIONS = 100
SUBSCRIBE_COST = 25
"""Requests of the address group's rate a subscribe takes (it starts a scan of the index), as Frigate counts it."""
HISTORY_PAGE = 100
"""Frigate's page size: at most this many history entries per notification."""
PROGRESS_EVERY = 5.0
"""Seconds after which a running history scan sends its progress even without new entries."""
MIN_PROGRESS_GAP = 1.0
"""An empty progress notification is not sent sooner than this after the previous notification."""
TIMESTAMP_START = 500_000_000
"""A `start` above this is a Unix time (Bitcoin's locktime rule), not a height."""
MAX_LABEL = 2**31


def invalid(message: str) -> RPCError:
    return RPCError(INVALID_PARAMS, message)


def named(args, names: tuple[str, ...], required: int) -> list:
    """Positional or named JSON-RPC params as a list in `names` order (None for those left out).

    Raises:
        RPCError: -32602 for too many params, unknown names or a missing required one.
    """
    if isinstance(args, dict):
        unknown = set(args) - set(names)
        if unknown:
            raise invalid(f"unknown params: {', '.join(sorted(map(str, unknown)))[:200]}")
        values = [args.get(n) for n in names]
    else:
        if len(args) > len(names):
            raise invalid(f"at most {len(names)} params")
        values = list(args) + [None] * (len(names) - len(args))
    for name, value in zip(names[:required], values):
        if value is None:
            raise invalid(f"{name} is required")
    return values


def parse_keys(scan_hex, spend_hex) -> tuple[bytes, bytes]:
    """(scan_key32, spend_pubkey33) from their hex params.

    Raises:
        RPCError: -32602 unless a valid 32-byte secret key (0 < b_scan < n) and a valid compressed key.
    """
    try:
        if not isinstance(scan_hex, str) or not isinstance(spend_hex, str):
            raise ValueError
        scan32, spend33 = bytes.fromhex(scan_hex), bytes.fromhex(spend_hex)
    except ValueError:
        raise invalid("scan_private_key or spend_public_key is not valid hex") from None
    if len(scan32) != 32:
        raise invalid("scan_private_key must be 32 bytes")
    if len(spend33) != 33:
        raise invalid("spend_public_key must be 33 bytes (compressed)")
    try:
        crypto.scalar(scan32, "scan_private_key")
        crypto.pubkey(spend33, "spend_public_key")
    except InvalidKeyError as exc:
        raise invalid(f"invalid scan/spend key: {exc}") from None
    return scan32, spend33


def parse_labels(labels, max_labels: int) -> tuple[int, ...]:
    """The labels to scan: 0 (change) and the given ones, ascending.

    Raises:
        RPCError: -32602 for more than max_labels, or a label not an integer with 0 < m < 2**31.
    """
    if labels is None:
        labels = []
    if not isinstance(labels, list):
        raise invalid("labels must be an array of integers")
    if len(labels) > max_labels:
        raise invalid(f"labels array exceeds {max_labels} entries")
    chosen = {0}
    for label in labels:
        if label is None:
            continue
        if isinstance(label, bool) or not isinstance(label, int) or not 0 < label < MAX_LABEL:
            raise invalid(f"label must satisfy 0 < label < 2^31, got {str(label)[:40]}")
        chosen.add(label)
    return tuple(sorted(chosen))


def parse_start(start, tip: int | None) -> tuple[int, int | None, int | None]:
    """(first height, last height or None, Unix time or None) from `start`: a height, a time, or "FROM-TO".

    For a time (above TIMESTAMP_START) the first height is left to the caller: the first block at or after it.

    Raises:
        RPCError: -32602 for anything else, a negative start, or a range beyond the tip.
    """
    if start is None:
        return 0, None, None
    if isinstance(start, str):
        lo, sep, hi = start.partition("-")
        if not sep or not lo.isdigit() or not hi.isdigit() or len(start) > 21:
            raise invalid("start string must be of the form 'FROM-TO' (block heights)")
        first, last = int(lo), int(hi)
        if last < first:
            raise invalid("start range must satisfy 0 <= from <= to")
        if tip is not None and last > tip:
            raise invalid(f"start range 'to' ({last}) exceeds tip ({tip})")
        return first, last, None
    if isinstance(start, bool) or not isinstance(start, int):
        raise invalid("start must be an integer or 'FROM-TO' string")
    if start < 0:
        raise invalid("start must be non-negative")
    if start > TIMESTAMP_START:
        return 0, None, start
    return start, None, None


@dataclass(eq=False)
class Subscription:
    """One address subscribed on a connection: what the client was told, and the scan behind it.

    `reply` is the subscription object of the answer, sent unchanged in every notification.
    Notifications wait in `queue` until the answer went out (`opened`), then go in order.
    """

    address: str
    reply: dict
    watch: Watch | None = None
    queue: list[tuple[list[Entry], float]] = field(default_factory=list)
    opened: bool = False
    history_done: bool = False
    progress: float = 0.0
    last_sent: float = field(default_factory=time.monotonic)
    ticker: asyncio.Task | None = None


def history_json(entries: list[Entry]) -> list[dict]:
    """Frigate's SilentPaymentsTxEntry objects: height, display txid, compressed tweak."""
    return [{"height": e.height, "tx_hash": e.txid32[::-1].hex(), "tweak_key": e.tweak33.hex()} for e in entries]


def notifications(sub: Subscription, entries: list[Entry], progress: float) -> list[dict]:
    """The named params of the notifications carrying `entries`: pages of at most HISTORY_PAGE.

    An empty `entries` gives one progress-only notification.
    """
    pages = [entries[i : i + HISTORY_PAGE] for i in range(0, len(entries), HISTORY_PAGE)] or [[]]
    return [{"subscription": sub.reply, "progress": progress, "history": history_json(page)} for page in pages]


def address_of(scan32: bytes, spend33: bytes, network: str) -> str:
    """The subscription's address on the index's network (sp1…, tsp1…, sprt1… on regtest), Frigate's key for it."""
    return sp_address.encode(PrivateKey(scan32).public_key.format(), spend33, get_network(network).hrp)


def receiver_of(scan32: bytes, spend33: bytes, labels: tuple[int, ...]) -> Receiver:
    return Receiver(scan32, spend33, tuple(m for m in labels if m))
