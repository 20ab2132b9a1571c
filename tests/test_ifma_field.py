"""The IFMA engine's 8-lane field arithmetic mod p agrees with Python integers.

Inputs are raw radix-2^52 limbs, so values at and above p (up to 2^260, the largest a carried
element can hold) are tested, not only reduced ones: 0, 1, p−1, p, p+1, 2^256−1, 2^256+2^208−1
(the largest output of a multiplication), limbs all 0 or all 2^52−1, and random values.
"""

from __future__ import annotations

import os
import random

import pytest

from sp_scan import native

pytestmark = [
    pytest.mark.skipif(os.environ.get("SP_SCAN_BACKEND") == "reference", reason="SP_SCAN_BACKEND=reference"),
    pytest.mark.skipif(native.ENABLED and not native._ifma_cpu(), reason="CPU without AVX-512 IFMA"),
]

P = 2**256 - 2**32 - 977
M52 = 2**52 - 1
EDGE = [0, 1, 2, 7, P - 7, P - 1, P, P + 1, 2**256 - 1, 2**256, 2 * P - 1, 2**256 + 2**208 - 1, 2**259, 2**260 - 1]
# Values with limb 4 ≤ 2^48 (what a multiplication returns): the subtrahend of `sub` and input of `neg`.
EDGE_WEAK = [0, 1, P - 1, P, P + 1, 2**256 - 1, 2**256, 2**256 + 2**208 - 1]
ROUNDS = 300


def limbs(v: int) -> list[int]:
    return [(v >> (52 * i)) & M52 for i in range(5)]


def value(lane: list[int]) -> int:
    return sum(limb << (52 * i) for i, limb in enumerate(lane))


def any_lane(rng: random.Random) -> list[int]:
    r = rng.random()
    if r < 0.3:
        return limbs(rng.choice(EDGE))
    if r < 0.5:
        return [rng.choice([0, 1, M52, M52 - 1, rng.getrandbits(52)]) for _ in range(5)]
    return limbs(rng.getrandbits(260))


def weak_lane(rng: random.Random) -> list[int]:
    return limbs(rng.choice(EDGE_WEAK) if rng.random() < 0.3 else rng.getrandbits(256))


OPS = {
    "mul": (any_lane, any_lane, lambda a, b: a * b % P),
    "sqr": (any_lane, any_lane, lambda a, b: a * a % P),
    "add": (any_lane, any_lane, lambda a, b: (a + b) % P),
    "sub": (any_lane, weak_lane, lambda a, b: (a - b) % P),
    "neg": (weak_lane, any_lane, lambda a, b: -a % P),
    "mul21": (any_lane, any_lane, lambda a, b: 21 * a % P),
}


def check(op: str, a: list[list[int]], b: list[list[int]], expect) -> None:
    got = native._ifma_field(op, a, b)
    want = [expect(value(x), value(y)) for x, y in zip(a, b)]
    for lane, (g, w) in enumerate(zip(got, want)):
        assert g == w, f"{op} lane {lane}: a={value(a[lane]):#x} b={value(b[lane]):#x}"


@pytest.mark.parametrize("op", sorted(OPS))
def test_field_op_matches_python_integers_on_edge_and_random_values(op):
    gen_a, gen_b, expect = OPS[op]
    rng = random.Random(op)
    for _ in range(ROUNDS):
        check(op, [gen_a(rng) for _ in range(8)], [gen_b(rng) for _ in range(8)], expect)


def test_every_pair_of_edge_values_multiplies_exactly():
    pairs = [(x, y) for x in EDGE for y in EDGE]
    pairs += [pairs[0]] * (-len(pairs) % 8)
    for i in range(0, len(pairs), 8):
        chunk = pairs[i : i + 8]
        check("mul", [limbs(x) for x, _ in chunk], [limbs(y) for _, y in chunk], lambda a, b: a * b % P)


def test_inverse_is_the_fermat_power_and_zero_maps_to_zero():
    rng = random.Random("inv")
    for _ in range(8):
        a = [any_lane(rng) for _ in range(8)]
        a[0], a[1] = limbs(0), limbs(P)
        check("inv", a, a, lambda x, _: pow(x, P - 2, P))


def test_square_root_is_the_exponent_p_plus_1_over_4_and_squares_back():
    rng = random.Random("sqrt")
    for _ in range(8):
        a = [any_lane(rng) for _ in range(8)]
        a[0] = limbs(4)
        check("sqrt", a, a, lambda x, _: pow(x, (P + 1) // 4, P))
        roots = native._ifma_field("sqrt", a, a)
        for lane, r in zip(a, roots):
            x = value(lane) % P
            assert (r * r % P == x) == (pow(x, (P - 1) // 2, P) in (0, 1))
