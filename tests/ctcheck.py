"""Dudect-style timing checks of the EC engines' cores (Reparaz, Balasch, Verbauwhede, "Dude, is my code
constant time?", 2017): time one operation on inputs of two classes, a fixed secret and fresh random
secrets, interleaved at random, and compare the two timing distributions with Welch's t-test.

A leak shows as |t| growing with the number of measurements; |t| below 4.5 after 10^6 measurements
is the usual "no leak detected" line. Timings are TSC cycles per call (`_testing.timings`). The
test is repeated on the measurements below several percentiles of the pooled distribution (cropping
away interrupts and neighbours' noise, which hit both classes alike), and the largest |t| reported.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass

from coincurve import PrivateKey

from sp_scan.native import _testing

N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
CROPS = (None, 0.5, 0.75, 0.9, 0.95, 0.99)
CHUNK = 20_000


@dataclass(frozen=True, slots=True)
class Result:
    """Welch's t over all measurements and each crop; max_abs_t is the verdict."""

    core: str
    op: str
    measurements: int
    t_by_crop: dict[str, float]
    max_abs_t: float
    mean_cycles: tuple[float, float]


def welch_t(a: list[int], b: list[int]) -> float:
    """Welch's t statistic of two samples (0 when either has fewer than 2 values or no variance)."""
    if len(a) < 2 or len(b) < 2:
        return 0.0
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    va = sum((x - ma) ** 2 for x in a) / (len(a) - 1)
    vb = sum((x - mb) ** 2 for x in b) / (len(b) - 1)
    den = math.sqrt(va / len(a) + vb / len(b))
    return 0.0 if den == 0 else (ma - mb) / den


def _points64(rng: random.Random) -> list[bytes]:
    out = []
    for _ in range(8):
        u = PrivateKey(rng.randrange(1, N).to_bytes(32, "big")).public_key.format(compressed=False)
        out.append(u[1:33][::-1] + u[33:][::-1])
    return out


def _scalar(rng: random.Random) -> bytes:
    return rng.randrange(1, N).to_bytes(32, "big")


# op -> (fixed input, random input); the fixed secrets are the ones a variable-time ladder
# would rush through: scan key 1 (GLV halves 1 and 0: nearly all digits zero), t_k = 1, and
# per-lane scalars 1 (b_scan·input_hash in a block scan).
INPUTS: dict[str, tuple[bytes, Callable[[random.Random], bytes]]] = {
    "ecdh": ((1).to_bytes(32, "big"), _scalar),
    "spend": ((1).to_bytes(32, "big") * 8, lambda rng: b"".join(_scalar(rng) for _ in range(8))),
    "lanes": ((1).to_bytes(32, "big") * 8, lambda rng: b"".join(_scalar(rng) for _ in range(8))),
    "control": ((1).to_bytes(32, "big"), lambda rng: rng.getrandbits(256).to_bytes(32, "big")),
    # the output match (core "scan"): a candidate x(P_k) below every output's x, which a search of the
    # sorted outputs would settle along one path, against random ones
    "match": (bytes(32), lambda rng: rng.getrandbits(256).to_bytes(32, "big")),
}
MATCH_OUTPUTS = 64
"""Outputs of the tx the match is timed on (sorted by x, as a search would want them)."""


def run(core: str, op: str, measurements: int, seed: int = 0) -> Result:
    """Time `op` of `core` on `measurements` inputs, each fixed or random with probability 1/2."""
    rng = random.Random(seed)
    fixed, fresh = INPUTS[op]
    if op == "match":
        outputs = sorted(rng.getrandbits(256).to_bytes(32, "big") for _ in range(MATCH_OUTPUTS))
        timings = lambda inputs: _testing.match_timings(outputs, inputs)  # noqa: E731
    else:
        points = _points64(rng)
        timings = lambda inputs: _testing.timings(core, op, inputs, points)  # noqa: E731
    timings([fixed] * 64)  # warm-up: tables, caches, frequency
    times: list[int] = []
    classes: list[int] = []
    for start in range(0, measurements, CHUNK):
        cls = [rng.getrandbits(1) for _ in range(min(CHUNK, measurements - start))]
        times += timings([fixed if c == 0 else fresh(rng) for c in cls])
        classes += cls
    pooled = sorted(times)
    t_by_crop = {}
    for crop in CROPS:
        limit = pooled[min(len(pooled) - 1, int(crop * len(pooled)))] if crop else pooled[-1]
        a = [t for t, c in zip(times, classes) if c == 0 and t <= limit]
        b = [t for t, c in zip(times, classes) if c == 1 and t <= limit]
        t_by_crop["all" if crop is None else f"<p{round(crop * 100)}"] = welch_t(a, b)
    means = tuple(
        sum(t for t, c in zip(times, classes) if c == k) / max(1, classes.count(k)) for k in (0, 1)
    )
    return Result(core, op, measurements, t_by_crop, max(abs(t) for t in t_by_crop.values()), means)
