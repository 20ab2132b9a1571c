"""Bitcoin serialization: compact sizes, witness stacks, transactions and blocks."""

from __future__ import annotations

from .errors import MalformedDataError


class Reader:
    """A cursor over bytes that raises `MalformedDataError` on truncation."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def read(self, n: int) -> bytes:
        """Return the next n bytes."""
        end = self.pos + n
        if end > len(self.data):
            raise MalformedDataError(f"truncated: need {n} bytes at offset {self.pos}")
        out = self.data[self.pos : end]
        self.pos = end
        return out

    def compact_size(self) -> int:
        """Read a canonical compact size."""
        first = self.read(1)[0]
        if first < 0xFD:
            return first
        width, floor = {0xFD: (2, 0xFD), 0xFE: (4, 0x10000), 0xFF: (8, 0x100000000)}[first]
        value = int.from_bytes(self.read(width), "little")
        if value < floor:
            raise MalformedDataError(f"non-canonical compact size at offset {self.pos - width - 1}")
        return value

    def var_bytes(self) -> bytes:
        """Read a compact-size length, then that many bytes."""
        return self.read(self.compact_size())

    def end(self) -> None:
        """Raise unless every byte was read."""
        if self.pos != len(self.data):
            raise MalformedDataError(f"{len(self.data) - self.pos} trailing bytes")


def parse_witness(data: bytes) -> tuple[bytes, ...]:
    """Parse a serialized witness stack (count, then length-prefixed items); b"" is no witness.

    Raises:
        MalformedDataError: truncated or trailing bytes.
    """
    if not data:
        return ()
    r = Reader(data)
    items = tuple(r.var_bytes() for _ in range(r.compact_size()))
    r.end()
    return items
