"""Every EC core's field arithmetic mod p agrees with Python integers (the cores this CPU runs and
the emulated IFMA core, so the IFMA schedule is checked on any CPU).

Inputs are raw limbs in the core's layout (radix 2^52 for ifma and ifma-emu, 2^26 for avx2 and
avx2-emu, four 64-bit words for scalar), so values at and above p (up to 2^260, the largest a carried
radix-2^52 element can hold; below 2^256 on scalar) are tested, not only reduced ones: 0, 1, p−1, p,
p+1, 2^256−1, 2^256+2^208−1 and 2^256+2^248−1 (bounds of what IFMA's multiplication may return), a
value whose product with 2^256−1 takes the scalar core's reduction through its rarest carry, limbs all
0 or all ones, and random values; and products of the largest sums the group code forms (magnitude 8).
"""

from __future__ import annotations

import os
import random

import pytest

from sp_scan.native import _testing

pytestmark = pytest.mark.skipif(os.environ.get("SP_SCAN_BACKEND") == "reference", reason="SP_SCAN_BACKEND=reference")

P = 2**256 - 2**32 - 977
C = 2**256 - P


def fold_carry_value() -> int:
    """x such that x·(2^256 − 1) takes the scalar core's reduction (core_fe64.h) through its rarest
    step, which random inputs never reach: folding the product's high half in (2^256 ≡ C) leaves
    2^32 over 2^256; folding that in wraps the sum again, to a value whose word 0 carries when the
    last C is added."""
    over = 2**32
    num = over * 2**256 - over * C + C  # x·(C − 1) = num + w for the wrapped value w
    w = 2**64 - C  # word 0 of w must be at least 2^64 − C
    w += -(num + w) % (C - 1)
    return (num + w) // (C - 1)


EDGE = [0, 1, 2, 7, P - 7, P - 1, P, P + 1, 2**256 - 1, 2**256, 2 * P - 1, 2**256 + 2**208 - 1, 2**256 + 2**248 - 1, 2**259,
        2**260 - 1, fold_carry_value()]
# Values below 2^256 + 2^248 (what a multiplication may return): the subtrahend of `sub` and input of `neg`.
EDGE_WEAK = [0, 1, P - 1, P, P + 1, 2**256 - 1, 2**256, 2**256 + 2**208 - 1, 2**256 + 2**248 - 1]
ROUNDS = 300


class Layout:
    """A core's raw limbs: `count` limbs of `bits` bits, value = Σ limb[i]·2^(bits·i)."""

    def __init__(self, core: str):
        built = _testing.BUILT[core]
        self.core, self.bits, self.count = core, built.raw_bits, built.raw_limbs
        self.mask = (1 << self.bits) - 1

    def limbs(self, v: int) -> list[int]:
        return [(v >> (self.bits * i)) & self.mask for i in range(self.count)]

    def value(self, lane: list[int]) -> int:
        return sum(limb << (self.bits * i) for i, limb in enumerate(lane))

    def any_lane(self, rng: random.Random) -> list[int]:
        r = rng.random()
        if r < 0.3:
            return self.limbs(rng.choice(EDGE))
        if r < 0.5:
            return [rng.choice([0, 1, self.mask, self.mask - 1, rng.getrandbits(self.bits)]) for _ in range(self.count)]
        return self.limbs(rng.getrandbits(260))

    def weak_lane(self, rng: random.Random) -> list[int]:
        return self.limbs(rng.choice(EDGE_WEAK) if rng.random() < 0.3 else rng.getrandbits(256))

    def check(self, op: str, a: list[list[int]], b: list[list[int]], expect) -> None:
        got = _testing.field(self.core, op, a, b)
        want = [expect(self.value(x), self.value(y)) for x, y in zip(a, b)]
        for lane, (g, w) in enumerate(zip(got, want)):
            assert g == w, f"{self.core} {op} value {lane}: a={self.value(a[lane]):#x} b={self.value(b[lane]):#x}"


@pytest.fixture(params=_testing.CORES)
def layout(request) -> Layout:
    return Layout(request.param)


OPS = {
    "mul": ("any_lane", "any_lane", lambda a, b: a * b % P),
    "sqr": ("any_lane", "any_lane", lambda a, b: a * a % P),
    "add": ("any_lane", "any_lane", lambda a, b: (a + b) % P),
    "sub": ("any_lane", "weak_lane", lambda a, b: (a - b) % P),
    "neg": ("weak_lane", "any_lane", lambda a, b: -a % P),
    "mul21": ("any_lane", "any_lane", lambda a, b: 21 * a % P),
    # the largest multiplicands the group code may form (m = 8: three doublings of an m = 1 value)
    "mul8": ("weak_lane", "weak_lane", lambda a, b: 64 * a * b % P),
    "sqr8": ("weak_lane", "weak_lane", lambda a, b: 64 * a * a % P),
}


@pytest.mark.parametrize("op", sorted(OPS))
def test_field_op_matches_python_integers_on_edge_and_random_values(layout, op):
    gen_a, gen_b, expect = OPS[op]
    rng = random.Random(op)
    a = [getattr(layout, gen_a)(rng) for _ in range(8 * ROUNDS)]
    b = [getattr(layout, gen_b)(rng) for _ in range(8 * ROUNDS)]
    layout.check(op, a, b, expect)


def test_every_pair_of_edge_values_multiplies_exactly(layout):
    pairs = [(x, y) for x in EDGE for y in EDGE]
    layout.check("mul", [layout.limbs(x) for x, _ in pairs], [layout.limbs(y) for _, y in pairs], lambda a, b: a * b % P)


def test_inverse_is_the_fermat_power_and_zero_maps_to_zero(layout):
    rng = random.Random("inv")
    a = [layout.any_lane(rng) for _ in range(64)]
    a[0], a[1] = layout.limbs(0), layout.limbs(P)
    layout.check("inv", a, a, lambda x, _: pow(x, P - 2, P))


def test_square_root_is_the_exponent_p_plus_1_over_4_and_squares_back(layout):
    rng = random.Random("sqrt")
    a = [layout.any_lane(rng) for _ in range(64)]
    a[0] = layout.limbs(4)
    layout.check("sqrt", a, a, lambda x, _: pow(x, (P + 1) // 4, P))
    roots = _testing.field(layout.core, "sqrt", a, a)
    for lane, r in zip(a, roots):
        x = layout.value(lane) % P
        assert (r * r % P == x) == (pow(x, (P - 1) // 2, P) in (0, 1))
