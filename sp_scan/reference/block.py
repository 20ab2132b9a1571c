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
