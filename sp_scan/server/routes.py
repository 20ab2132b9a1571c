"""The BlindBit Oracle v1 routes: parse, ask the index, serialize.

Each `*_body` function takes a read-only `Index` and parsed arguments and returns the JSON
value of the answer; it runs on a reader thread (`app.Readers`). A height the index does not
hold raises the index's `HeightError` (answered 404). Nothing here touches SQL or does EC
math: the index stores the tweaks, filters and spent-index hashes as served.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sp_scan.index import Index

FILTER_KINDS = ("new-utxos", "spent")
FILTER_TYPE = 4
"""BlindBit's `filter_type` for its taproot filters (BIP158 parameters, not a basic filter)."""
MAX_HEIGHT = 2**32 - 1
MAX_DUST_LIMIT = 2**64 - 1
_DIGITS = re.compile(r"[0-9]+")
_STABLE_TRIES = 3


class RouteError(Exception):
    """An answer other than 200: the HTTP status and the `error` message of the JSON body."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def parse_height(text: str) -> int:
    """Parse a height path segment: decimal digits only, at most 2**32 - 1.

    Raises:
        RouteError: 400 when it does not parse.
    """
    if len(text) > 10 or not _DIGITS.fullmatch(text) or int(text) > MAX_HEIGHT:
        raise RouteError(400, f"could not parse block height {text[:20]!r}")
    return int(text)


def parse_dust_limit(text: str | None) -> int:
    """Parse the `dustLimit` query value (satoshis, default 0): decimal digits, at most 2**64 - 1.

    Raises:
        RouteError: 400 when it does not parse (empty, negative, not an integer, too large).
    """
    if text is None:
        return 0
    if len(text) > 20 or not _DIGITS.fullmatch(text) or int(text) > MAX_DUST_LIMIT:
        raise RouteError(400, f"invalid dustLimit {text[:24]!r}: an integer from 0 to {MAX_DUST_LIMIT}")
    return int(text)


def _tip(index: Index) -> tuple[int, bytes]:
    tip = index.tip()
    if tip is None:
        raise RouteError(503, "the index has no blocks yet")
    return tip


def _display(hash32: bytes) -> str:
    return hash32[::-1].hex()


def _stable(index, height: int, read: Callable[[], object]) -> tuple[bytes, object]:
    """(block hash, read()) of one block, read again if a reorg replaced the block meanwhile."""
    for _ in range(_STABLE_TRIES):
        hash32 = index.block_hash(height)
        value = read()
        if index.block_hash(height) == hash32:
            return hash32, value
    raise RouteError(503, f"block {height} keeps changing (reorg in progress); retry")


def info_body(index: Index) -> dict:
    """`/info`: network (spdk's names), tip height, which tweak routes are filled (all of them)."""
    height, _ = _tip(index)
    return {
        "network": index.network,
        "height": height,
        "tweaks_only": False,
        "tweaks_full_basic": True,
        "tweaks_full_with_dust_filter": True,
        "tweaks_cut_through_with_dust_filter": True,
    }


def block_height_body(index: Index) -> dict:
    """`/block-height`: `{"block_height": tip}`."""
    height, _ = _tip(index)
    return {"block_height": height}


def block_hash_body(index: Index, height: int) -> dict:
    """`/block-hash/:h`: the block's hash, display hex."""
    return {"block_hash": _display(index.block_hash(height))}


def tweaks_body(index: Index, height: int, dust_limit: int, cut_through: bool) -> list[str]:
    """`/tweak-index/:h` (full) and `/tweaks/:h` (cut-through): 66-hex tweaks in block order.

    A tx is kept when its largest taproot output is >= dust_limit; with cut_through, only while
    one of its taproot outputs is unspent, and by the largest unspent one.
    """
    return [t.hex() for t in index.tweaks(height, dust_limit=dust_limit, cut_through=cut_through)]


def filter_body(index: Index, kind: str, height: int) -> dict:
    """`/filter/new-utxos/:h` and `/filter/spent/:h`: the stored GCS bytes as `data` hex."""
    hash32, data = _stable(index, height, lambda: index.filter(height, kind))
    return {"block_hash": _display(hash32), "block_height": height, "data": data.hex(), "filter_type": FILTER_TYPE}


def utxos_body(index: Index, height: int) -> list[dict]:
    """`/utxos/:h`: every taproot output of the block's eligible txs, spent ones flagged, as stored."""
    hash32, (time, utxos) = _stable(index, height, lambda: (index.block_time(height), index.utxos(height)))
    block_hash = _display(hash32)
    return [
        {
            "txid": _display(u.txid32),
            "vout": u.vout,
            "value": u.value,
            "scriptpubkey": "5120" + u.output32.hex(),
            "block_height": height,
            "block_hash": block_hash,
            "timestamp": time,
            "spent": u.spent,
        }
        for u in utxos
    ]


def spent_index_body(index: Index, height: int) -> dict:
    """`/spent-index/:h`: the block's 8-byte spent-index hashes, tx then vin order."""
    hash32, hashes = _stable(index, height, lambda: index.spent_index(height))
    return {"block_hash": _display(hash32), "data": [h.hex() for h in hashes]}
