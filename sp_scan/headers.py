"""Block headers checked as Bitcoin Core checks them: proof of work, difficulty, time, chain work, a checkpoint.

Models: Core's `src/pow.cpp` (CheckProofOfWork, GetNextWorkRequired, CalculateNextWorkRequired,
GetBlockProof) and `validation.cpp`'s ContextualCheckBlockHeader (median time past, two hours into the
future, BIP94's timewarp rule); the rules of each chain and its checkpoint are in `sp_scan.network`.

`HeaderChain` holds the headers of one server's chain, each checked before it is kept:
- at or below the network's checkpoint, by hash: they must lead up, parent by parent, to the
  checkpoint's hash (and each must meet its own nBits);
- above it, by the rules: each names the previous one as its parent, its hash meets its nBits, its nBits
  is the one the chain's retarget rules give at that height (mainnet: a retarget every 2016 blocks from
  the period's time span, clamped to 4× either way; testnet3 and testnet4: a block 20 minutes after its
  parent may have the limit, else the period's last other nBits; testnet4 retargets from the period's
  first block; regtest never retargets), its time is after the median of the 11 before it and within
  two hours of now. The chain is kept from the checkpoint's difficulty period on (or from the lowest
  height asked for below it), so every rule has the blocks it reads.
A server that switches branches is followed once the new headers pass; `work` gives a branch's chain work
so that a caller compares two branches before it switches (Core follows the most work). `fork_point` finds
where two chains part: the index's sync, the wallet's and the Electrum server's scans each roll back to it.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from .errors import SourceError
from .network import Pow
from .wire import sha256d

HEADER_BYTES = 80
MEDIAN_SPAN = 11
"""Blocks whose median time a new block's time must exceed."""
MAX_FUTURE = 2 * 60 * 60
"""Seconds a block's time may be ahead of this machine's clock (Core's MAX_FUTURE_BLOCK_TIME)."""
MAX_TIMEWARP = 600
"""BIP94: the first block of a period is at most this many seconds older than its parent."""
_HEADER = struct.Struct("<i32s32sIII")


@dataclass(frozen=True, slots=True)
class Header:
    """An 80-byte block header, parsed.

    Attributes:
        hash32: its hash (internal order); prev32: its parent's; time: its timestamp; bits: nBits.
    """

    hash32: bytes
    prev32: bytes
    time: int
    bits: int

    @classmethod
    def parse(cls, header80: bytes, what: str = "a header") -> Header:
        """Raises SourceError: not 80 bytes."""
        if len(header80) != HEADER_BYTES:
            raise SourceError(f"{what} is {len(header80)} bytes, not {HEADER_BYTES}")
        _, prev32, _, stamp, bits, _ = _HEADER.unpack(header80)
        return cls(sha256d(header80), prev32, stamp, bits)


def target(bits: int) -> int | None:
    """The target nBits encodes (Core's SetCompact); None when it is negative, zero or overflows."""
    size, word = bits >> 24, bits & 0x007FFFFF
    value = word >> 8 * (3 - size) if size <= 3 else word << 8 * (size - 3)
    negative = word != 0 and bits & 0x00800000
    overflow = word != 0 and (size > 34 or (word > 0xFF and size > 33) or (word > 0xFFFF and size > 32))
    return None if negative or overflow or value == 0 else value


def compact(value: int) -> int:
    """nBits of a target (Core's GetCompact, never negative)."""
    size = (value.bit_length() + 7) // 8
    word = value << 8 * (3 - size) if size <= 3 else value >> 8 * (size - 3)
    if word & 0x00800000:
        word >>= 8
        size += 1
    return word | size << 24


def work(bits: int) -> int:
    """The expected number of hashes a block of these nBits took (Core's GetBlockProof); 0 for invalid nBits."""
    value = target(bits)
    return 0 if value is None else (1 << 256) // (value + 1)


def meets(hash32: bytes, bits: int, pow_rules: Pow) -> bool:
    """Whether a block hash meets its nBits, a valid target no easier than the chain's limit (Core's CheckProofOfWork)."""
    value = target(bits)
    return value is not None and value <= pow_rules.limit and int.from_bytes(hash32, "little") <= value


def fork_point(ours: Iterable[tuple[int, bytes]], theirs: Callable[[int], bytes | None]) -> int | None:
    """The highest height where our chain and theirs hold the same block; None when they share none of ours.

    Args:
        ours: our (height, hash) pairs from the top down (read lazily: the walk stops at the first shared one).
        theirs: their hash at a height, None when they hold no block there; asked once per height walked, as
            given (a caller that retries passes its retrying call; what it raises ends the walk).
    """
    for height, hash32 in ours:
        if theirs(height) == hash32:
            return height
    return None


def retarget(pow_rules: Pow, last_bits: int, first_bits: int, span: int) -> int:
    """nBits after a period whose blocks took `span` seconds (Core's CalculateNextWorkRequired, for a chain that retargets).

    Args:
        last_bits: the period's last block's nBits; first_bits: its first block's (BIP94 starts from those).
    """
    timespan = pow_rules.interval * pow_rules.spacing
    span = min(max(span, timespan // 4), timespan * 4)
    value = target(first_bits if pow_rules.bip94 else last_bits) or 0
    return compact(min(value * span // timespan, pow_rules.limit))


class HeaderChain:
    """One server's headers of a chain, checked as the module docstring says before they are kept.

    Args:
        pow_rules: the chain's rules and checkpoint (`sp_scan.network.get(name).pow`).
        now: the clock a block's time is compared with (seconds since the epoch).
    """

    def __init__(self, pow_rules: Pow, now=time.time) -> None:
        self.pow = pow_rules
        self.checkpoint = pow_rules.checkpoint[0]
        self._checkpoint32 = bytes.fromhex(pow_rules.checkpoint[1])[::-1]
        self._now = now
        self.base = -1
        """The lowest height kept (-1: none yet)."""
        self._hashes: list[bytes] = []
        self._bits: list[int] = []
        self._times: list[int] = []
        self._base_prev32 = b""

    @property
    def top(self) -> int:
        """The highest height kept (base - 1 when none)."""
        return self.base + len(self._hashes) - 1

    def start(self, lowest: int) -> int:
        """The first height to give `anchor` so that it covers `lowest` and the checkpoint's period."""
        period = self.checkpoint - self.checkpoint % self.pow.interval
        return max(0, min(lowest, period, self.checkpoint - MEDIAN_SPAN))

    def hash32(self, height: int) -> bytes | None:
        """The kept header's hash at `height`, or None."""
        return self._hashes[height - self.base] if self.base <= height <= self.top else None

    def work(self, lo: int, hi: int) -> int:
        """The chain work of the kept headers lo..hi (all must be kept)."""
        return sum(work(b) for b in self._bits[lo - self.base : hi - self.base + 1])

    def anchor(self, start: int, headers80: Sequence[bytes]) -> None:
        """Keep the headers of heights start..checkpoint, which must lead up to the checkpoint's hash, below what is
        kept (or as the first headers kept).

        Raises:
            SourceError: they do not end at the checkpoint or at the lowest header kept, a header does not name
                the one before it, or one does not meet its own nBits.
        """
        parsed = [Header.parse(h, f"the header of block {start + i}") for i, h in enumerate(headers80)]
        end = start + len(parsed) - 1
        for i, h in enumerate(parsed):
            if i and h.prev32 != parsed[i - 1].hash32:
                raise SourceError(f"the header of block {start + i} does not name block {start + i - 1} as its parent")
            if not meets(h.hash32, h.bits, self.pow):
                raise SourceError(f"the header of block {start + i} does not meet its own nBits {h.bits:08x}")
        if self.base < 0:
            if end != self.checkpoint or parsed[-1].hash32 != self._checkpoint32:
                raise SourceError(f"the server's block {self.checkpoint} is not the checkpoint {self.pow.checkpoint[1]}: another chain")
        elif end != self.base - 1 or parsed[-1].hash32 != self._base_prev32:
            raise SourceError(f"the header of block {self.base} does not name the server's block {self.base - 1} as its parent")
        self._hashes[:0] = [h.hash32 for h in parsed]
        self._bits[:0] = [h.bits for h in parsed]
        self._times[:0] = [h.time for h in parsed]
        self.base, self._base_prev32 = start, parsed[0].prev32

    def extend(self, start: int, headers80: Sequence[bytes]) -> None:
        """Keep the headers of heights start.. (start at most top + 1), each checked by the rules; kept headers
        they replace (the server switched branches) are dropped from the first that differs.

        Raises:
            SourceError: a header that breaks a rule (named with its height), or a branch that leaves the chain at
                or below the checkpoint.
        """
        if not self.base <= start <= self.top + 1:
            raise ValueError(f"headers from {start} do not continue the chain kept at {self.base}..{self.top}")
        for i, header80 in enumerate(headers80):
            height = start + i
            h = Header.parse(header80, f"the header of block {height}")
            if height <= self.top:
                if h.hash32 == self._hashes[height - self.base]:
                    continue
                if height <= self.checkpoint:
                    raise SourceError(f"the server's block {height} is not the one that leads to the checkpoint {self.pow.checkpoint[1]}")
                del self._hashes[height - self.base :], self._bits[height - self.base :], self._times[height - self.base :]
            self._check(height, h)
            self._hashes.append(h.hash32)
            self._bits.append(h.bits)
            self._times.append(h.time)

    def _check(self, height: int, h: Header) -> None:
        what = f"the header of block {height}"
        i = height - self.base
        if i < 1:
            raise ValueError(f"block {height} has no parent kept")
        if h.prev32 != self._hashes[i - 1]:
            raise SourceError(f"{what} does not name block {height - 1} as its parent")
        if not meets(h.hash32, h.bits, self.pow):
            raise SourceError(f"{what} does not meet its own nBits {h.bits:08x} (its hash is above their target, or the target above the chain's limit)")
        expected = self._next_bits(height, h.time)
        if h.bits != expected:
            raise SourceError(f"{what} has nBits {h.bits:08x}, not the {expected:08x} the chain's retarget rules give")
        median = sorted(self._times[max(0, i - MEDIAN_SPAN) : i])[min(i, MEDIAN_SPAN) // 2]
        if h.time <= median:
            raise SourceError(f"{what} is not later than the median time of the {MEDIAN_SPAN} blocks before it")
        if h.time > self._now() + MAX_FUTURE:
            raise SourceError(f"{what} is more than two hours in the future")
        if self.pow.bip94 and height % self.pow.interval == 0 and h.time < self._times[i - 1] - MAX_TIMEWARP:
            raise SourceError(f"{what} is more than {MAX_TIMEWARP} s older than its parent at a retarget (BIP94)")

    def _next_bits(self, height: int, stamp: int) -> int:
        """The nBits a block at `height` with time `stamp` must have (Core's GetNextWorkRequired)."""
        p, i = self.pow, height - self.base
        limit_bits = compact(p.limit)
        if height % p.interval:
            if not p.min_difficulty:
                return self._bits[i - 1]
            if stamp > self._times[i - 1] + 2 * p.spacing:
                return limit_bits
            j = i - 1
            while j > 0 and (self.base + j) % p.interval and self._bits[j] == limit_bits:
                j -= 1
            return self._bits[j]
        if not p.retarget:
            return self._bits[i - 1]
        first = i - p.interval
        if first < 0:
            raise ValueError(f"the retarget at {height} needs block {height - p.interval}, below the chain kept")
        return retarget(p, self._bits[i - 1], self._bits[first], self._times[i - 1] - self._times[first])
