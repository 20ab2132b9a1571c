"""BIP375 PSBTs: every official vector with its outcome and rule, the signer round trip, hostile input."""

from __future__ import annotations

import base64
import json
import tracemalloc

import pytest
from coincurve import PrivateKey

import psbtfactory as pf
from conftest import ROOT
from sp_scan import descriptor, psbt, scan, summary
from sp_scan.errors import InvalidKeyError, PSBTError
from sp_scan.wire import TxOut, compact_size, sha256d

CASES = json.loads((ROOT / "vectors" / "bip375" / "bip375_test_vectors.json").read_text())
CHECKS = {
    "ecdh_coverage": psbt.check_ecdh_coverage,
    "input_eligibility": psbt.check_input_eligibility,
    "output_scripts": psbt.check_output_scripts,
}


def _run(case: dict) -> psbt.Status | None:
    p = psbt.Psbt.from_base64(case["psbt"])
    if "checks" in case:
        for name in case["checks"]:
            CHECKS[name](p)
        return None
    return psbt.verify(p)


@pytest.mark.parametrize("case", CASES["valid"], ids=[c["description"] for c in CASES["valid"]])
def test_valid_vector_passes_and_round_trips_byte_for_byte(case):
    status = _run(case)
    assert psbt.Psbt.from_base64(case["psbt"]).to_base64() == case["psbt"]
    if case["description"].startswith("can finalize"):
        assert status.computed == status.sp_outputs and status.ready
    elif case["description"].startswith("in progress"):
        assert status.sp_outputs


@pytest.mark.parametrize("case", CASES["invalid"], ids=[c["description"] for c in CASES["invalid"]])
def test_invalid_vector_fails_the_rule_it_breaks(case):
    rule = case["description"].split(":")[0]
    with pytest.raises(PSBTError) as err:
        _run(case)
    assert err.value.rule == rule and str(err.value).startswith(rule + ": ")


def test_there_are_20_valid_and_22_invalid_vectors():
    assert (len(CASES["valid"]), len(CASES["invalid"])) == (20, 22)


def test_in_progress_vectors_compute_their_missing_outputs_only_once_covered():
    case = next(c for c in CASES["valid"] if c["description"].startswith("in progress: two inputs / one sp output"))
    p = psbt.Psbt.from_base64(case["psbt"])
    assert not psbt.verify(p).ready
    with pytest.raises(PSBTError, match="ecdh coverage: cannot compute the outputs .* eligible input 1 has no ECDH share"):
        psbt.compute_outputs(p)


# --- the signer round trip ---


def _paid(p: psbt.Psbt, receiver: scan.Receiver) -> list:
    """What the receiver's scan finds among the PSBT's taproot outputs (tweak from the input keys)."""
    outpoint = min(i.outpoint.to_bytes() for i in p.input_info())
    tweak33 = summary.summarize_keys(outpoint, pf.input_keys(p)).tweak33
    outputs32 = [m[pf.key(psbt.fields.OUT_SCRIPT)][2:] for m in p.outputs if m[pf.key(psbt.fields.OUT_SCRIPT)][:2] == b"\x51\x20"]
    return scan.scan_tweak(tweak33, outputs32, receiver)


def test_two_signers_add_shares_for_their_inputs_and_the_receiver_finds_the_outputs():
    alice, bob = pf.coin("alice", "p2wpkh"), pf.coin("bob", "p2tr")
    other = b"\x00\x14" + bytes(20)
    p = pf.build([alice, bob], [pf.receiver_address(), other, pf.receiver_address(1), pf.receiver_address()])
    assert psbt.verify(p) == psbt.Status((0, 2, 3), (), False)
    after_alice = psbt.add_shares(p, {0: alice.private_key32}, aux_rand32=bytes(32))
    assert psbt.verify(after_alice).computed == ()
    done = psbt.add_shares(psbt.Psbt.from_bytes(after_alice.to_bytes()), {1: bob.private_key32})
    status = psbt.verify(done)
    assert status.computed == status.sp_outputs == (0, 2, 3)
    assert done.global_map[pf.key(psbt.fields.GLOBAL_TX_MODIFIABLE)] == b"\x00"
    wallet = descriptor.decode(str(descriptor.from_keys(pf.RECEIVER_SCAN, pf.RECEIVER_SPEND, annotations=(("ml", 1),))))
    found = _paid(done, wallet.receiver())
    assert sorted(f.label for f in found if f.label is not None) == [1] and len(found) == 3


def test_one_signer_with_every_key_sets_a_global_share():
    alice, bob = pf.coin("alice", "p2tr"), pf.coin("bob", "p2wpkh")
    p = pf.build([alice, bob, pf.p2sh_multisig_coin("carol")], [pf.receiver_address(), pf.receiver_address()])
    done = psbt.add_shares(p, {0: alice.private_key32, 1: bob.private_key32}, global_share=True)
    assert any(k[0] == psbt.fields.GLOBAL_SP_ECDH_SHARE for k in done.global_map)
    assert not any(k[0] == psbt.fields.IN_SP_ECDH_SHARE for m in done.inputs for k in m)
    assert psbt.verify(done).computed == (0, 1)
    assert len(_paid(done, pf.receiver())) == 2


def test_outputs_of_one_scan_key_take_k_in_output_order():
    alice = pf.coin("alice")
    p = psbt.add_shares(pf.build([alice], [pf.receiver_address(1), pf.receiver_address(), pf.receiver_address(2)]), {0: alice.private_key32})
    found = _paid(p, pf.receiver((1, 2)))
    assert [f.label for f in found] == [1, None, 2]


def test_compute_outputs_refuses_until_every_eligible_input_is_covered():
    alice, bob = pf.coin("alice"), pf.coin("bob")
    p = psbt.add_shares(pf.build([alice, bob], [pf.receiver_address()]), {0: alice.private_key32})
    with pytest.raises(PSBTError, match="ecdh coverage: .*eligible input 1 has no ECDH share"):
        psbt.compute_outputs(p)


# --- bad input ---


def _vector_bytes(description_start: str) -> bytes:
    case = next(c for c in CASES["valid"] if c["description"].startswith(description_start))
    return base64.b64decode(case["psbt"])


def test_every_truncation_of_a_psbt_is_a_structure_error():
    data = _vector_bytes("can finalize: two inputs single-signer using per-input")
    for n in range(len(data)):
        with pytest.raises(PSBTError) as err:
            psbt.Psbt.from_bytes(data[:n])
        assert err.value.rule == psbt.STRUCTURE


def test_trailing_bytes_and_duplicate_keys_are_refused():
    data = _vector_bytes("can finalize: one P2PKH input")
    with pytest.raises(PSBTError, match="trailing"):
        psbt.Psbt.from_bytes(data + b"\x00")
    first = data[5 : 5 + 2 + data[5] + data[6 + data[5]]]
    with pytest.raises(PSBTError, match="duplicate key"):
        psbt.Psbt.from_bytes(data[:5] + first + data[5:])


def test_a_length_or_key_type_that_is_not_a_canonical_compact_size_is_refused():
    data = _vector_bytes("can finalize: one P2PKH input")
    with pytest.raises(PSBTError, match="non-canonical compact size"):
        psbt.Psbt.from_bytes(data[:5] + b"\xfd\x02\x00\xf0\x00\x00" + data[5:])  # a 2-byte key's length in 3 bytes
    with pytest.raises(PSBTError, match="global map: a key's type is not a canonical compact size"):
        psbt.Psbt.from_bytes(data[:5] + b"\x03\xfd\x01\x00\x00" + data[5:])


def test_psbt_version_0_is_refused_naming_version_2():
    v0 = b"psbt\xff" + b"\x01\x00" + bytes([10]) + bytes.fromhex("02000000000000000000") + b"\x00"
    with pytest.raises(PSBTError, match="psbt structure: PSBT version 0 is not supported: BIP375 needs PSBT version 2"):
        psbt.Psbt.from_bytes(v0)


@pytest.mark.parametrize("drop", [psbt.fields.GLOBAL_TX_VERSION, psbt.fields.GLOBAL_INPUT_COUNT, psbt.fields.GLOBAL_OUTPUT_COUNT])
def test_a_missing_required_global_field_is_refused(drop):
    p = pf.build([pf.coin("alice")], [pf.receiver_address()])
    g = {k: v for k, v in p.global_map.items() if k != pf.key(drop)}
    with pytest.raises(PSBTError, match="psbt structure: PSBT version 2 requires"):
        psbt.Psbt(g, p.inputs, p.outputs)


@pytest.mark.parametrize("drop", [psbt.fields.IN_PREVIOUS_TXID, psbt.fields.IN_OUTPUT_INDEX])
def test_a_missing_required_input_field_is_refused(drop):
    p = pf.build([pf.coin("alice")], [pf.receiver_address()])
    with pytest.raises(PSBTError, match="input 0: PSBT version 2 requires"):
        psbt.Psbt(p.global_map, [{k: v for k, v in p.inputs[0].items() if k != pf.key(drop)}], p.outputs)


def test_base64_and_binary_are_both_read_and_garbage_is_a_structure_error():
    data = _vector_bytes("can finalize: one P2PKH input")
    assert psbt.parse(data) == psbt.parse(base64.b64encode(data) + b"\n")
    for junk in (b"\xff\xfe", b"not base64!", b""):
        with pytest.raises(PSBTError) as err:
            psbt.parse(junk)
        assert err.value.rule == psbt.STRUCTURE


def test_a_proof_made_with_the_wrong_key_fails_ecdh_coverage():
    alice, mallory = pf.coin("alice"), pf.coin("mallory")
    p = psbt.add_shares(pf.build([alice, pf.coin("bob")], [pf.receiver_address()]), {0: alice.private_key32})
    forged = psbt.add_shares(pf.build([mallory, pf.coin("bob")], [pf.receiver_address()]), {0: mallory.private_key32})
    scan33 = pf.receiver_address().scan_pubkey33
    swapped = dict(p.inputs[0])
    for kind in (psbt.fields.IN_SP_ECDH_SHARE, psbt.fields.IN_SP_DLEQ):
        swapped[pf.key(kind, scan33)] = forged.inputs[0][pf.key(kind, scan33)]
    with pytest.raises(PSBTError, match="ecdh coverage: input 0 .*PSBT_IN_SP_DLEQ does not verify"):
        psbt.verify(psbt.Psbt(p.global_map, [swapped, p.inputs[1]], p.outputs))


def test_a_share_for_an_input_that_is_not_eligible_is_refused():
    carol = pf.p2sh_multisig_coin("carol")
    p = pf.build([pf.coin("alice"), carol], [pf.receiver_address()])
    with pytest.raises(PSBTError, match="input eligibility: input 1 is not eligible .*P2SH.*takes no ECDH share"):
        psbt.add_shares(p, {1: carol.private_key32})


def test_a_key_that_does_not_belong_to_its_input_is_refused_unechoed():
    alice, bob = pf.coin("alice"), pf.coin("bob", "p2tr")
    p = pf.build([alice, bob], [pf.receiver_address()])
    for index, wrong in ((0, bob.private_key32), (1, alice.private_key32)):
        with pytest.raises(InvalidKeyError, match=f"input {index} does not belong") as err:
            psbt.add_shares(p, {index: wrong})
        assert wrong.hex() not in str(err.value)


def test_segwit_v2_inputs_and_other_sighashes_stop_the_signer():
    alice = pf.coin("alice")
    p = pf.build([alice], [pf.receiver_address()])
    v2 = dict(p.inputs[0])
    v2[pf.key(psbt.fields.IN_WITNESS_UTXO)] = bytes.fromhex("a086010000000000") + bytes([34, 0x52, 32]) + bytes(32)
    with pytest.raises(PSBTError, match="input eligibility: input 0 spends a segwit version 2"):
        psbt.add_shares(psbt.Psbt(p.global_map, [v2], p.outputs), {0: alice.private_key32})
    single = {**p.inputs[0], pf.key(psbt.fields.IN_SIGHASH_TYPE): (3).to_bytes(4, "little")}
    with pytest.raises(PSBTError, match="input eligibility: input 0 PSBT_IN_SIGHASH_TYPE is 3"):
        psbt.add_shares(psbt.Psbt(p.global_map, [single], p.outputs), {0: alice.private_key32})


def test_add_shares_needs_a_silent_payment_output_and_a_real_input():
    alice = pf.coin("alice")
    with pytest.raises(PSBTError, match="no silent-payment output"):
        psbt.add_shares(pf.build([alice], [b"\x51\x20" + bytes(32)]), {0: alice.private_key32})
    with pytest.raises(PSBTError, match="input 3 does not exist"):
        psbt.add_shares(pf.build([alice], [pf.receiver_address()]), {3: alice.private_key32})


def test_a_global_share_needs_every_eligible_key():
    alice, bob = pf.coin("alice"), pf.coin("bob")
    with pytest.raises(PSBTError, match="global share needs the keys of every eligible input; missing input 1"):
        psbt.add_shares(pf.build([alice, bob], [pf.receiver_address()]), {0: alice.private_key32}, global_share=True)


def test_an_invalid_point_in_silent_payment_data_is_a_structure_error():
    p = pf.build([pf.coin("alice")], [pf.receiver_address()])
    out = {**p.outputs[0], pf.key(psbt.fields.OUT_SP_V0_INFO): b"\x02" + b"\xff" * 32 + pf.receiver_address().spend_pubkey33}
    with pytest.raises(PSBTError, match="psbt structure: output 0: PSBT_OUT_SP_V0_INFO scan key is not a valid compressed point"):
        psbt.Psbt(p.global_map, p.inputs, [out])


def test_an_unknown_field_survives_a_round_trip():
    p = pf.build([pf.coin("alice")], [pf.receiver_address()])
    extra = {**p.inputs[0], b"\xfc\x05hello\x01": b"proprietary"}
    q = psbt.Psbt(p.global_map, [extra], p.outputs)
    assert psbt.Psbt.from_bytes(q.to_bytes()) == q


def test_a_p2pkh_input_gets_its_key_through_non_witness_utxo_and_bip32_derivation():
    case = next(c for c in CASES["valid"] if c["description"] == "can finalize: one P2PKH input single-signer")
    p = psbt.Psbt.from_base64(case["psbt"])
    info = p.input_info()[0]
    assert info.eligible and info.pubkey == bytes.fromhex(case["supplementary"]["inputs"][0]["public_key"])
    assert PrivateKey(bytes.fromhex(case["supplementary"]["inputs"][0]["private_key"])).public_key.format() == info.pubkey


# ---- hostile PSBTs cost bounded memory (issue: 50 MB claiming 50 million input maps grew to ~7 GB) ----

SLACK = 1 << 20
"""Allocations of the parse that do not grow with the PSBT (one InputInfo, a traceback)."""


def _kv(k: bytes, v: bytes) -> bytes:
    return compact_size(len(k)) + k + compact_size(len(v)) + v


def _globals(n_in: int, n_out: int) -> bytes:
    version = (2).to_bytes(4, "little")
    return _kv(b"\x02", version) + _kv(b"\x04", compact_size(n_in)) + _kv(b"\x05", compact_size(n_out)) + _kv(b"\xfb", version) + b"\x00"


def _claiming_empty_maps(n: int) -> bytes:
    """The issue's reproduction, scaled: n input maps claimed, each an empty map (one 0x00)."""
    return psbt.MAGIC + _globals(n, 0) + bytes(n)


def _every_map_a_transaction_holds() -> bytes:
    return psbt.MAGIC + _globals(psbt.codec.MAX_INPUTS, psbt.codec.MAX_OUTPUTS) + bytes(psbt.codec.MAX_INPUTS + psbt.codec.MAX_OUTPUTS)


def _one_map_of_tiny_entries(n: int) -> bytes:
    """One input map of n unknown 4-byte keys with empty values: 6 bytes each on the wire."""
    entries = b"".join(b"\x04\xf0" + i.to_bytes(3, "little") + b"\x00" for i in range(n))
    return psbt.MAGIC + _globals(1, 0) + entries + b"\x00"


def _global_map_of_tiny_entries(n: int, key: bytes, versioned: bool) -> bytes:
    """A global map of n unknown keys (`key` then a 3-byte count) with empty values, after the version-2
    fields when `versioned` (then a PSBT of no inputs and no outputs); the issue: 50 MB of them took 817 MB."""
    fields = _globals(0, 0)[:-1] if versioned else b""
    entries = b"".join(bytes([len(key) + 3]) + key + i.to_bytes(3, "little") + b"\x00" for i in range(n))
    return psbt.MAGIC + fields + entries + b"\x00"


def _spaced_base64(data: bytes) -> bytes:
    """Base64 with a space after every character (whitespace is allowed anywhere)."""
    text = base64.b64encode(data)
    spaced = bytearray(b" ") * (2 * len(text))
    spaced[::2] = text
    return bytes(spaced)


def _peak_of_parse(data: bytes) -> tuple[int, PSBTError | None]:
    """The parse's peak traced memory (the PSBT itself not included) and its error."""
    tracemalloc.start()
    try:
        psbt.parse(data)
        error = None
    except PSBTError as exc:
        error = exc
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak, error


@pytest.mark.parametrize(
    ("build", "needle"),
    [
        (lambda: _claiming_empty_maps(3_000_000), "3,000,000 inputs: more than a transaction can hold (24,390 in 4,000,000 weight units)"),
        (_every_map_a_transaction_holds, "too many small maps or entries for the PSBT's size"),
        (lambda: _one_map_of_tiny_entries(500_000), "input 0: too many small maps or entries"),
        (lambda: _spaced_base64(_one_map_of_tiny_entries(300_000)), "input 0: too many small maps or entries"),
        (lambda: _global_map_of_tiny_entries(200_000, b"\xf0", False), "global map: too many small maps or entries"),
        (lambda: _global_map_of_tiny_entries(200_000, b"\xf0", True), "global map: too many small maps or entries"),
        (lambda: base64.b64encode(_global_map_of_tiny_entries(200_000, b"\xfc\x02sp\x00", False)), "global map: too many small maps or entries"),
    ],
    ids=[
        "the issue's reproduction", "every map a transaction holds, empty", "half a million tiny entries", "spaced base64",
        "unknown global keys", "unknown global keys after the version fields", "base64 proprietary global keys",
    ],  # fmt: skip
)
def test_a_hostile_psbt_is_refused_within_4x_its_size_plus_a_constant(build, needle):
    data = build()
    peak, error = _peak_of_parse(data)
    assert error is not None and error.rule == psbt.STRUCTURE and needle in str(error)
    assert len(data) + peak <= 4 * len(data) + psbt.codec.MAP_ALLOWANCE + SLACK, (len(data), peak)


def test_a_psbt_with_a_large_previous_transaction_verifies_within_the_bound():
    alice = pf.coin("alice")
    many = [TxOut(1, b"")] * 20_000 + [alice.prevout]
    prev = b"\x02\x00\x00\x00" + compact_size(1) + bytes(36) + b"\x00" + bytes(4) + compact_size(len(many)) + b"".join(o.to_bytes() for o in many) + bytes(4)
    spending = {
        pf.key(psbt.fields.IN_PREVIOUS_TXID): sha256d(prev),
        pf.key(psbt.fields.IN_OUTPUT_INDEX): (len(many) - 1).to_bytes(4, "little"),
        pf.key(psbt.fields.IN_NON_WITNESS_UTXO): prev,
        **{k: v for k, v in alice.input_map().items() if k[0] == psbt.fields.IN_BIP32_DERIVATION},
    }
    base = pf.build([alice], [pf.receiver_address()])
    data = psbt.Psbt(base.global_map, [spending], base.outputs).to_bytes()
    tracemalloc.start()
    try:
        status = psbt.verify(psbt.parse(data))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert status.sp_outputs == (0,) and psbt.parse(data).input_info()[0].eligible
    assert len(data) + peak <= 4 * len(data) + psbt.codec.MAP_ALLOWANCE + SLACK, (len(data), peak)


def test_a_one_byte_version_field_says_its_width_not_a_version():
    version = b"\x02"
    data = psbt.MAGIC + _kv(b"\x02", (2).to_bytes(4, "little")) + _kv(b"\xfb", version) + b"\x00"
    with pytest.raises(PSBTError, match="PSBT_GLOBAL_VERSION is 1 bytes, expected 4") as info:
        psbt.parse(data)
    assert "need 2" not in str(info.value)
