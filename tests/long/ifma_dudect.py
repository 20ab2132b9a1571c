"""The long constant-time check of the IFMA engine: `python -m tests.long.ifma_dudect [N]`.

Welch's t between fixed and random secrets over N timed calls each (default 1,000,000) of b·T on
8 lanes (scan key recoded every call), of k_i·T_i with secret per-lane scalars (as in a block
scan), and of B + t·G on 8 lanes, and 100,000 calls of the variable-time control that must stand
out. About 2.5 minutes on one core. See tests/ctcheck.py.
"""

from __future__ import annotations

import sys
import time

from tests import ctcheck


def main(argv: list[str]) -> int:
    n = int(argv[0]) if argv else 1_000_000
    print(f"{'op':8} {'measurements':>12} {'max |t|':>8}  mean cycles fixed / random   t by crop")
    worst = 0.0
    for op, count in (("control", min(n, 100_000)), ("ecdh", n), ("lanes", n), ("spend", n)):
        start = time.perf_counter()
        r = ctcheck.run(op, count, seed=int(time.time()))
        crops = " ".join(f"{k}:{v:+.2f}" for k, v in r.t_by_crop.items())
        print(f"{op:8} {r.measurements:>12,} {r.max_abs_t:8.2f}  {r.mean_cycles[0]:>10,.0f} / {r.mean_cycles[1]:<10,.0f}"
              f"  {crops}  ({time.perf_counter() - start:.0f} s)")
        if op != "control":
            worst = max(worst, r.max_abs_t)
    verdict = "no leak detected" if worst < 4.5 else "LEAK SUSPECTED"
    print(f"engine max |t| = {worst:.2f} ({verdict}; threshold 4.5)")
    return 0 if worst < 4.5 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
