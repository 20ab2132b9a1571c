"""Scanning in Python: find the outputs of a transaction that pay a receiver (BIP352)."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate

from coincurve import PublicKey

from .. import _checks, crypto
from ..crypto import K_MAX
from ..errors import InvalidKeyError, MalformedDataError
from ..types import FoundOutput, Receiver, TxInput
from . import summary as _summary


def _outputs(outputs32: Sequence[bytes]) -> list[tuple[bytes, PublicKey]]:
    _checks.outputs32(outputs32)
    # An x that is not on the curve cannot be ours; skip it, as Core does.
    lifted = ((bytes(x), crypto.lift_x(bytes(x))) for x in outputs32)
    return [(x, p) for x, p in lifted if p is not None]


def scan_shared_secret(ecdh33: bytes, outputs32: Sequence[bytes], receiver: Receiver) -> list[FoundOutput]:
    """Find the outputs paying `receiver` given the ECDH shared secret.

    For each k, the remaining outputs are tried in the given order, each
    directly, then with the labels (BIP352's loop; libsecp256k1's order): the
    first output O with x(O) = x(P_k) matches unlabelled, or with O − P_k or
    −O − P_k a label point (O with even y, O − P_k first) matches with that
    label. A labelled output before an unlabelled one of the same k wins. The
    match is removed; scanning stops at the first k without one, or at K_MAX.

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
        x_k, neg_p_k = p_k.format()[1:], crypto.negate(p_k)
        for i, (x, o) in enumerate(todo):
            if x == x_k:
                tweak32, label = t_k, None
                break
            hit = _label_of(o, neg_p_k, receiver) or _label_of(crypto.negate(o), neg_p_k, receiver)
            if hit is not None:
                label, tweak32 = hit[0], _add_scalars(t_k, hit[1])
                break
        else:
            break
        found.append(FoundOutput(todo.pop(i)[0], tweak32, label))
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
    return scan_shared_secret(shared_secret(tweak33, receiver.scan_key32), outputs32, receiver)


def _tweak_point(tweak: bytes, i: int) -> PublicKey:
    p = crypto.point(bytes(tweak)) if len(tweak) == 33 else crypto.point64(bytes(tweak))
    if p is None:
        raise InvalidKeyError(f"tweak of tx {i} is not a valid point")
    return p


def scan_tweaks(
    tweaks: Sequence[bytes], outputs: Sequence[Sequence[bytes]], receiver: Receiver, *, threads: int = 1
) -> list[list[FoundOutput]]:
    """Scan a batch of light-client tweaks (input_hash·A per tx) in one call.

    The native backend scans the whole batch without the GIL, split over
    `threads` native threads; results do not depend on `threads` (the
    reference runs in the calling thread).

    Args:
        tweaks: one tweak per tx, all 33 bytes (ser_P) or all 64 bytes (x ‖ y).
        outputs: per tx, the x-only keys (32 bytes) of its taproot outputs.
        receiver: the keys to scan for.
        threads: threads to split the batch over, >= 1 (capped at len(tweaks) and at 256).

    Returns:
        One list of found outputs per tweak, same order, each in k order; [] where none.

    Raises:
        MalformedDataError: len(outputs) != len(tweaks).
        InvalidKeyError: a tweak of the wrong width, mixed widths, an output not 32 bytes, or a tweak
            that is not a valid point; the message names the (lowest) tx index. Nothing is returned.
        ValueError: threads < 1.
    """
    _checks.check_batch(tweaks, outputs, threads)
    points = [_tweak_point(t, i) for i, t in enumerate(tweaks)]
    return [
        scan_shared_secret(p.multiply(bytes(receiver.scan_key32)).format(), outs, receiver) if outs else []
        for p, outs in zip(points, outputs)
    ]


def scan_tweaks_packed(
    tweaks: bytes, tweak_width: int, outputs32: bytes, counts: bytes, receiver: Receiver, threads: int = 1
) -> list[tuple[int, int, bytes, int | None]]:
    """Scan a batch in packed buffers (an index partition's form); `scan_tweaks` without lists.

    Args:
        tweaks: n tweaks of tweak_width bytes each, concatenated.
        tweak_width: 33 (ser_P) or 64 (x ‖ y).
        outputs32: the 32-byte x-only output keys of every tx, tx after tx.
        counts: n little-endian uint32: tx i owns the next counts[i] keys of outputs32.
        receiver: the keys to scan for.
        threads: as `scan_tweaks`.

    Returns:
        (tx_index, output_index_within_tx, tweak32, label or None) per found output, by tx, then k.

    Raises:
        InvalidKeyError: tweak_width not 33 or 64, tweaks not a whole number of them, or a tweak that
            is not a valid point (the message names the lowest tx index).
        MalformedDataError: counts not 4 bytes per tweak, or not adding up to len(outputs32) / 32.
        ValueError: threads < 1.
    """
    if tweak_width not in _checks.TWEAK_WIDTHS:
        raise InvalidKeyError(f"tweak_width must be 33 or 64, not {tweak_width}")
    if len(tweaks) % tweak_width:
        raise InvalidKeyError(f"tweaks: {len(tweaks)} bytes is not a whole number of {tweak_width}-byte tweaks")
    n = len(tweaks) // tweak_width
    if len(counts) != 4 * n:
        raise MalformedDataError(f"counts: {len(counts)} bytes for {n} tweaks (one uint32 LE per tweak)")
    sizes = [int.from_bytes(counts[4 * i : 4 * i + 4], "little") for i in range(n)]
    if len(outputs32) != 32 * sum(sizes):
        raise MalformedDataError(f"outputs32: {len(outputs32)} bytes, but the counts add up to {sum(sizes)} keys")
    firsts = [0, *accumulate(sizes)]
    outputs = [[bytes(outputs32[32 * j : 32 * j + 32]) for j in range(a, b)] for a, b in zip(firsts, firsts[1:])]
    found = scan_tweaks([tweaks[i * tweak_width : (i + 1) * tweak_width] for i in range(n)], outputs, receiver, threads=threads)
    out = []
    for tx, (outs, hits) in enumerate(zip(outputs, found)):
        taken: set[int] = set()
        for f in hits:  # equal keys are matched lowest index first
            j = next(j for j, o in enumerate(outs) if o == f.output32 and j not in taken)
            taken.add(j)
            out.append((tx, j, f.tweak32, f.label))
    return out


def k0_outputs(tweaks: bytes, tweak_width: int, receiver: Receiver, threads: int = 1) -> bytes:
    """The k = 0 output keys each tweak would pay the receiver: what a light client looks up in a filter.

    Args:
        tweaks: n tweaks (input_hash·A) of tweak_width bytes, concatenated.
        tweak_width: 33 (ser_P) or 64 (x ‖ y).
        receiver: the keys; its labels in `receiver.labels` order (the change label 0 first).
        threads: native threads (the reference runs in the calling thread); results do not depend on it.

    Returns:
        n × (1 + len(receiver.labels)) × 32 bytes: per tweak, x(P_0) with P_0 = B_spend + t_0·G, then
        x(P_0 + ℓ_m·G) for each label m; 32 zero bytes where a sum is the point at infinity (or t_0
        is not below n).

    Raises:
        InvalidKeyError: tweak_width not 33 or 64, tweaks not a whole number of them, or a tweak that
            is not a valid point (the message names the lowest index).
    """
    if tweak_width not in _checks.TWEAK_WIDTHS:
        raise InvalidKeyError(f"tweak_width must be 33 or 64, not {tweak_width}")
    if len(tweaks) % tweak_width:
        raise InvalidKeyError(f"tweaks: {len(tweaks)} bytes is not a whole number of {tweak_width}-byte tweaks")
    if threads < 1:
        raise ValueError(f"threads must be at least 1, not {threads}")
    points = [_tweak_point(tweaks[i : i + tweak_width], i // tweak_width) for i in range(0, len(tweaks), tweak_width)]
    spend = crypto.pubkey(receiver.spend_pubkey33, "spend_pubkey33")
    by_m = {m: PublicKey(label33) for label33, (m, _) in receiver.label_table.items()}
    labels = [by_m[m] for m in receiver.labels]
    zero = bytes(32)
    out = []
    for p in points:
        t_0 = crypto.tagged_hash(crypto.TAG_SHARED_SECRET, p.multiply(bytes(receiver.scan_key32)).format() + crypto.ser32(0))
        if not 0 < int.from_bytes(t_0, "big") < crypto.N:
            out.append(zero * (1 + len(labels)))
            continue
        p_0 = spend.add(t_0)
        out.append(p_0.format()[1:])
        for label in labels:
            total = crypto.add([p_0, label])
            out.append(zero if total is None else total.format()[1:])
    return b"".join(out)


def scan_tx(inputs: Sequence[TxInput], outputs32: Sequence[bytes], receiver: Receiver) -> list[FoundOutput]:
    """Scan a full transaction: its inputs (with prevouts) and its taproot output keys.

    Returns:
        The found outputs; [] when none or when the transaction is not an SP transaction.

    Raises:
        InvalidKeyError: an output is not 32 bytes.
    """
    summary = _summary.summarize(inputs)
    if summary is None:
        _outputs(outputs32)
        return []
    return scan_tweak(summary.tweak33, outputs32, receiver)

