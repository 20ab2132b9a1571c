"""An independent BIP158 Golomb-coded-set decoder for the tests (shares no code with sp_scan).

`GolombSet(data, key16)` reads CompactSize(N) and the Golomb-Rice stream back into the sorted
mapped values; `item in gcs` hashes the item the BIP158 way and looks it up. P = 19 and
M = 784931 are BlindBit's parameters; the BIP158 basic filters use the same.
"""

from __future__ import annotations

import struct

P = 19
M = 784931
U64 = 0xFFFFFFFFFFFFFFFF


def siphash_2_4(key16: bytes, msg: bytes) -> int:
    """SipHash-2-4 written from the paper's description: 8-byte LE words, last word carries len."""

    def rotl(x: int, n: int) -> int:
        return ((x << n) & U64) | (x >> (64 - n))

    k0, k1 = struct.unpack("<2Q", key16)
    s = [k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D, k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573]

    def sipround() -> None:
        a, b, c, d = s
        a = (a + b) & U64
        b = rotl(b, 13) ^ a
        a = rotl(a, 32)
        c = (c + d) & U64
        d = rotl(d, 16) ^ c
        a = (a + d) & U64
        d = rotl(d, 21) ^ a
        c = (c + b) & U64
        b = rotl(b, 17) ^ c
        c = rotl(c, 32)
        s[:] = [a, b, c, d]

    tail = len(msg) % 8
    padded = msg[: len(msg) - tail] + msg[len(msg) - tail :].ljust(7, b"\0") + bytes([len(msg) & 0xFF])
    for (word,) in struct.iter_unpack("<Q", padded):
        s[3] ^= word
        sipround()
        sipround()
        s[0] ^= word
    s[2] ^= 0xFF
    for _ in range(4):
        sipround()
    return s[0] ^ s[1] ^ s[2] ^ s[3]


class GolombSet:
    """A decoded filter: `n`, the sorted `values`, and membership of raw items."""

    def __init__(self, data: bytes, key16: bytes, p: int = P, m: int = M):
        first = data[0]
        size = {0xFD: 2, 0xFE: 4, 0xFF: 8}.get(first, 0)
        self.n = int.from_bytes(data[1 : 1 + size], "little") if size else first
        self.key16, self.m = key16, m
        bits = "".join(f"{byte:08b}" for byte in data[1 + size :])
        pos, value, values = 0, 0, []
        for _ in range(self.n):
            stop = bits.index("0", pos)
            quotient = stop - pos
            remainder = int(bits[stop + 1 : stop + 1 + p], 2)
            pos = stop + 1 + p
            value += (quotient << p) | remainder
            values.append(value)
        if pos > len(bits) or set(bits[pos:]) - {"0"} or len(bits) - pos >= 8:
            raise ValueError("filter has trailing data or bad padding")
        self.values = values
        self._set = set(values)

    def mapped(self, item: bytes) -> int:
        """The value an item maps to in this filter: hash * (N·M) >> 64."""
        return (siphash_2_4(self.key16, item) * self.n * self.m) >> 64

    def __contains__(self, item: bytes) -> bool:
        return self.mapped(item) in self._set


def block_key16(block_hash_display_hex: str) -> bytes:
    """The SipHash key of a block: the first 16 bytes of its hash in internal (reversed) order."""
    return bytes.fromhex(block_hash_display_hex)[::-1][:16]
