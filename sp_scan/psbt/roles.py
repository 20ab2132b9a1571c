"""BIP375's roles as functions that return a new `Psbt`: a signer's ECDH shares and proofs, the output scripts."""

from __future__ import annotations

import os
from collections.abc import Mapping

from coincurve import PrivateKey

from .. import crypto, extract, send
from ..errors import InvalidKeyError, PSBTError
from ..extract import ScriptType
from .codec import Psbt
from .fields import (
    COVERAGE, ELIGIBILITY, GLOBAL_SP_DLEQ, GLOBAL_SP_ECDH_SHARE, GLOBAL_TX_MODIFIABLE, IN_REDEEM_SCRIPT, IN_SP_DLEQ,
    IN_SP_ECDH_SHARE, MODIFIABLE_INPUTS_OUTPUTS, Map, OUT_SCRIPT, field_key,
)  # fmt: skip
from .inputs import InputInfo
from .rules import check_input_eligibility, expected_scripts, missing_shares, scan_key_groups, scan_keys, verify


def replace_maps(p: Psbt, global_updates: Map | None = None, inputs: Mapping[int, Map] | None = None, outputs: Mapping[int, Map] | None = None) -> Psbt:
    """A new Psbt with these entries added to (or replacing those of) its global, input and output maps."""
    g = {**p.global_map, **(global_updates or {})}
    ins = tuple({**m, **(inputs or {}).get(i, {})} for i, m in enumerate(p.inputs))
    outs = tuple({**m, **(outputs or {}).get(i, {})} for i, m in enumerate(p.outputs))
    return Psbt(g, ins, outs)


def compute_outputs(p: Psbt) -> Psbt:
    """Fill PSBT_OUT_SCRIPT of every silent-payment output and clear the modifiable flags (BIP375 Signer).

    Raises:
        PSBTError: `verify` fails, or (rule "ecdh coverage") an eligible input has no share for a scan key.
    """
    verify(p)
    scripts: dict[int, Map] = {}
    for scan33, outs in scan_key_groups(p).items():
        expected = expected_scripts(p, scan33, outs)
        if expected is None:
            raise PSBTError(COVERAGE, f"cannot compute the outputs for scan key {scan33.hex()}: {missing_shares(p, scan33)}")
        scripts.update({i: {field_key(OUT_SCRIPT): s} for i, s in expected.items()})
    modifiable = p.global_map.get(field_key(GLOBAL_TX_MODIFIABLE))
    flags = {} if modifiable is None else {field_key(GLOBAL_TX_MODIFIABLE): bytes([modifiable[0] & ~MODIFIABLE_INPUTS_OUTPUTS])}
    return replace_maps(p, flags, outputs=scripts)


def _own_key(info: InputInfo, m: Map, private_key32: bytes) -> send.InputKey:
    """The signer's key for an eligible input, checked against what the input shows of its key."""
    crypto.scalar(private_key32, f"the private key for input {info.index}")
    point = PrivateKey(bytes(private_key32)).public_key.format()
    script = info.prevout_script
    if info.is_taproot:
        ok = point[1:] == script[2:34]
    else:
        redeem = m.get(field_key(IN_REDEEM_SCRIPT))
        key_hash = {ScriptType.P2PKH: script[3:23], ScriptType.P2WPKH: script[2:22]}.get(extract.script_type(script), redeem[2:22] if redeem else b"")
        ok = crypto.hash160(point) == key_hash
    if not ok or (info.pubkey is not None and info.pubkey not in (point, point[1:])):
        raise InvalidKeyError(f"the private key given for input {info.index} does not belong to the output it spends")
    return send.InputKey(bytes(private_key32), info.is_taproot)


def add_shares(p: Psbt, private_keys: Mapping[int, bytes], *, global_share: bool = False, aux_rand32: bytes | None = None) -> Psbt:
    """BIP375 Signer: add ECDH shares and DLEQ proofs for the inputs whose keys are given.

    Per input by default; with `global_share`, one share per scan key over all
    eligible inputs (the keys must cover every one of them). When the shares
    then cover every scan key, the output scripts are computed too.

    Args:
        private_keys: input index -> its 32-byte private key (for P2TR, the key of the output key).
        global_share: set PSBT_GLOBAL_SP_ECDH_SHARE instead of per-input shares.
        aux_rand32: randomness for the proofs; None draws fresh bytes per proof.

    Returns:
        The new PSBT, verified.

    Raises:
        PSBTError: the PSBT has no silent-payment output or fails `verify`; an input index is out
            of range, or (rule "input eligibility") an input is not eligible or cannot be told;
            with `global_share`, an eligible input has no key.
        InvalidKeyError: a key is not valid or does not belong to its input.
        KeySumZeroError: the keys sum to zero.
    """
    wanted = scan_keys(p)
    if not wanted:
        raise PSBTError(COVERAGE, "the PSBT has no silent-payment output (PSBT_OUT_SP_V0_INFO): no ECDH share to add")
    check_input_eligibility(p)
    infos = p.input_info()
    keys: dict[int, send.InputKey] = {}
    for i, private_key32 in sorted(private_keys.items()):
        if not 0 <= i < len(infos):
            raise PSBTError(ELIGIBILITY, f"input {i} does not exist (the PSBT has {len(infos)})")
        if not infos[i].eligible:
            state = "it cannot be told whether input" if infos[i].eligible is None else "input"
            raise PSBTError(ELIGIBILITY, f"{state} {i} is not eligible ({infos[i].reason}): it takes no ECDH share")
        keys[i] = _own_key(infos[i], p.inputs[i], private_key32)

    def aux() -> bytes:
        return os.urandom(32) if aux_rand32 is None else aux_rand32

    if global_share:
        missing = [info.index for info in infos if info.eligible is not False and info.index not in keys]
        if missing:
            raise PSBTError(ELIGIBILITY, f"a global share needs the keys of every eligible input; missing input {missing[0]}")
        entries: dict[bytes, bytes] = {}
        for scan33 in wanted:
            share, proof = send.ecdh_share(list(keys.values()), scan33, aux())
            entries[field_key(GLOBAL_SP_ECDH_SHARE, scan33)], entries[field_key(GLOBAL_SP_DLEQ, scan33)] = share, proof
        result = replace_maps(p, entries)
    else:
        per_input: dict[int, dict[bytes, bytes]] = {}
        for i, key in keys.items():
            for scan33 in wanted:
                share, proof = send.ecdh_share([key], scan33, aux())
                per_input.setdefault(i, {}).update({field_key(IN_SP_ECDH_SHARE, scan33): share, field_key(IN_SP_DLEQ, scan33): proof})
        result = replace_maps(p, inputs=per_input)
    status = verify(result)
    return compute_outputs(result) if status.ready and len(status.computed) < len(status.sp_outputs) else result
