"""Cake Wallet's tweak methods (cake-tech/blockstream-electrs, src/electrum/server.rs), served from the index.

- `blockchain.tweaks.subscribe(height, count, historical, protocol_version?)`: notifications of the same
  method, one per block with tweaks, params `[{"<height>": {"<txid>": {"tweak", "output_pubkeys":
  {"<vout>": [x-only key, amount, spent?]}}}}]` (protocol 1) or `[{"tweaks_v2": base64}]` (protocol 2,
  the compact form cake-tech/sp_scanner decodes: `u32 height LE ‖ CompactSize n_tx ‖ n_tx × (txid32
  internal order ‖ tweak33 ‖ CompactSize n_out ‖ n_out × (CompactSize vout ‖ x-only key32))`), the last
  height of the range always sent (empty when it has none) so the client knows where the scan ended,
  then `[{"message": "done"}]`; the answer is that last notification whole, as electrs returns it.
  With `historical` false, spent outputs are left out and a tx left with none is dropped (Cake's rule).
- `blockchain.block.tweaks(height)`: the block's tweaks, 66 hex each, block order.
- `blockchain.tweaks.get(txid, vout, height)`: `{"amount", "spent"}` of one output (the compact form
  carries no amounts).
Heights below the index's first height are read from it, as electrs starts at its first SP height.
"""

from __future__ import annotations

import base64
import itertools
import struct

from aiorpcx import RPCError

from sp_scan.errors import HeightError
from sp_scan.index import Index, Partition
from sp_scan.wire import compact_size

from .frigate import invalid, named

TWEAKS_SUBSCRIBE = "blockchain.tweaks.subscribe"
BLOCK_TWEAKS = "blockchain.block.tweaks"
TWEAKS_GET = "blockchain.tweaks.get"
MAX_COUNT = 1000
"""electrs caps `count` at 1000 blocks."""
PROTOCOLS = (1, 2)
MAX_PROTOCOL = 2
READ_BLOCKS = 50
"""Blocks read from the index at a time while streaming."""
NOT_FOUND = 1


def _height(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**32:
        raise invalid(f"{name} must be an integer from 0 to 2^32 - 1")
    return value


def parse_subscribe(args) -> tuple[int, int, bool, int]:
    """(height, count, historical, protocol) of a tweaks.subscribe call; count capped at MAX_COUNT.

    Raises:
        RPCError: -32602 for a missing or malformed param, or a protocol other than 1 or 2.
    """
    height, count, historical, protocol = named(args, ("height", "count", "historical", "protocol_version"), 2)
    height, count = _height(height, "height"), min(_height(count, "count"), MAX_COUNT)
    if historical is None:
        historical = False
    if not isinstance(historical, bool):
        raise invalid("historical must be true or false")
    protocol = 1 if protocol is None else protocol
    if isinstance(protocol, bool) or protocol not in PROTOCOLS:
        raise invalid(f"unsupported protocol_version {str(protocol)[:20]} (this server speaks {', '.join(map(str, PROTOCOLS))})")
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


def _blocks(p: Partition, historical: bool):
    """Per block of the partition: (height, [(txid32, tweak33, [(vout, key32, amount, spent)])]), spent
    outputs left out unless historical."""
    heights, tx_starts, out_starts = (memoryview(b).cast("I") for b in (p.heights, p.tx_starts, p.out_starts))
    counts, vouts, values = memoryview(p.counts).cast("I"), memoryview(p.vouts).cast("I"), memoryview(p.values).cast("Q")
    firsts = list(itertools.accumulate(counts, initial=0))
    n_blocks = len(heights)
    for b in range(n_blocks):
        tx_end = tx_starts[b + 1] if b + 1 < n_blocks else len(counts)
        txs = []
        for tx in range(tx_starts[b], tx_end):
            outputs = []
            for j in range(firsts[tx], firsts[tx + 1]):
                spent = bool(p.spent[j >> 3] >> (j & 7) & 1)
                if historical or not spent:
                    outputs.append((vouts[j], p.outputs32[32 * j : 32 * j + 32], values[j], spent))
            if outputs:
                point64 = p.tweaks64[64 * tx : 64 * tx + 64]
                txs.append((p.txids[32 * tx : 32 * tx + 32], bytes([2 + (point64[63] & 1)]) + point64[:32], outputs))
        yield heights[b], txs


def stream_chunk(index: Index, lo: int, hi: int, last: int, historical: bool, protocol: int) -> list[dict]:
    """The notification params objects for heights lo..hi of a stream ending at `last` (runs on a reader thread)."""
    out = []
    sent_last = False
    for height, txs in _blocks(index.partition(lo, hi), historical):
        if not txs and height != last:
            continue
        sent_last |= height == last
        out.append(_block_message(height, txs, protocol))
    if hi == last and not sent_last:
        out.append(_block_message(last, [], protocol))
    return out


def _block_message(height: int, txs, protocol: int) -> dict:
    if protocol == 2:
        record = compact_block(height, [(txid, tweak, [(vout, key) for vout, key, _, _ in outs]) for txid, tweak, outs in txs])
        return {"tweaks_v2": base64.b64encode(record).decode()}
    return {
        str(height): {
            txid[::-1].hex(): {
                "tweak": tweak.hex(),
                "output_pubkeys": {str(vout): [key.hex(), amount, *([True] if spent else [])] for vout, key, amount, spent in outs},
            }
            for txid, tweak, outs in txs
        }
    }


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
        RPCError: -32602 for a missing or malformed param.
    """
    txid, vout, height = named(args, ("txid", "vout", "height"), 3)
    try:
        if not isinstance(txid, str) or len(txid) != 64:
            raise ValueError
        txid32 = bytes.fromhex(txid)[::-1]
    except ValueError:
        raise invalid("txid must be 64 hex digits") from None
    return txid32, _height(vout, "vout"), _height(height, "height")


def tweak_output(index: Index, txid32: bytes, vout: int, height: int) -> dict:
    """`blockchain.tweaks.get`: {"amount", "spent"} of a taproot output of an eligible tx (runs on a reader thread).

    Raises:
        RPCError: code 1 when the block has no such tx or output.
    """
    try:
        blocks = list(_blocks(index.partition(height, height), True))
    except HeightError:
        blocks = []
    for _, txs in blocks:
        for txid, _, outputs in txs:
            if txid == txid32:
                for out_vout, _, amount, spent in outputs:
                    if out_vout == vout:
                        return {"amount": amount, "spent": spent}
    raise RPCError(NOT_FOUND, f"no tweak row for output {vout} of {txid32[::-1].hex()} at height {height}")
