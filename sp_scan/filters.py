"""The two BlindBit Oracle v1 filters of a block and its spent index.

Both filters are BIP158 Golomb-coded sets with P = 19, M = 784931 and the SipHash-2-4 key
taken from the first 16 bytes of the block hash (internal order). Items are hashed, mapped
into [0, N·M), sorted with duplicates kept, and Golomb-Rice coded; a filter is
CompactSize(N) ‖ the bit stream zero-padded to a byte, the bytes served as `data`.

- new-UTXO filter: the 32-byte x-only key of every P2TR output of the block.
- spent filter: the block's spent-index hashes, SHA256(prevout txid ‖ vout LE32 ‖ block
  hash)[:8] for every input that spends a P2TR output.

`golomb_set` (SipHash, map, sort, code), `golomb_match` (the lookup a light client makes) and
`spent_hashes` come from the chosen backend
(`sp_scan.backend`): C, or the Python of `sp_scan.reference.filters`.
"""

from __future__ import annotations

from collections.abc import Sequence

from sp_scan.backend import golomb_match, golomb_set, spent_hashes
from sp_scan.errors import MalformedDataError
from sp_scan.wire import Reader
from sp_scan.reference.filters import M, P

__all__ = ["M", "P", "golomb_match", "golomb_set", "matches", "new_utxos_filter", "spent_filter", "spent_hashes"]


def _block_key16(block_hash32: bytes) -> bytes:
    if len(block_hash32) != 32:
        raise MalformedDataError("block_hash32 must be 32 bytes")
    return bytes(block_hash32[:16])


def new_utxos_filter(block_hash32: bytes, keys32: Sequence[bytes] | bytes) -> bytes:
    """Build a block's new-UTXO filter: the GCS of the x-only keys of all its P2TR outputs.

    Args:
        block_hash32: the block hash, internal byte order (its first 16 bytes key SipHash).
        keys32: the 32-byte x-only output keys, every P2TR output of the block, duplicates included;
            a sequence, or one bytes object of k × 32 (the index's packed column).

    Returns:
        The filter bytes served hex-encoded as `data` by /filter/new-utxos.

    Raises:
        MalformedDataError: block_hash32 is not 32 bytes or a key is not 32 bytes.
    """
    return golomb_set(_block_key16(block_hash32), keys32, 32, "keys32")


def spent_filter(block_hash32: bytes, hashes8: Sequence[bytes] | bytes) -> bytes:
    """Build a block's spent filter: the GCS of its spent-index hashes.

    Args:
        block_hash32: the block hash, internal byte order.
        hashes8: the block's 8-byte spent-index hashes (`spent_hashes`), or them packed (k × 8).

    Returns:
        The filter bytes served hex-encoded as `data` by /filter/spent.

    Raises:
        MalformedDataError: block_hash32 is not 32 bytes or a hash is not 8 bytes.
    """
    return golomb_set(_block_key16(block_hash32), hashes8, 8, "hashes8")


def matches(block_hash32: bytes, filter_bytes: bytes, items: bytes, width: int) -> list[int]:
    """Which items a block's filter (either kind) holds: what a light client asks before it fetches.

    Args:
        block_hash32: the block hash, internal byte order.
        filter_bytes: the filter, CompactSize(N) ‖ bit stream, as /filter/* serve it in `data`.
        items: the items packed, k × width bytes (32-byte x-only keys, or 8-byte spent-index hashes).
        width: the items' length.

    Returns:
        The indices of the items the filter holds, ascending (false positives at rate 1/M).

    Raises:
        MalformedDataError: block_hash32 is not 32 bytes, items are not k × width bytes, or the filter
            does not parse (a count its stream cannot hold, a non-canonical CompactSize).
    """
    reader = Reader(bytes(filter_bytes), what="filter")
    n = reader.compact_size()
    return golomb_match(_block_key16(block_hash32), n, reader.data[reader.pos :], items, width)
