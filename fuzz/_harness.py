"""Shared set-up for the atheris targets: repo on sys.path, seed corpus, run loop."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from pathlib import Path

import atheris

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# errors.py holds no logic to instrument, so it may be imported before the targets' instrumented imports.
from sp_scan.errors import MalformedDataError, PrevoutsError, SPError  # noqa: E402

BLOCKS = ROOT / "vectors" / "blocks"
SMALL_BLOCK = bytes.fromhex((BLOCKS / "small.hex").read_text())
SMALL_SPENT = bytes.fromhex((BLOCKS / "small.spent.hex").read_text())


def outcome(f: Callable, *args: object) -> tuple[object, type | None]:
    """(result, None) or (None, error type); a block or spent-data error must be one of the two typed ones."""
    try:
        return f(*args), None
    except SPError as exc:
        assert isinstance(exc, (MalformedDataError, PrevoutsError)), exc
        return None, type(exc)


def run(name: str, test_one: Callable[[bytes], None], seeds: Iterable[bytes] = ()) -> None:
    """Fuzz test_one; with no corpus directory on the command line, use fuzz/corpus/<name> seeded with seeds."""
    args = list(sys.argv)
    if not any(not a.startswith("-") for a in args[1:]):
        corpus = CORPUS / name
        corpus.mkdir(parents=True, exist_ok=True)
        for i, seed in enumerate(seeds):
            (corpus / f"seed-{i}").write_bytes(seed)
        args.append(str(corpus))
    atheris.Setup(args, test_one)
    atheris.Fuzz()
