"""Batched HASH160 of 33-byte keys (AVX2 lanes and the portable path) and the P2PKH walk built on it."""

import hashlib
import os
import platform
import random
import subprocess
import sys
from pathlib import Path

import pytest
from coincurve import PrivateKey

from sp_scan import crypto, extract, native, reference
from sp_scan.types import OutPoint, TxInput

pytestmark = pytest.mark.skipif(not native.ENABLED, reason="native backend not enabled")

if native.ENABLED:
    from sp_scan.native import _hash

BATCH_SIZES = [*range(41), 63, 64, 65, *range(1000, 1009)]


def cpu_has_avx2() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            words = set(f.read().split())
    except OSError:
        return False
    return platform.machine() in ("x86_64", "AMD64") and "avx2" in words


def ref_hash160(data: bytes) -> bytes:
    return hashlib.new("ripemd160", hashlib.sha256(data).digest()).digest()


@pytest.fixture(params=["fast", "portable"])
def lanes(request):
    """Select AVX2 lanes (when the CPU has them) or the forced portable path in-process; restore afterwards."""
    portable = request.param == "portable" or os.environ.get("SP_SCAN_SHA256") == "portable"
    _hash.select(request.param == "portable")
    expected = "avx2" if cpu_has_avx2() and not portable else "portable"
    assert _hash.hash160_impl() == expected
    yield expected
    _hash.select(False)


def test_batched_hash160_equals_hashlib_for_every_batch_size(lanes):
    rng = random.Random(160)
    for n in BATCH_SIZES:
        for _ in range(3):
            keys = [rng.randbytes(33) for _ in range(n)]
            assert _hash.hash160_33_many(b"".join(keys)) == b"".join(map(ref_hash160, keys)), (lanes, n)


def test_batched_hash160_of_extreme_bytes_and_repeated_keys(lanes):
    keys = [b"\x00" * 33, b"\xff" * 33, b"\x80" * 33, b"\x02" + b"\xff" * 32] * 5
    assert _hash.hash160_33_many(b"".join(keys)) == b"".join(map(ref_hash160, keys))


def test_single_hash160_agrees_with_the_batched_one(lanes):
    rng = random.Random(33)
    keys = [rng.randbytes(33) for _ in range(17)]
    assert b"".join(native.hash160(k) for k in keys) == _hash.hash160_33_many(b"".join(keys))


def test_batched_hash160_refuses_a_length_that_is_not_a_multiple_of_33():
    with pytest.raises(ValueError):
        _hash.hash160_33_many(b"\x02" * 34)
    with pytest.raises(TypeError):
        _hash.hash160_33_many("text")


# ---- the P2PKH walk: native == reference ----

KEY33 = PrivateKey(hashlib.sha256(b"sp-scan batch key").digest()).public_key.format()
SIG = b"\x47" + b"\x30" * 71
BAD33 = b"\x02" + b"\x00" * 31 + b"\x05"  # x = 5: x^3 + 7 = 132 is not a square mod p, so not a point


def p2pkh_spk(key33: bytes) -> bytes:
    return b"\x76\xa9\x14" + crypto.hash160(key33) + b"\x88\xac"


def push33(data33: bytes, rng: random.Random) -> bytes:
    """A 33-byte push, mostly direct, sometimes through OP_PUSHDATA1/2/4."""
    return rng.choice([b"\x21"] * 5 + [b"\x4c\x21", b"\x4d\x21\x00", b"\x4e\x21\x00\x00\x00"]) + data33


def filler(rng: random.Random) -> bytes:
    """Something that is not a 33-byte push: a signature, OP_DROP, or a short push."""
    return rng.choice([SIG, b"\x75", b"\x01\x21", b"\x20" + b"\x02" * 32, b"\x22" + b"\x03" * 34])


def script_sig(items: list[bytes], rng: random.Random) -> bytes:
    """items: 33-byte payloads pushed in order, with random non-33-byte fillers between them."""
    out = []
    for item in items:
        if rng.random() < 0.2:
            out.append(filler(rng))
        out.append(push33(item, rng))
    return b"".join(out) + (SIG if rng.random() < 0.5 else b"")


TRUNCATED_TAILS = [b"\x21" + b"\x02" * 10, b"\x4c", b"\x4d\x21", b"\x4e\x21\x00\x00", b"\x4c\xff" + b"\x00" * 5]


def p2pkh_cases():
    """(name, prevout_script, script_sig) for keys at every position, truncated tails and invalid-point matches."""
    rng = random.Random(352)
    spk = p2pkh_spk(KEY33)
    for total in range(41):
        for pos in range(total + 1):
            dummies = [b"\x02" + rng.randbytes(32) for _ in range(total)]
            yield f"{total} pushes, key at {pos}", spk, script_sig([*dummies[:pos], KEY33, *dummies[pos:]], rng)
        yield f"{total} pushes, no key", spk, script_sig([rng.randbytes(33) for _ in range(total)], rng)
    dummies = [b"\x02" + rng.randbytes(32) for _ in range(300)]
    for pos in range(301):
        sig = script_sig([*dummies[:pos], KEY33, *dummies[pos:]], rng)
        yield f"300 dummies, key at {pos}", spk, sig
        yield f"300 dummies, key at {pos}, truncated tail", spk, sig + TRUNCATED_TAILS[pos % len(TRUNCATED_TAILS)]
    for pos in (0, 7, 8, 9, 100):
        sig = script_sig([*dummies[:pos], KEY33, KEY33, *dummies[pos:]], rng)
        yield f"key twice at {pos}", spk, sig
    # Only BAD33 itself hashes to HASH160(BAD33): every match is an invalid point, wherever it sits.
    bad_spk = p2pkh_spk(BAD33)
    for positions in ([0], [7], [8], [0, 1, 2, 3, 4, 5, 6, 7, 8], list(range(0, 300, 13)), [299]):
        items = [BAD33 if i in positions else d for i, d in enumerate(dummies)]
        yield f"invalid-point matches at {positions[:3]}..., then the real key", bad_spk, script_sig([*items, KEY33], rng)


def mismatches() -> list[str]:
    """Names of the cases where the native and the reference extraction disagree (also run in subprocesses)."""
    bad = []
    for name, spk, sig in p2pkh_cases():
        if extract.input_pubkey(spk, sig, ()) != reference.extract.input_pubkey(spk, sig, ()):
            bad.append(name)
    return bad


def test_the_cases_cover_keys_found_none_and_truncation():
    results = [reference.extract.input_pubkey(spk, sig, ()) for _, spk, sig in p2pkh_cases()]
    found = sum(total + 1 for total in range(41)) + 301 + 5  # key at each position; 300 dummies; key twice
    none = 41 + 301 + 6  # no key; truncated tails; invalid-point matches
    assert (results.count(KEY33), results.count(None), len(results)) == (found, none, found + none)


def test_native_p2pkh_extraction_equals_the_reference_with_avx2_lanes():
    assert mismatches() == []


def test_native_p2pkh_extraction_equals_the_reference_on_the_portable_path():
    code = (
        f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import test_native_hash160_batch as t; "
        "from sp_scan.native import _hash; print(_hash.hash160_impl(), _hash.impl(), len(t.mismatches()))"
    )
    env = {**os.environ, "SP_SCAN_SHA256": "portable"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["portable", "portable", "0"], out.stdout


def test_tx_pubkeys_over_batched_p2pkh_inputs_equals_the_reference():
    rng = random.Random(7)
    inputs = []
    for i, (_, spk, sig) in enumerate(p2pkh_cases()):
        if i % 17 == 0:
            inputs.append(TxInput(OutPoint(rng.randbytes(32), i), sig, (), spk))
    assert extract.tx_pubkeys(inputs) == reference.extract.tx_pubkeys(inputs)
