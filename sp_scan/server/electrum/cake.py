"""Cake Wallet's tweak methods (cake-tech/blockstream-electrs, src/electrum/server.rs), served from the index.

- `blockchain.tweaks.subscribe(height, count, historical, protocol_version?)`: notifications of the same
  method, one per block with tweaks, params `[{"<height>": {"<txid>": {"tweak", "output_pubkeys":
  {"<vout>": [x-only key, amount, spent?]}}}}]` (protocol 1) or `[{"tweaks_v2": base64}]` (protocol 2,
  the compact form cake-tech/sp_scanner decodes: `u32 height LE ‖ CompactSize n_tx ‖ n_tx × (txid32
  internal order ‖ tweak33 ‖ CompactSize n_out ‖ n_out × (CompactSize vout ‖ x-only key32))`), the last
  height of the range always sent (empty when it has none) so the client knows where the scan ended,
  then `[{"message": "done"}]`; the answer is that last notification whole, as electrs returns it.
  With `historical`, a spent output's list ends with electrs's SpendingInput `{"txid", "vin",
  "confirmed": {"height", "hash", "time"} or null}` (the index knows that it is spent, the backend
  Electrum server which input spent it: historical protocol-1 streams need one). Without, spent
  outputs of blocks below tip - 5 are left out, and a tx left with none is dropped; the last blocks'
  are kept unmarked (electrs looks spends up only below tip - 5).
- `blockchain.block.tweaks(height)`: the block's tweaks, 66 hex each, block order.
- `blockchain.tweaks.get(txid, vout, height)`: `{"amount", "spent"}` of one output (the compact form
  carries no amounts).
Heights below the index's first height are read from it, as electrs starts at its first SP height.
Errors of these methods are electrs's: `"error": "<message>"` (`rpc.PlainError`), not an object.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import itertools
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from sp_scan.errors import HeightError, SPError
from sp_scan.index import Index, Partition
from sp_scan.wire import compact_size, parse_tx, sha256d

from .frigate import named
from .rpc import PlainError

MAX_COUNT = 1000
"""electrs caps `count` at 1000 blocks."""
PROTOCOLS = (1, 2)
MAX_PROTOCOL = 2
READ_BLOCKS = 50
"""Blocks read from the index at a time while streaming."""
RECENT = 5
"""electrs looks spends up, and leaves spent outputs out of a non-historical stream, only below tip - RECENT."""


def _height(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**32:
        raise PlainError(f"{name} must be an integer from 0 to 2^32 - 1")
    return value


def parse_subscribe(args) -> tuple[int, int, bool, int]:
    """(height, count, historical, protocol) of a tweaks.subscribe call; count capped at MAX_COUNT.

    Raises:
        PlainError: a missing or malformed param, or a protocol other than 1 or 2.
    """
    height, count, historical, protocol = named(args, ("height", "count", "historical", "protocol_version"), 2)
    height, count = _height(height, "height"), min(_height(count, "count"), MAX_COUNT)
    if historical is None:
        historical = False
    if not isinstance(historical, bool):
        raise PlainError("historical must be true or false")
    protocol = 1 if protocol is None else protocol
    if isinstance(protocol, bool) or protocol not in PROTOCOLS:
        raise PlainError(f"unsupported protocol_version {str(protocol)[:20]} (this server speaks {', '.join(map(str, PROTOCOLS))})")
    return height, count, historical, protocol


def done_message() -> dict:
    """The final notification's params object (electrs's `{"message": "done"}`, plus the newest protocol)."""
    return {"max_protocol_version": MAX_PROTOCOL, "message": "done"}


def stream_range(index: Index, height: int, count: int) -> tuple[int, int] | None:
    """The heights a tweaks.subscribe streams: from max(height, first) for `count` blocks, up to the tip."""
    tip, first = index.tip(), index.first_height
    if tip is None or count == 0:
        return None
    lo, hi = max(height, first), min(height + count - 1, tip[0])
    return (lo, hi) if lo <= hi else None



def compact_block(height: int, txs: list[tuple[bytes, bytes, list[tuple[int, bytes]]]]) -> bytes:
    """The compact (protocol 2) record of one block: txs as (txid32 internal, tweak33, [(vout, x-only32)])."""
    out = [struct.pack("<I", height), compact_size(len(txs))]
    for txid32, tweak33, outputs in txs:
        out += [txid32, tweak33, compact_size(len(outputs))]
        out += [compact_size(vout) + key32 for vout, key32 in outputs]
    return b"".join(out)


def _blocks(p: Partition, keep_spent_from: int):
    """Per block of the partition: (height, [(txid32, tweak33, [(vout, key32, amount, spent)])]), spent
    outputs of blocks below `keep_spent_from` left out (and a tx left with none)."""
    heights, tx_starts, out_starts = (memoryview(b).cast("I") for b in (p.heights, p.tx_starts, p.out_starts))
    counts, vouts, values = memoryview(p.counts).cast("I"), memoryview(p.vouts).cast("I"), memoryview(p.values).cast("Q")
    firsts = list(itertools.accumulate(counts, initial=0))
    n_blocks = len(heights)
    for b in range(n_blocks):
        tx_end = tx_starts[b + 1] if b + 1 < n_blocks else len(counts)
        keep_spent = heights[b] >= keep_spent_from
        txs = []
        for tx in range(tx_starts[b], tx_end):
            outputs = []
            for j in range(firsts[tx], firsts[tx + 1]):
                spent = bool(p.spent[j >> 3] >> (j & 7) & 1)
                if keep_spent or not spent:
                    outputs.append((vouts[j], p.outputs32[32 * j : 32 * j + 32], values[j], spent))
            if outputs:
                txs.append((p.txids[32 * tx : 32 * tx + 32], p.tweaks33[33 * tx : 33 * tx + 33], outputs))
        yield heights[b], txs


@dataclass(slots=True)
class SpentOutput:
    """A spent output of a historical stream: its outpoint, key and height, and the list its marker goes on."""

    txid32: bytes
    vout: int
    key32: bytes
    height: int
    items: list


def stream_chunk(index: Index, lo: int, hi: int, last: int, historical: bool, protocol: int) -> tuple[list[dict], list[SpentOutput]]:
    """The notification params objects for heights lo..hi of a stream ending at `last` (runs on a reader
    thread), and the spent outputs whose markers `spend_markers` must add (protocol 1, historical)."""
    tip = index.tip()
    keep_spent_from = 0 if historical else (tip[0] if tip else 0) - RECENT
    out: list[dict] = []
    spent: list[SpentOutput] = []
    sent_last = False
    for height, txs in _blocks(index.partition(lo, hi), keep_spent_from):
        if not txs and height != last:
            continue
        sent_last |= height == last
        out.append(_block_message(height, txs, protocol, spent if historical else None))
    if hi == last and not sent_last:
        out.append(_block_message(last, [], protocol, None))
    return out, spent


def _block_message(height: int, txs, protocol: int, spent: list[SpentOutput] | None) -> dict:
    if protocol == 2:
        record = compact_block(height, [(txid, tweak, [(vout, key) for vout, key, _, _ in outs]) for txid, tweak, outs in txs])
        return {"tweaks_v2": base64.b64encode(record).decode()}
    block = {}
    for txid, tweak, outs in txs:
        pubkeys = {}
        for vout, key, amount, is_spent in outs:
            items = pubkeys[str(vout)] = [key.hex(), amount]
            if is_spent and spent is not None:
                spent.append(SpentOutput(txid, vout, key, height, items))
        block[txid[::-1].hex()] = {"tweak": tweak.hex(), "output_pubkeys": pubkeys}
    return {str(height): block}


Request = Callable[[str, list], Awaitable]
"""The backend Electrum server's `request(method, params)`."""


async def spend_markers(request: Request, outputs: list[SpentOutput]) -> None:
    """Append to each output's list electrs's SpendingInput: `{"txid", "vin", "confirmed": {"height",
    "hash", "time"}}` (`confirmed` null for a spend the backend has in its mempool), found through the
    backend: the history of the output's script, the txs in it after the output, the input spending it.

    Raises:
        PlainError: the backend does not know what spent an output the index has spent (a backend
            behind the index), or answers something that does not parse.
        RPCError: the backend's own error, or -32000 when it is unreachable.
    """
    if not outputs:
        return
    scripts = {o.key32: hashlib.sha256(b"\x51\x20" + o.key32).digest()[::-1].hex() for o in outputs}
    histories = dict(zip(scripts, await asyncio.gather(*(request("blockchain.scripthash.get_history", [h]) for h in scripts.values()))))
    wanted: dict[str, int] = {}
    for o in outputs:
        funding = o.txid32[::-1].hex()
        for entry in _entries(histories[o.key32]):
            if entry[0] != funding and (entry[1] <= 0 or entry[1] >= o.height):
                wanted[entry[0]] = entry[1]
    raws = await asyncio.gather(*(request("blockchain.transaction.get", [txid]) for txid in wanted))
    spender: dict[tuple[bytes, int], tuple[str, int, int]] = {}
    for (txid, height), raw in zip(wanted.items(), raws):
        try:
            tx = parse_tx(bytes.fromhex(raw))
        except (SPError, ValueError, TypeError):
            raise PlainError(f"the backend's transaction {txid} does not parse") from None
        for vin, spent_input in enumerate(tx.inputs):
            spender[spent_input.outpoint.txid32, spent_input.outpoint.vout] = (txid, vin, height)
    heights = sorted({h for _, _, h in spender.values() if h > 0})
    headers = dict(zip(heights, await asyncio.gather(*(request("blockchain.block.header", [h]) for h in heights))))
    for o in outputs:
        found = spender.get((o.txid32, o.vout))
        if found is None:
            raise PlainError(f"the backend does not know what spent output {o.vout} of {o.txid32[::-1].hex()}")
        txid, vin, height = found
        o.items.append({"txid": txid, "vin": vin, "confirmed": _block_id(height, headers.get(height))})


def _entries(history) -> list[tuple[str, int]]:
    """(tx_hash, height) of a get_history answer."""
    try:
        return [(str(e["tx_hash"]), int(e["height"])) for e in history]
    except (TypeError, KeyError, ValueError):
        raise PlainError("the backend's history does not parse") from None


def _block_id(height: int, header_hex) -> dict | None:
    """electrs's BlockId of the block at `height` from its header's hex, None for the mempool (height <= 0)."""
    if height <= 0:
        return None
    try:
        header = bytes.fromhex(header_hex)
    except (TypeError, ValueError):
        header = b""
    if len(header) != 80:
        raise PlainError(f"the backend's header at height {height} does not parse")
    return {"height": height, "hash": sha256d(header)[::-1].hex(), "time": int.from_bytes(header[68:72], "little")}


def block_tweaks(index: Index, height: int) -> list[str]:
    """`blockchain.block.tweaks`: the block's tweaks (66 hex), block order; below the first height, the first block's.

    Raises:
        HeightError: the height is not indexed.
    """
    first = index.first_height
    return [t.hex() for t in index.tweaks(max(height, first if first is not None else height))]


def parse_get(args) -> tuple[bytes, int, int]:
    """(txid32 internal order, vout, height) of a tweaks.get call.

    Raises:
        PlainError: a missing or malformed param.
    """
    txid, vout, height = named(args, ("txid", "vout", "height"), 3)
    try:
        if not isinstance(txid, str) or len(txid) != 64:
            raise ValueError
        txid32 = bytes.fromhex(txid)[::-1]
    except ValueError:
        raise PlainError("txid must be 64 hex digits") from None
    return txid32, _height(vout, "vout"), _height(height, "height")


def tweak_output(index: Index, txid32: bytes, vout: int, height: int) -> dict:
    """`blockchain.tweaks.get`: {"amount", "spent"} of a taproot output of an eligible tx (runs on a reader thread).

    Raises:
        PlainError: the block has no such tx or output.
    """
    try:
        blocks = list(_blocks(index.partition(height, height), 0))
    except HeightError:
        blocks = []
    for _, txs in blocks:
        for txid, _, outputs in txs:
            if txid == txid32:
                for out_vout, _, amount, spent in outputs:
                    if out_vout == vout:
                        return {"amount": amount, "spent": spent}
    raise PlainError(f"no tweak row for output {vout} of {txid32[::-1].hex()} at height {height}")
