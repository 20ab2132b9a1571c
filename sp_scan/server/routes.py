"""The BlindBit Oracle v1 answers: parse the arguments, read the index, serialize to JSON bytes.

Each `*_answer` function takes a read-only `Index`, the height, the block hash the server
expects there (and the tip hash for answers that depend on the tip) and returns an
`answers.Answer`; it runs on a reader thread. The answer is marked cacheable only when the
index still held exactly that block (and tip) around the read, so a cached answer always
belongs to the key it is stored under. Nothing here touches SQL or does EC math: the index
stores the tweaks, filters and spent-index hashes as served.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..proto import blindbit_v1
from .answers import Answer, answer

if TYPE_CHECKING:
    from sp_scan.index import Index

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


def dumps(value: object) -> bytes:
    """Compact JSON bytes."""
    return json.dumps(value, separators=(",", ":")).encode()


def _display(hash32: bytes) -> str:
    return hash32[::-1].hex()


def _string_array(hex_texts: bytes, width: int) -> bytes:
    """A JSON array of the strings of `width` characters that make up `hex_texts` (ASCII hex)."""
    if not hex_texts:
        return b"[]"
    items = [hex_texts[i : i + width] for i in range(0, len(hex_texts), width)]
    return b'["' + b'","'.join(items) + b'"]'


def read_block(index: Index, height: int, hash32: bytes, tip: bytes | None, read: Callable[[], object]) -> tuple[bytes, object, bool]:
    """(the block's hash, read(), cacheable): read() while block `height` stays one block around it.

    Cacheable when that block is `hash32` and, with `tip`, the index's tip hash is `tip` around
    the read too.

    Raises:
        HeightError: the height is not indexed.
        RouteError: 503 when the block kept changing (a reorg in progress).
    """
    for _ in range(_STABLE_TRIES):
        before = index.block_hash(height)
        tip_before = index.tip() if tip is not None else None
        value = read()
        if index.block_hash(height) != before:
            continue
        cacheable = before == hash32
        if tip is not None:
            tip_after = index.tip()
            cacheable = cacheable and tip_before == tip_after and tip_after is not None and tip_after[1] == tip
        return before, value, cacheable
    raise RouteError(503, f"block {height} keeps changing (reorg in progress); retry")


def tweaks_answer(index: Index, height: int, hash32: bytes, tip: bytes | None, dust_limit: int, cut_through: bool) -> Answer:
    """`/tweak-index/:h` (full) and `/tweaks/:h` (cut-through, pass the tip): 66-hex tweaks in block order.

    A tx is kept when its largest taproot output is >= dust_limit; with cut_through, only while
    one of its taproot outputs is unspent, and by the largest unspent one.
    """
    _, tweaks, cacheable = read_block(index, height, hash32, tip, lambda: index.tweaks(height, dust_limit=dust_limit, cut_through=cut_through))
    return answer(200, _string_array(b"".join(tweaks).hex().encode(), 66), cacheable)


def filter_answer(index: Index, height: int, hash32: bytes, kind: str) -> Answer:
    """`/filter/new-utxos/:h` and `/filter/spent/:h`: the stored GCS bytes as `data` hex."""
    got, data, cacheable = read_block(index, height, hash32, None, lambda: index.filter(height, kind))
    body = {"block_hash": _display(got), "block_height": height, "data": data.hex(), "filter_type": FILTER_TYPE}
    return answer(200, dumps(body), cacheable)


def utxos_answer(index: Index, height: int, hash32: bytes, tip: bytes) -> Answer:
    """`/utxos/:h`: every taproot output of the block's eligible txs, spent ones flagged (as of `tip`)."""
    got, (time, utxos), cacheable = read_block(index, height, hash32, tip, lambda: (index.block_time(height), index.utxos(height)))
    tail = f',"block_height":{height},"block_hash":"{_display(got)}","timestamp":{time},"spent":'
    spent, unspent = tail + "true}", tail + "false}"
    rows = [
        f'{{"txid":"{u.txid32[::-1].hex()}","vout":{u.vout},"value":{u.value},"scriptpubkey":"5120{u.output32.hex()}"'
        + (spent if u.spent else unspent)
        for u in utxos
    ]
    return answer(200, ("[" + ",".join(rows) + "]").encode(), cacheable)


def spent_index_answer(index: Index, height: int, hash32: bytes) -> Answer:
    """`/spent-index/:h`: the block's 8-byte spent-index hashes, tx then vin order."""
    got, hashes, cacheable = read_block(index, height, hash32, None, lambda: index.spent_index(height))
    data = _string_array(b"".join(hashes).hex().encode(), 16)
    return answer(200, b'{"block_hash":"%s","data":%s}' % (_display(got).encode(), data), cacheable)


def info_body(network: str, height: int) -> bytes:
    """`/info`: network (spdk's names), tip height, which tweak routes are filled (all of them)."""
    return dumps({"network": network, "height": height, "tweaks_only": False, **dict.fromkeys(blindbit_v1.INFO_FLAGS.values(), True)})


def block_height_body(height: int) -> bytes:
    """`/block-height`: `{"block_height": tip}`."""
    return dumps({"block_height": height})


def block_hash_body(hash32: bytes) -> bytes:
    """`/block-hash/:h`: the block's hash, display hex."""
    return dumps({"block_hash": _display(hash32)})

