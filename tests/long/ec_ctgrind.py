"""Constant-time check of the scalar EC core under Valgrind memcheck: `python -m tests.long.ec_ctgrind`.

Builds tests/long/ctgrind.c with the scalar core's C (core_ec_scalar.c, core_scalar.c, core_cpu.c:
no Python, no libsecp256k1) at the extension's optimisation level, then runs it under memcheck with the
secrets marked undefined (libsecp256k1's ctime_tests method): the scan key through its GLV recoding and
b·T, b·s_i·T_i, t_i through B + t_i·G, and every field operation. Any branch or memory address that
depends on a secret is a memcheck error, and the run fails; a control (a branch and a table index on a
secret byte) must be flagged, or the check proves nothing and fails too. Needs gcc, Valgrind and its
headers (Debian: valgrind); the AVX-512 engine cannot run under Valgrind, which does not implement it.
About a minute.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NATIVE = ROOT / "sp_scan" / "native"
SOURCES = [Path(__file__).with_name("ctgrind.c"), NATIVE / "core_ec_scalar.c", NATIVE / "core_scalar.c", NATIVE / "core_cpu.c"]


def main() -> int:
    for tool in ("gcc", "valgrind"):
        if shutil.which(tool) is None:
            print(f"ec_ctgrind: {tool} is not installed", file=sys.stderr)
            return 2
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "ctgrind"
        subprocess.run(["gcc", "-O2", "-std=c11", "-g", f"-I{NATIVE}", *map(str, SOURCES), "-o", str(exe)], check=True)
        control, engine = (memcheck(exe, *args) for args in (["control"], []))
    if control.returncode == 0:
        print("ec_ctgrind: the control was not flagged: memcheck does not see secrets here", file=sys.stderr)
        return 1
    print(engine.stdout, end="")
    if engine.returncode != 0:
        print(engine.stderr, file=sys.stderr)
        print("ec_ctgrind: memcheck found secret-dependent branches or addresses (above)", file=sys.stderr)
        return 1
    summary = [line.split("== ")[-1] for line in engine.stderr.splitlines() if "ERROR SUMMARY" in line]
    flagged = [line.split("== ")[-1] for line in control.stderr.splitlines() if "ERROR SUMMARY" in line]
    print(f"OK: scalar core: {summary[-1]}; control: {flagged[-1]}")
    return 0


def memcheck(exe: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["valgrind", "--error-exitcode=1", "--track-origins=yes", str(exe), *args],
                          capture_output=True, text=True)


if __name__ == "__main__":
    sys.exit(main())
