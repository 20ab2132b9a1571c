"""Native extraction decides "is x a secp256k1 x-coordinate" with a Jacobi symbol: it must agree
with Euler's criterion (x < p and (x³+7)^((p-1)/2) = 1 mod p) and with libsecp256k1's parse.

The predicate is reached through the door (`native.tx_pubkeys` / `native.input_pubkey` on crafted
inputs), so the plumbing for every input type is tested with it. Python's `pow` costs ~110 µs a
call: the default run checks POW_EXAMPLES random x against it (SP_SCAN_VALIDITY_EXAMPLES raises
that, e.g. 200000 for ~30 s) and 200,000 more against libsecp256k1 through coincurve.
"""

from __future__ import annotations

import os
import random

import pytest
from coincurve import PrivateKey, PublicKey

from conftest import CASES, tx_inputs
from sp_scan import native, reference
from sp_scan.crypto import hash160
from sp_scan.extract import pushes
from sp_scan.types import OutPoint, TxInput

# As in test_native: only an explicit reference run skips (a missing extension must fail).
pytestmark = pytest.mark.skipif(os.environ.get("SP_SCAN_BACKEND") == "reference", reason="SP_SCAN_BACKEND=reference")

P = 2**256 - 2**32 - 977
POW_EXAMPLES = int(os.environ.get("SP_SCAN_VALIDITY_EXAMPLES", "20000"))
LIBSECP_EXAMPLES = 200_000
OUTPOINT = OutPoint(bytes(32), 0)
SIG71, SIG64 = b"\x30" * 71, b"\x01" * 64
P2WPKH_PREVOUT = b"\x00\x14" + b"\x11" * 20
NON_NUMS_CONTROL = b"\xc0" + b"\x07" * 32


def euler(x: int) -> bool:
    """The specification: x is a field element and x³+7 a non-zero square mod p."""
    return x < P and pow(x**3 + 7, (P - 1) // 2, P) == 1


def libsecp(x: int) -> bool:
    try:
        PublicKey(b"\x02" + x.to_bytes(32, "big"))
    except ValueError:
        return False
    return True


def p2wpkh(key33: bytes) -> TxInput:
    return TxInput(OUTPOINT, b"", (SIG71, key33), P2WPKH_PREVOUT)


def p2tr_key_path(x32: bytes) -> TxInput:
    return TxInput(OUTPOINT, b"", (SIG64,), b"\x51\x20" + x32)


def assert_native_validity(xs: list[int], expected: list[bool]) -> None:
    """One tx_pubkeys call over P2WPKH inputs with key 02‖x; on a mismatch, name the first x."""
    keys = [b"\x02" + x.to_bytes(32, "big") for x in xs]
    got = native.tx_pubkeys([p2wpkh(k) for k in keys])
    if got != [k for k, ok in zip(keys, expected) if ok]:
        for x, k, ok in zip(xs, keys, expected):
            assert (native.input_pubkey(P2WPKH_PREVOUT, b"", (SIG71, k)) == k) == ok, f"x = {x:#066x}"
        pytest.fail("tx_pubkeys disagrees with input_pubkey")


def test_random_x_agree_with_eulers_criterion():
    rng = random.Random(0x352)
    xs = [rng.getrandbits(256) for _ in range(POW_EXAMPLES)]
    expected = [euler(x) for x in xs]
    assert 0.45 < sum(expected) / len(xs) < 0.55
    assert_native_validity(xs, expected)


def test_random_x_agree_with_libsecp256k1s_parse():
    rng = random.Random(0xB1352)
    xs = [rng.getrandbits(256) for _ in range(LIBSECP_EXAMPLES)]
    assert_native_validity(xs, [libsecp(x) for x in xs])


EDGES = {
    "near 0": range(0, 2048),
    "near p": range(P - 2048, P + 2048),
    "near 2^256": range(2**256 - 2048, 2**256),
    "near 2^64, 2^128, 2^192": [b + d for b in (2**64, 2**128, 2**192) for d in range(-256, 256)],
}


@pytest.mark.parametrize("name", EDGES)
def test_x_in_small_ranges_agree_with_eulers_criterion(name):
    xs = list(EDGES[name])
    assert_native_validity(xs, [euler(x) for x in xs])


def test_p_and_its_neighbours():
    assert_native_validity([P - 2, P - 1, P, P + 1, 2**256 - 1], [euler(P - 2), euler(P - 1), False, False, False])


def test_x_of_real_points_are_valid_and_their_neighbours_follow_euler():
    xs = [int.from_bytes(PrivateKey.from_int(k).public_key.format()[1:], "big") for k in range(1, 513)]
    assert_native_validity(xs, [True] * len(xs))
    near = [x + d for x in xs[:64] for d in (-2, -1, 1, 2)]
    assert_native_validity(near, [euler(x) for x in near])


def test_squares_and_non_squares_by_construction():
    # Sorted by Euler's criterion first, so each kind is checked on its own.
    rng = random.Random(7)
    squares, non_squares = [], []
    while len(squares) < 500 or len(non_squares) < 500:
        x = rng.randrange(P)
        (squares if euler(x) else non_squares).append(x)
    assert_native_validity(squares, [True] * len(squares))
    assert_native_validity(non_squares, [False] * len(non_squares))


def _every_input_type(x32: bytes) -> list[tuple[str, TxInput]]:
    out = []
    for prefix in (b"\x02", b"\x03", b"\x00", b"\x04", b"\x05"):
        key = prefix + x32
        out.append((f"p2wpkh {prefix.hex()}", p2wpkh(key)))
        out.append((f"p2sh {prefix.hex()}", TxInput(OUTPOINT, b"\x16\x00\x14" + bytes(20), (SIG71, key), b"\xa9\x14" + bytes(20) + b"\x87")))
        p2pkh_prevout = b"\x76\xa9\x14" + hash160(key) + b"\x88\xac"
        out.append((f"p2pkh {prefix.hex()}", TxInput(OUTPOINT, bytes([71]) + SIG71 + b"\x21" + key, (), p2pkh_prevout)))
    out.append(("p2tr key path", p2tr_key_path(x32)))
    out.append(("p2tr script path", TxInput(OUTPOINT, b"", (b"\x51", NON_NUMS_CONTROL), b"\x51\x20" + x32)))
    return out


def test_every_input_type_and_prefix_equals_the_reference():
    rng = random.Random(11)
    xs = [rng.getrandbits(256) for _ in range(300)] + [P - 1, P, 2**256 - 1, 0]
    for x in xs:
        x32 = x.to_bytes(32, "big")
        for kind, t in _every_input_type(x32):
            args = (t.prevout_script, t.script_sig, t.witness)
            want = reference.extract.input_pubkey(*args)
            assert native.input_pubkey(*args) == want, (kind, x32.hex())
            if kind.endswith((" 02", " 03")) or kind.startswith("p2tr"):
                assert (want is not None) == euler(x), (kind, x32.hex())


def test_summaries_of_mixed_valid_and_invalid_keys_equal_the_reference():
    rng = random.Random(13)
    for _ in range(300):
        inputs = []
        for i in range(rng.randrange(1, 5)):
            x32 = rng.getrandbits(256).to_bytes(32, "big")
            t = p2tr_key_path(x32) if rng.random() < 0.5 else p2wpkh(bytes([2 + rng.randrange(2)]) + x32)
            inputs.append(TxInput(OutPoint(bytes([i]) * 32, i), t.script_sig, t.witness, t.prevout_script))
        assert native.summarize(inputs) == reference.summary.summarize(inputs)
        assert native.tx_pubkeys(inputs) == reference.extract.tx_pubkeys(inputs)


def test_every_key_in_the_official_vectors_follows_euler():
    xs = set()
    for case in CASES:
        for obj in [*case["sending"], *case["receiving"]]:
            xs.update(bytes.fromhex(o) for o in obj["given"].get("outputs", []))
            for t in tx_inputs(obj["given"]["vin"]):
                if t.prevout_script[:2] == b"\x51\x20" and len(t.prevout_script) == 34:
                    xs.add(t.prevout_script[2:])
                for item in [*t.witness, *(pushes(t.script_sig) or [])]:
                    if len(item) == 33 and item[0] in (2, 3):
                        xs.add(item[1:])
    xs_int = sorted(int.from_bytes(x, "big") for x in xs)
    assert len(xs_int) > 50
    assert_native_validity(xs_int, [euler(x) for x in xs_int])
