"""Whole block: `tweaks` and `scan` over the mainnet-sized sample block, eligible tx/s, 1 and 2 jobs.

"library ..." rows time one call on one block in this process, per backend; "library tweaks" and
"library scan" also on every EC engine this CPU runs, libsecp256k1's included (through the test-only
door `sp_scan.native._testing`), and the scan against libsecp256k1 0.8's silentpayments module on
the same block (per tx with taproot outputs: our
extraction, the module's `prevouts_summary` and `scan_outputs`), all per eligible tx.
`--jobs` runs one block per worker process, so the other rows process BLOCKS copies of
the sample block: "block ..." rows call the CLI's own runner (`sp_scan.cli.run.run`, the
pool and emitter included, output to /dev/null) in this process; "CLI ..." rows time
the `sp-scan` command in a subprocess, interpreter start-up included.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from coincurve import PublicKey

from sp_scan import block, extract, scan, wire
from sp_scan.native import _testing
from sp_scan.scan import Receiver

from . import peers
from .ours import native_attr, reference_of

DIR = Path(__file__).resolve().parent.parent / "vectors" / "blocks"
BLOCK, SPENT = DIR / "mainnet.bin", DIR / "mainnet.spent.bin"
BLOCKS = 32  # a range long enough that the pool's start-up (a fixed ~20 ms) is not what --jobs measures
BLOCK_ROWS = ["library tweaks", "block tweaks", "CLI tweaks", "library scan", "block scan", "CLI scan"]
JOBS = [1, 2]

pytestmark = pytest.mark.skipif(not BLOCK.exists(), reason="vectors/blocks/mainnet.bin not generated yet")


def _expected() -> dict:
    return json.loads((DIR / "mainnet.expected.json").read_text())


def _receiver() -> Receiver:
    wallet = _expected()["wallet"]
    scan_key32 = bytes.fromhex((DIR / wallet["scan_key_file"]).read_text().strip())
    return Receiver(scan_key32, bytes.fromhex(wallet["spend_pubkey"]), tuple(wallet["labels"]))


def _eligible(command: str) -> int:
    """Eligible transactions of one copy, after checking the library finds what the sender paid."""
    raw, spent = BLOCK.read_bytes(), SPENT.read_bytes()
    expected = _expected()
    assert [t.tweak33.hex() for t in block.tweaks(raw, spent)] == [t["tweak"] for t in expected["tweaks"]]
    if command == "scan":
        assert len(block.scan(raw, spent, _receiver())) == len(expected["found"])
    return len(expected["tweaks"])


@pytest.mark.parametrize("impl", ["native", "reference"])
@pytest.mark.parametrize("command", ["tweaks", "scan"])
def test_library(benchmark, command, impl):
    """One block, one process: `native.block_<command>` or the reference `block.<command>`."""
    if impl == "native":
        fn = native_attr(f"block_{command}")
        if fn is None:
            pytest.skip("native backend not enabled")
    else:
        fn = reference_of(block, command)
    args = (BLOCK.read_bytes(), SPENT.read_bytes()) + ((_receiver(),) if command == "scan" else ())
    expected = _expected()["tweaks" if command == "tweaks" else "found"]
    assert len(fn(*args)) == len(expected)
    benchmark.extra_info.update(row=f"library {command}", impl=impl, per=_eligible(command), unit="s/tx")
    benchmark.pedantic(fn, args, rounds=5 if impl == "native" else 2, iterations=1, warmup_rounds=1)


ENGINES = [e for e in _testing.ENGINES if not e.endswith("-emu")]


def engine_row(command: str, engine: str) -> str:
    return f"library {command}, {engine} engine"


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("command", ["tweaks", "scan"])
def test_library_on_each_engine(benchmark, command, engine):
    fn = getattr(_testing, f"block_{command}")
    args = (engine, BLOCK.read_bytes(), SPENT.read_bytes()) + ((_receiver(),) if command == "scan" else ())
    assert len(fn(*args)) == len(_expected()["tweaks" if command == "tweaks" else "found"])
    benchmark.extra_info.update(row=engine_row(command, engine), impl="native", per=_eligible(command), unit="s/tx")
    benchmark.pedantic(fn, args, rounds=5, iterations=1, warmup_rounds=1)


def test_library_scan_libsecp_module(benchmark):
    """libsecp 0.8's module over the block's txs with taproot outputs, fed by our extraction."""
    r = _receiver()
    txs = [
        (tx.inputs, [o.script[2:] for o in tx.outputs if extract.script_type(o.script) is extract.ScriptType.P2TR])
        for tx in wire.transactions(BLOCK.read_bytes(), SPENT.read_bytes())
    ]
    txs = [(inputs, outs) for inputs, outs in txs if outs]
    labels = {}
    for m in r.labels:
        tweak32 = scan.label_tweak(r.scan_key32, m)
        labels[PublicKey.from_secret(tweak32).format()] = tweak32
    tx_pubkeys = native_attr("tx_pubkeys") or extract.tx_pubkeys

    def loop():
        return [out for inputs, outs in txs for out in peers.libsecp_scan_tx(tx_pubkeys, inputs, outs, r.scan_key32, r.spend_pubkey33, labels)]

    assert sorted(loop()) == sorted(bytes.fromhex(f["output"]) for f in _expected()["found"])
    benchmark.extra_info.update(row="library scan", impl="libsecp 0.8", per=_eligible("scan"), unit="s/tx")
    benchmark.pedantic(loop, rounds=3, iterations=1, warmup_rounds=1)


@pytest.mark.parametrize("jobs", JOBS)
@pytest.mark.parametrize("command", ["tweaks", "scan"])
def test_runner(benchmark, command, jobs):
    cli_run = importlib.import_module("sp_scan.cli.run")
    output = importlib.import_module("sp_scan.cli.output")
    sources = [importlib.import_module("sp_scan.cli.sources").FileBlock(str(BLOCK), str(SPENT))] * BLOCKS
    receiver = _receiver() if command == "scan" else None
    per = BLOCKS * _eligible(command)

    def run() -> None:
        with open(os.devnull, "w") as sink:
            cli_run.run(sources, command, receiver, jobs, output.Emitter(command, True, sink))

    benchmark.extra_info.update(row=f"block {command}", impl=f"jobs={jobs}", per=per, unit="s/tx")
    benchmark.pedantic(run, rounds=3, iterations=1, warmup_rounds=1)


@pytest.mark.parametrize("jobs", JOBS)
@pytest.mark.parametrize("command", ["tweaks", "scan"])
def test_cli(benchmark, command, jobs):
    exe = shutil.which("sp-scan", path=str(Path(sys.executable).parent)) or shutil.which("sp-scan")
    if exe is None:
        pytest.skip("the sp-scan command is not installed (pip install -e .)")
    cmd = [exe, command, *[str(BLOCK)] * BLOCKS, "--jobs", str(jobs), "--json"]  # finds mainnet.spent.bin
    if command == "scan":
        wallet = _expected()["wallet"]
        cmd += ["--scan-key-file", str(DIR / wallet["scan_key_file"]), "--spend-pubkey", wallet["spend_pubkey"]]
        cmd += [arg for m in wallet["labels"] for arg in ("--label", str(m))]
    per = BLOCKS * _eligible(command)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    records = len(_expected()["tweaks" if command == "tweaks" else "found"])
    assert len(out.splitlines()) == BLOCKS * records
    benchmark.extra_info.update(row=f"CLI {command}", impl=f"jobs={jobs}", per=per, unit="s/tx")
    benchmark.pedantic(subprocess.run, (cmd,), {"check": True, "capture_output": True}, rounds=3, iterations=1)
