"""BIP375's checks that need the whole transaction, in the BIP's order: ECDH coverage, input eligibility, output scripts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .. import crypto, dleq, extract, send, summary
from ..crypto import K_MAX
from ..errors import PSBTError
from ..extract import ScriptType
from .codec import Psbt, SPOutput
from .fields import (
    COVERAGE, ELIGIBILITY, GLOBAL_SP_DLEQ, GLOBAL_SP_ECDH_SHARE, IN_PARTIAL_SIG, IN_SIGHASH_TYPE, IN_SP_DLEQ,
    IN_SP_ECDH_SHARE, IN_TAP_KEY_SIG, IN_TAP_SCRIPT_SIG, Map, OUTPUT_SCRIPTS, SIGHASH_ALL, SIGHASH_DEFAULT, entries,
    field_key,
)  # fmt: skip
from .inputs import InputInfo


@dataclass(frozen=True, slots=True)
class Status:
    """How far a PSBT's silent-payment outputs are (all checks passed).

    Attributes:
        sp_outputs: indices of the outputs with PSBT_OUT_SP_V0_INFO.
        computed: those of them that have PSBT_OUT_SCRIPT.
        ready: True when every scan key is covered, so `compute_outputs` can fill the rest.
    """

    sp_outputs: tuple[int, ...]
    computed: tuple[int, ...]
    ready: bool


def scan_keys(p: Psbt) -> list[bytes]:
    return sorted({o.scan_pubkey33 for o in p.sp_outputs()})


def share_of(m: Map, key_type: int, scan33: bytes) -> bytes | None:
    return m.get(field_key(key_type, scan33))


def _pubkey_sum(infos: Sequence[InputInfo], what: str) -> bytes:
    """ser_P(A) over the eligible inputs, for verifying a global proof; rule "ecdh coverage"."""
    for info in infos:
        if info.eligible is None:
            raise PSBTError(COVERAGE, f"{what}: cannot tell whether input {info.index} is eligible ({info.reason})")
        if info.eligible and info.pubkey is None:
            raise PSBTError(COVERAGE, f"{what}: input {info.index} has no known public key ({info.reason})")
    keys = [info.pubkey for info in infos if info.eligible]
    total = crypto.add([crypto.point(k) if len(k) == 33 else crypto.lift_x(k) for k in keys]) if keys else None
    if total is None:
        raise PSBTError(COVERAGE, f"{what}: the eligible input keys sum to nothing")
    return total.format()


def _input_point(info: InputInfo) -> bytes:
    key = info.pubkey
    return key if len(key) == 33 else b"\x02" + key


def check_ecdh_coverage(p: Psbt) -> None:
    """BIP375 "ECDH coverage": every share has a proof that verifies, and a set output script is covered.

    Raises:
        PSBTError: (rule "ecdh coverage") a share without a proof or a proof without a share, a
            proof that does not verify, an input whose key is needed but unknown, or an output
            script set while an eligible input (or every input) lacks a share for its scan key.
    """
    infos = p.input_info()
    g = p.global_map
    for scan33 in {k for k, _ in (*entries(g, GLOBAL_SP_ECDH_SHARE), *entries(g, GLOBAL_SP_DLEQ))}:
        share, proof = share_of(g, GLOBAL_SP_ECDH_SHARE, scan33), share_of(g, GLOBAL_SP_DLEQ, scan33)
        what = f"global ECDH share for scan key {scan33.hex()}"
        if share is None or proof is None:
            raise PSBTError(COVERAGE, f"{what}: PSBT_GLOBAL_SP_ECDH_SHARE and PSBT_GLOBAL_SP_DLEQ must come together")
        if not dleq.verify_proof(_pubkey_sum(infos, what), scan33, share, proof):
            raise PSBTError(COVERAGE, f"{what}: PSBT_GLOBAL_SP_DLEQ does not verify")
    for info, m in zip(infos, p.inputs):
        for scan33 in {k for k, _ in (*entries(m, IN_SP_ECDH_SHARE), *entries(m, IN_SP_DLEQ))}:
            share, proof = share_of(m, IN_SP_ECDH_SHARE, scan33), share_of(m, IN_SP_DLEQ, scan33)
            what = f"input {info.index} ECDH share for scan key {scan33.hex()}"
            if share is None or proof is None:
                raise PSBTError(COVERAGE, f"{what}: PSBT_IN_SP_ECDH_SHARE and PSBT_IN_SP_DLEQ must come together")
            if info.eligible is False:
                continue  # not counted
            if info.eligible is None or info.pubkey is None:
                raise PSBTError(COVERAGE, f"{what}: no public key to verify PSBT_IN_SP_DLEQ with ({info.reason})")
            if not dleq.verify_proof(_input_point(info), scan33, share, proof):
                raise PSBTError(COVERAGE, f"{what}: PSBT_IN_SP_DLEQ does not verify")
    for out in p.sp_outputs():
        if out.script is None:
            continue
        scan33 = out.scan_pubkey33
        if share_of(g, GLOBAL_SP_ECDH_SHARE, scan33) is not None:
            continue
        if not any(share_of(m, IN_SP_ECDH_SHARE, scan33) is not None for m in p.inputs):
            raise PSBTError(COVERAGE, f"output {out.index} has PSBT_OUT_SCRIPT but there is no ECDH share for its scan key")
        missing = _uncovered(p, scan33)
        if missing:
            raise PSBTError(COVERAGE, f"output {out.index} has PSBT_OUT_SCRIPT but {missing}")


def _uncovered(p: Psbt, scan33: bytes) -> str:
    """Why the shares for one scan key do not cover the transaction ("" when they do)."""
    if share_of(p.global_map, GLOBAL_SP_ECDH_SHARE, scan33) is not None:
        return ""
    for info, m in zip(p.input_info(), p.inputs):
        if info.eligible is None:
            return f"cannot tell whether input {info.index} is eligible ({info.reason})"
        if info.eligible and share_of(m, IN_SP_ECDH_SHARE, scan33) is None:
            return f"eligible input {info.index} has no ECDH share for scan key {scan33.hex()}"
    return ""


def missing_shares(p: Psbt, scan33: bytes) -> str:
    """Why one scan key's output scripts cannot be derived yet ("" when they can)."""
    unknown = next((i for i in p.input_info() if i.eligible and i.pubkey is None), None)
    return _uncovered(p, scan33) or (f"input {unknown.index} has no known public key ({unknown.reason})" if unknown else "")


def check_input_eligibility(p: Psbt) -> None:
    """BIP375 "input eligibility": with silent-payment outputs, no segwit v2+ spend and only SIGHASH_ALL.

    Raises:
        PSBTError: (rule "input eligibility") an input spends segwit version 2+, has no UTXO
            to tell, or asks for or carries a signature with a sighash other than ALL
            (DEFAULT is ALL for taproot).
    """
    if not p.sp_outputs():
        return
    for info, m in zip(p.input_info(), p.inputs):
        if info.prevout_script is None:
            raise PSBTError(ELIGIBILITY, f"input {info.index}: {info.reason}")
        if extract.script_type(info.prevout_script) is ScriptType.WITNESS_UNKNOWN:
            raise PSBTError(ELIGIBILITY, f"input {info.index} spends a segwit version 2+ output; silent-payment outputs forbid it")
        allowed = (SIGHASH_ALL, SIGHASH_DEFAULT) if info.is_taproot else (SIGHASH_ALL,)
        sighash = m.get(field_key(IN_SIGHASH_TYPE))
        if sighash is not None and int.from_bytes(sighash, "little") not in allowed:
            raise PSBTError(ELIGIBILITY, f"input {info.index} PSBT_IN_SIGHASH_TYPE is {int.from_bytes(sighash, 'little')}; silent-payment outputs need SIGHASH_ALL")
        sigs = [v for _, v in entries(m, IN_PARTIAL_SIG)] + [v for _, v in entries(m, IN_TAP_SCRIPT_SIG) if len(v) == 65]
        sigs += [v for v in (m.get(field_key(IN_TAP_KEY_SIG)),) if v is not None and len(v) == 65]
        if any(not sig or sig[-1] != SIGHASH_ALL for sig in sigs):
            raise PSBTError(ELIGIBILITY, f"input {info.index} carries a signature that is not SIGHASH_ALL")


def expected_scripts(p: Psbt, scan33: bytes, outs: Sequence[SPOutput]) -> dict[int, bytes] | None:
    """Output index -> P2TR script for one scan key's outputs; None while the shares are incomplete.

    Raises:
        PSBTError: (rule "output scripts") the inputs give no shared secret, or more than K_max outputs.
    """
    if missing_shares(p, scan33):
        return None
    infos = p.input_info()
    share = share_of(p.global_map, GLOBAL_SP_ECDH_SHARE, scan33)
    if share is None:
        shares = [share_of(m, IN_SP_ECDH_SHARE, scan33) for info, m in zip(infos, p.inputs) if info.eligible]
        total = crypto.add([crypto.point(s) for s in shares]) if shares else None
        share = total.format() if total is not None else None
    keys = [info.pubkey for info in infos if info.eligible]
    found = summary.summarize_keys(min(info.outpoint.to_bytes() for info in infos), keys) if infos else None
    if found is None or share is None:
        raise PSBTError(OUTPUT_SCRIPTS, f"the inputs give no shared secret for scan key {scan33.hex()} (no eligible input, or keys summing to nothing)")
    if len(outs) > K_MAX:
        raise PSBTError(OUTPUT_SCRIPTS, f"more than {K_MAX} silent-payment outputs for scan key {scan33.hex()}")
    ecdh33 = send.ecdh_from_share(share, found.input_hash32)
    return {o.index: b"\x51\x20" + send.output_key(ecdh33, o.spend_pubkey33, k) for k, o in enumerate(outs)}


def scan_key_groups(p: Psbt) -> dict[bytes, list[SPOutput]]:
    groups: dict[bytes, list[SPOutput]] = {}
    for out in p.sp_outputs():
        groups.setdefault(out.scan_pubkey33, []).append(out)
    return groups


def check_output_scripts(p: Psbt) -> None:
    """BIP375 "output scripts": every set PSBT_OUT_SCRIPT of a silent-payment output is the derived one.

    Within a scan key, k counts the outputs in output order. BIP375's text
    says to sort the codes first; its test vectors (a labelled pair whose
    spend keys are out of order is valid) and its reference validator count
    in output order, and so do we. The two agree when a constructor adds
    the outputs of one scan key sorted.

    Raises:
        PSBTError: (rule "output scripts") a script that differs from the derivation, or one set
            while the shares cannot derive it.
    """
    for scan33, outs in scan_key_groups(p).items():
        if all(o.script is None for o in outs):
            continue
        expected = expected_scripts(p, scan33, outs)
        for o in outs:
            if o.script is None:
                continue
            if expected is None:
                raise PSBTError(OUTPUT_SCRIPTS, f"output {o.index} has PSBT_OUT_SCRIPT but the ECDH shares cannot derive it yet")
            if o.script != expected[o.index]:
                raise PSBTError(OUTPUT_SCRIPTS, f"output {o.index} PSBT_OUT_SCRIPT is not the silent-payment output its ECDH shares derive")


def verify(p: Psbt) -> Status:
    """Run BIP375's checks in order: ECDH coverage, input eligibility, output scripts (the structure holds by construction).

    A share on an input that is not eligible is not counted (as BIP375's
    vectors have it); `add_shares` never adds one.

    Returns:
        How far the silent-payment outputs are.

    Raises:
        PSBTError: the first rule broken.
    """
    check_ecdh_coverage(p)
    check_input_eligibility(p)
    check_output_scripts(p)
    outs = p.sp_outputs()
    ready = not any(missing_shares(p, scan33) for scan33 in scan_keys(p))
    return Status(tuple(o.index for o in outs), tuple(o.index for o in outs if o.script is not None), ready)
