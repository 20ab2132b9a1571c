"""Run every saved input of the fuzz corpora once through its target (no libFuzzer), e.g. under ASan.

    python fuzz/replay.py                 # all targets with a corpus in fuzz/corpus/
    python fuzz/replay.py block spent     # some of them

Exits 1 on the first input a target fails on, naming the file.
"""

import importlib
import sys
import time

from _harness import CORPUS

TARGETS = ["address", "block", "spent", "extract", "cli"]


def main(names: list[str]) -> int:
    for name in names or [t for t in TARGETS if (CORPUS / t).is_dir()]:
        test_one = importlib.import_module(f"fuzz_{name}").test_one
        files = sorted(p for p in (CORPUS / name).iterdir() if p.is_file())
        start = time.perf_counter()
        for path in files:
            try:
                test_one(path.read_bytes())
            except Exception:
                print(f"replay: {name}: {path} fails", file=sys.stderr)
                raise
        print(f"replay: {name}: {len(files)} inputs in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
