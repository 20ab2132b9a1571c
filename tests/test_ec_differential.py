"""Every EC engine scans exactly like the libsecp256k1 engine (the engines this CPU runs and the
emulated IFMA one, in the test-only extension): 24,000 random tweaks (20,000 of 33 bytes, 4,000 of
64; a quarter of that on the emulated engine, a test build several times slower), and the corners — scan keys near n and at the GLV split's edges, tweaks with x
near p, P_0 at infinity, P_0 + L_m at infinity or a doubling, identical lanes, batch sizes that are
not multiples of the lanes, the BIP label strategy on the engine's P_k. The outputs are built with
coincurve, so a scan only finds them when every point is bit-exact (see tests/ec_cases.py).

The BIP352 receiving vectors run on the engine in use in test_batch_scan.py (batches of three), so
on every engine across the CI runs. The million-tweak run is `python -m tests.long.ec_differential`.
"""

from __future__ import annotations

import os
import random

import pytest
from coincurve import PrivateKey, PublicKey

import ec_cases as cases
from sp_scan import scan
from sp_scan.native import _testing

pytestmark = pytest.mark.skipif(os.environ.get("SP_SCAN_BACKEND") == "reference", reason="SP_SCAN_BACKEND=reference")

N = cases.N
LAMBDA = 0x5363AD4CC05C30E0A5261C028812645A122E22EA20816678DF02967C1B23BD72
EDGE_KEYS = [1, 2, 3, N - 1, N - 2, N // 2, N // 2 + 1, LAMBDA, N - LAMBDA, 2**128 - 1, 2**128, 2**128 + 1,
             (2**128 * LAMBDA) % N, 2**255]


def receiver(rng: random.Random, scan_key: int | None = None, labels: tuple[int, ...] = (1, 7)) -> scan.Receiver:
    key = scan_key if scan_key is not None else rng.randrange(1, N)
    return scan.Receiver(cases.b32(key), PrivateKey(cases.b32(rng.randrange(1, N))).public_key.format(), labels)


@pytest.fixture(params=_testing.CORES)
def engine(request) -> str:
    return request.param


def share(engine: str) -> int:
    """The part of a random batch an engine scans: a quarter on the emulated (test build) ones."""
    return 4 if engine.endswith("-emu") else 1


@pytest.fixture(scope="module")
def batch33():
    rng = random.Random("differential-33")
    r = receiver(rng)
    return r, list(cases.random_cases(rng, r, 20_000))


@pytest.fixture
def strategy():
    yield _testing.set_label_strategy
    _testing.set_label_strategy("auto")


def test_20000_random_33_byte_tweaks_scan_alike(engine, batch33):
    r, batch = batch33
    batch = batch[: len(batch) // share(engine)]
    assert cases.check(engine, batch, r, 33) > len(batch) // 2


def test_4000_random_64_byte_tweaks_scan_alike_on_two_threads(engine):
    rng = random.Random("differential-64")
    r = receiver(rng, labels=(3,))
    batch = list(cases.random_cases(rng, r, 4_000 // share(engine)))
    assert cases.check(engine, batch, r, 64, threads=2) > len(batch) // 2


def test_the_bip_label_strategy_adds_the_engines_p_k_with_libsecp(engine, strategy):
    rng = random.Random("bip")
    r = receiver(rng, labels=tuple(range(1, 40)))
    strategy("bip")
    assert cases.check(engine, list(cases.random_cases(rng, r, 500)), r, 33) > 200


@pytest.mark.parametrize("key", EDGE_KEYS, ids=lambda k: f"{k:#x}"[:18])
def test_scan_keys_near_n_and_at_the_glv_edges(engine, key):
    rng = random.Random(key)
    r = receiver(rng, scan_key=key)
    assert cases.check(engine, list(cases.random_cases(rng, r, 40)), r, 33) > 10


def test_tweaks_with_x_near_p_in_both_parities(engine):
    rng = random.Random("near-p")
    r = receiver(rng)
    points = []
    for x in range(cases.P - 1, cases.P - 3000, -1):
        if pow(x**3 + 7, (cases.P - 1) // 2, cases.P) == 1:
            points += [PublicKey(bytes([prefix]) + x.to_bytes(32, "big")) for prefix in (2, 3)]
    assert len(points) > 100
    batch = [cases.case(rng, r, p, rng.choice(cases.KINDS)) for p in points]
    for width in (33, 64):
        cases.check(engine, batch, r, width)


def test_p_0_at_infinity_finds_nothing(engine):
    rng = random.Random("infinity")
    key, tweak = rng.randrange(1, N), PrivateKey(cases.b32(rng.randrange(1, N))).public_key
    t0 = int.from_bytes(cases.t_k(tweak.multiply(cases.b32(key)).format(), 0), "big")
    spend = PrivateKey(cases.b32(N - t0)).public_key  # B = −t_0·G
    r = scan.Receiver(cases.b32(key), spend.format(), (1,))
    batch = [cases.Case(tweak, [rng.getrandbits(256).to_bytes(32, "big")], [])] * 9
    assert cases.check(engine, batch, r, 33) == 0


@pytest.mark.parametrize("sign", [-1, 1], ids=["P0=-L", "P0=L"])
def test_p_0_plus_a_label_at_infinity_or_doubling(engine, sign):
    rng = random.Random(f"label-edge-{sign}")
    key, tweak = rng.randrange(1, N), PrivateKey(cases.b32(rng.randrange(1, N))).public_key
    t0 = int.from_bytes(cases.t_k(tweak.multiply(cases.b32(key)).format(), 0), "big")
    ell = int.from_bytes(scan.label_tweak(cases.b32(key), 1), "big")
    spend = PrivateKey(cases.b32((sign * ell - t0) % N)).public_key  # P_0 = ±L_1
    r = scan.Receiver(cases.b32(key), spend.format(), (1,))
    if sign < 0:
        batch = [cases.Case(tweak, [rng.getrandbits(256).to_bytes(32, "big")], [])] * 9
    else:
        doubled = PrivateKey(cases.b32(2 * ell % N)).public_key.format()[1:]
        batch = [cases.Case(tweak, [rng.getrandbits(256).to_bytes(32, "big"), doubled], [(doubled, 1)])] * 9
    cases.check(engine, batch, r, 33)


@pytest.mark.parametrize("size", [1, 7, 9, 63, 65, 129])
@pytest.mark.parametrize("threads", [1, 3])
def test_batches_that_are_not_multiples_of_8_with_identical_lanes(engine, size, threads):
    rng = random.Random(f"sizes-{size}-{threads}")
    r = receiver(rng)
    same = PrivateKey(cases.b32(rng.randrange(1, N))).public_key
    batch = [cases.case(rng, r, same if i % 3 == 0 else PrivateKey(cases.b32(rng.randrange(1, N))).public_key,
                        rng.choice(cases.KINDS)) for i in range(size)]
    cases.check(engine, batch, r, 33, threads)
