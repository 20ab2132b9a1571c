"""Which EC engine scans: the best this CPU runs (ifma > avx2 > scalar), or the one SP_SCAN_ECC names;
an unknown setting, or an engine this CPU or build cannot run, is refused (ConfigError in the library,
one line and exit 2 in the CLI), as are unknown SP_SCAN_BACKEND and SP_SCAN_SHA256 values and a
coincurve other than the one the C core binds libsecp256k1 out of. Each is read once, when
sp_scan.native is imported, so every case runs in a new process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sp_scan import native
from sp_scan.native import _testing

pytestmark = pytest.mark.skipif(os.environ.get("SP_SCAN_BACKEND") == "reference", reason="SP_SCAN_BACKEND=reference")

REPORT = "import sp_scan.native as n; print(n.ec_engine())"
SETTINGS = ("SP_SCAN_ECC", "SP_SCAN_BACKEND", "SP_SCAN_SHA256")
CLI = [sys.executable, "-m", "sp_scan.cli"]


def run(argv: list[str], **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in SETTINGS} | env
    return subprocess.run(argv, env=environ, capture_output=True, text=True, cwd=Path(__file__).parent.parent)


def engine_in_a_new_process(**env: str) -> str:
    result = run([sys.executable, "-c", REPORT], **env)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def best_here() -> str:
    return "ifma" if "ifma" in _testing.CORES else "avx2" if "avx2" in _testing.CORES else "scalar"


def test_the_best_engine_of_this_cpu_runs_by_default():
    assert engine_in_a_new_process() == best_here()


@pytest.mark.parametrize(
    ("setting", "engine"),
    [("scalar", "scalar"), ("libsecp", "libsecp256k1"), ("libsecp256k1", "libsecp256k1"), ("portable", "libsecp256k1")],
)
def test_sp_scan_ecc_forces_an_engine_every_cpu_runs(setting, engine):
    assert engine_in_a_new_process(SP_SCAN_ECC=setting) == engine


@pytest.mark.parametrize("engine", ["ifma", "avx2"])
def test_sp_scan_ecc_forces_a_vector_engine_only_where_the_cpu_runs_it(engine):
    result = run([sys.executable, "-c", REPORT], SP_SCAN_ECC=engine)
    cli = run([*CLI, "--version"], SP_SCAN_ECC=engine)
    if engine in _testing.CORES:
        assert (result.returncode, result.stdout.strip()) == (0, engine)
        assert cli.returncode == 0 and f"(EC engine: {engine};" in cli.stdout
    else:
        assert result.returncode != 0
        assert "ConfigError" in result.stderr and engine in result.stderr
        assert cli.returncode == 2 and cli.stderr.count("\n") == 1 and engine in cli.stderr


@pytest.mark.parametrize(
    ("name", "value"),
    [("SP_SCAN_ECC", "bogus"), ("SP_SCAN_ECC", "IFMA"), ("SP_SCAN_ECC", "ifma-emu"), ("SP_SCAN_BACKEND", "fast"),
     ("SP_SCAN_BACKEND", "Reference"), ("SP_SCAN_SHA256", "shani"), ("SP_SCAN_SHA256", "none")],
)  # fmt: skip
def test_an_unknown_setting_is_refused_by_the_library_and_by_the_cli_with_one_line(name, value):
    library = run([sys.executable, "-c", "import sp_scan.native"], **{name: value})
    assert library.returncode != 0 and "sp_scan.errors.ConfigError" in library.stderr and name in library.stderr
    cli = run([*CLI, "--version"], **{name: value})
    assert cli.returncode == 2 and cli.stdout == ""
    assert cli.stderr.count("\n") == 1 and cli.stderr.startswith(f"sp-scan: error: {name}=")


def test_the_accepted_settings_run_and_the_cli_names_the_engine():
    for env, shown in [({"SP_SCAN_BACKEND": "native"}, best_here()), ({"SP_SCAN_BACKEND": "reference"}, "reference"),
                       ({"SP_SCAN_SHA256": "portable"}, best_here()), ({"SP_SCAN_ECC": "scalar"}, "scalar")]:
        cli = run([*CLI, "--version"], **env)
        assert cli.returncode == 0, cli.stderr
        assert f"(EC engine: {shown};" in cli.stdout


def test_the_engine_in_use_is_named_in_this_process():
    expected = os.environ.get("SP_SCAN_ECC") or best_here()
    assert native.ec_engine() == native.EC_ENGINES.get(expected, expected)


def as_if_coincurve_were(version: str, code: str) -> list[str]:
    """A new Python that runs `code` with coincurve's stated version replaced by `version`."""
    return [sys.executable, "-c", f"import coincurve; coincurve.__version__ = {version!r}\n{code}"]


CLI_VERSION = "import sys; sys.argv = ['sp-scan', '--version']; from sp_scan.cli import main; main()"


@pytest.mark.parametrize("version", ["20.0.0", "21.0.1", "22.0.0"])
def test_a_coincurve_other_than_the_one_the_core_binds_is_refused_by_the_library_and_by_the_cli_in_one_line(version):
    library = run(as_if_coincurve_were(version, "import sp_scan.native"))
    assert library.returncode != 0 and "sp_scan.errors.ConfigError" in library.stderr and f"coincurve {version}" in library.stderr
    cli = run(as_if_coincurve_were(version, CLI_VERSION))
    assert cli.returncode == 2 and cli.stdout == ""
    assert cli.stderr.count("\n") == 1 and cli.stderr.startswith(f"sp-scan: error: coincurve {version} is installed")
    assert f"pip install 'coincurve=={native.COINCURVE_VERSIONS[-1]}'" in cli.stderr


def test_the_coincurve_the_core_binds_loads_and_the_reference_backend_takes_any():
    assert run(as_if_coincurve_were(native.COINCURVE_VERSIONS[-1], CLI_VERSION)).returncode == 0
    reference = run(as_if_coincurve_were("20.0.0", CLI_VERSION), SP_SCAN_BACKEND="reference")
    assert reference.returncode == 0 and "(EC engine: reference;" in reference.stdout


def test_pyproject_pins_the_coincurve_releases_the_door_accepts():
    import tomllib

    dependencies = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())["project"]["dependencies"]
    assert [d for d in dependencies if d.startswith("coincurve")] == [f"coincurve=={v}" for v in native.COINCURVE_VERSIONS]
