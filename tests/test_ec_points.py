"""Every EC core's point operations agree with libsecp256k1 (through coincurve), bit for bit: the cores
this CPU runs and the emulated IFMA core (sp_scan.native._testing).

Parsing (33- and 64-byte points, every way a point can be invalid), b·T with the scan key's GLV
recoding and with per-lane scalars, B + t·G, and P + L, on random inputs and on the corners: keys
and tweaks near n and at the GLV split's boundaries, sums at infinity, identical lanes, and counts
that are not multiples of the lanes or of a batch. The point additions alone, on their exceptional
cases, against the group law in Python integers.
"""

from __future__ import annotations

import os
import random

import pytest
from coincurve import PrivateKey, PublicKey

from sp_scan.native import _testing

pytestmark = pytest.mark.skipif(os.environ.get("SP_SCAN_BACKEND") == "reference", reason="SP_SCAN_BACKEND=reference")

P = 2**256 - 2**32 - 977
N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
LAMBDA = 0x5363AD4CC05C30E0A5261C028812645A122E22EA20816678DF02967C1B23BD72
# Scalars at the edges of the range and of the GLV split (halves near 0 and near 2^128).
EDGE_SCALARS = [1, 2, 3, N - 1, N - 2, N // 2, N // 2 + 1, LAMBDA, N - LAMBDA, LAMBDA + 1, 2**128 - 1, 2**128,
                2**128 + 1, (2**128 * LAMBDA) % N, (2**127 + 2**128 * LAMBDA) % N, 2**255, N - 2**128]
COUNTS = [1, 7, 8, 9, 63, 64, 65, 130]


def b32(k: int) -> bytes:
    return k.to_bytes(32, "big")


def xy_le(pub: PublicKey) -> bytes:
    """The engine's point layout: x then y, 32 bytes little-endian each."""
    u = pub.format(compressed=False)
    return u[1:33][::-1] + u[33:][::-1]


def rand_pub(rng: random.Random) -> PublicKey:
    return PrivateKey(b32(rng.randrange(1, N))).public_key


def negate(pub: PublicKey) -> PublicKey:
    ser = pub.format()
    return PublicKey(bytes([ser[0] ^ 1]) + ser[1:])


def is_x(x: int) -> bool:
    return x < P and pow(x**3 + 7, (P - 1) // 2, P) == 1


def libsecp_parse(data: bytes) -> PublicKey | None:
    try:
        return PublicKey(data if len(data) == 33 else b"\x04" + data)
    except ValueError:
        return None


def expected_sum(a: PublicKey, b: PublicKey) -> bytes | None:
    try:
        return PublicKey.combine_keys([a, b]).format()
    except ValueError:  # infinity
        return None


def point_or_none(ser33: bytes) -> bytes | None:
    """The engine's answer: a leading 0 byte means no point."""
    return None if ser33[0] == 0 else ser33


@pytest.fixture(params=_testing.CORES)
def core(request) -> str:
    return request.param


def assert_parse_agrees(core: str, points: list[bytes], width: int) -> None:
    pts, valid = _testing.parse(core, b"".join(points), width)
    for data, pt, ok in zip(points, pts, valid):
        want = libsecp_parse(data)
        assert ok == (want is not None), data.hex()
        if ok:
            assert pt == xy_le(want), data.hex()


def test_parse_agrees_with_libsecp_on_valid_invalid_and_edge_points(core):
    rng = random.Random("parse")
    near_p = [x for x in range(P - 200, P) if is_x(x)][:4]
    xs = [x for x in (0, 1, 2, 3, 4, 5, 6, 7) + tuple(near_p) + (P, P + 1, 2**256 - 1)]
    xs += [rng.getrandbits(256) for _ in range(200)]
    cases33 = [bytes([prefix]) + b32(x) for x in xs for prefix in (2, 3)]
    cases33 += [bytes([prefix]) + rand_pub(rng).format()[1:] for prefix in (0, 1, 4, 5, 6, 7, 0xFF)]
    cases33 += [rand_pub(rng).format() for _ in range(300)]
    assert_parse_agrees(core, cases33, 33)

    cases64 = []
    for _ in range(100):
        u = rand_pub(rng).format(compressed=False)[1:]
        x, y = int.from_bytes(u[:32], "big"), int.from_bytes(u[32:], "big")
        cases64 += [u, b32(x) + b32(P - y), b32(x) + b32((y + 1) % P), b32(x) + b32(y + P if y + P < 2**256 else y)]
    cases64 += [b32(x) + b32(0) for x in near_p] + [b32(P) + b32(1), b32(2**256 - 1) * 2]
    assert_parse_agrees(core, cases64, 64)


@pytest.mark.parametrize("count", COUNTS)
def test_shared_secrets_match_libsecp_for_edge_and_random_scan_keys(core, count):
    rng = random.Random(f"ecdh-{count}")
    pubs = [rand_pub(rng) for _ in range(count)]
    pubs[count // 2] = pubs[0]  # identical lanes
    for key in [rng.randrange(1, N), EDGE_SCALARS[count % len(EDGE_SCALARS)], N - 1]:
        got = _testing.shared_secrets(core, b32(key), [xy_le(p) for p in pubs], None)
        assert got == [p.multiply(b32(key)).format() for p in pubs], f"key {key:#x}"


def test_shared_secrets_for_every_edge_scan_key(core):
    rng = random.Random("edge-keys")
    pubs = [rand_pub(rng) for _ in range(8)] + [PrivateKey(b32(1)).public_key]
    for key in EDGE_SCALARS:
        got = _testing.shared_secrets(core, b32(key), [xy_le(p) for p in pubs], None)
        assert got == [p.multiply(b32(key)).format() for p in pubs], f"key {key:#x}"


def test_shared_secrets_for_scalars_c1_plus_c2_lambda_with_small_c1_c2(core):
    """k = c1 + c2·λ, |c1|, |c2| ≤ 16: the last additions of the ladder meet a point and the negative
    of its λ-image (y1 = −y2, x1 ≠ x2), the exceptional case of a Jacobian engine's unified addition."""
    rng = random.Random("lattice")
    ks = [(c1 + c2 * LAMBDA) % N for c1 in range(-16, 17) for c2 in range(-16, 17)]
    ks = [k for k in ks if k]
    pubs = [rand_pub(rng) for _ in range(8)]
    got = _testing.shared_secrets(core, b32(1), [xy_le(pubs[i % 8]) for i in range(len(ks))], [b32(k) for k in ks])
    assert got == [pubs[i % 8].multiply(b32(k)).format() for i, k in enumerate(ks)]


def test_per_lane_scalars_give_b_times_s_and_mark_invalid_ones(core):
    rng = random.Random("lanes")
    key = rng.randrange(1, N)
    scalars = EDGE_SCALARS + [0, N, N + 1, 2**256 - 1] + [rng.randrange(1, N) for _ in range(60)]
    pubs = [rand_pub(rng) for _ in scalars]
    got = _testing.shared_secrets(core, b32(key), [xy_le(p) for p in pubs], [b32(s) for s in scalars])
    for p, s, g in zip(pubs, scalars, got):
        if s == 0 or s >= N:
            assert g[0] == 0
        else:
            assert g == p.multiply(b32(key * s % N)).format(), f"s {s:#x}"


@pytest.mark.parametrize("count", COUNTS)
def test_spend_points_match_libsecp(core, count):
    rng = random.Random(f"spend-{count}")
    spend = rand_pub(rng)
    ts = [rng.randrange(1, N) for _ in range(count)]
    for i, edge in zip(range(0, count, 5), EDGE_SCALARS):
        ts[i] = edge
    p33, pk = _testing.spend_points(core, xy_le(spend), [b32(t) for t in ts])
    for t, ser, xy in zip(ts, p33, pk):
        want = expected_sum(spend, PrivateKey(b32(t)).public_key)
        assert point_or_none(ser) == want, f"t {t:#x}"
        if want is not None:
            assert xy == xy_le(PublicKey(want))


def test_spend_points_refuse_t_outside_1_to_n_and_report_infinity(core):
    rng = random.Random("spend-edges")
    t0 = rng.randrange(1, N)
    minus = PrivateKey(b32(N - t0)).public_key  # B = −t0·G: B + t0·G is infinity
    ts = [0, N, N + 1, 2**256 - 1, t0, N - t0, 1]
    p33, _ = _testing.spend_points(core, xy_le(minus), [b32(t) for t in ts])
    assert [s[0] for s in p33[:5]] == [0, 0, 0, 0, 0]
    assert p33[5] == PrivateKey(b32(2 * (N - t0) % N)).public_key.format()  # doubling
    assert point_or_none(p33[6]) == expected_sum(minus, PrivateKey(b32(1)).public_key)


def test_label_sums_match_libsecp_including_doubling_and_infinity(core):
    rng = random.Random("labels")
    points = [rand_pub(rng) for _ in range(11)]
    labels = [rand_pub(rng) for _ in range(3)] + [points[0], negate(points[1])]
    got = _testing.label_sums(core, [xy_le(p) for p in points], [xy_le(lab) for lab in labels])
    for p, row in zip(points, got):
        assert [point_or_none(s) for s in row] == [expected_sum(p, lab) for lab in labels]
    assert got[1][4][0] == 0  # P + (−P)


BETA = 0x7AE96A2B657C07106E64479EAC3434E99CF0497512F58995C1396C28719501EE  # λ·(x, y) = (β·x, y)


def affine(pub: PublicKey) -> tuple[int, int]:
    u = pub.format(compressed=False)
    return int.from_bytes(u[1:33], "big"), int.from_bytes(u[33:], "big")


def add_affine(p: tuple[int, int] | None, q: tuple[int, int] | None) -> tuple[int, int] | None:
    """The group law on affine points with Python integers (None: infinity)."""
    if p is None or q is None:
        return q if p is None else p
    (x1, y1), (x2, y2) = p, q
    if x1 == x2 and (y1 + y2) % P == 0:
        return None
    slope = 3 * x1 * x1 * pow(2 * y1, -1, P) if x1 == x2 else (y2 - y1) * pow(x2 - x1, -1, P)
    x3 = (slope * slope - x1 - x2) % P
    return x3, (slope * (x1 - x3) - y1) % P


@pytest.mark.parametrize("op", sorted(_testing.POINT_OPS))
def test_the_additions_exceptional_cases_against_the_group_law(core, op):
    """p + q for q = ±p, ±λp, ±λ²p (the same x, or y1 = ±y2 with x1 ≠ x2), p at infinity and random pairs,
    p in the formula's own coordinates with Z = 1, p − 1 and random: what whole operations reach rarely
    (the unified addition's masked cases) or never (its p = −q, which a nonzero scalar cannot reach)."""
    rng = random.Random(f"ge-{op}")
    ps = [affine(rand_pub(rng)) for _ in range(4)]
    gx, gy = affine(PrivateKey(b32(1)).public_key)
    assert affine(PrivateKey(b32(LAMBDA)).public_key) == (BETA * gx % P, gy)  # BETA is λ's
    pairs = []
    for x, y in ps:
        partners = [(BETA**e * x % P, s * y % P) for e in range(3) for s in (1, -1)] + [affine(rand_pub(rng))]
        pairs += [((x, y), q) for q in partners]
    cases = [(p, q, z) for p, q in pairs for z in (1, P - 1, rng.randrange(2, P))]
    jac = op == "madd_ct"
    coords = [(x * z ** (2 if jac else 1) % P, y * z ** (3 if jac else 1) % P, z) for (x, y), _, z in cases]
    infinity = (1, 1, 0) if jac else (0, 1, 0)
    got = _testing.point_add(core, op, coords + [infinity] * 4, [q for _, q, _ in cases] + ps)
    assert got == [add_affine(p, q) for p, q, _ in cases] + ps
    assert got.count(None) == 3 * len(ps)  # p + (−p), for each z


def test_many_random_shared_secrets_and_spend_points(core):
    rng = random.Random("bulk")
    key = rng.randrange(1, N)
    pubs = [rand_pub(rng) for _ in range(1000)]
    got = _testing.shared_secrets(core, b32(key), [xy_le(p) for p in pubs], None)
    assert got == [p.multiply(b32(key)).format() for p in pubs]
    spend = rand_pub(rng)
    ts = [rng.randrange(1, N) for _ in range(1000)]
    p33, _ = _testing.spend_points(core, xy_le(spend), [b32(t) for t in ts])
    assert [point_or_none(s) for s in p33] == [expected_sum(spend, PrivateKey(b32(t)).public_key) for t in ts]
