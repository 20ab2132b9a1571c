"""Argument checks both backends make the same way, so they fail with the same errors."""

from __future__ import annotations

from collections.abc import Sequence

from .errors import InvalidKeyError, MalformedDataError

TWEAK_WIDTHS = (33, 64)
"""A tweak (input_hash·A) is ser_P (33 bytes) or x ‖ y (64 bytes, parsed without a square root)."""


def sized(data: bytes, width: int, name: str) -> bytes:
    """Return `data` as bytes when it is bytes of `width`.

    Raises:
        InvalidKeyError: not bytes, or another width; the message names `name`.
    """
    if not isinstance(data, (bytes, bytearray)) or len(data) != width:
        raise InvalidKeyError(f"{name} must be {width} bytes")
    return bytes(data)


def outputs32(outputs: Sequence[bytes], where: str = "") -> None:
    """Check that every output is a 32-byte x-only key.

    Raises:
        InvalidKeyError: one is not; the message starts with `where` (e.g. "tx 3: ") when given.
    """
    if any(not isinstance(o, (bytes, bytearray)) or len(o) != 32 for o in outputs):
        raise InvalidKeyError(f"{where}each output must be a 32-byte x-only key")


def check_batch(tweaks: Sequence[bytes], outputs: Sequence[Sequence[bytes]], threads: int) -> int:
    """Check the shape of a `scan_tweaks` batch; return its tweak width (33 for an empty batch).

    Raises:
        MalformedDataError: not one list of outputs per tweak.
        InvalidKeyError: a tweak not 33 or 64 bytes, tweaks of both widths, or an output not 32 bytes;
            the message names the tx index.
        ValueError: threads < 1.
    """
    if not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be an integer >= 1, not {threads!r}")
    if len(tweaks) != len(outputs):
        raise MalformedDataError(f"{len(tweaks)} tweaks but {len(outputs)} lists of outputs")
    width = len(tweaks[0]) if len(tweaks) else TWEAK_WIDTHS[0]
    for i, tweak in enumerate(tweaks):
        if not isinstance(tweak, (bytes, bytearray)) or len(tweak) not in TWEAK_WIDTHS:
            raise InvalidKeyError(f"tweak of tx {i} must be 33 or 64 bytes")
        if len(tweak) != width:
            raise InvalidKeyError(f"tweak of tx {i} is {len(tweak)} bytes, tx 0's {width}: one width per call")
    for i, outs in enumerate(outputs):
        outputs32(outs, f"tx {i}: ")
    return width
