"""Fuzz the spent-outputs parser: typed errors only, round trip, native == reference on the small block.

    python fuzz/fuzz_spent.py -max_total_time=300
"""

import atheris
from _harness import SMALL_BLOCK, SMALL_SPENT, outcome, run

with atheris.instrument_imports(include=["sp_scan"]):
    from sp_scan import formats, native, reference, wire
    from sp_scan.errors import MalformedDataError


def test_one(data: bytes) -> None:
    parsed, error = outcome(wire.parse_spent, data)
    if parsed is not None:
        assert wire.serialize_spent(parsed) == data
    else:
        assert error is MalformedDataError
    # load_spent sniffs binary / hex / JSON: typed errors only
    outcome(formats.load_spent, data)
    expected = outcome(reference.block.tweaks, SMALL_BLOCK, data)
    assert outcome(native.block_tweaks, SMALL_BLOCK, data) == expected


if __name__ == "__main__":
    assert native.ENABLED, "build the extension first: python setup.py build_ext --inplace"
    run("spent", test_one, [SMALL_SPENT, SMALL_SPENT.hex().encode(), b"[[], [{\"value\": 0.1, \"scriptPubKey\": {\"hex\": \"51\"}}]]"])
