"""Each EC core's public-data paths agree with libsecp256k1 through coincurve.

Key sums (a block's A per tx: parse the input keys, add those that are points): keys off the curve
or with a bad prefix are skipped, a set with no point or summing to infinity has no sum, a running
sum may pass through infinity, and sets of 0 to 40 keys share a batch (more sets than one batch of
vectors holds). Tweaks (s·A, variable time): edge scalars that keep the ladder at infinity for many
windows or zero a GLV half, and out-of-range ones.
"""

from __future__ import annotations

import random

import pytest
from coincurve import PrivateKey, PublicKey

from sp_scan import native

N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
P = 2**256 - 2**32 - 977

if native.ENABLED:
    from sp_scan.native import _testing

    CORES = _testing.CORES
else:
    CORES = []

pytestmark = pytest.mark.skipif(not CORES, reason="native backend not enabled")


def point(k: int) -> bytes:
    return PrivateKey(k.to_bytes(32, "big")).public_key.format()


def negate(key33: bytes) -> bytes:
    return bytes([key33[0] ^ 1]) + key33[1:]


def off_curve(rng: random.Random) -> bytes:
    """A 33-byte key whose x is below p but not on the curve."""
    while True:
        x = rng.randrange(P)
        if pow((x**3 + 7) % P, (P - 1) // 2, P) == P - 1:
            return bytes([rng.choice([2, 3])]) + x.to_bytes(32, "big")


def bad_key(rng: random.Random) -> bytes:
    good = point(rng.randrange(1, N))
    return rng.choice([off_curve(rng), b"\x04" + good[1:], b"\x02" + b"\xff" * 32, bytes([2]) + P.to_bytes(32, "big")])


def expected(keys: list[bytes]) -> bytes | None:
    points = []
    for k in keys:
        try:
            points.append(PublicKey(k))
        except ValueError:
            continue
    if not points:
        return None
    try:
        u = PublicKey.combine_keys(points).format(compressed=False)
    except ValueError:  # the sum is infinity
        return None
    return u[1:33][::-1] + u[33:][::-1]


def random_sets(rng: random.Random, count: int) -> list[list[bytes]]:
    sets = []
    for _ in range(count):
        size = rng.choice([0, 1, 1, 1, 2, 2, 3, 5, 8, 17, 40])
        keys = [point(rng.randrange(1, N)) if rng.random() < 0.85 else bad_key(rng) for _ in range(size)]
        sets.append(keys)
    return sets


def corner_sets() -> list[list[bytes]]:
    a, b = point(7), point(8)
    return [
        [a, negate(a)],  # infinity
        [a, negate(a), b],  # through infinity, then b
        [a, a],  # a doubling
        [a, a, negate(a)],  # 2a − a
        [off_curve(random.Random(1))],  # no point
        [],  # no key
        [a] * 20 + [negate(a)] * 20,  # long, back to infinity
        [b"\x02" + (P - 1).to_bytes(32, "big"), b],  # x = p − 1 is not on the curve... or is: either way as libsecp
    ]


@pytest.mark.parametrize("core", CORES)
def test_key_sums_match_libsecp_on_random_and_corner_sets(core):
    rng = random.Random(core)
    sets = corner_sets() + random_sets(rng, 150)
    rng.shuffle(sets)
    got = _testing.key_sums(core, sets)
    assert got == [expected(s) for s in sets]


@pytest.mark.parametrize("core", CORES)
def test_a_single_set_and_no_set(core):
    assert _testing.key_sums(core, []) == []
    a = point(5)
    assert _testing.key_sums(core, [[a, point(6)]]) == [expected([a, point(6)])]


# ---- the variable-time tweaks: s·A on public data ----

LAMBDA = 0x5363AD4CC05C30E0A5261C028812645A122E22EA20816678DF02967C1B23BD72
EDGE_SCALARS = [1, 2, 3, 16, 17, 31, 32, 33, N - 1, N - 2, LAMBDA, N - LAMBDA, 2**128 - 1, 2**128, 2**255,
                (2**128 * LAMBDA) % N, (5 * LAMBDA) % N, 2**5, 2**130, 0, N, N + 1, 2**256 - 1]


def pt64(key33: bytes) -> bytes:
    u = PublicKey(key33).format(compressed=False)
    return u[1:33][::-1] + u[33:][::-1]


def expected_tweak(point33: bytes, s: int) -> bytes:
    if not 0 < s < N:
        return b"\x00"
    return PublicKey(point33).multiply(s.to_bytes(32, "big")).format()


@pytest.mark.parametrize("core", CORES)
def test_tweaks_match_libsecp_on_edge_and_random_scalars(core):
    """Edge scalars leave the ladder at infinity for many windows (small s) or put a GLV half at 0."""
    rng = random.Random(f"tweaks {core}")
    scalars = EDGE_SCALARS + [rng.randrange(1, N) for _ in range(150)]
    points = [point(rng.randrange(1, N)) for _ in scalars]
    got = _testing.tweaks(core, [pt64(p) for p in points], [s.to_bytes(32, "big") for s in scalars])
    want = [expected_tweak(p, s) for p, s in zip(points, scalars)]
    assert [g if g[0] else b"\x00" for g in got] == want
