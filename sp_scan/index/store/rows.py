"""The index's rows (format 4): what each table holds, how values are packed, and the checksums that guard them.

One row per block in each of three tables, keyed by height, so a read touches only what it needs:
- `blocks`: what scans and tweak answers read: `BLOCK_FIELDS` (header fields, the counts of its eligible txs
  and of their taproot outputs; per eligible tx in block order its tweak and txid; the outputs packed in
  `outs`; their x-only keys).
- `spent`: what spent answers read and the writer's marks: `SPENT_FIELDS` (the block's new-UTXO filter, the
  8-byte spent-index hashes and key prefixes of the P2TR outputs its inputs spend, and `marks`: the
  places (height, ordinal) of the indexed outputs it spent).
- `spends`: the block's spent bitmap (bit j of byte j // 8 for its taproot output of ordinal j), the
  only row that changes after its block is written (see `spends.py`).

Each `blocks` and `spent` row carries `sums`: the CRC-32 of each of its fields seeded with the height, the
table and the field's position (a value moved to another row or field is a damaged value); a `spends`
row its bitmap's. Nothing is stored that another field gives in nanoseconds: the 64-byte tweaks are the
33-byte ones decompressed (in the scan's own lanes), the largest value per tx and the spent filter are
computed from the fields here when asked.

Packed fields: `outs` is zlib of the byte planes (all first bytes, then all second bytes, ...) of the
per-tx counts (n × u32), then the outputs' vouts (Σ × u32) and values (Σ × u64); `marks` is zlib of the
byte planes of its places sorted ascending (u64 `height << 32 | ordinal`). Planes put the zero high bytes
of small integers together, where zlib packs them to almost nothing.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from ...crc import crc
from ...types import BlockData

FORMAT_VERSION = 4
APPLICATION_ID = 0x53505358  # "SPSX"

BLOCK_FIELDS = ("hash", "prev", "time", "block_txs", "n_tx", "n_out", "tweaks33", "outs", "txids", "out_keys")
"""A `blocks` row's fields, in column order: small and often read ones first (a field behind a large one
costs its pages)."""
SPENT_FIELDS = ("filter_new", "spent_hashes", "spent_keys", "marks")
"""A `spent` row's fields, in column order."""
OUTPUT_FIELDS = ("out_counts", "out_vouts", "out_values")
"""What `outs` unpacks to: n × u32, Σ × u32, Σ × u64."""
FIELDS = (*BLOCK_FIELDS[:7], *OUTPUT_FIELDS, *BLOCK_FIELDS[8:], *SPENT_FIELDS)
"""The names a reader asks for (`Store.row`): every stored field, `outs` as what it unpacks to."""
NULLABLE = ("filter_new", "spent_hashes", "spent_keys")
"""Absent (None) for a block stored without filters, or (spent_keys) by an sp-scan that did not keep them."""

MAX_MARKS_BYTES = 8 << 18
"""A block's marks unpack to at most this (a block has fewer than 2^18 inputs)."""
_TABLE = {"blocks": 0, "spent": 1, "spends": 2}
_SUMS = {"blocks": struct.Struct(f"<{len(BLOCK_FIELDS)}I"), "spent": struct.Struct(f"<{len(SPENT_FIELDS)}I")}
_SEED = struct.Struct("<qBB")
_INTS = ("height", "time", "block_txs", "n_tx", "n_out")
_PER_TX = {"txids": 32, "tweaks33": 33}  # bytes per eligible tx
_PER_OUTPUT = {"out_keys": 32}  # bytes per taproot output of those txs
_PAIRS = ("spent_hashes", "spent_keys")  # 8-byte records


def seed(height: int, table: str, position: int) -> int:
    """The CRC a field starts from: its height, table and position, so a value moved is a value damaged."""
    return zlib.crc32(_SEED.pack(height, _TABLE[table], position))


def sums(height: int, table: str, values: Sequence) -> bytes:
    """A `blocks` or `spent` row's `sums`: the CRC of each of its values, in field order."""
    return _SUMS[table].pack(*(crc(v, seed(height, table, i)) for i, v in enumerate(values)))


def unpack_sums(table: str, packed) -> tuple[int, ...] | None:
    """The CRCs of a row's `sums`; None when it is not one (missing or the wrong size)."""
    if type(packed) is not bytes or len(packed) != _SUMS[table].size:
        return None
    return _SUMS[table].unpack(packed)


def bits_sum(height: int, bits: bytes) -> int:
    """A `spends` row's checksum."""
    return crc(bytes(bits), seed(height, "spends", 0))


def meta_sum(key: str, value) -> int:
    """A meta row's checksum: its value's CRC seeded with its key."""
    return crc(value, zlib.crc32(key.encode()))


def _planes(data: bytes, width: int) -> bytes:
    """`data`'s `width`-byte integers as byte planes: every integer's byte 0, then every byte 1, ..."""
    return b"".join(data[i::width] for i in range(width))


def _unplanes(planes: bytes, width: int) -> bytes:
    """The integers `_planes` laid out as planes, interleaved again."""
    out, k = bytearray(len(planes)), len(planes) // width
    for i in range(width):
        out[i::width] = planes[i * k : (i + 1) * k]
    return bytes(out)


def _inflate(packed: bytes, limit: int, name: str) -> bytes:
    """zlib's `packed` unpacked, at most `limit` + 1 bytes of it (a damaged field never unpacks to gigabytes).

    Raises:
        ValueError: not a whole zlib stream.
    """
    unpacker = zlib.decompressobj()
    try:
        out = unpacker.decompress(packed, limit + 1)
    except zlib.error as exc:
        raise ValueError(f"{name} does not unpack ({exc})") from None
    if not unpacker.eof and len(out) <= limit:
        raise ValueError(f"{name} does not unpack (the stream ends early)")
    return out


def pack_outputs(counts: bytes, vouts: bytes, values: bytes) -> bytes:
    """`outs`: per-tx counts (n × u32), then the outputs' vouts (Σ × u32) and values (Σ × u64), packed."""
    return zlib.compress(_planes(counts, 4) + _planes(vouts, 4) + _planes(values, 8))


def unpack_outputs(outs: bytes, n_tx: int, n_out: int) -> tuple[bytes, bytes, bytes]:
    """(counts n × u32, vouts Σ × u32, values Σ × u64) of a block of `n_tx` eligible txs and `n_out` outputs.

    Raises:
        ValueError: `outs` is not what `pack_outputs` makes for such a block.
    """
    planes = _inflate(outs, 4 * n_tx + 12 * n_out, "outs")
    if len(planes) != 4 * n_tx + 12 * n_out:
        raise ValueError(f"outs holds {len(planes)} bytes, not {4 * n_tx + 12 * n_out} for {n_tx} transactions and {n_out} outputs")
    counts = _unplanes(planes[: 4 * n_tx], 4)
    if sum(memoryview(counts).cast("I")) != n_out:
        raise ValueError(f"the counts of outs add up to {sum(memoryview(counts).cast('I'))} outputs, not {n_out}")
    return counts, _unplanes(planes[4 * n_tx : 4 * n_tx + 4 * n_out], 4), _unplanes(planes[4 * n_tx + 4 * n_out :], 8)


def pack_marks(places: Sequence[int]) -> bytes:
    """`marks`: the places (u64 `height << 32 | ordinal`) of the outputs a block spent, packed ascending (a
    memoryview of u64, as the writer's output map gives them, is taken to be ascending already)."""
    packed = places.tobytes() if isinstance(places, memoryview) else struct.pack(f"<{len(places)}Q", *sorted(places))
    return zlib.compress(_planes(packed, 8))


def unpack_marks(marks: bytes) -> memoryview:
    """The places `pack_marks` packed, ascending, as a memoryview of u64.

    Raises:
        ValueError: `marks` does not unpack.
    """
    planes = _inflate(marks, MAX_MARKS_BYTES, "marks")
    if len(planes) % 8:
        raise ValueError(f"marks holds {len(planes)} bytes, not 8 for each output")
    return memoryview(_unplanes(planes, 8)).cast("Q")


@dataclass(frozen=True, slots=True)
class BlockRow:
    """A block as the store writes it, prepared by `block_row` away from the writer (in a sync worker).

    Attributes:
        height: the block's height.
        block: its `blocks` row's values (BLOCK_FIELDS).
        spent: its `spent` row's values (SPENT_FIELDS), `marks` empty: the writer knows which outputs it spends.
        sums: the `blocks` row's sums.
        counts: n × u32, each eligible tx's taproot outputs (`outs` unpacked, for the writer's output map).
        vouts: Σ × u32, their vouts.
        outpoints: m × 36, the outpoints of its inputs that spend P2TR outputs, tx then vin order.
    """

    height: int
    block: tuple
    spent: tuple
    sums: bytes
    counts: bytes
    vouts: bytes
    outpoints: bytes

    @property
    def hash32(self) -> bytes:
        return self.block[0]

    @property
    def prev32(self) -> bytes:
        return self.block[1]

    @property
    def block_txs(self) -> int:
        return self.block[3]

    @property
    def n_tx(self) -> int:
        return self.block[4]

    @property
    def txids(self) -> bytes:
        return self.block[8]


def block_row(height: int, data: BlockData, filters: tuple[bytes, bytes, bytes | None] | None) -> BlockRow:
    """Prepare block `height` for `Store.append`: its rows' values and checksums, and what the writer needs of it.

    Args:
        height: the block's height.
        data: the block's index data.
        filters: (new-UTXO filter, spent-index hashes k × 8, spent P2TR keys' prefixes m × 8 or None), or None.
    """
    filter_new, spent_hashes, spent_keys = filters or (None, None, None)
    outs = pack_outputs(data.out_counts, data.out_vouts, data.out_values)
    n_out = len(data.out_vouts) // 4
    block = (data.hash32, data.prev32, data.time, data.block_txs, data.n_tx, n_out, data.tweaks33, outs, data.txids, data.out_keys)
    return BlockRow(height, block, (filter_new, spent_hashes, spent_keys, b""), sums(height, "blocks", block), data.out_counts, data.out_vouts, data.spent_outpoints)


def row_problem(names: Sequence[str], values: Sequence) -> str | None:
    """What is wrong with a row's named values (stored fields, `outs` unpacked to OUTPUT_FIELDS), or None."""
    row = dict(zip(names, values))
    for name, value in row.items():
        if name in _INTS:
            if type(value) is not int or value < 0:
                return f"{name} is {value!r}, not a count"
        elif value is None and name in NULLABLE:
            continue
        elif type(value) is not bytes:
            return f"{name} is {type(value).__name__}, not bytes"
        elif (name in ("hash", "prev") and len(value) != 32) or (name in _PAIRS and len(value) % 8):
            return f"{name} is {len(value)} bytes"
    for widths, count, what in ((_PER_TX, row.get("n_tx"), "transactions"), (_PER_OUTPUT, row.get("n_out"), "taproot outputs")):
        for name, width in widths.items():
            if name in row and len(row[name]) != width * count:
                return f"{name} holds {len(row[name])} bytes, not {width} for each of {count} {what}"
    return None
