"""Fuzz the spent-outputs parser: typed errors only, round trip, native == reference on the small block.

    python fuzz/fuzz_spent.py -max_total_time=300
"""

import atheris
from _harness import ROOT, run

with atheris.instrument_imports(include=["sp_scan"]):
    from sp_scan import block, native
    from sp_scan.errors import MalformedDataError, PrevoutsError, SPError

BLOCKS = ROOT / "vectors" / "blocks"
SMALL_BLOCK = bytes.fromhex((BLOCKS / "small.hex").read_text())
SMALL_SPENT = bytes.fromhex((BLOCKS / "small.spent.hex").read_text())


def outcome(f, *args):
    try:
        return f(*args), None
    except SPError as exc:
        assert isinstance(exc, (MalformedDataError, PrevoutsError)), exc
        return None, type(exc)


def test_one(data: bytes) -> None:
    parsed, error = outcome(block.parse_spent, data)
    if parsed is not None:
        assert block.serialize_spent(parsed) == data
    else:
        assert error is MalformedDataError
    # load_spent sniffs binary / hex / JSON: typed errors only
    outcome(block.load_spent, data)
    expected = outcome(block.tweaks_reference, SMALL_BLOCK, data)
    assert outcome(native.block_tweaks, SMALL_BLOCK, data) == expected


if __name__ == "__main__":
    assert native.ENABLED, "build the extension first: python setup.py build_ext --inplace"
    run("spent", test_one, [SMALL_SPENT, SMALL_SPENT.hex().encode(), b"[[], [{\"value\": 0.1, \"scriptPubKey\": {\"hex\": \"51\"}}]]"])
