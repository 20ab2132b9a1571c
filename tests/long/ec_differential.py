"""The long engine-vs-libsecp differential: `python -m tests.long.ec_differential [N] [--engine E] [--seed S] [--public]`.

N random tweaks (default 1,000,000) per engine (default: every engine this CPU runs, not the
emulated test builds; --engine, repeatable, picks any of them, "ifma-emu" included), in chunks of
20,000, each chunk with a new receiver (every fifth with a scan key from the edge list: near n, at
the GLV split's edges), alternating 33- and 64-byte tweaks and 1 or 2 threads, every tenth chunk with
the BIP label strategy. Every chunk is scanned by the engine and by the libsecp256k1 engine; their
results must be equal and find exactly the outputs built in with coincurve (tests/ec_cases.py). Per
million: about 4 minutes (ifma), 6 (scalar) on one core, most of it building the cases.

--public checks the block tweaks' variable-time s·A instead (the engine's `tweaks` entry): N random
points and scalars (2% from an edge list, some pairs of neighbours identical), each result equal to
coincurve's multiplication (or "no point" for s = 0 or ≥ n). About 4 minutes per million.
"""

from __future__ import annotations

import argparse
import random
import sys
import time

from coincurve import PrivateKey

from sp_scan import scan
from sp_scan.native import _testing
from tests import ec_cases as cases

CHUNK = 20_000
LAMBDA = 0x5363AD4CC05C30E0A5261C028812645A122E22EA20816678DF02967C1B23BD72
EDGE_KEYS = [1, 2, cases.N - 1, cases.N - 2, LAMBDA, cases.N - LAMBDA, 2**128 - 1, 2**128, (2**128 * LAMBDA) % cases.N]
EDGE_SCALARS = EDGE_KEYS + [3, 15, 16, 17, 31, 32, 33, 2**129, 2**255, 0, cases.N, cases.N + 1, 2**256 - 1]


def run(engine: str, n: int, seed: int) -> int:
    """Scan n random tweaks on `engine` and on libsecp256k1 in chunks; returns the outputs found."""
    rng = random.Random(seed)
    done = found = 0
    start = time.perf_counter()
    for chunk in range(0, (n + CHUNK - 1) // CHUNK):
        count = min(CHUNK, n - done)
        key = EDGE_KEYS[chunk // 5 % len(EDGE_KEYS)] if chunk % 5 == 4 else rng.randrange(1, cases.N)
        spend = PrivateKey(cases.b32(rng.randrange(1, cases.N))).public_key.format()
        receiver = scan.Receiver(cases.b32(key), spend, tuple(rng.sample(range(1, 100), rng.randrange(0, 4))))
        width, threads = (33, 64)[chunk % 2], 1 + chunk % 3 % 2
        _testing.set_label_strategy("bip" if chunk % 10 == 9 else "auto")
        batch = list(cases.random_cases(rng, receiver, count))
        found += cases.check(engine, batch, receiver, width, threads)
        done += count
        print(f"{engine}: {done:>10,} tweaks, {found:,} outputs found by both engines alike "
              f"({time.perf_counter() - start:.0f} s)", flush=True)
    _testing.set_label_strategy("auto")
    return found


def run_public(engine: str, n: int, seed: int) -> int:
    """s·A on `engine` against coincurve for n random (A, s) in chunks; raises AssertionError on a difference."""
    rng = random.Random(seed)
    done = 0
    start = time.perf_counter()
    while done < n:
        count = min(CHUNK, n - done)
        points = [PrivateKey(cases.b32(rng.randrange(1, cases.N))).public_key for _ in range(count)]
        scalars = [rng.choice(EDGE_SCALARS) if rng.random() < 0.02 else rng.randrange(1, cases.N) for _ in range(count)]
        for i in range(0, count - 1, 97):  # identical neighbours: the same lookups on two lanes
            points[i + 1], scalars[i + 1] = points[i], scalars[i]
        pt64 = [(lambda u: u[1:33][::-1] + u[33:][::-1])(p.format(compressed=False)) for p in points]
        got = _testing.tweaks(engine, pt64, [s.to_bytes(32, "big") for s in scalars])
        for i, (p, s, g) in enumerate(zip(points, scalars, got)):
            want = p.multiply(cases.b32(s)).format() if 0 < s < cases.N else b"\x00"
            if (g if g[0] else b"\x00") != want:
                raise AssertionError(f"{engine}: s·A differs at case {done + i}: s={s:#x} A={p.format().hex()}")
        done += count
        print(f"{engine}: {done:>10,} public s·A alike ({time.perf_counter() - start:.0f} s)", flush=True)
    return done


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", nargs="?", type=int, default=1_000_000)
    ap.add_argument("--engine", action="append", choices=_testing.CORES, help="default: every non-emulated core here")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--public", action="store_true", help="the block tweaks' s·A instead of the scan")
    args = ap.parse_args(argv)
    seed = args.seed if args.seed is not None else int(time.time())
    engines = args.engine or [c for c in _testing.CORES if not c.endswith("-emu")]
    what = "public s·A" if args.public else "tweaks"
    print(f"seed {seed}; engines {', '.join(engines)}; {args.n:,} {what} each in chunks of {CHUNK:,}", flush=True)
    for engine in engines:
        (run_public if args.public else run)(engine, args.n, seed)
        print(f"OK: {engine}: {args.n:,} {what}, 0 differences (seed {seed})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
