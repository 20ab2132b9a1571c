"""What BIP352 makes of a PSBT input: its prevout, whether it is eligible, and its public key.

Input keys come from the final scriptSig/witness when an input is finalized, else from the
prevout (P2TR's output key) or, for the hashed types, from `PSBT_IN_BIP32_DERIVATION` as BIP375's
Updater provides it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import crypto, extract
from ..extract import NUMS_H, ScriptType
from ..types import OutPoint
from ..wire import parse_tx, parse_txout, parse_witness
from .fields import (
    IN_BIP32_DERIVATION, IN_FINAL_SCRIPTSIG, IN_FINAL_SCRIPTWITNESS, IN_NON_WITNESS_UTXO, IN_OUTPUT_INDEX, IN_PREVIOUS_TXID,
    IN_REDEEM_SCRIPT, IN_TAP_INTERNAL_KEY, IN_WITNESS_UTXO, Map, entries, field_key, structure_error,
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class InputInfo:
    """What BIP352 makes of one PSBT input.

    Attributes:
        index: the input's position.
        outpoint: the output it spends.
        prevout_script: that output's scriptPubKey, or None without a UTXO field.
        eligible: True / False, or None while it cannot be told (no UTXO, P2SH without redeem script).
        pubkey: the key it contributes (33 bytes, or 32 x-only for P2TR) when known.
        reason: why it is not eligible, or why that is unknown ("" otherwise).
    """

    index: int
    outpoint: OutPoint
    prevout_script: bytes | None
    eligible: bool | None
    pubkey: bytes | None
    reason: str = ""

    @property
    def is_taproot(self) -> bool:
        """True when the input spends P2TR (its key counts with even Y)."""
        return self.prevout_script is not None and extract.script_type(self.prevout_script) is ScriptType.P2TR


def _prevout_script(m: Map) -> bytes | None:
    utxo = m.get(field_key(IN_WITNESS_UTXO))
    if utxo is not None:
        return parse_txout(utxo).script
    full = m.get(field_key(IN_NON_WITNESS_UTXO))
    if full is not None:
        return parse_tx(full).outputs[int.from_bytes(m[field_key(IN_OUTPUT_INDEX)], "little")].script
    return None


def _derivation_key(m: Map, key_hash20: bytes) -> tuple[bool, bytes | None, str]:
    """The input's key from PSBT_IN_BIP32_DERIVATION: (eligible, key or None, reason).

    The key hashing to key_hash20 is taken; failing that, the first one, as
    BIP375's reference validator does (its vectors pair keys and scripts
    that do not hash to each other). An uncompressed key is not eligible.
    """
    keys = [keydata for keydata, _ in entries(m, IN_BIP32_DERIVATION)]
    if not keys:
        return True, None, "no PSBT_IN_BIP32_DERIVATION gives its public key"
    key = next((k for k in keys if crypto.hash160(k) == key_hash20), keys[0])
    if len(key) != 33 or crypto.point(key) is None:
        return False, None, "its key is not compressed"
    return True, key, ""


def classify(i: int, m: Map) -> InputInfo:
    outpoint = OutPoint(m[field_key(IN_PREVIOUS_TXID)], int.from_bytes(m[field_key(IN_OUTPUT_INDEX)], "little"))
    script = _prevout_script(m)
    if script is None:
        return InputInfo(i, outpoint, None, None, None, "no PSBT_IN_WITNESS_UTXO or PSBT_IN_NON_WITNESS_UTXO")
    kind = extract.script_type(script)
    final_sig, final_wit = m.get(field_key(IN_FINAL_SCRIPTSIG)), m.get(field_key(IN_FINAL_SCRIPTWITNESS))
    if kind is ScriptType.WITNESS_UNKNOWN:
        return InputInfo(i, outpoint, script, False, None, "it spends a segwit version 2+ output")
    if final_sig is not None or final_wit is not None:
        key = extract.input_pubkey(script, final_sig or b"", parse_witness(final_wit or b""))
        return InputInfo(i, outpoint, script, key is not None, key, "" if key else "its final scriptSig/witness has no eligible key")
    if kind is ScriptType.P2TR:
        if m.get(field_key(IN_TAP_INTERNAL_KEY)) == NUMS_H:
            return InputInfo(i, outpoint, script, False, None, "its taproot internal key is the NUMS point H")
        if crypto.lift_x(script[2:34]) is None:
            return InputInfo(i, outpoint, script, False, None, "its taproot output key is not on the curve")
        return InputInfo(i, outpoint, script, True, script[2:34])
    if kind is ScriptType.P2PKH:
        return InputInfo(i, outpoint, script, *_derivation_key(m, script[3:23]))
    if kind is ScriptType.P2WPKH:
        return InputInfo(i, outpoint, script, *_derivation_key(m, script[2:22]))
    if kind is ScriptType.P2SH:
        redeem = m.get(field_key(IN_REDEEM_SCRIPT))
        if redeem is None:
            return InputInfo(i, outpoint, script, None, None, "it spends P2SH and has no PSBT_IN_REDEEM_SCRIPT")
        if crypto.hash160(redeem) != script[2:22]:
            raise structure_error(f"input {i}: PSBT_IN_REDEEM_SCRIPT does not hash to the P2SH prevout")
        if extract.script_type(redeem) is not ScriptType.P2WPKH:
            return InputInfo(i, outpoint, script, False, None, "it spends P2SH that is not P2SH-P2WPKH")
        return InputInfo(i, outpoint, script, *_derivation_key(m, redeem[2:22]))
    return InputInfo(i, outpoint, script, False, None, "it spends a script type BIP352 does not use")
