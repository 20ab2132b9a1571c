"""Spending silent-payment outputs with PSBTs (BIP376): the Updater's input fields, the Signer, the Input Finalizer.

A found output is locked by d = b_spend + tweak (BIP352 "Spending"), a key on no BIP32 path: the
Updater puts the tweak in `PSBT_IN_SP_TWEAK` (t_k plus the label tweak, as a wallet stores it)
and, when it knows where the spend key comes from, `PSBT_IN_SP_SPEND_BIP32_DERIVATION`. The
Signer (`sign_sp_inputs`) makes d for each such input, refuses one whose d·G is not the output
key, does BIP375's part when the transaction pays silent-payment addresses (ECDH shares and
DLEQ proofs with the keys d, then the output scripts), and signs each input's BIP341 key-path
sighash with BIP340. The Input Finalizer (`finalize_sp_inputs`) turns the signatures into
witnesses and removes the BIP376 fields, PSBT_IN_TAP_KEY_SIG and PSBT_IN_WITNESS_UTXO as BIP376
says; `tx.extract` then gives the transaction.

Secrets: the spend key and each d are held by coincurve (libsecp256k1: the tweak addition and
the signature are constant-time) in Python bytes, which cannot be wiped; the C stages that make
the ECDH shares and proofs wipe their copies. A caller that holds the spend key in a bytearray
zeroes it after the call.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence

from coincurve import PrivateKey, PublicKeyXOnly

from .. import crypto, extract
from ..errors import InvalidKeyError, PSBTError, SPError
from ..extract import ScriptType
from ..wire import compact_size
from .codec import Psbt
from .fields import (
    IN_FINAL_SCRIPTWITNESS, IN_SIGHASH_TYPE, IN_SP_SPEND_BIP32_DERIVATION, IN_SP_TWEAK, IN_TAP_KEY_SIG, IN_WITNESS_UTXO,
    SIGHASH_ALL, SIGHASH_DEFAULT, SP_SPEND, Map, entries, field_key, split_key,
)  # fmt: skip
from .roles import add_shares, replace_maps
from .rules import verify
from .tx import prevouts, taproot_sighash, unsigned_tx

_REMOVED_WHEN_FINAL = (IN_SP_TWEAK, IN_SP_SPEND_BIP32_DERIVATION, IN_TAP_KEY_SIG, IN_WITNESS_UTXO)


def spend_fields(tweak32: bytes, spend_pubkey33: bytes, origin: tuple[bytes, Sequence[int]] | None = None) -> dict[bytes, bytes]:
    """The Updater's BIP376 entries of an input spending a silent-payment output.

    Args:
        tweak32: t_k plus the label tweak, mod n (`WalletOutput.tweak32`).
        spend_pubkey33: B_spend, the key PSBT_IN_SP_SPEND_BIP32_DERIVATION is for.
        origin: (fingerprint4, path) of B_spend (hardened steps with the 2**31 bit), or None to
            leave PSBT_IN_SP_SPEND_BIP32_DERIVATION out.

    Returns:
        Full key -> value, to merge into the input's map.

    Raises:
        InvalidKeyError: a tweak that is not 32 bytes, an invalid spend key, or a bad origin.
    """
    if len(tweak32) != 32:
        raise InvalidKeyError("tweak32 must be 32 bytes")
    crypto.pubkey(spend_pubkey33, "spend_pubkey33")
    fields = {field_key(IN_SP_TWEAK): bytes(tweak32)}
    if origin is not None:
        fingerprint4, path = origin
        if len(fingerprint4) != 4 or any(not 0 <= step < 2**32 for step in path):
            raise InvalidKeyError("a key origin is a 4-byte fingerprint and 32-bit path steps")
        fields[field_key(IN_SP_SPEND_BIP32_DERIVATION, bytes(spend_pubkey33))] = bytes(fingerprint4) + struct.pack(f"<{len(path)}I", *path)
    return fields


def sp_spend_inputs(p: Psbt) -> list[int]:
    """The indices of the inputs that carry PSBT_IN_SP_TWEAK (silent-payment outputs being spent)."""
    return [i for i, m in enumerate(p.inputs) if field_key(IN_SP_TWEAK) in m]


def _keys(p: Psbt, spend_key32: bytes) -> dict[int, PrivateKey]:
    """d for every input this spend key signs, each checked against its output key."""
    crypto.scalar(spend_key32, "spend_key32")
    spend = PrivateKey(bytes(spend_key32))
    spend33 = spend.public_key.format()
    inputs = sp_spend_inputs(p)
    if not inputs:
        raise PSBTError(SP_SPEND, "no input has PSBT_IN_SP_TWEAK: nothing to sign with a spend key")
    infos = p.input_info()
    keys: dict[int, PrivateKey] = {}
    for i in inputs:
        m = p.inputs[i]
        named = [keydata for keydata, _ in entries(m, IN_SP_SPEND_BIP32_DERIVATION)]
        if named and spend33 not in named:
            continue  # another spend key's input
        script = infos[i].prevout_script
        if script is None or extract.script_type(script) is not ScriptType.P2TR:
            raise PSBTError(SP_SPEND, f"input {i} has PSBT_IN_SP_TWEAK but no PSBT_IN_WITNESS_UTXO of a P2TR output")
        try:
            d = spend.add(m[field_key(IN_SP_TWEAK)])
        except ValueError:
            raise PSBTError(SP_SPEND, f"input {i}: PSBT_IN_SP_TWEAK is not a tweak (it is at least n, or b_spend + tweak is zero)") from None
        if d.public_key.format()[1:] != script[2:34]:
            raise PSBTError(
                SP_SPEND, f"input {i}: b_spend + PSBT_IN_SP_TWEAK is not the key of the output it spends (a wrong spend key or a wrong tweak); nothing was signed"
            )
        keys[i] = d
    if not keys:
        raise InvalidKeyError("the spend key given is not the one PSBT_IN_SP_SPEND_BIP32_DERIVATION names for any input (its public key differs)")
    return keys


def _hash_type(m: Map, i: int) -> int:
    value = m.get(field_key(IN_SIGHASH_TYPE))
    hash_type = SIGHASH_DEFAULT if value is None else int.from_bytes(value, "little")
    if hash_type not in (SIGHASH_DEFAULT, SIGHASH_ALL):
        raise PSBTError(SP_SPEND, f"input {i}: PSBT_IN_SIGHASH_TYPE is {hash_type}; sp-scan signs SIGHASH_DEFAULT or SIGHASH_ALL only")
    return hash_type


def _sp_outputs(p: Psbt, keys: dict[int, PrivateKey], aux_rand32: bytes | None) -> Psbt:
    """BIP375's Signer duties with the keys d: shares and proofs (global when they cover every eligible input), then the scripts."""
    outputs = p.sp_outputs()
    if not outputs or all(o.script is not None for o in outputs):
        return p
    infos = p.input_info()
    eligible = {i: d.secret for i, d in keys.items() if infos[i].eligible}
    if not eligible:
        return p
    whole = all(info.index in eligible for info in infos if info.eligible is not False)
    return add_shares(p, eligible, global_share=whole, aux_rand32=aux_rand32)


def sign_sp_inputs(p: Psbt, spend_key32: bytes, *, aux_rand32: bytes | None = None) -> Psbt:
    """BIP376 Signer (and BIP375's when the transaction pays silent-payment addresses): sign every input
    that spends a silent-payment output of this spend key.

    For each input with PSBT_IN_SP_TWEAK (and no PSBT_IN_SP_SPEND_BIP32_DERIVATION naming another
    key): d = b_spend + tweak mod n, negated for an odd Y by the signature; x(d·G) must be the
    input's output key. With silent-payment outputs still without a script, ECDH shares and DLEQ
    proofs are added with the keys d (one global share per scan key when they cover every eligible
    input) and the scripts computed; while a script is missing (other signers' shares) nothing is
    signed (BIP375). Then each input gets PSBT_IN_TAP_KEY_SIG: a BIP340 signature of its BIP341
    key-path sighash (SIGHASH_DEFAULT unless PSBT_IN_SIGHASH_TYPE asks for ALL).

    Args:
        spend_key32: b_spend (bytes or bytearray; not kept).
        aux_rand32: BIP340 auxiliary randomness for every signature and proof; None draws fresh bytes each time.

    Returns:
        The new PSBT, verified (BIP375).

    Raises:
        InvalidKeyError: spend_key32 is not a key, or it is not the key any input's
            PSBT_IN_SP_SPEND_BIP32_DERIVATION names.
        PSBTError: (rule "sp spend") no input has PSBT_IN_SP_TWEAK, an input's tweak does not give
            its output key (a wrong spend key or tweak), an input without its UTXO, or a sighash type
            other than DEFAULT/ALL; a BIP375 rule the PSBT breaks (named by its rule).
    """
    keys = _keys(p, spend_key32)
    if aux_rand32 is not None and len(aux_rand32) != 32:
        raise InvalidKeyError("aux_rand32 must be 32 bytes")
    p = _sp_outputs(p, keys, aux_rand32)
    if any(o.script is None for o in p.sp_outputs()):
        return p
    tx, spent = unsigned_tx(p), prevouts(p)
    signed: dict[int, Map] = {}
    for i, d in keys.items():
        hash_type = _hash_type(p.inputs[i], i)
        msg32 = taproot_sighash(tx, spent, i, hash_type)
        sig64 = d.sign_schnorr(msg32, os.urandom(32) if aux_rand32 is None else bytes(aux_rand32))
        if not PublicKeyXOnly(spent[i].script[2:34]).verify(sig64, msg32):
            raise SPError(f"input {i}: the signature made does not verify (a fault in the signer); nothing was signed")
        signed[i] = {field_key(IN_TAP_KEY_SIG): sig64 + (b"\x01" if hash_type == SIGHASH_ALL else b"")}
    result = replace_maps(p, inputs=signed)
    verify(result)
    return result


def finalize_sp_inputs(p: Psbt) -> Psbt:
    """BIP376 Input Finalizer: every input with PSBT_IN_SP_TWEAK gets PSBT_IN_FINAL_SCRIPTWITNESS (its key-path
    signature) and loses PSBT_IN_SP_TWEAK, PSBT_IN_SP_SPEND_BIP32_DERIVATION, PSBT_IN_TAP_KEY_SIG and
    PSBT_IN_WITNESS_UTXO. BIP375's checks run first, while the inputs still show their keys (so a
    silent-payment output script is verified before the transaction is extracted).

    Returns:
        The new PSBT (the same one when no input has PSBT_IN_SP_TWEAK).

    Raises:
        PSBTError: (rule "sp spend") such an input has no PSBT_IN_TAP_KEY_SIG; a BIP375 rule broken.
    """
    inputs = sp_spend_inputs(p)
    if not inputs:
        return p
    unsigned = [i for i in inputs if field_key(IN_TAP_KEY_SIG) not in p.inputs[i]]
    if unsigned:
        raise PSBTError(SP_SPEND, f"input {unsigned[0]} has PSBT_IN_SP_TWEAK but no PSBT_IN_TAP_KEY_SIG: it is not signed yet")
    verify(p)
    maps = list(p.inputs)
    for i in inputs:
        sig = maps[i][field_key(IN_TAP_KEY_SIG)]
        kept = {k: v for k, v in maps[i].items() if split_key(k)[0] not in _REMOVED_WHEN_FINAL}
        kept[field_key(IN_FINAL_SCRIPTWITNESS)] = compact_size(1) + compact_size(len(sig)) + sig
        maps[i] = kept
    return Psbt(p.global_map, maps, p.outputs)
