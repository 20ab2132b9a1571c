"""Prevouts summary in Python: smallest outpoint, A, input_hash and the light-client tweak."""

from __future__ import annotations

from collections.abc import Sequence

from .. import crypto
from ..errors import InvalidKeyError
from ..types import Summary, TxInput
from . import extract


def summarize(inputs: Sequence[TxInput]) -> Summary | None:
    """Summarize the inputs of a transaction for BIP352.

    Args:
        inputs: every input of the transaction, with its prevout scriptPubKey.

    Returns:
        The summary, or None when the transaction is not a silent-payments
        transaction: no eligible input, a segwit v2..16 spend, keys summing
        to infinity, or input_hash out of range.
    """
    keys = extract.tx_pubkeys(inputs)
    if not keys:
        return None
    return summarize_keys(min(i.outpoint.to_bytes() for i in inputs), keys)


def summarize_keys(outpoint_smallest36: bytes, pubkeys: Sequence[bytes]) -> Summary | None:
    """Summarize from the smallest outpoint and the eligible input keys, as `extract` returns them.

    Args:
        outpoint_smallest36: the smallest outpoint of ALL the transaction's inputs, serialized.
        pubkeys: 33-byte compressed or 32-byte x-only (P2TR, even Y) keys.

    Returns:
        The summary, or None when there is no key, the keys sum to infinity,
        or input_hash is out of range.

    Raises:
        InvalidKeyError: a key is not a valid point of either width, or the outpoint is not 36 bytes.
    """
    if len(outpoint_smallest36) != 36:
        raise InvalidKeyError("outpoint_smallest36 must be 36 bytes")
    if not pubkeys:
        return None
    # Taproot keys count with even Y; the running sum may pass through infinity.
    points = [crypto.point(k) if len(k) == 33 else crypto.lift_x(k) for k in pubkeys]
    if any(p is None for p in points):
        raise InvalidKeyError("an input key is not a valid 33-byte or x-only point")
    total = crypto.add(points)
    if total is None:
        return None
    pubkey_sum33 = total.format()
    input_hash32 = crypto.tagged_hash(crypto.TAG_INPUTS, bytes(outpoint_smallest36) + pubkey_sum33)
    if not 0 < int.from_bytes(input_hash32, "big") < crypto.N:
        return None
    tweak33 = total.multiply(input_hash32).format()
    return Summary(bytes(outpoint_smallest36), pubkey_sum33, input_hash32, tweak33)

