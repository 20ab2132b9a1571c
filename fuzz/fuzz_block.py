"""Fuzz the block parser: native and reference block loops give the same result or the same typed error.

    python fuzz/fuzz_block.py -max_total_time=300

The block is the fuzz input; its spent outputs are the small sample block's.
"""

import atheris
from _harness import SMALL_BLOCK, SMALL_SPENT, outcome, run

with atheris.instrument_imports(include=["sp_scan"]):
    from sp_scan import native, reference


def test_one(data: bytes) -> None:
    expected = outcome(reference.block.tweaks, data, SMALL_SPENT)
    got = outcome(native.block_tweaks, data, SMALL_SPENT)
    assert got == expected, (got, expected)


if __name__ == "__main__":
    assert native.ENABLED, "build the extension first: python setup.py build_ext --inplace"
    run("block", test_one, [SMALL_BLOCK, SMALL_BLOCK[:80] + b"\x01" + SMALL_BLOCK[81:400]])
