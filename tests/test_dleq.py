"""BIP374 DLEQ proofs: every official vector, native and reference generation agreeing, misuse."""

from __future__ import annotations

import csv
import os

import pytest
from coincurve import PrivateKey, PublicKey

from conftest import ROOT
from sp_scan import dleq, native, reference, send
from sp_scan.crypto import N, add, point
from sp_scan.errors import InvalidKeyError, KeySumZeroError, SendError


def _rows(name: str) -> list[dict]:
    with open(ROOT / "vectors" / "bip374" / name, newline="") as f:
        return list(csv.DictReader(f))


GENERATE, VERIFY = _rows("test_vectors_generate_proof.csv"), _rows("test_vectors_verify_proof.csv")
GENERATORS = [dleq.generate_proof, reference.dleq.generate_proof]


def _point(text: str) -> bytes:
    return dleq.INFINITY if text == "INFINITY" else bytes.fromhex(text)


def _mul(point33: bytes, scalar32: bytes) -> bytes:
    return PublicKey(point33).multiply(scalar32).format()


def _message(text: str) -> bytes | None:
    return bytes.fromhex(text) if text else None


@pytest.mark.parametrize("generate", GENERATORS, ids=["native", "reference"])
@pytest.mark.parametrize("row", GENERATE, ids=[f"{r['index']}-{r['comment']}" for r in GENERATE])
def test_generate_proof_vector(row, generate):
    proof = generate(bytes.fromhex(row["scalar_a"]), _point(row["point_B"]), bytes.fromhex(row["auxrand_r"]), _point(row["point_G"]), _message(row["message"]))
    expected = None if row["result_proof"] == "INVALID" else bytes.fromhex(row["result_proof"])
    assert proof == expected


@pytest.mark.parametrize("row", VERIFY, ids=[f"{r['index']}-{r['comment']}" for r in VERIFY])
def test_verify_proof_vector(row):
    ok = dleq.verify_proof(_point(row["point_A"]), _point(row["point_B"]), _point(row["point_C"]), bytes.fromhex(row["proof"]), _point(row["point_G"]), _message(row["message"]))
    assert ok is (row["result_success"] == "TRUE")


def test_generate_proof_goes_through_the_native_door_when_it_is_enabled(monkeypatch):
    calls, real = [], native.dleq_prove
    monkeypatch.setattr(native, "dleq_prove", lambda *args: calls.append(args) or real(*args))
    proof = dleq.generate_proof(PrivateKey().secret, PrivateKey().public_key.format(), bytes(32))
    assert len(proof) == 64 and len(calls) == (1 if native.ENABLED else 0)


@pytest.mark.parametrize("seed", range(20))
def test_native_and_reference_proofs_agree_and_verify(seed):
    a32, b_key, r32 = (PrivateKey.from_int(seed * 7919 + 1).secret, PrivateKey(), os.urandom(32))
    m = os.urandom(32) if seed % 2 else None
    b33 = b_key.public_key.format()
    proof = dleq.generate_proof(a32, b33, r32, m=m)
    assert proof == reference.dleq.generate_proof(a32, b33, r32, m=m)
    a33, c33 = PrivateKey(a32).public_key.format(), b_key.public_key.multiply(a32).format()
    assert dleq.verify_proof(a33, b33, c33, proof, m=m)
    assert not dleq.verify_proof(b33, b33, c33, proof, m=m)
    assert not dleq.verify_proof(a33, b33, c33, proof, m=bytes(32) if m else os.urandom(32))


def test_a_proof_for_another_secret_does_not_verify():
    b33 = PrivateKey().public_key.format()
    a_key, other = PrivateKey(), PrivateKey()
    proof = dleq.generate_proof(other.secret, b33, bytes(32))
    c33 = _mul(b33, a_key.secret)
    assert not dleq.verify_proof(a_key.public_key.format(), b33, c33, proof)


def test_s_at_or_above_n_and_infinite_points_fail_verification():
    a = PrivateKey()
    b33 = PrivateKey().public_key.format()
    c33 = _mul(b33, a.secret)
    proof = dleq.generate_proof(a.secret, b33, bytes(32))
    a33 = a.public_key.format()
    assert dleq.verify_proof(a33, b33, c33, proof)
    assert not dleq.verify_proof(a33, b33, c33, proof[:32] + N.to_bytes(32, "big"))
    for i in range(4):
        points = [a33, b33, c33, dleq.G]
        points[i] = dleq.INFINITY
        assert not dleq.verify_proof(points[0], points[1], points[2], proof, points[3])


@pytest.mark.parametrize("generate", GENERATORS, ids=["native", "reference"])
def test_generation_misuse_raises_typed_errors(generate):
    key, b33 = PrivateKey().secret, PrivateKey().public_key.format()
    for args, name in (
        ((key[:31], b33, bytes(32)), "a32"),
        ((key, b33[:32], bytes(32)), "B33"),
        ((key, b"\x04" + b33[1:], bytes(32)), "B33"),
        ((key, b33, bytes(31)), "r32"),
    ):
        with pytest.raises(InvalidKeyError, match=name):
            generate(*args)
    with pytest.raises(InvalidKeyError, match="m must be 32 bytes"):
        generate(key, b33, bytes(32), dleq.G, b"short")


def test_verification_misuse_raises_typed_errors():
    b33 = PrivateKey().public_key.format()
    with pytest.raises(InvalidKeyError, match="proof64"):
        dleq.verify_proof(b33, b33, b33, bytes(63))
    with pytest.raises(InvalidKeyError, match="C33"):
        dleq.verify_proof(b33, b33, b"\x02" + b"\xff" * 32, bytes(64))


@pytest.mark.parametrize("taproot", [False, True])
def test_ecdh_shares_native_and_reference_agree_and_prove_the_key_sum(taproot):
    keys = [send.InputKey(PrivateKey().secret, taproot), send.InputKey(PrivateKey().secret, False)]
    scan33, aux = PrivateKey().public_key.format(), os.urandom(32)
    share, proof = send.ecdh_share(keys, scan33, aux)
    assert (share, proof) == reference.send.ecdh_share(keys, scan33, aux)
    points = [PrivateKey(k.private_key32).public_key.format() for k in keys]
    if taproot:
        points[0] = b"\x02" + points[0][1:]  # P2TR keys count with even Y
    a33 = add([point(p) for p in points]).format()
    assert dleq.verify_proof(a33, scan33, share, proof)


@pytest.mark.parametrize("share", [send.ecdh_share, reference.send.ecdh_share], ids=["native", "reference"])
def test_ecdh_share_misuse(share):
    key = PrivateKey()
    scan33 = PrivateKey().public_key.format()
    with pytest.raises(SendError):
        share([], scan33, bytes(32))
    with pytest.raises(KeySumZeroError):
        share([send.InputKey(key.secret, False), send.InputKey((N - key.to_int()).to_bytes(32, "big"), False)], scan33, bytes(32))
    with pytest.raises(InvalidKeyError):
        share([send.InputKey(bytes(32), False)], scan33, bytes(32))
    with pytest.raises(InvalidKeyError, match="aux_rand32"):
        share([send.InputKey(key.secret, False)], scan33, bytes(31))
