"""Constant-time check of the scalar and AVX2 EC cores under Valgrind memcheck: `python -m tests.long.ec_ctgrind`.

Builds tests/long/ctgrind.c with each core's C (core_ec_scalar.c or core_ec_avx2.c, core_scalar.c,
core_cpu.c: no Python, no libsecp256k1) at the extension's optimisation level, then runs it under memcheck with the
secrets marked undefined (libsecp256k1's ctime_tests method): the scan key through its GLV recoding and
b·T, b·s_i·T_i, t_i through B + t_i·G, and every field operation. Any branch or memory address that
depends on a secret is a memcheck error, and the run fails; a control (a branch and a table index on a
secret byte) must be flagged, or the check proves nothing and fails too. Needs gcc, Valgrind and its
headers (Debian: valgrind); the AVX2 core only on a CPU with AVX2 (Valgrind runs it), the AVX-512 engine
not at all: Valgrind does not implement AVX-512. About a minute per core.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NATIVE = ROOT / "sp_scan" / "native"
COMMON = [Path(__file__).with_name("ctgrind.c"), NATIVE / "core_scalar.c", NATIVE / "core_cpu.c"]
CORES = {"scalar": (NATIVE / "core_ec_scalar.c", []), "avx2": (NATIVE / "core_ec_avx2.c", ["-DCTGRIND_AVX2"])}


def main() -> int:
    for tool in ("gcc", "valgrind"):
        if shutil.which(tool) is None:
            print(f"ec_ctgrind: {tool} is not installed", file=sys.stderr)
            return 2
    from sp_scan.native import _testing

    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for core, (source, flags) in CORES.items():
            if core not in _testing.CORES:
                print(f"ec_ctgrind: {core}: this CPU cannot run it, skipped")
                continue
            exe = Path(tmp) / f"ctgrind-{core}"
            subprocess.run(["gcc", "-O2", "-std=c11", "-g", f"-I{NATIVE}", *flags, *map(str, [*COMMON, source]), "-o", str(exe)],
                           check=True)
            control, engine = (memcheck(exe, *args) for args in (["control"], []))
            if control.returncode == 0:
                print("ec_ctgrind: the control was not flagged: memcheck does not see secrets here", file=sys.stderr)
                return 1
            print(engine.stdout, end="")
            if engine.returncode != 0:
                print(engine.stderr, file=sys.stderr)
                print(f"ec_ctgrind: {core}: memcheck found secret-dependent branches or addresses (above)", file=sys.stderr)
                failed = 1
                continue
            summary = [line.split("== ")[-1] for line in engine.stderr.splitlines() if "ERROR SUMMARY" in line]
            flagged = [line.split("== ")[-1] for line in control.stderr.splitlines() if "ERROR SUMMARY" in line]
            print(f"OK: {core} core: {summary[-1]}; control: {flagged[-1]}")
    return failed


def memcheck(exe: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["valgrind", "--error-exitcode=1", "--track-origins=yes", str(exe), *args],
                          capture_output=True, text=True)


if __name__ == "__main__":
    sys.exit(main())
