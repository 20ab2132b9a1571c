"""The AVX2 core's radix-2^26 field at the edges of its magnitude rules, natively and emulated.

core_fe26.h adds without carrying, so a multiplication's inputs are not carried limbs below 2^26
but any limbs within magnitude m ≤ 15 (limbs 0..8 up to m·(2^26 + 2^14), limb 9 up to
m·(2^22 + 2^10)). These cases put every limb at or near that bound (the columns of a product reach
2^63.3), and the subtrahends of sub/neg at the m = 1 bound a multiplication can return; results are
checked against Python integers. The field tests every core shares feed only limbs below 2^26.
"""

from __future__ import annotations

import random

import pytest

from sp_scan import native

P = 2**256 - 2**32 - 977
L, L9 = 2**26 + 2**14, 2**22 + 2**10  # the per-limb bounds of magnitude 1
ROUNDS = 150

if native.ENABLED:
    from sp_scan.native import _testing

    AVX2_CORES = [c for c in ("avx2", "avx2-emu") if c in _testing.CORES]
else:
    AVX2_CORES = []

pytestmark = pytest.mark.skipif(not AVX2_CORES, reason="native backend not enabled")


def value(limbs: list[int]) -> int:
    return sum(limb << (26 * i) for i, limb in enumerate(limbs))


def at_magnitude(rng: random.Random, m: int) -> list[int]:
    """Ten limbs within magnitude m: all at the bound, some at it, or anywhere below it."""
    top, top9 = m * L, m * L9
    r = rng.random()
    if r < 0.25:
        return [top] * 9 + [top9]
    if r < 0.6:
        return [rng.choice([0, top, top - 1, rng.randrange(top)]) for _ in range(9)] + [rng.choice([0, top9, rng.randrange(top9)])]
    return [rng.randrange(top + 1) for _ in range(9)] + [rng.randrange(top9 + 1)]


# op -> (m of a, m of b, expected); sub and neg run with c = 2, so their subtrahend has m = 1.
CASES = {
    "mul": (15, 15, lambda a, b: a * b % P),
    "sqr": (15, 1, lambda a, b: a * a % P),
    "add": (7, 8, lambda a, b: (a + b) % P),
    "sub": (13, 1, lambda a, b: (a - b) % P),
    "neg": (1, 1, lambda a, b: -a % P),
    "mul21": (15, 1, lambda a, b: 21 * a % P),
    "inv": (15, 1, lambda a, b: pow(a, P - 2, P)),
}


@pytest.mark.parametrize("core", AVX2_CORES)
@pytest.mark.parametrize("op", sorted(CASES))
def test_field_op_is_exact_on_limbs_at_the_magnitude_bounds(core, op):
    ma, mb, expect = CASES[op]
    rng = random.Random(f"{core} {op}")
    rounds = ROUNDS if op != "inv" else 4
    for _ in range(rounds):
        a = [at_magnitude(rng, ma) for _ in range(8)]
        b = [at_magnitude(rng, mb) for _ in range(8)]
        got = _testing.field(core, op, a, b)
        for x, y, g in zip(a, b, got):
            assert g == expect(value(x), value(y)), f"{op} a={x} b={y}"


@pytest.mark.parametrize("core", AVX2_CORES)
def test_the_largest_product_wraps_through_every_reduction_step(core):
    """All limbs at m = 15: the top column's carry t[19] and limb 9's fold are at their largest."""
    big = [15 * L] * 9 + [15 * L9]
    cases = [(big, big), (big, [L] * 9 + [L9]), ([L - 1] * 9 + [L9 - 1], big), (big, [0] * 10)]
    got = _testing.field(core, "mul", [a for a, _ in cases], [b for _, b in cases])
    assert got == [value(a) * value(b) % P for a, b in cases]
