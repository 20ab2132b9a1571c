"""BIP158 Golomb-coded sets and BlindBit's spent-index hashes in Python (SipHash-2-4 included)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from ..errors import MalformedDataError
from ..wire import compact_size

P = 19
"""Golomb-Rice parameter: each delta's low P bits are written verbatim."""
M = 784931
"""Inverse false-positive rate: items are mapped into [0, N·M)."""

_MASK64 = (1 << 64) - 1


def _rotl64(x: int, bits: int) -> int:
    return ((x << bits) | (x >> (64 - bits))) & _MASK64


def siphash24(key16: bytes, data: bytes) -> int:
    """Return SipHash-2-4 of data under key16 as an integer (the reference; k0, k1 little-endian)."""
    k0, k1 = int.from_bytes(key16[:8], "little"), int.from_bytes(key16[8:16], "little")
    v = [k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D, k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573]

    def rounds(count: int) -> None:
        for _ in range(count):
            v[0] = (v[0] + v[1]) & _MASK64
            v[1] = _rotl64(v[1], 13) ^ v[0]
            v[0] = _rotl64(v[0], 32)
            v[2] = (v[2] + v[3]) & _MASK64
            v[3] = _rotl64(v[3], 16) ^ v[2]
            v[0] = (v[0] + v[3]) & _MASK64
            v[3] = _rotl64(v[3], 21) ^ v[0]
            v[2] = (v[2] + v[1]) & _MASK64
            v[1] = _rotl64(v[1], 17) ^ v[2]
            v[2] = _rotl64(v[2], 32)

    whole = len(data) - len(data) % 8
    words = [int.from_bytes(data[i : i + 8], "little") for i in range(0, whole, 8)]
    words.append(((len(data) & 0xFF) << 56) | int.from_bytes(data[whole:], "little"))
    for m in words:
        v[3] ^= m
        rounds(2)
        v[0] ^= m
    v[2] ^= 0xFF
    rounds(4)
    return v[0] ^ v[1] ^ v[2] ^ v[3]


def _items(items: Sequence[bytes] | bytes, width: int, name: str) -> Sequence[bytes]:
    """The items as a sequence, split from one packed buffer when width is given; widths checked."""
    if width and isinstance(items, (bytes, bytearray, memoryview)):
        data = bytes(items)
        if len(data) % width:
            raise MalformedDataError(f"{name}: packed items are {len(data)} bytes, not a multiple of {width}")
        return [data[i : i + width] for i in range(0, len(data), width)]
    if width:
        for i, item in enumerate(items):
            if len(item) != width:
                raise MalformedDataError(f"{name}: item {i} is {len(item)} bytes, expected {width}")
    return items


def golomb_set(
    key16: bytes, items: Sequence[bytes] | bytes, width: int = 0, name: str = "items", p: int = P, m: int = M
) -> bytes:
    """Build the BIP158 Golomb-coded set of items under a SipHash key (BlindBit: p = P, m = M).

    Args:
        key16: the 16-byte SipHash-2-4 key.
        items: the items (any lengths when width is 0); duplicates are kept and counted. With a
            width, also one bytes object holding the items packed (N × width bytes).
        width: when non-zero, the length every item must have.
        name: the argument name for error messages.
        p: the Golomb-Rice parameter, 1..32.
        m: the inverse false-positive rate; values are mapped into [0, N·m).

    Returns:
        CompactSize(N) ‖ the Golomb-Rice coded sorted values, zero-padded to a byte.

    Raises:
        MalformedDataError: key16 is not 16 bytes, or an item is not `width` bytes.
        ValueError: p or m out of range.
    """
    if len(key16) != 16:
        raise MalformedDataError("key16 must be 16 bytes")
    items = _items(items, width, name)
    if not (1 <= p <= 32 and 1 <= m and len(items) * m < 1 << 64):
        raise ValueError("golomb_set needs 1 <= p <= 32, m >= 1 and N·m < 2**64")
    f = len(items) * m
    values = sorted((siphash24(key16, bytes(item)) * f) >> 64 for item in items)
    bits, last = [], 0
    for value in values:
        delta, last = value - last, value
        bits.append("1" * (delta >> p) + "0" + format(delta & ((1 << p) - 1), f"0{p}b"))
    stream = "".join(bits)
    stream += "0" * (-len(stream) % 8)
    return compact_size(len(items)) + int("1" + stream, 2).to_bytes(len(stream) // 8 + 1, "big")[1:]


def golomb_match(key16: bytes, n: int, stream: bytes, items: Sequence[bytes] | bytes, width: int = 0, p: int = P, m: int = M) -> list[int]:
    """Which items a Golomb-coded set holds: its stream decoded once and merged with the items' values.

    Args:
        key16: the set's 16-byte SipHash-2-4 key.
        n: the number of values the set codes (its CompactSize prefix).
        stream: the Golomb-Rice bit stream after that prefix.
        items: the items to look up; with a width, also one bytes object of them packed.
        width: when non-zero, the length every item must have.
        p, m: as `golomb_set`.

    Returns:
        The indices of the items whose mapped value the set holds (false positives at rate 1/m), ascending.

    Raises:
        MalformedDataError: key16 is not 16 bytes, an item is not `width` bytes, or the stream ends
            before its n values.
    """
    if len(key16) != 16:
        raise MalformedDataError("key16 must be 16 bytes")
    items = _items(items, width, "items")
    if n > len(stream) * 8 // (p + 1):
        raise MalformedDataError("the filter holds fewer bits than its count of values needs")
    wanted: dict[int, list[int]] = {}
    for i, item in enumerate(items):
        wanted.setdefault((siphash24(key16, bytes(item)) * n * m) >> 64, []).append(i)
    bits = "".join(f"{byte:08b}" for byte in stream)
    pos, value, hits = 0, 0, []
    for _ in range(n if wanted else 0):
        stop = bits.find("0", pos)
        if stop < 0 or stop + 1 + p > len(bits):
            raise MalformedDataError("the filter's bit stream ends before its count of values")
        value += ((stop - pos) << p) | int(bits[stop + 1 : stop + 1 + p], 2)
        pos = stop + 1 + p
        hits.extend(wanted.pop(value, ()))
    return sorted(hits)


def spent_hashes(block_hash32: bytes, outpoints36: Sequence[bytes] | bytes) -> list[bytes]:
    """Return the spent-index hash of each outpoint: SHA256(outpoint36 ‖ block_hash32)[:8].

    Args:
        block_hash32: the spending block's hash, internal byte order.
        outpoints36: the spent P2TR prevouts, each txid (internal order) ‖ vout LE32, in tx then
            vin order (coinbase has none); a sequence, or one bytes object of m × 36.

    Returns:
        The 8-byte hashes, in the order of outpoints36.

    Raises:
        MalformedDataError: block_hash32 is not 32 bytes or an outpoint is not 36 bytes.
    """
    if len(block_hash32) != 32:
        raise MalformedDataError("block_hash32 must be 32 bytes")
    suffix = bytes(block_hash32)
    return [hashlib.sha256(bytes(outpoint) + suffix).digest()[:8] for outpoint in _items(outpoints36, 36, "outpoints36")]
