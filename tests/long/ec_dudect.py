"""The long constant-time check of the EC cores: `python -m tests.long.ec_dudect [N] [--core C]`.

Welch's t between fixed and random secrets over N timed calls each (default 1,000,000) of b·T on
8 points (scan key recoded every call), of k_i·T_i with secret per-point scalars (as in a block
scan), and of B + t·G on 8 points, per core (default: every core this CPU runs, not the emulated
test builds), and 100,000 calls of the variable-time control that must stand out. About 2.5 minutes
per million calls on the ifma core, 4 on the scalar one (b·T; Zen 4, idle). See tests/ctcheck.py.
"""

from __future__ import annotations

import argparse
import sys
import time

from sp_scan.native import _testing
from tests import ctcheck


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", nargs="?", type=int, default=1_000_000)
    ap.add_argument("--core", action="append", choices=_testing.CORES, help="default: every non-emulated core here")
    args = ap.parse_args(argv)
    cores = args.core or [c for c in _testing.CORES if not c.endswith("-emu")]
    print(f"{'core':8} {'op':8} {'measurements':>12} {'max |t|':>8}  mean ticks fixed / random   t by crop")
    worst = 0.0
    jobs = [(cores[0], "control", min(args.n, 100_000))] + [(c, op, args.n) for c in cores for op in ("ecdh", "lanes", "spend")]
    for core, op, count in jobs:
        start = time.perf_counter()
        r = ctcheck.run(core, op, count, seed=int(time.time()))
        crops = " ".join(f"{k}:{v:+.2f}" for k, v in r.t_by_crop.items())
        print(f"{core:8} {op:8} {r.measurements:>12,} {r.max_abs_t:8.2f}  {r.mean_cycles[0]:>10,.0f} / {r.mean_cycles[1]:<10,.0f}"
              f"  {crops}  ({time.perf_counter() - start:.0f} s)", flush=True)
        if op != "control":
            worst = max(worst, r.max_abs_t)
    verdict = "no leak detected" if worst < 4.5 else "LEAK SUSPECTED"
    print(f"engine max |t| = {worst:.2f} ({verdict}; threshold 4.5)")
    return 0 if worst < 4.5 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
