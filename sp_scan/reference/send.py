"""Sending in Python: the taproot outputs that pay a list of silent-payments addresses."""

from __future__ import annotations

from collections.abc import Sequence

from coincurve import PrivateKey

from .. import _checks, crypto
from ..address import SPAddress
from ..crypto import K_MAX
from ..errors import KeySumZeroError, KmaxExceededError, SendError
from ..types import InputKey, OutPoint
from . import dleq


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
            outputs[index] = output_key(ecdh33, recipients[index].spend_pubkey33, k)
    return outputs


def output_key(ecdh33: bytes, spend_pubkey33: bytes, k: int) -> bytes:
    """Return the x-only key of P_k = B_spend + t_k·G, t_k = hash_BIP0352/SharedSecret(ecdh33 ‖ ser32(k)).

    Raises:
        InvalidKeyError: spend_pubkey33 is not a valid compressed point.
        SendError: t_k is not a valid scalar or P_k is infinite (negligible odds).
    """
    t_k = crypto.tagged_hash(crypto.TAG_SHARED_SECRET, bytes(ecdh33) + crypto.ser32(k))
    spend = crypto.pubkey(spend_pubkey33, "spend_pubkey33")
    try:
        return spend.add(t_k).format()[1:]
    except ValueError:
        raise SendError(f"t_k for k = {k} gives no output key") from None


def ecdh_from_share(ecdh_share33: bytes, input_hash32: bytes) -> bytes:
    """Return the sender's shared secret ser_P(input_hash·C) from an ECDH share C = a·B_scan (BIP375).

    Raises:
        InvalidKeyError: the share is not a valid compressed point, or input_hash32 is not a valid scalar.
    """
    crypto.scalar(input_hash32, "input_hash32")
    return crypto.pubkey(ecdh_share33, "ecdh_share33").multiply(bytes(input_hash32)).format()


def ecdh_share(input_keys: Sequence[InputKey], scan_pubkey33: bytes, aux_rand32: bytes) -> tuple[bytes, bytes]:
    """Return a BIP375 ECDH share C = a·B_scan and its BIP374 proof, a the sum of the given input keys.

    One key gives an input's share; the keys of every eligible input give the
    global share. Taproot keys count negated when their point has odd Y.

    Args:
        input_keys: the private keys of the inputs the share covers.
        scan_pubkey33: the recipient's B_scan.
        aux_rand32: fresh randomness for the proof.

    Returns:
        (share33, proof64).

    Raises:
        SendError: no input key, or proof generation failed (negligible odds).
        InvalidKeyError: a key is not in [1, n-1], a width is wrong, or B_scan is not a valid point.
        KeySumZeroError: the keys sum to zero.
    """
    if not input_keys:
        raise SendError("an ECDH share needs at least one input key")
    a32 = _secret_sum(input_keys).to_bytes(32, "big")
    scan = crypto.pubkey(scan_pubkey33, "scan_pubkey33")
    proof = dleq.generate_proof(a32, bytes(scan_pubkey33), _checks.sized(aux_rand32, 32, "aux_rand32"))
    if proof is None:
        raise SendError("DLEQ proof generation failed")
    return scan.multiply(a32).format(), proof


def shared_secret(outpoints: Sequence[OutPoint], input_keys: Sequence[InputKey], scan_pubkey33: bytes) -> bytes:
    """Return the sender's ECDH shared secret with one recipient, ser_P((input_hash·a)·B_scan).

    Raises:
        as `create_outputs`.
    """
    return _ecdh(_tweaked_secret(outpoints, input_keys), scan_pubkey33)


def _ecdh(secret: int, scan_pubkey33: bytes) -> bytes:
    return crypto.pubkey(scan_pubkey33, "scan_pubkey33").multiply(secret.to_bytes(32, "big")).format()


def _secret_sum(input_keys: Sequence[InputKey]) -> int:
    """Return a = Σ a_i mod n, taproot keys negated to even Y."""
    a = 0
    for key in input_keys:
        secret = crypto.scalar(key.private_key32, "private_key32")
        if key.is_taproot and PrivateKey(key.private_key32).public_key.format()[0] == 3:
            secret = crypto.N - secret
        a = (a + secret) % crypto.N
    if a == 0:
        raise KeySumZeroError("input private keys sum to zero")
    return a


def _tweaked_secret(outpoints: Sequence[OutPoint], input_keys: Sequence[InputKey]) -> int:
    """Return input_hash·a mod n, with taproot keys negated to even Y."""
    if not outpoints or not input_keys:
        raise SendError("need the outpoints and at least one eligible input key")
    a = _secret_sum(input_keys)
    outpoint_smallest36 = min(o.to_bytes() for o in outpoints)
    pubkey_sum33 = PrivateKey.from_int(a).public_key.format()
    input_hash = int.from_bytes(crypto.tagged_hash(crypto.TAG_INPUTS, outpoint_smallest36 + pubkey_sum33), "big")
    if not 0 < input_hash < crypto.N:
        raise SendError("input_hash out of range")
    return input_hash * a % crypto.N

