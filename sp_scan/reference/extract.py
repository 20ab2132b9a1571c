"""Input classification in Python: the public key an input contributes to BIP352, if any.

The type of an input is decided by the scriptPubKey of the output it
spends, never by its scriptSig or witness. The result is a 33-byte
compressed key (P2PKH, P2SH-P2WPKH, P2WPKH), a 32-byte x-only key (P2TR),
or None when the input is not eligible.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from .. import crypto
from ..types import TxInput

NUMS_H = bytes.fromhex("50929b74c1a04954b78b4b6035e97a5e078a5a0f28ec96d547bfee9ace803ac0")
"""BIP341's provably unspendable internal key; a script-path spend with it is ignored."""

_OP_PUSHDATA1, _OP_PUSHDATA2, _OP_PUSHDATA4 = 0x4C, 0x4D, 0x4E
_TAPROOT_CONTROL_BASE, _TAPROOT_CONTROL_NODE, _TAPROOT_CONTROL_MAX_NODES = 33, 32, 128
_ANNEX_TAG = 0x50


class ScriptType(enum.Enum):
    """The kind of output an input spends, as far as BIP352 cares."""

    P2PKH = "p2pkh"
    P2SH = "p2sh"
    P2WPKH = "p2wpkh"
    P2TR = "p2tr"
    WITNESS_UNKNOWN = "witness_v2+"
    OTHER = "other"


def script_type(prevout_script: bytes) -> ScriptType:
    """Classify a scriptPubKey; WITNESS_UNKNOWN is any witness program of version 2..16."""
    s, n = prevout_script, len(prevout_script)
    if n == 25 and s[:3] == b"\x76\xa9\x14" and s[23:] == b"\x88\xac":
        return ScriptType.P2PKH
    if n == 23 and s[:2] == b"\xa9\x14" and s[22] == 0x87:
        return ScriptType.P2SH
    if n == 22 and s[:2] == b"\x00\x14":
        return ScriptType.P2WPKH
    if n == 34 and s[:2] == b"\x51\x20":
        return ScriptType.P2TR
    if 4 <= n <= 42 and 0x52 <= s[0] <= 0x60 and s[1] == n - 2:
        return ScriptType.WITNESS_UNKNOWN
    return ScriptType.OTHER


def pushes(script: bytes) -> list[bytes] | None:
    """The data pushes of a script, in order; None when a push is truncated.

    Non-push opcodes are passed over (Core's `GetOp` walk).
    """
    out = []
    i, n = 0, len(script)
    while i < n:
        op = script[i]
        i += 1
        if op > _OP_PUSHDATA4:
            continue
        if op < _OP_PUSHDATA1:
            size = op
        else:
            width = {_OP_PUSHDATA1: 1, _OP_PUSHDATA2: 2, _OP_PUSHDATA4: 4}[op]
            if i + width > n:
                return None
            size = int.from_bytes(script[i : i + width], "little")
            i += width
        if i + size > n:
            return None
        out.append(script[i : i + size])
        i += size
    return out


def _compressed_key(data: bytes) -> bytes | None:
    return data if crypto.point(data) is not None else None


def _p2pkh(prevout_script: bytes, script_sig: bytes) -> bytes | None:
    # The first 33-byte push whose HASH160 matches and that is a valid
    # compressed point: the key need not be the last push (malleation).
    items = pushes(script_sig)
    if items is None:
        return None
    key_hash = prevout_script[3:23]
    for item in items:
        if len(item) == 33 and crypto.hash160(item) == key_hash and _compressed_key(item):
            return item
    return None


def _p2tr(prevout_script: bytes, witness: Sequence[bytes]) -> bytes | None:
    stack = list(witness)
    if not stack:
        return None
    if len(stack) >= 2 and stack[-1][:1] == bytes([_ANNEX_TAG]):
        stack.pop()
    if len(stack) >= 2:
        control = stack[-1]
        nodes, rest = divmod(len(control) - _TAPROOT_CONTROL_BASE, _TAPROOT_CONTROL_NODE)
        if len(control) < _TAPROOT_CONTROL_BASE or rest or nodes > _TAPROOT_CONTROL_MAX_NODES:
            return None
        if control[1:33] == NUMS_H:
            return None
    output32 = prevout_script[2:34]
    return output32 if crypto.lift_x(output32) is not None else None


def input_pubkey(prevout_script: bytes, script_sig: bytes, witness: Sequence[bytes]) -> bytes | None:
    """Return the public key an input contributes, or None when it is not eligible.

    Args:
        prevout_script: scriptPubKey of the spent output.
        script_sig: the input's scriptSig.
        witness: the input's witness stack, one bytes per item.

    Returns:
        33-byte compressed key for P2PKH / P2SH-P2WPKH / P2WPKH, 32-byte
        x-only key for P2TR, None for any other or malformed input.
    """
    kind = script_type(prevout_script)
    if kind is ScriptType.P2PKH:
        return _p2pkh(prevout_script, script_sig)
    if kind is ScriptType.P2SH:
        # BIP141 makes the scriptSig of P2SH-P2WPKH exactly one push of `00 14 <20>`.
        if len(script_sig) != 23 or script_sig[:3] != b"\x16\x00\x14" or not witness:
            return None
        return _compressed_key(witness[-1])
    if kind is ScriptType.P2WPKH:
        return _compressed_key(witness[-1]) if witness else None
    if kind is ScriptType.P2TR:
        return _p2tr(prevout_script, witness)
    return None


def spends_unknown_segwit(inputs: Sequence[TxInput]) -> bool:
    """True when any input spends a segwit v2..16 output, which makes the whole transaction ineligible."""
    return any(script_type(i.prevout_script) is ScriptType.WITNESS_UNKNOWN for i in inputs)


def tx_pubkeys(inputs: Sequence[TxInput]) -> list[bytes] | None:
    """Return the eligible input keys of a transaction, in input order.

    Returns:
        The keys (possibly none), or None when any input spends a segwit
        v2..16 output, which makes the whole transaction ineligible.
    """
    if spends_unknown_segwit(inputs):
        return None
    keys = (input_pubkey(i.prevout_script, i.script_sig, i.witness) for i in inputs)
    return [k for k in keys if k is not None]

