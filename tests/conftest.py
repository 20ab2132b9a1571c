"""Shared fixtures: the official BIP352 vectors parsed into library types, and Core-validated regtest chains."""

from __future__ import annotations

import json
import signal
import sys
import tempfile
from pathlib import Path

import pytest

from sp_scan.types import OutPoint, TxInput
from sp_scan.wire import parse_witness

ROOT = Path(__file__).resolve().parent.parent
VECTORS = ROOT / "vectors" / "bip352" / "send_and_receive_test_vectors.json"
CASES = json.loads(VECTORS.read_text())

# A run started in the background of a shell without job control (`pytest &` in a script) inherits
# SIGINT ignored, and so would every command the tests start; the Ctrl-C tests need it delivered.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_addoption(parser):
    parser.addoption("--examples-python", default=sys.executable, help="the interpreter tests/test_examples.py runs examples/ with")


def pytest_report_header(config):
    import sp_scan

    return f"sp_scan: {Path(sp_scan.__file__).parent}"


def tx_inputs(vin: list[dict]) -> list[TxInput]:
    """Turn a vector's `vin` list into TxInputs."""
    return [
        TxInput(
            OutPoint.from_display(v["txid"], v["vout"]),
            bytes.fromhex(v["scriptSig"]),
            parse_witness(bytes.fromhex(v["txinwitness"])),
            bytes.fromhex(v["prevout"]["scriptPubKey"]["hex"]),
        )
        for v in vin
    ]


def _ids(kind: str) -> tuple[list[tuple[int, dict]], list[str]]:
    params, ids = [], []
    for n, case in enumerate(CASES):
        objs = case[kind]
        for j, obj in enumerate(objs):
            params.append((n, obj))
            suffix = f"-{j}" if len(objs) > 1 else ""
            ids.append(f"{n:02d}-{case['comment']}{suffix}")
    return params, ids


SENDING, SENDING_IDS = _ids("sending")
RECEIVING, RECEIVING_IDS = _ids("receiving")


# --- chains validated by Bitcoin Core's libbitcoinkernel (tests/kernelchain.py) ---


@pytest.fixture(scope="session")
def kernel_chain():
    """The sample chain of vectors/chain (genesis to height 110), built once per session; read-only."""
    import kernelchain

    with tempfile.TemporaryDirectory(prefix="sp-scan-kernel-") as datadir:  # 18 MB of preallocated block files
        chain = kernelchain.build_sample_chain(Path(datadir))
        chain.read_only = True
        yield chain
        chain.close()


@pytest.fixture(scope="session")
def kernel_rest(kernel_chain):
    """A Core REST stand-in serving the session's sample chain (`.url`); do not stop it or count its requests."""
    import kernelchain

    with kernelchain.rest_server(kernel_chain) as server:
        yield server


@pytest.fixture(scope="session")
def kernel_index(kernel_rest, tmp_path_factory) -> Path:
    """The path of an index of the whole sample chain, synced once by the library from `kernel_rest`; read it only."""
    from serving import synced_index

    return synced_index(tmp_path_factory.mktemp("kernel-index") / "sample.db", kernel_rest.url)


@pytest.fixture
def kernel_copy(kernel_chain):
    """A private kernel holding the sample chain, for a test that mines, reorganises or serves it."""
    import kernelchain

    with tempfile.TemporaryDirectory(prefix="sp-scan-kernel-") as datadir:
        chain = kernelchain.replay(kernel_chain, Path(datadir))
        yield chain
        chain.close()
