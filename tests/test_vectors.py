"""Every official BIP352 vector, one test id per sending and receiving object."""

from __future__ import annotations

import hashlib
import re

import pytest
from coincurve import PrivateKey
from coincurve.keys import PublicKeyXOnly

from conftest import RECEIVING, RECEIVING_IDS, SENDING, SENDING_IDS, ROOT, tx_inputs
from sp_scan import address, extract, scan, send, summary
from sp_scan.crypto import N
from sp_scan.errors import SendError

MSG = hashlib.sha256(b"message").digest()
AUX = hashlib.sha256(b"random auxiliary data").digest()


VENDORED = re.findall(r"^\| `([^`]+)` \|.*\| `([0-9a-f]{64})` \|$", (ROOT / "vectors" / "README.md").read_text(), re.M)


@pytest.mark.parametrize(("path", "sha256"), VENDORED, ids=[path for path, _ in VENDORED])
def test_vendored_file_matches_its_recorded_sha256(path, sha256):
    assert hashlib.sha256((ROOT / "vectors" / path).read_bytes()).hexdigest() == sha256


def test_every_vendored_vector_file_has_a_recorded_sha256():
    recorded = {path for path, _ in VENDORED}
    dirs = ("bip352", "bip158", "bip374", "bip375", "blindbit")
    on_disk = {str(p.relative_to(ROOT / "vectors")) for d in dirs for p in (ROOT / "vectors" / d).rglob("*") if p.is_file() and p.name != "LICENSE"}
    assert on_disk == recorded


def test_there_are_28_sending_and_29_receiving_objects():
    assert (len(SENDING), len(RECEIVING)) == (28, 29)


@pytest.mark.parametrize(("n", "obj"), SENDING, ids=SENDING_IDS)
def test_sending(n, obj):
    given, expected = obj["given"], obj["expected"]
    inputs = tx_inputs(given["vin"])
    keys = [extract.input_pubkey(i.prevout_script, i.script_sig, i.witness) for i in inputs]
    compressed = [k if len(k) == 33 else b"\x02" + k for k in keys if k is not None]
    assert [k.hex() for k in compressed] == expected["input_pub_keys"]
    input_keys = [
        send.InputKey(bytes.fromhex(v["private_key"]), len(k) == 32)
        for v, k in zip(given["vin"], keys)
        if k is not None
    ]
    recipients = []
    for r in given["recipients"]:
        decoded = address.decode(r["address"])
        assert decoded.scan_pubkey33.hex() == r["scan_pub_key"]
        assert decoded.spend_pubkey33.hex() == r["spend_pub_key"]
        recipients += [decoded] * r.get("count", 1)
    outpoints = [i.outpoint for i in inputs]
    if expected["outputs"] in ([[]], []):
        with pytest.raises(SendError):
            send.create_outputs(outpoints, input_keys, recipients)
        return
    outputs = send.create_outputs(outpoints, input_keys, recipients)
    assert len(set(outputs)) == len(outputs)
    assert any({o.hex() for o in outputs} == set(c) and len(c) == len(outputs) for c in expected["outputs"])
    for r, secret in zip(given["recipients"], expected["shared_secrets"]):
        got = send.shared_secret(outpoints, input_keys, bytes.fromhex(r["scan_pub_key"]))
        assert got.hex() == secret


def _keys(given):
    scan_key = bytes.fromhex(given["key_material"]["scan_priv_key"])
    spend_key = bytes.fromhex(given["key_material"]["spend_priv_key"])
    return scan_key, spend_key, PrivateKey(spend_key).public_key.format()


def _signature(spend_key: bytes, tweak32: bytes) -> bytes:
    secret = (int.from_bytes(spend_key, "big") + int.from_bytes(tweak32, "big")) % N
    return PrivateKey.from_int(secret).sign_schnorr(MSG, AUX)


@pytest.mark.parametrize(("n", "obj"), RECEIVING, ids=RECEIVING_IDS)
def test_receiving(n, obj):
    given, expected = obj["given"], obj["expected"]
    scan_key, spend_key, spend_pub = _keys(given)
    scan_pub = PrivateKey(scan_key).public_key.format()
    addresses = [address.encode(scan_pub, spend_pub)] + [
        address.encode(scan_pub, address.labelled_spend_pubkey(scan_key, spend_pub, m)) for m in given["labels"]
    ]
    assert addresses == expected["addresses"]

    inputs = tx_inputs(given["vin"])
    outputs = [bytes.fromhex(o) for o in given["outputs"]]
    found_summary = summary.summarize(inputs)
    if expected["tweak"] is None:
        assert found_summary is None
        assert "input_pub_key_sum" not in expected
    else:
        assert found_summary.pubkey_sum33.hex() == expected["input_pub_key_sum"]
        assert found_summary.tweak33.hex() == expected["tweak"]
        assert scan.shared_secret(found_summary.tweak33, scan_key).hex() == expected["shared_secret"]

    receiver = scan.Receiver(scan_key, spend_pub, tuple(given["labels"]))
    found = scan.scan_tx(inputs, outputs, receiver)
    assert found == (scan.scan_tweak(found_summary.tweak33, outputs, receiver) if found_summary else [])
    if "n_outputs" in expected:
        assert len(found) == expected["n_outputs"]
        return
    got = {
        (f.output32.hex(), f.tweak32.hex(), _signature(spend_key, f.tweak32).hex())
        for f in found
    }
    want = {(o["pub_key"], o["priv_key_tweak"], o["signature"]) for o in expected["outputs"]}
    assert got == want
    for f in found:
        sig = _signature(spend_key, f.tweak32)
        assert PublicKeyXOnly(f.output32).verify(sig, MSG)
