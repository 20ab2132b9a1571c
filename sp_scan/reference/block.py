"""The block loop in Python: parse a block, join its prevouts, run the reference stages per transaction."""

from __future__ import annotations

import struct

from coincurve import PublicKey

from ..types import BlockData, BlockMatch, Receiver, TxTweak
from ..wire import join_prevouts, parse_block, parse_spent, transactions
from . import extract
from .scan import scan_tx
from .summary import summarize


def _is_taproot(script: bytes) -> bool:
    return extract.script_type(script) is extract.ScriptType.P2TR


def tweaks(block_bytes: bytes, spent_bytes: bytes) -> list[TxTweak]:
    """Return the light-client tweak (input_hash·A) of every eligible transaction, in block order.

    A transaction is listed when it has at least one P2TR output and
    `summarize` gives it a summary (BIP352's scanning conditions).

    Raises:
        MalformedBlockError, MalformedDataError, PrevoutsError: as `transactions`.
    """
    out = []
    for tx in transactions(block_bytes, spent_bytes):
        if not any(_is_taproot(o.script) for o in tx.outputs):
            continue
        summary = summarize(tx.inputs)
        if summary is not None:
            out.append(TxTweak(tx.txid32, summary.tweak33))
    return out


def scan(block_bytes: bytes, spent_bytes: bytes, receiver: Receiver) -> list[BlockMatch]:
    """Return the outputs of a block that pay `receiver`, in block order, then vout order.

    Raises:
        MalformedBlockError, MalformedDataError, PrevoutsError: as `transactions`.
    """
    out = []
    for tx in transactions(block_bytes, spent_bytes):
        taproot = [(vout, o) for vout, o in enumerate(tx.outputs) if _is_taproot(o.script)]
        if not taproot:
            continue
        found = scan_tx(tx.inputs, [o.script[2:] for _, o in taproot], receiver)
        matches = []
        for f in found:
            # Identical outputs are matched once each, lowest vout first.
            i = next(i for i, (_, o) in enumerate(taproot) if o.script[2:] == f.output32)
            vout, o = taproot.pop(i)
            matches.append(BlockMatch(tx.txid32, vout, o.amount, f))
        out.extend(sorted(matches, key=lambda m: m.vout))
    return out


def block_index(block_bytes: bytes, spent_bytes: bytes) -> BlockData:
    """Return what the tweak index keeps of a block (see `BlockData`), in one pass.

    Raises:
        MalformedBlockError, MalformedDataError, PrevoutsError: as `transactions`.
    """
    parsed = parse_block(block_bytes)
    spent_txs = join_prevouts(parsed, parse_spent(spent_bytes))
    cols: dict[str, list[bytes]] = {k: [] for k in ("txids", "tweaks33", "tweaks64", "counts", "vouts", "keys", "values", "max")}
    for tx in spent_txs:
        taproot = [(vout, o) for vout, o in enumerate(tx.outputs) if _is_taproot(o.script)]
        summary = summarize(tx.inputs) if taproot else None
        if summary is None:
            continue
        cols["txids"].append(tx.txid32)
        cols["tweaks33"].append(summary.tweak33)
        cols["tweaks64"].append(PublicKey(summary.tweak33).format(compressed=False)[1:])
        cols["counts"].append(struct.pack("<I", len(taproot)))
        cols["max"].append(struct.pack("<Q", max(o.amount for _, o in taproot)))
        for vout, o in taproot:
            cols["vouts"].append(struct.pack("<I", vout))
            cols["keys"].append(o.script[2:])
            cols["values"].append(struct.pack("<Q", o.amount))
    header = parsed.header80
    return BlockData(
        hash32=parsed.hash32,
        prev32=header[4:36],
        time=int.from_bytes(header[68:72], "little"),
        block_txs=len(parsed.txs),
        txids=b"".join(cols["txids"]),
        tweaks33=b"".join(cols["tweaks33"]),
        tweaks64=b"".join(cols["tweaks64"]),
        out_counts=b"".join(cols["counts"]),
        out_vouts=b"".join(cols["vouts"]),
        out_keys=b"".join(cols["keys"]),
        out_values=b"".join(cols["values"]),
        max_values=b"".join(cols["max"]),
        taproot_keys=b"".join(o.script[2:] for tx in parsed.txs for o in tx.outputs if _is_taproot(o.script)),
        spent_outpoints=b"".join(
            i.outpoint.to_bytes() for tx in spent_txs for i in tx.inputs if _is_taproot(i.prevout_script)
        ),
        spent_key_prefixes=b"".join(i.prevout_script[2:10] for tx in spent_txs for i in tx.inputs if _is_taproot(i.prevout_script)),
    )


def mark_spent(found: list[int | None], bitmaps: dict[int, bytearray]) -> bytes:
    """Set bit `ordinal` of bitmaps[height] for each item of `found` that is not None (height << 32 |
    ordinal), unless it is set (an output keeps the mark of its first spend).

    Returns:
        The marks made, in order: (height, ordinal) as u32 LE pairs.

    Raises:
        KeyError: a height without its bitmap.
        IndexError: an ordinal beyond its height's bitmap.
    """
    marks = []
    for at in found:
        if at is None:
            continue
        height, ordinal = at >> 32, at & 0xFFFFFFFF
        bits = bitmaps[height]
        if ordinal >> 3 >= len(bits):
            raise IndexError(f"mark_spent: output {ordinal} of block {height} is beyond its bitmap")
        bit = 1 << (ordinal & 7)
        if not bits[ordinal >> 3] & bit:
            bits[ordinal >> 3] |= bit
            marks.append(struct.pack("<II", height, ordinal))
    return b"".join(marks)


_MAX_PLACE = 2**24 - 1  # heights and ordinals the native map holds: 24 bits each


class OutputMap:
    """The index writer's unspent tracked outputs: outpoint36 -> (height, ordinal) of a taproot output of an
    indexed eligible tx. Places are u64 LE `height << 32 | ordinal`; heights and ordinals below 2^24."""

    def __init__(self) -> None:
        self._places: dict[bytes, tuple[int, int]] = {}

    def __len__(self) -> int:
        return len(self._places)

    @property
    def nbytes(self) -> int:
        """Bytes of memory the map takes (Python's dict: an estimate)."""
        return 200 * len(self._places)

    @staticmethod
    def _outputs(fn: str, txids: bytes, counts: bytes, vouts: bytes):
        """(ordinal, outpoint36) of each output of a block's txids (n × 32), counts (n × u32), vouts (Σ × u32).

        Raises:
            ValueError: the three do not fit each other, or more than 2^24 outputs.
        """
        if len(txids) % 32 or len(counts) != len(txids) // 8 or len(vouts) % 4:
            raise ValueError(f"{fn}: txids (n x 32), counts (n x 4) and vouts (k x 4) do not fit")
        per_tx = struct.unpack(f"<{len(counts) // 4}I", counts)
        if sum(per_tx) != len(vouts) // 4:
            raise ValueError(f"{fn}: the counts add up to {sum(per_tx)} outputs, vouts holds {len(vouts) // 4}")
        if sum(per_tx) > _MAX_PLACE + 1:
            raise ValueError(f"{fn}: a block of more than 2^24 outputs")
        o = 0
        for i, count in enumerate(per_tx):
            for _ in range(count):
                yield o, txids[32 * i : 32 * i + 32] + vouts[4 * o : 4 * o + 4]
                o += 1

    @staticmethod
    def _height(fn: str, height: int) -> int:
        if not 0 <= height <= _MAX_PLACE:
            raise ValueError(f"{fn}: height {height} is beyond 2^24 - 1")
        return height

    def add_block(self, height: int, txids: bytes, counts: bytes, vouts: bytes, spent: bytes) -> int:
        """Add the block's outputs whose bit in `spent` (⌈Σ/8⌉ bytes, or empty for none) is clear, each unless
        held (the first place stays); returns how many were added.

        Raises:
            ValueError: the columns do not fit, or a height or ordinal beyond 2^24 - 1.
        """
        self._height("add_block", height)
        outputs = list(self._outputs("add_block", txids, counts, vouts))
        if spent and len(spent) != (len(outputs) + 7) // 8:
            raise ValueError(f"add_block: spent holds {len(spent)} bytes for {len(outputs)} outputs")
        added = 0
        for o, outpoint in outputs:
            if not (spent and spent[o >> 3] >> (o & 7) & 1) and outpoint not in self._places:
                self._places[outpoint] = (height, o)
                added += 1
        return added

    def drop_block(self, height: int, txids: bytes, counts: bytes, vouts: bytes) -> int:
        """Remove the block's outputs the map holds at `height` (a block rolled back); returns how many.

        Raises:
            ValueError: as `add_block`.
        """
        self._height("drop_block", height)
        dropped = 0
        for _, outpoint in self._outputs("drop_block", txids, counts, vouts):
            if self._places.get(outpoint, (None,))[0] == height:
                del self._places[outpoint]
                dropped += 1
        return dropped

    def spend(self, height: int, txids: bytes, counts: bytes, vouts: bytes, outpoints36: bytes) -> tuple[bytes, bytes]:
        """Add block `height`'s outputs (as `add_block`), then take out every output an outpoint (k × 36) names.

        Returns:
            (the block's bitmap of its own outputs taken, ⌈Σ/8⌉ bytes; the places taken, ascending, u64 LE).

        Raises:
            ValueError: as `add_block`, or outpoints36 is not k × 36 bytes.
        """
        self.add_block(height, txids, counts, vouts, b"")
        if len(outpoints36) % 36:
            raise ValueError("spend: outpoints36 must be k x 36 bytes")
        own = bytearray((len(vouts) // 4 + 7) // 8)
        places = []
        for i in range(0, len(outpoints36), 36):
            place = self._places.pop(bytes(outpoints36[i : i + 36]), None)
            if place is not None:
                if place[0] == height:
                    own[place[1] >> 3] |= 1 << (place[1] & 7)
                places.append(place[0] << 32 | place[1])
        return bytes(own), struct.pack(f"<{len(places)}Q", *sorted(places))

    def put(self, outpoints36: bytes, places: bytes) -> int:
        """Add each outpoint (k × 36) at its place (k × u64 LE) unless held; returns how many were added.

        Raises:
            ValueError: the two do not fit, or a place beyond 2^24 - 1.
        """
        if len(outpoints36) % 36 or len(places) != len(outpoints36) // 36 * 8:
            raise ValueError("put: outpoints36 (k x 36) and places (k x u64) do not fit")
        added = 0
        for i, (place,) in enumerate(struct.iter_unpack("<Q", places)):
            height, ordinal = place >> 32, place & 0xFFFFFFFF
            if height > _MAX_PLACE or ordinal > _MAX_PLACE:
                raise ValueError(f"put: place ({height}, {ordinal}) is beyond 2^24 - 1")
            outpoint = bytes(outpoints36[36 * i : 36 * i + 36])
            if outpoint not in self._places:
                self._places[outpoint] = (height, ordinal)
                added += 1
        return added
