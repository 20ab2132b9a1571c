"""CRC-32 of stored values: what the index's and the wallet's SQLite rows carry to detect damage.

Each value is tagged by its type before it is hashed, so that a flipped bit, a value of another type
or a row read with another seed (its table, its height) gives another checksum. A CRC detects
accidents (a flipped byte, a row changed by hand), not a forger, who can compute it too.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable


def crc(value, seed: int) -> int:
    """The CRC-32 of a stored value (bytes, int, str or None, tagged by its type) continuing `seed`; -1 for
    any other type (no CRC equals it)."""
    if type(value) is bytes:
        return zlib.crc32(value, zlib.crc32(b"b", seed))
    if type(value) is int and -(2**63) <= value < 2**63:
        return zlib.crc32(b"i" + value.to_bytes(8, "little", signed=True), seed)
    if type(value) is str:
        return zlib.crc32(b"s" + value.encode(errors="surrogatepass"), seed)
    if value is None:
        return zlib.crc32(b"n", seed)
    return -1


def crc_row(values: Iterable, seed: int) -> int:
    """The CRC of a row's values in order, continuing `seed`; -1 when one value has a type `crc` does not take."""
    for value in values:
        seed = crc(value, seed)
        if seed < 0:
            return -1
    return seed
