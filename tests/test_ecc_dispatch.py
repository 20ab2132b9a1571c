"""Which EC engine scans: IFMA when the CPU and OS can run it, libsecp256k1's otherwise, and
always libsecp256k1's with SP_SCAN_ECC=portable (read at the first native call)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sp_scan import native

pytestmark = pytest.mark.skipif(os.environ.get("SP_SCAN_BACKEND") == "reference", reason="SP_SCAN_BACKEND=reference")

REPORT = "import sp_scan.native as n; print(n.ec_engine())"


def engine_in_a_new_process(**env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if k != "SP_SCAN_ECC"} | env
    return subprocess.run([sys.executable, "-c", REPORT], env=environ, capture_output=True, text=True, check=True).stdout.strip()


def test_the_ifma_engine_runs_exactly_when_the_cpu_and_os_allow_it():
    assert engine_in_a_new_process() == ("ifma" if native._ifma_cpu() else "libsecp256k1")


def test_sp_scan_ecc_portable_forces_the_libsecp_engine():
    assert engine_in_a_new_process(SP_SCAN_ECC="portable") == "libsecp256k1"


def test_engines_can_be_swapped_for_tests_and_unknown_names_are_refused():
    previous = native._set_ec_engine("libsecp256k1")
    try:
        assert native.ec_engine() == "libsecp256k1"
        with pytest.raises(ValueError, match="unknown EC engine"):
            native._set_ec_engine("fast")
    finally:
        native._set_ec_engine(previous)
    assert native.ec_engine() == previous
