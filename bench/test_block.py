"""Whole block: `tweaks` and `scan` over the mainnet-sized sample block, eligible tx/s, 1 and 2 jobs."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from sp_scan import block

from . import cases

ROOT = Path(__file__).resolve().parent.parent
BLOCK = ROOT / "vectors" / "blocks" / "mainnet.bin"
SPENT = ROOT / "vectors" / "blocks" / "mainnet.spent.bin"
BLOCK_ROWS = ["tweaks", "scan"]


def _call(command: str, jobs: int):
    fn = getattr(block, command)
    if "jobs" not in inspect.signature(fn).parameters:
        pytest.skip(f"sp_scan.block.{command} takes no jobs argument yet")
    block_bytes, spent_bytes = BLOCK.read_bytes(), SPENT.read_bytes()
    if command == "tweaks":
        return fn, (block_bytes, spent_bytes), {"jobs": jobs}
    return fn, (block_bytes, spent_bytes, cases.receiver()), {"jobs": jobs}


@pytest.mark.skipif(not BLOCK.exists(), reason="vectors/blocks/mainnet.bin not generated yet")
@pytest.mark.parametrize("jobs", [1, 2])
@pytest.mark.parametrize("command", BLOCK_ROWS)
def test_block(benchmark, command, jobs):
    fn, args, kwargs = _call(command, jobs)
    eligible = len(block.tweaks(*args[:2]))
    assert eligible > 0
    benchmark.extra_info.update(row=f"block {command}", impl=f"jobs={jobs}", per=eligible, unit="s/tx")
    benchmark.pedantic(fn, args, kwargs, rounds=3, iterations=1, warmup_rounds=1)
