"""Sending: the taproot outputs that pay a list of silent-payments addresses."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from coincurve import PrivateKey

from . import crypto
from .address import SPAddress
from .errors import KeySumZeroError, KmaxExceededError, SendError
from .scan import K_MAX
from .types import OutPoint


@dataclass(frozen=True, slots=True)
class InputKey:
    """The private key of one eligible input.

    Attributes:
        private_key32: the input's secret key (never shown in repr).
        is_taproot: True for a P2TR input, whose key counts with even Y.
    """

    private_key32: bytes = field(repr=False)
    is_taproot: bool


def create_outputs(outpoints: Sequence[OutPoint], input_keys: Sequence[InputKey], recipients: Sequence[SPAddress]) -> list[bytes]:
    """Return the x-only output key paying each recipient, in recipient order.

    Args:
        outpoints: the outpoints of ALL inputs of the transaction.
        input_keys: the private keys of the eligible inputs.
        recipients: decoded addresses; repeating one pays it several times.

    Raises:
        InvalidKeyError: a private key is not 32 bytes or not in [1, n-1].
        SendError: no outpoints, no eligible input key, or no recipient.
        InvalidKeyError: a recipient key is not a valid compressed point.
        KeySumZeroError: the keys sum to zero.
        KmaxExceededError: more than K_MAX recipients share one scan key.
    """
    if not recipients:
        raise SendError("need at least one recipient")
    secret = _tweaked_secret(outpoints, input_keys)
    groups: dict[bytes, list[int]] = {}
    for index, r in enumerate(recipients):
        groups.setdefault(r.scan_pubkey33, []).append(index)
    if any(len(g) > K_MAX for g in groups.values()):
        raise KmaxExceededError(f"more than {K_MAX} outputs for one scan key")
    outputs = [b""] * len(recipients)
    for scan33, indices in groups.items():
        ecdh33 = _ecdh(secret, scan33)
        for k, index in enumerate(indices):
            t_k = crypto.tagged_hash(crypto.TAG_SHARED_SECRET, ecdh33 + crypto.ser32(k))
            spend = crypto.pubkey(recipients[index].spend_pubkey33, "spend_pubkey33")
            outputs[index] = spend.add(t_k).format()[1:]
    return outputs


def shared_secret(outpoints: Sequence[OutPoint], input_keys: Sequence[InputKey], scan_pubkey33: bytes) -> bytes:
    """Return the sender's ECDH shared secret with one recipient, ser_P((input_hash·a)·B_scan).

    Raises:
        as `create_outputs`.
    """
    return _ecdh(_tweaked_secret(outpoints, input_keys), scan_pubkey33)


def _ecdh(secret: int, scan_pubkey33: bytes) -> bytes:
    return crypto.pubkey(scan_pubkey33, "scan_pubkey33").multiply(secret.to_bytes(32, "big")).format()


def _tweaked_secret(outpoints: Sequence[OutPoint], input_keys: Sequence[InputKey]) -> int:
    """Return input_hash·a mod n, with taproot keys negated to even Y."""
    if not outpoints or not input_keys:
        raise SendError("need the outpoints and at least one eligible input key")
    a = 0
    for key in input_keys:
        secret = crypto.scalar(key.private_key32, "private_key32")
        if key.is_taproot and PrivateKey(key.private_key32).public_key.format()[0] == 3:
            secret = crypto.N - secret
        a = (a + secret) % crypto.N
    if a == 0:
        raise KeySumZeroError("input private keys sum to zero")
    outpoint_smallest36 = min(o.to_bytes() for o in outpoints)
    pubkey_sum33 = PrivateKey.from_int(a).public_key.format()
    input_hash = int.from_bytes(crypto.tagged_hash(crypto.TAG_INPUTS, outpoint_smallest36 + pubkey_sum33), "big")
    if not 0 < input_hash < crypto.N:
        raise SendError("input_hash out of range")
    return input_hash * a % crypto.N


# ---- backend: the pure-Python code above stays reachable as *_reference ----
from . import native  # noqa: E402

create_outputs_reference, shared_secret_reference = create_outputs, shared_secret
if native.ENABLED:
    create_outputs, shared_secret = native.create_outputs, native.send_shared_secret  # type: ignore[assignment]
