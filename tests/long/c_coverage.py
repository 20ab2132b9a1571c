"""CI's shortened test lists against the whole suite, C line by C line: `python -m tests.long.c_coverage [--engine E]... [--keep DIR]`.

`.ci/run` runs the whole suite once, then only `.ci/engine-tests` on every other EC engine and only
`.ci/asan-tests` against the sanitized build. This checks that nothing is lost by that. It builds the C
extensions with gcov counters in a scratch copy of the tree, each extension in its own build directory
(`_core` and `_testcore` are built from the same sources and must keep their own counts), then:

- runs the whole suite and the tests in `.ci/asan-tests`: every C line that the suite runs, in any
  extension, must be run by the list;
- for each engine (default: every engine this CPU runs but the dispatch's, as `.ci/run`), runs the whole
  suite and `.ci/engine-tests` with SP_SCAN_ECC set to it: every line of the library's extension (`_core`,
  the one SP_SCAN_ECC steers) that the suite runs there must be run by the list, but for the files of
  ENGINE_FREE: they make no EC call, so they run alike on every engine, and the whole suite's run covers
  them (their misses are printed, not counted).

Prints each list's misses as file:line and exits 1 if there is any. Needs gcc's gcov. The whole suite runs
once per engine plus once: about 10 minutes each on 2 cores.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXTENSIONS = ("_hash", "_core", "_testcore")
BUILD = """
import sys
from distutils.core import run_setup
name, temp = sys.argv[1:]
dist = run_setup("setup.py", ["-q", "build_ext", "--inplace", "--force", "--build-temp", temp], stop_after="commandline")
dist.ext_modules = [e for e in dist.ext_modules if e.name == "sp_scan.native." + name]
dist.run_commands()
"""

ENGINE_FREE = ("core_bind.c", "core_corefiles.c", "core_corefiles_bind.c", "sha256.c", "ripemd160.c")
"""`_core`'s sources that no EC engine steers: argument and error bindings, block files, hashing."""

Lines = set[tuple[str, int]]


def listed(name: str) -> list[str]:
    """The test files of .ci/<name>, comment lines dropped."""
    text = (ROOT / ".ci" / name).read_text()
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def build(work: Path) -> dict[str, Path]:
    """Copy the tree to `work` and build each extension there with gcov counters; their build directories."""
    with tempfile.TemporaryFile() as tar:
        skip = {".git", ".venv", "build", "__pycache__", ".hypothesis", ".pytest_cache"}
        with tarfile.open(fileobj=tar, mode="w") as out:
            for path in ROOT.iterdir():
                if path.name not in skip:
                    out.add(path, path.name, filter=lambda t: None if Path(t.name).name in skip or t.name.endswith(".so") else t)
        tar.seek(0)
        with tarfile.open(fileobj=tar) as src:
            src.extractall(work, filter="data")
    env = {**os.environ, "CFLAGS": "--coverage -O1", "LDFLAGS": "--coverage"}
    temps = {}
    for name in EXTENSIONS:
        temps[name] = work / "build" / name
        subprocess.run([sys.executable, "-c", BUILD, name, str(temps[name])], cwd=work, env=env, check=True)
    return temps


def run(work: Path, temps: dict[str, Path], tests: list[str], engine: str | None) -> dict[str, Lines]:
    """Run pytest on `tests` in the scratch tree; the C lines each extension ran (counters reset first)."""
    for temp in temps.values():
        for counts in temp.rglob("*.gcda"):
            counts.unlink()
    env = {**os.environ, "PYTHONPATH": str(work)}
    env.pop("SP_SCAN_BACKEND", None)
    env.pop("SP_SCAN_ECC", None)
    if engine:
        env["SP_SCAN_ECC"] = engine
    check = "import sp_scan.native as n, sys; assert n.ENABLED and n.__file__.startswith(sys.argv[1]), n.__file__"
    subprocess.run([sys.executable, "-c", check, str(work)], cwd=work, env=env, check=True)
    print(f"c_coverage: pytest {len(tests) or 'all'} files{f' on {engine}' if engine else ''}", flush=True)
    status = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests], cwd=work, env=env).returncode
    if status:
        raise SystemExit(f"c_coverage: pytest exited {status}")
    return {name: ran(temp, work) for name, temp in temps.items()}


def ran(temp: Path, work: Path) -> Lines:
    """The (source, line) pairs with a count above zero in one build directory's counters."""
    lines: Lines = set()
    for counts in sorted(temp.rglob("*.gcda")):
        out = subprocess.run(["gcov", "--json-format", "--stdout", str(counts)], cwd=work, capture_output=True, check=True)
        for chunk in out.stdout.splitlines():
            report = json.loads(gzip.decompress(chunk) if chunk[:2] == b"\x1f\x8b" else chunk)
            for source in report["files"]:
                name = os.path.relpath(os.path.join(work, source["file"]), work)
                if name.startswith("sp_scan/"):  # not Python's own headers
                    lines.update((name, line["line_number"]) for line in source["lines"] if line["count"])
    return lines


def report(label: str, suite: Lines, subset: Lines, free: tuple[str, ...] = ()) -> int:
    """Print the lines the suite ran and the list did not; their count, but for those in the files `free`."""
    missed = sorted(suite - subset)
    counted = [(name, line) for name, line in missed if Path(name).name not in free]
    print(
        f"c_coverage: {label}: the suite ran {len(suite)} C lines, the list {len(subset & suite)}, missed {len(counted)}"
        + (f" (and {len(missed) - len(counted)} in {', '.join(free)}, not counted)" if len(missed) > len(counted) else "")
    )
    for name, line in missed:
        print(f"  {name}:{line}{'' if (name, line) in counted else ' (not counted)'}")
    return len(counted)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", action="append", help="an engine to check .ci/engine-tests on (repeatable)")
    parser.add_argument("--keep", type=Path, help="build here and keep it (default: a temporary directory)")
    args = parser.parse_args()
    if shutil.which("gcov") is None:
        print("c_coverage: gcov is not installed", file=sys.stderr)
        return 2
    if args.engine is None:
        from sp_scan import native
        from sp_scan.native import _testing

        args.engine = [e for e in _testing.ENGINES if not e.endswith("-emu") and e != native.ec_engine()]
    work = args.keep or Path(tempfile.mkdtemp(prefix="sp-scan-coverage."))
    try:
        temps = build(work)
        whole = run(work, temps, [], None)
        asan = run(work, temps, listed("asan-tests"), None)
        misses = report(".ci/asan-tests", set().union(*whole.values()), set().union(*asan.values()))
        for engine in args.engine:
            whole = run(work, temps, [], engine)["_core"]
            subset = run(work, temps, listed("engine-tests"), engine)["_core"]
            misses += report(f".ci/engine-tests on {engine} (_core)", whole, subset, ENGINE_FREE)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
