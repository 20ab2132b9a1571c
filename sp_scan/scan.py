"""Scanning: find the outputs of a transaction that pay a receiver (BIP352)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from coincurve import PublicKey

from . import crypto
from .errors import InvalidKeyError
from . import summary as _summary
from .types import FoundOutput, TxInput

K_MAX = 2323
"""The most outputs a receiver finds in one transaction (BIP352 v1.1)."""

CHANGE_LABEL = 0


def label_tweak(scan_key32: bytes, m: int) -> bytes:
    """Return ℓ_m = hash_BIP0352/Label(b_scan ‖ ser32(m)), 32 bytes.

    Raises:
        InvalidKeyError: scan_key32 is not a valid 32-byte secret key, or m is not in [0, 2**32).
    """
    crypto.scalar(scan_key32, "scan_key32")
    if not isinstance(m, int) or not 0 <= m < 2**32:
        raise InvalidKeyError("label m must be an integer in [0, 2**32)")
    return crypto.tagged_hash(crypto.TAG_LABEL, bytes(scan_key32) + crypto.ser32(m))


@dataclass(frozen=True, slots=True, weakref_slot=True)
class Receiver:
    """A receiver's scanning keys: scan secret, spend public key and labels.

    The change label m = 0 is always scanned, whether listed or not. The
    scan key never appears in `repr`.

    Attributes:
        scan_key32: b_scan, 32 bytes.
        spend_pubkey33: B_spend, compressed.
        labels: the labels m in use (0 is added).

    Raises:
        InvalidKeyError: a key of the wrong width, not a valid key, or a label out of range.
    """

    scan_key32: bytes = field(repr=False)
    spend_pubkey33: bytes
    labels: tuple[int, ...] = ()
    label_table: dict[bytes, tuple[int, bytes]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        crypto.scalar(self.scan_key32, "scan_key32")
        crypto.pubkey(self.spend_pubkey33, "spend_pubkey33")
        labels = tuple(dict.fromkeys((CHANGE_LABEL, *self.labels)))
        table = {}
        for m in labels:
            tweak32 = label_tweak(self.scan_key32, m)
            table[PublicKey.from_secret(tweak32).format()] = (m, tweak32)
        object.__setattr__(self, "labels", labels)
        object.__setattr__(self, "label_table", table)


def _outputs(outputs32: Sequence[bytes]) -> list[tuple[bytes, PublicKey]]:
    for out in outputs32:
        if not isinstance(out, (bytes, bytearray)) or len(out) != 32:
            raise InvalidKeyError("each output must be a 32-byte x-only key")
    # An x that is not on the curve cannot be ours; skip it, as Core does.
    lifted = ((bytes(x), crypto.lift_x(bytes(x))) for x in outputs32)
    return [(x, p) for x, p in lifted if p is not None]


def scan_shared_secret(ecdh33: bytes, outputs32: Sequence[bytes], receiver: Receiver) -> list[FoundOutput]:
    """Find the outputs paying `receiver` given the ECDH shared secret.

    For each k, an output whose x equals x(P_k) matches unlabelled; otherwise
    the first remaining output O (in the given order) for which O − P_k or
    −O − P_k is a label point matches with that label. Scanning stops at the
    first k without a match, or at k = K_MAX.

    Args:
        ecdh33: ser_P(b_scan·input_hash·A).
        outputs32: the x-only keys of the transaction's taproot outputs.
        receiver: the keys to scan for.

    Returns:
        The found outputs in k order; [] when none.

    Raises:
        InvalidKeyError: an output is not 32 bytes.
    """
    todo = _outputs(outputs32)
    spend = crypto.pubkey(receiver.spend_pubkey33, "spend_pubkey33")
    found: list[FoundOutput] = []
    for k in range(K_MAX):
        if not todo:
            break
        t_k = crypto.tagged_hash(crypto.TAG_SHARED_SECRET, ecdh33 + crypto.ser32(k))
        if not 0 < int.from_bytes(t_k, "big") < crypto.N:
            break
        p_k = spend.add(t_k)
        x_k = p_k.format()[1:]
        match = next((i for i, (x, _) in enumerate(todo) if x == x_k), None)
        tweak32, label = t_k, None
        if match is None:
            neg_p_k = crypto.negate(p_k)
            for i, (_, o) in enumerate(todo):
                hit = _label_of(o, neg_p_k, receiver) or _label_of(crypto.negate(o), neg_p_k, receiver)
                if hit is not None:
                    match, (label, label32) = i, hit
                    tweak32 = _add_scalars(t_k, label32)
                    break
        if match is None:
            break
        found.append(FoundOutput(todo.pop(match)[0], tweak32, label))
    return found


def _label_of(o: PublicKey, neg_p_k: PublicKey, receiver: Receiver) -> tuple[int, bytes] | None:
    d = crypto.add([o, neg_p_k])
    return receiver.label_table.get(d.format()) if d is not None else None


def _add_scalars(a32: bytes, b32: bytes) -> bytes:
    return ((int.from_bytes(a32, "big") + int.from_bytes(b32, "big")) % crypto.N).to_bytes(32, "big")


def shared_secret(tweak33: bytes, scan_key32: bytes) -> bytes:
    """Return ser_P(b_scan·tweak), 33 bytes, the receiver's ECDH shared secret.

    Raises:
        InvalidKeyError: a key of the wrong width or not a valid key.
    """
    tweak = crypto.pubkey(tweak33, "tweak33")
    crypto.scalar(scan_key32, "scan_key32")
    return tweak.multiply(bytes(scan_key32)).format()


def scan_tweak(tweak33: bytes, outputs32: Sequence[bytes], receiver: Receiver) -> list[FoundOutput]:
    """Scan with a light-client tweak (input_hash·A) as served by an index.

    Raises:
        InvalidKeyError: tweak33 is not a valid compressed point, or an output is not 32 bytes.
    """
    return scan_shared_secret(shared_secret_reference(tweak33, receiver.scan_key32), outputs32, receiver)


def scan_tx(inputs: Sequence[TxInput], outputs32: Sequence[bytes], receiver: Receiver) -> list[FoundOutput]:
    """Scan a full transaction: its inputs (with prevouts) and its taproot output keys.

    Returns:
        The found outputs; [] when none or when the transaction is not an SP transaction.

    Raises:
        InvalidKeyError: an output is not 32 bytes.
    """
    summary = _summary.summarize_reference(inputs)
    if summary is None:
        _outputs(outputs32)
        return []
    return scan_tweak_reference(summary.tweak33, outputs32, receiver)


# ---- backend: the pure-Python code above stays reachable as *_reference ----
from . import native  # noqa: E402

scan_tx_reference, scan_tweak_reference, shared_secret_reference = scan_tx, scan_tweak, shared_secret
if native.ENABLED:
    scan_tx, scan_tweak, shared_secret = native.scan_tx, native.scan_tweak, native.shared_secret  # type: ignore[assignment]
