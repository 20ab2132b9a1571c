"""Named regressions for the BIP352 corners implementations get wrong."""

from __future__ import annotations

import pytest
from coincurve import PrivateKey, PublicKey

from helpers import (
    NUMS_CONTROL_INTERNAL,
    outpoint,
    p2pkh_input,
    p2tr_input,
    p2wpkh_input,
    pub,
    push,
    script_path_witness,
    secret,
)
from sp_scan import address, extract, scan, send, summary
from sp_scan.crypto import TAG_SHARED_SECRET, N, ser32, tagged_hash
from sp_scan.errors import KmaxExceededError
from sp_scan.types import OutPoint, TxInput

SCAN, SPEND = secret(1), secret(2)
RECEIVER_ADDR = address.SPAddress("sp", 0, pub(SCAN), pub(SPEND))


def _labelled(m: int) -> address.SPAddress:
    return address.SPAddress("sp", 0, pub(SCAN), address.labelled_spend_pubkey(SCAN, pub(SPEND), m))


def _paying_tx(recipients, n_inputs: int = 2):
    keys = [secret(100 + i) for i in range(n_inputs)]
    inputs = [p2wpkh_input(outpoint(i), pub(k)) for i, k in enumerate(keys)]
    outputs = send.create_outputs([i.outpoint for i in inputs], [send.InputKey(k, False) for k in keys], recipients)
    return inputs, outputs


def _spend_key_matches(found: scan.FoundOutput) -> bool:
    d = (int.from_bytes(SPEND, "big") + int.from_bytes(found.tweak32, "big")) % N
    return PrivateKey.from_int(d).public_key.format()[1:] == found.output32


def test_label_match_and_direct_match_are_told_apart():
    inputs, outputs = _paying_tx([RECEIVER_ADDR, _labelled(5)])
    found = scan.scan_tx(inputs, outputs, scan.Receiver(SCAN, pub(SPEND), (5,)))
    assert {f.output32: f.label for f in found} == {outputs[0]: None, outputs[1]: 5}
    assert all(_spend_key_matches(f) for f in found)


def test_labelled_output_is_missed_when_its_label_is_not_scanned():
    inputs, outputs = _paying_tx([RECEIVER_ADDR, _labelled(5)])
    found = scan.scan_tx(inputs, outputs, scan.Receiver(SCAN, pub(SPEND)))
    assert [f.output32 for f in found] == [outputs[0]]


def test_change_label_zero_is_always_scanned():
    inputs, outputs = _paying_tx([_labelled(0)])
    found = scan.scan_tx(inputs, outputs, scan.Receiver(SCAN, pub(SPEND)))
    assert [(f.output32, f.label) for f in found] == [(outputs[0], 0)]
    assert _spend_key_matches(found[0])


def test_kmax_2323_outputs_are_sent_and_all_found():
    inputs, outputs = _paying_tx([RECEIVER_ADDR] * scan.K_MAX, n_inputs=1)
    found = scan.scan_tx(inputs, outputs[::-1], scan.Receiver(SCAN, pub(SPEND)))
    assert len(found) == scan.K_MAX and {f.output32 for f in found} == set(outputs)


def test_kmax_2324_outputs_fail_to_send():
    with pytest.raises(KmaxExceededError):
        _paying_tx([RECEIVER_ADDR] * (scan.K_MAX + 1), n_inputs=1)


def test_kmax_receiver_stops_at_2323_even_if_more_are_ours():
    # Build the 2324th output by hand: the sender refuses to.
    inputs, outputs = _paying_tx([RECEIVER_ADDR] * scan.K_MAX, n_inputs=1)
    s = summary.summarize(inputs)
    ecdh = scan.shared_secret(s.tweak33, SCAN)
    t = tagged_hash(TAG_SHARED_SECRET, ecdh + ser32(scan.K_MAX))
    extra = PublicKey(pub(SPEND)).add(t).format()[1:]
    found = scan.scan_tx(inputs, [*outputs, extra], scan.Receiver(SCAN, pub(SPEND)))
    assert len(found) == scan.K_MAX and extra not in {f.output32 for f in found}


def test_keys_summing_to_infinity_make_the_tx_ineligible():
    a = secret(7)
    neg = (N - int.from_bytes(a, "big")).to_bytes(32, "big")
    inputs = [p2wpkh_input(outpoint(1), pub(a)), p2wpkh_input(outpoint(2), pub(neg))]
    assert summary.summarize(inputs) is None
    assert scan.scan_tx(inputs, [pub(secret(9))[1:]], scan.Receiver(SCAN, pub(SPEND))) == []


def test_intermediate_infinity_does_not_stop_the_sum():
    a, b = secret(7), secret(8)
    neg = (N - int.from_bytes(a, "big")).to_bytes(32, "big")
    inputs = [p2wpkh_input(outpoint(i), pub(k)) for i, k in enumerate([a, neg, b])]
    assert summary.summarize(inputs).pubkey_sum33 == pub(b)


@pytest.mark.parametrize("annex", [False, True], ids=["no-annex", "annex"])
def test_nums_h_script_path_is_ignored(annex):
    x = pub(secret(3))[1:]
    spend = p2tr_input(outpoint(1), x, script_path_witness(NUMS_CONTROL_INTERNAL, annex))
    assert extract.input_pubkey(spend.prevout_script, spend.script_sig, spend.witness) is None


@pytest.mark.parametrize("annex", [False, True], ids=["no-annex", "annex"])
def test_other_script_path_gives_the_output_key(annex):
    x = pub(secret(3))[1:]
    spend = p2tr_input(outpoint(1), x, script_path_witness(pub(secret(4))[1:], annex))
    assert extract.input_pubkey(spend.prevout_script, spend.script_sig, spend.witness) == x


def test_key_path_with_annex_gives_the_output_key():
    x = pub(secret(3))[1:]
    spend = p2tr_input(outpoint(1), x, (b"\x01" * 64, b"\x50" + b"\x00" * 10))
    assert extract.input_pubkey(spend.prevout_script, spend.script_sig, spend.witness) == x


def test_malleated_p2pkh_key_need_not_be_the_last_push():
    key, other = pub(secret(5)), pub(secret(6))
    sig = push(b"\x30" * 71)
    # OP_1 OP_IF <sig> <key> OP_ELSE <sig> <other> OP_ENDIF
    script_sig = b"\x51\x63" + sig + push(key) + b"\x67" + sig + push(other) + b"\x68"
    spend = p2pkh_input(outpoint(1), key, script_sig)
    assert extract.input_pubkey(spend.prevout_script, spend.script_sig, spend.witness) == key


def test_p2pkh_with_truncated_push_is_ignored():
    key = pub(secret(5))
    spend = p2pkh_input(outpoint(1), key, push(key) + b"\x4c\xff\x00")
    assert extract.input_pubkey(spend.prevout_script, spend.script_sig, spend.witness) is None


def test_segwit_v2_spend_skips_the_whole_tx():
    good = p2wpkh_input(outpoint(1), pub(secret(5)))
    v2 = TxInput(outpoint(2), b"", (b"\x01",), b"\x52\x20" + b"\x07" * 32)
    assert extract.tx_pubkeys([good, v2]) is None
    assert summary.summarize([good, v2]) is None
    assert summary.summarize([good]) is not None


def test_smallest_outpoint_is_taken_over_ineligible_inputs_too():
    eligible = p2wpkh_input(OutPoint(b"\xff" * 32, 0), pub(secret(5)))
    p2wsh = TxInput(OutPoint(b"\x00" * 32, 3), b"", (b"\x01",), b"\x00\x20" + b"\x01" * 32)
    s = summary.summarize([eligible, p2wsh])
    assert s.outpoint_smallest36 == p2wsh.outpoint.to_bytes()


def test_vout_compares_as_little_endian_bytes():
    txid = b"\x42" * 32
    inputs = [p2wpkh_input(OutPoint(txid, 1), pub(secret(5))), p2wpkh_input(OutPoint(txid, 256), pub(secret(6)))]
    assert summary.summarize(inputs).outpoint_smallest36 == txid + bytes([0, 1, 0, 0])


def test_taproot_input_key_counts_with_even_y():
    k = secret(11)
    x = pub(k)[1:]
    s = summary.summarize([p2tr_input(outpoint(1), x)])
    assert s.pubkey_sum33 == b"\x02" + x
