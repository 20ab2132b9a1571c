"""BlindBit's BIP158 filters and spent index: BIP158's vectors, spdk's signet bodies, an independent decoder."""

from __future__ import annotations

import hashlib
import json
import random

import pytest
from bitcoin.core import CBlock

from conftest import ROOT
from gcsdecode import GolombSet, block_key16
from sp_scan import native, reference
from sp_scan.errors import MalformedDataError
from sp_scan import filters

BIP158 = json.loads((ROOT / "vectors/bip158/testnet-19.json").read_text())[1:]
SIGNET = (200000, 200001, 295125, 295147)
BUILDERS = [pytest.param(filters.golomb_set, id="backend"), pytest.param(reference.filters.golomb_set, id="reference")]


def signet(height: int, name: str):
    return json.loads((ROOT / f"vectors/blindbit/{height}/{name}.json").read_text())


def basic_filter_items(block_hex: str, prev_scripts_hex: list[str]) -> list[bytes]:
    """BIP158 basic filter elements: output scripts (not empty, not OP_RETURN) and prevout scripts, deduplicated."""
    items = {
        bytes(out.scriptPubKey)
        for tx in CBlock.deserialize(bytes.fromhex(block_hex)).vtx
        for out in tx.vout
        if len(out.scriptPubKey) and out.scriptPubKey[0] != 0x6A
    }
    items |= {bytes.fromhex(s) for s in prev_scripts_hex if s}
    return sorted(items)


def test_the_native_builder_is_the_default_unless_the_reference_is_selected():
    assert (filters.golomb_set is native.golomb_set) == native.ENABLED


# ---- BIP158's basic-filter vectors: SipHash, the map, the sort and the coding ----
@pytest.mark.parametrize("build", BUILDERS)
@pytest.mark.parametrize("row", BIP158, ids=[f"{r[0]}-{r[7] or 'block'}" for r in BIP158])
def test_bip158_basic_filter_is_rebuilt_byte_for_byte(row, build):
    _, block_hash, block_hex, prev_scripts, _, expected, *_ = row
    items = basic_filter_items(block_hex, prev_scripts)
    assert build(block_key16(block_hash), items).hex() == expected


@pytest.mark.parametrize("row", BIP158, ids=[f"{r[0]}-{r[7] or 'block'}" for r in BIP158])
def test_the_test_decoder_reads_bip158_filters(row):
    _, block_hash, block_hex, prev_scripts, _, expected, *_ = row
    items = basic_filter_items(block_hex, prev_scripts)
    gcs = GolombSet(bytes.fromhex(expected), block_key16(block_hash))
    assert gcs.n == len(items)
    assert all(item in gcs for item in items)


# ---- spdk's BlindBit v1 bodies for four signet blocks ----
@pytest.mark.parametrize("build", BUILDERS)
@pytest.mark.parametrize("height", SIGNET)
def test_spent_filter_is_rebuilt_byte_for_byte_from_the_spent_index(height, build):
    body, index = signet(height, "filter-spent"), signet(height, "spent-index")
    block_hash32 = bytes.fromhex(body["block_hash"])[::-1]
    hashes8 = [bytes.fromhex(h) for h in index["data"]]
    assert index["block_hash"] == body["block_hash"]
    assert build(block_hash32[:16], hashes8, 8).hex() == body["data"]
    if build is filters.golomb_set:
        assert filters.spent_filter(block_hash32, hashes8).hex() == body["data"]


@pytest.mark.parametrize("height", SIGNET)
def test_every_served_utxo_key_is_in_the_new_utxos_filter_and_random_keys_mostly_are_not(height):
    body = signet(height, "filter-new-utxos")
    gcs = GolombSet(bytes.fromhex(body["data"]), block_key16(body["block_hash"]))
    keys = {bytes.fromhex(u["scriptpubkey"])[2:] for u in signet(height, "utxos")}
    assert body["filter_type"] == 4 and body["block_height"] == height
    assert gcs.n >= len(keys) > 0
    assert all(key in gcs for key in keys)
    rng = random.Random(height)
    assert sum(rng.randbytes(32) in gcs for _ in range(2000)) <= 3  # about 2000 / 784931 expected


def outpoint36(utxo: dict) -> bytes:
    return bytes.fromhex(utxo["txid"])[::-1] + utxo["vout"].to_bytes(4, "little")


def test_spent_hash_of_a_295125_output_spent_in_295147_is_in_295147s_spent_index():
    index = signet(295147, "spent-index")
    block_hash32 = bytes.fromhex(index["block_hash"])[::-1]
    utxos = signet(295125, "utxos")
    hashes = filters.spent_hashes(block_hash32, [outpoint36(u) for u in utxos])
    spent = [h.hex() for h in hashes if h.hex() in index["data"]]
    assert len(spent) == 1
    i = [h.hex() for h in hashes].index(spent[0])
    assert hashlib.sha256(outpoint36(utxos[i]) + block_hash32).digest()[:8].hex() == spent[0]
    # the txid in display order would not match
    assert filters.spent_hashes(block_hash32, [bytes.fromhex(utxos[i]["txid"]) + outpoint36(utxos[i])[32:]])[0].hex() not in index["data"]


# ---- our filters through the independent decoder ----
def test_new_utxos_filter_keeps_duplicates_and_every_key_is_a_member():
    rng = random.Random(1)
    keys = [rng.randbytes(32) for _ in range(300)]
    keys += keys[:7]
    block_hash32 = rng.randbytes(32)
    data = filters.new_utxos_filter(block_hash32, keys)
    gcs = GolombSet(data, block_hash32[:16])
    assert gcs.n == 307
    assert data[:3] == b"\xfd\x33\x01"
    assert gcs.values == sorted(gcs.mapped(k) for k in keys)
    assert all(k in gcs for k in keys)
    assert sum(rng.randbytes(32) in gcs for _ in range(2000)) <= 3


def test_spent_filter_members_are_the_spent_hashes():
    rng = random.Random(2)
    block_hash32 = rng.randbytes(32)
    hashes8 = filters.spent_hashes(block_hash32, [rng.randbytes(36) for _ in range(50)])
    gcs = GolombSet(filters.spent_filter(block_hash32, hashes8), block_hash32[:16])
    assert gcs.n == 50 and all(h in gcs for h in hashes8)


@pytest.mark.parametrize("hashes", [filters.spent_hashes, reference.filters.spent_hashes], ids=["backend", "reference"])
def test_spent_hashes_backends_agree_with_hashlib(hashes):
    rng = random.Random(3)
    block_hash32 = rng.randbytes(32)
    outpoints36 = [rng.randbytes(36) for _ in range(100)]
    assert hashes(block_hash32, outpoints36) == [hashlib.sha256(o + block_hash32).digest()[:8] for o in outpoints36]
    assert hashes(block_hash32, [bytearray(o) for o in outpoints36[:3]]) == hashes(block_hash32, outpoints36[:3])
    with pytest.raises(MalformedDataError, match="outpoints36: item 1 is 35 bytes"):
        hashes(block_hash32, [bytes(36), bytes(35)])
    with pytest.raises(MalformedDataError, match="block_hash32"):
        hashes(bytes(33), [])


@pytest.mark.parametrize("backend", ["backend", "reference"])
def test_packed_items_give_the_same_answers_as_sequences(backend):
    build = filters.golomb_set if backend == "backend" else reference.filters.golomb_set
    hashes = filters.spent_hashes if backend == "backend" else reference.filters.spent_hashes
    rng = random.Random(4)
    block_hash32, keys = rng.randbytes(32), [rng.randbytes(32) for _ in range(40)]
    outpoints = [rng.randbytes(36) for _ in range(30)]
    assert build(block_hash32[:16], b"".join(keys), 32) == build(block_hash32[:16], keys, 32)
    assert build(block_hash32[:16], memoryview(b"".join(keys)), 32) == build(block_hash32[:16], keys, 32)
    assert hashes(block_hash32, bytearray(b"".join(outpoints))) == hashes(block_hash32, outpoints)
    assert build(block_hash32[:16], b"", 32) == b"\x00" and hashes(block_hash32, b"") == []
    with pytest.raises(MalformedDataError, match="keys32: packed items are 65 bytes, not a multiple of 32"):
        build(block_hash32[:16], bytes(65), 32, "keys32")
    with pytest.raises(MalformedDataError, match="outpoints36: packed items are 37 bytes, not a multiple of 36"):
        hashes(block_hash32, bytes(37))


def test_public_functions_take_the_index_packed_columns():
    rng = random.Random(5)
    block_hash32, keys, outpoints = rng.randbytes(32), rng.randbytes(32 * 25), rng.randbytes(36 * 9)
    hashes8 = filters.spent_hashes(block_hash32, outpoints)
    assert filters.new_utxos_filter(block_hash32, keys) == filters.new_utxos_filter(block_hash32, [keys[i : i + 32] for i in range(0, len(keys), 32)])
    assert filters.spent_filter(block_hash32, b"".join(hashes8)) == filters.spent_filter(block_hash32, hashes8)


def test_empty_filters_are_a_single_zero_byte():
    assert filters.new_utxos_filter(bytes(32), []) == b"\x00"
    assert filters.spent_filter(bytes(32), []) == b"\x00"
    assert filters.spent_hashes(bytes(32), []) == []


@pytest.mark.parametrize("n", [1, 2, 252, 253, 1000])
@pytest.mark.parametrize(("p", "m"), [(19, 784931), (4, 4096), (1, 1), (32, 1 << 40)])
def test_native_and_reference_build_the_same_set(n, p, m):
    rng = random.Random(n * 1000 + p)
    key16 = rng.randbytes(16)
    items = [rng.randbytes(rng.choice((8, 32, 36, 0, 3))) for _ in range(n)]
    items += items[: n // 3]
    built = filters.golomb_set(key16, items, p=p, m=m)
    assert built == reference.filters.golomb_set(key16, items, p=p, m=m)
    gcs = GolombSet(built, key16, p=p, m=m)
    assert gcs.n == len(items) and all(item in gcs for item in items)


@pytest.mark.parametrize("build", BUILDERS)
def test_bad_widths_raise_malformed_data_naming_the_argument(build):
    with pytest.raises(MalformedDataError, match="key16"):
        build(bytes(15), [])
    with pytest.raises(MalformedDataError, match=r"keys32: item 1 is 31 bytes, expected 32"):
        build(bytes(16), [bytes(32), bytes(31)], 32, "keys32")
    with pytest.raises(ValueError, match="p <= 32"):
        build(bytes(16), [b"x"], 0, "items", 33)


def test_public_functions_check_widths():
    with pytest.raises(MalformedDataError, match="block_hash32"):
        filters.new_utxos_filter(bytes(31), [])
    with pytest.raises(MalformedDataError, match="keys32"):
        filters.new_utxos_filter(bytes(32), [bytes(33)])
    with pytest.raises(MalformedDataError, match="hashes8"):
        filters.spent_filter(bytes(32), [bytes(9)])


# ---- looking items up: what a light client asks of a filter before it fetches ----

MATCHERS = [pytest.param(native.golomb_match, id="native"), pytest.param(reference.filters.golomb_match, id="reference")]


def _parts(data: bytes) -> tuple[int, bytes]:
    first = data[0]
    size = {0xFD: 2, 0xFE: 4, 0xFF: 8}.get(first, 0)
    return (int.from_bytes(data[1 : 1 + size], "little") if size else first), data[1 + size :]


@pytest.mark.skipif(not native.ENABLED, reason="the native module is not built")
@pytest.mark.parametrize("n", [0, 1, 2, 300, 5000])
def test_native_and_reference_lookups_agree_with_the_independent_decoder(n):
    rng = random.Random(n)
    key16 = rng.randbytes(16)
    members = [rng.randbytes(32) for _ in range(n)]
    queries = members[::3] + [rng.randbytes(32) for _ in range(400)] + members[1:2]
    count, stream = _parts(reference.filters.golomb_set(key16, members, 32))
    decoded = GolombSet(reference.filters.golomb_set(key16, members, 32), key16)
    expected = [i for i, q in enumerate(queries) if q in decoded]
    assert native.golomb_match(key16, count, stream, b"".join(queries), 32) == expected
    assert reference.filters.golomb_match(key16, count, stream, queries, 32) == expected
    assert set(range(len(members[::3]))) <= set(expected)


@pytest.mark.parametrize("height", SIGNET)
def test_blindbits_recorded_filters_hold_every_served_key_and_spent_hash(height):
    hash32 = bytes.fromhex(signet(height, "filter-new-utxos")["block_hash"])[::-1]
    keys = b"".join(bytes.fromhex(u["scriptpubkey"])[2:] for u in signet(height, "utxos"))
    assert filters.matches(hash32, bytes.fromhex(signet(height, "filter-new-utxos")["data"]), keys, 32) == list(range(len(keys) // 32))
    hashes = b"".join(bytes.fromhex(h) for h in signet(height, "spent-index")["data"])
    assert filters.matches(hash32, bytes.fromhex(signet(height, "filter-spent")["data"]), hashes, 8) == list(range(len(hashes) // 8))


@pytest.mark.parametrize("match", MATCHERS)
def test_a_lookup_in_a_filter_cut_short_or_claiming_too_many_values_is_malformed(match):
    key16 = bytes(16)
    members = [bytes([i]) * 32 for i in range(50)]
    count, stream = _parts(reference.filters.golomb_set(key16, members, 32))
    queries = b"".join(members)  # the highest value is the stream's last: the lookup reads it all
    assert len(stream) > 125
    with pytest.raises(MalformedDataError, match="ends before"):
        match(key16, count, stream[:125], queries, 32)  # room for 50 values of 20 bits, not for these
    with pytest.raises(MalformedDataError, match="fewer bits"):
        match(key16, 10**6, stream, queries, 32)
    with pytest.raises(MalformedDataError):
        match(key16[:15], count, stream, queries, 32)
    with pytest.raises(MalformedDataError):
        filters.matches(bytes(32), b"\xfd\x01", queries, 32)  # a CompactSize cut short
