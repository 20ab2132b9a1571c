"""The tweak index's store and read API: round trips, cut-through, rollback, refusals, partitions and scans."""

from __future__ import annotations

import pickle
from pathlib import Path
import sqlite3
import struct

import pytest

import blockfactory as bf
from cli_support import Chain, spending_chain
from index_support import WALLET, content, files_of, synced
from sp_scan import block
from sp_scan.errors import HeightError, IndexStoreError, NodeError
from sp_scan.index import Index, scan_partition, store
from sp_scan.types import IndexMatch, Utxo

CHAIN = spending_chain(9)
SPEND_HEIGHTS = [h for h in range(len(CHAIN.blocks)) if h % 3 == 2]


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    with synced(tmp_path_factory.mktemp("index") / "chain.db", CHAIN) as idx:
        yield idx


def spent_outpoints() -> set[tuple[bytes, int]]:
    return {(i.prevout.hash, i.prevout.n) for h in SPEND_HEIGHTS for tx in CHAIN.blocks[h].txs[1:] for i in tx.vin}


def expected_utxos(h: int) -> list[Utxo]:
    tb = CHAIN.blocks[h]
    eligible = {t.txid32 for t in block.tweaks(tb.raw, tb.spent_bytes)}
    spent = spent_outpoints()
    outs = [Utxo(t, v, o.amount, o.script[2:], (t, v) in spent) for t, v, o in bf.taproot_outputs(tb) if t in eligible]
    return sorted(outs, key=lambda u: (u.txid32[::-1], u.vout))


def test_every_block_reads_back_as_the_block_loop_computes_it(index):
    assert index.tip() == (CHAIN.tip, CHAIN.blocks[-1].header.GetHash())
    assert (index.network, index.first_height) == ("regtest", 0)
    for h, tb in enumerate(CHAIN.blocks):
        assert index.block_hash(h) == tb.header.GetHash()
        assert index.block_time(h) == tb.header.nTime
        assert index.tweaks(h) == [t.tweak33 for t in block.tweaks(tb.raw, tb.spent_bytes)]
        assert index.utxos(h) == expected_utxos(h)


def test_the_chain_spends_outputs_of_earlier_indexed_txs(index):
    spent = [u for h in range(len(CHAIN.blocks)) for u in index.utxos(h) if u.spent]
    assert len(spent) == len(spent_outpoints()) > 4


def test_the_dust_limit_keeps_txs_whose_largest_taproot_output_reaches_it(index):
    for h in range(len(CHAIN.blocks)):
        by_tx: dict[bytes, int] = {}
        for u in index.utxos(h):
            by_tx[u.txid32] = max(by_tx.get(u.txid32, 0), u.value)
        order = [t for t in (x.txid32 for x in block.tweaks(CHAIN.blocks[h].raw, CHAIN.blocks[h].spent_bytes))]
        all_tweaks = dict(zip(order, index.tweaks(h)))
        for limit in sorted(set(by_tx.values())):
            assert index.tweaks(h, dust_limit=limit) == [all_tweaks[t] for t in order if by_tx[t] >= limit]
        assert index.tweaks(h, dust_limit=max(by_tx.values()) + 1) == []


def test_cut_through_drops_a_tx_only_when_all_its_taproot_outputs_are_spent(index):
    dropped = kept_partly_spent = 0
    for h in range(len(CHAIN.blocks)):
        by_tx: dict[bytes, list[bool]] = {}
        for u in index.utxos(h):
            by_tx.setdefault(u.txid32, []).append(u.spent)
        order = [t.txid32 for t in block.tweaks(CHAIN.blocks[h].raw, CHAIN.blocks[h].spent_bytes)]
        tweaks = dict(zip(order, index.tweaks(h)))
        assert index.tweaks(h, cut_through=True) == [tweaks[t] for t in order if not all(by_tx[t])]
        dropped += sum(all(s) for s in by_tx.values())
        kept_partly_spent += sum(any(s) and not all(s) for s in by_tx.values())
    assert dropped >= 2 and kept_partly_spent >= 2


def test_with_cut_through_the_dust_limit_looks_at_the_largest_unspent_taproot_output(index):
    # BlindBit's cut-through index lowers a tx's value to its largest unspent output as outputs are spent.
    differs = 0
    for h in range(len(CHAIN.blocks)):
        largest: dict[bytes, int] = {}
        unspent: dict[bytes, int | None] = {}
        for u in index.utxos(h):
            largest[u.txid32] = max(largest.get(u.txid32, 0), u.value)
            unspent.setdefault(u.txid32, None)
            if not u.spent:
                unspent[u.txid32] = max(unspent[u.txid32] or 0, u.value)
        order = [t.txid32 for t in block.tweaks(CHAIN.blocks[h].raw, CHAIN.blocks[h].spent_bytes)]
        tweaks = dict(zip(order, index.tweaks(h)))
        for limit in sorted(set(largest.values()) | {0}):
            left = [t for t in order if unspent[t] is not None and unspent[t] >= limit]
            assert index.tweaks(h, dust_limit=limit, cut_through=True) == [tweaks[t] for t in left]
            assert index.tweaks(h, dust_limit=limit) == [tweaks[t] for t in order if largest[t] >= limit]
        differs += sum(v is not None and v < largest[t] for t, v in unspent.items())
    assert differs >= 1  # a partly spent tx whose largest taproot output is among the spent ones


def test_colliding_txid_prefixes_are_told_apart_by_the_full_txid(index, tmp_path, monkeypatch):
    monkeypatch.setattr(store, "_PREFIX_SHIFT", 63)  # one bit of prefix: nearly every txid collides
    with synced(tmp_path / "collide.db", CHAIN) as collided:
        for h in range(len(CHAIN.blocks)):
            assert collided.utxos(h) == index.utxos(h)
            assert collided.tweaks(h, cut_through=True) == index.tweaks(h, cut_through=True)


def test_the_spend_lookup_cache_keeps_its_bound_while_blocks_are_appended(index, tmp_path, monkeypatch):
    monkeypatch.setattr(store, "_LOCATOR_CACHE", 2)
    with synced(tmp_path / "small-cache.db", CHAIN) as small:
        assert len(small._store._locators) <= 2
    assert content(tmp_path / "small-cache.db") == content(index.path)


def test_a_rollback_removes_blocks_their_txloc_entries_and_their_marks(tmp_path):
    with synced(tmp_path / "a.db", CHAIN, stop=4) as short:
        expected = content(short.path)
    with synced(tmp_path / "b.db", CHAIN) as idx:
        idx._store.rollback(4)
        assert idx.tip()[0] == 4
        with pytest.raises(HeightError, match="height 5 is not in the index"):
            idx.tweaks(5)
    assert content(tmp_path / "b.db") == expected


def test_block_files_of_a_longer_competing_branch_are_refused_never_rolled_back(tmp_path):
    other = spending_chain(11, CHAIN, fork_height=4, salt=1)
    with synced(tmp_path / "kept.db", CHAIN) as idx:
        before = content(idx.path)
        with pytest.raises(NodeError, match="block files must extend the index; they never roll it back"):
            idx.sync(files_of(other))
    assert content(tmp_path / "kept.db") == before


def test_an_output_spent_twice_keeps_its_first_mark_through_a_rollback(index, tmp_path):
    """Core would refuse such a block; the index marks only what is new and undoes only that."""
    outputs = {(t, v): o for tb in CHAIN.blocks for t, v, o in bf.taproot_outputs(tb)}
    spent, unspent = ([(u.txid32, u.vout) for h in range(len(CHAIN.blocks)) for u in index.utxos(h) if u.spent is flag] for flag in (True, False))
    again, fresh = spent[0], unspent[-1]
    tx, prevouts = bf.spend_tx(99, [(*again, outputs[again]), (*fresh, outputs[fresh])])
    extra = bf.assemble([tx], [prevouts], len(CHAIN.blocks), CHAIN.blocks[-1].header.GetHash())
    with synced(tmp_path / "twice.db", Chain(blocks=[*CHAIN.blocks, extra])) as idx:
        assert len(idx._store.row(len(CHAIN.blocks), ("marks",))[0]) == 8  # one mark: the fresh output
        assert _is_spent(idx, *again) and _is_spent(idx, *fresh)
        idx._store.rollback(CHAIN.tip)
        assert _is_spent(idx, *again) and not _is_spent(idx, *fresh)


def _is_spent(idx: Index, txid32: bytes, vout: int) -> bool:
    return next(u.spent for h in range(len(CHAIN.blocks)) for u in idx.utxos(h) if (u.txid32, u.vout) == (txid32, vout))


def test_the_store_refuses_a_block_that_does_not_follow_or_link_to_the_tip(index, tmp_path):
    data = block.block_index(CHAIN.blocks[1].raw, CHAIN.blocks[1].spent_bytes)
    with synced(tmp_path / "x.db", CHAIN, stop=1) as idx:
        with pytest.raises(IndexStoreError, match="block 5 does not follow the index"):
            idx._store.append(5, data, None)
        with pytest.raises(IndexStoreError, match="does not link to the tip"):
            idx._store.append(2, data, None)
        assert idx.tip()[0] == 1


def test_heights_outside_the_index_raise_height_error(index):
    for read in (index.block_hash, index.block_time, index.tweaks, index.utxos, index.spent_index):
        with pytest.raises(HeightError, match="height 99 is not in the index"):
            read(99)
    with pytest.raises(HeightError):
        index.filter(99, "spent")
    with pytest.raises(HeightError, match="not all indexed"):
        list(index.scan(WALLET, 3, 99))


def test_a_partition_pickles_and_scans_without_the_database(index):
    partition = pickle.loads(pickle.dumps(index.partition(0, CHAIN.tip)))
    assert partition.n_tx == sum(len(index.tweaks(h)) for h in range(len(CHAIN.blocks)))
    spent = spent_outpoints()
    expected = [
        IndexMatch(h, m.txid32, m.vout, m.amount, m.found, (m.txid32, m.vout) in spent)
        for h, tb in enumerate(CHAIN.blocks)
        for m in block.scan(tb.raw, tb.spent_bytes, WALLET)
    ]
    assert len(expected) > 10 and any(m.spent for m in expected)
    assert scan_partition(partition, WALLET) == expected
    assert list(index.scan(WALLET)) == expected


@pytest.mark.parametrize("size", [1, 2, 4, 100])
def test_an_index_scan_gives_the_same_matches_for_any_partition_size_and_threads(index, size):
    whole = list(index.scan(WALLET))
    assert list(index.scan(WALLET, partition_blocks=size)) == whole
    assert list(index.scan(WALLET, partition_blocks=size, threads=3)) == whole
    assert list(index.scan(WALLET, 3, 5, partition_blocks=size)) == [m for m in whole if 3 <= m.height <= 5]


def test_partitions_read_ahead_are_the_partitions_in_order_and_a_stopped_reader_ends(index):
    ranges = index.partition_ranges(partition_blocks=2)
    assert [(lo, hi, p) for lo, hi, p in index.read_partitions(ranges)] == [(lo, hi, index.partition(lo, hi)) for lo, hi in ranges]
    reader = index.read_partitions(ranges)
    next(reader)
    reader.close()  # the read already under way finishes; nothing is left running
    assert list(index.read_partitions([])) == []


def test_info_counts_blocks_transactions_and_bytes(index):
    info = index.info()
    assert info["tip_height"] == CHAIN.tip and info["tip_hash"] == CHAIN.blocks[-1].hash_hex
    assert info["blocks"] == len(CHAIN.blocks)
    assert info["transactions"] == sum(len(tb.txs) for tb in CHAIN.blocks)
    assert info["eligible_transactions"] == sum(len(index.tweaks(h)) for h in range(len(CHAIN.blocks)))
    assert info["bytes"] > 0


# ---- refusals: each a typed error with a clear message ----


def test_a_missing_file_is_refused(tmp_path):
    with pytest.raises(IndexStoreError, match="no index at"):
        Index.open(tmp_path / "none.db")


@pytest.mark.parametrize("junk", [b"", b"hello, not a database" * 200, b"SQLite format 3\x00" + b"\xff" * 4000])
def test_a_file_that_is_not_an_index_is_refused(tmp_path, junk):
    path = tmp_path / "junk.db"
    path.write_bytes(junk)
    with pytest.raises(IndexStoreError, match="not a"):
        Index.open(path)


def test_another_sqlite_database_is_not_an_index(tmp_path):
    path = tmp_path / "other.db"
    sqlite3.connect(path).execute("CREATE TABLE t(x)").connection.close()
    with pytest.raises(IndexStoreError, match="is not an sp-scan index"):
        Index.open(path)


def test_a_damaged_index_raises_index_store_error_not_sqlite_errors(tmp_path):
    path = tmp_path / "damaged.db"
    synced(path, CHAIN).close()
    data = bytearray(path.read_bytes())
    data[store.PAGE_SIZE :] = b"\x5a" * (len(data) - store.PAGE_SIZE)  # every page but the header's
    path.write_bytes(bytes(data))
    with pytest.raises(IndexStoreError, match="damaged.db"):
        with Index.open(path) as idx:
            idx.tweaks(3)


def test_another_format_version_is_refused(tmp_path):
    path = tmp_path / "v3.db"
    Index.create(path, "regtest").close()
    sqlite3.connect(path).execute("PRAGMA user_version = 3").connection.close()
    with pytest.raises(IndexStoreError, match="format version 3; this sp-scan reads version 2"):
        Index.open(path)


def test_another_network_is_refused(tmp_path):
    path = tmp_path / "main.db"
    Index.create(path, "main").close()
    with pytest.raises(IndexStoreError, match="of network main, not regtest"):
        Index.open(path, network="regtest")
    with Index.open(path) as idx, pytest.raises(IndexStoreError, match="of network main; the source is on regtest"):
        idx.sync(files_of(CHAIN))


def test_create_refuses_an_existing_file_and_unknown_networks(tmp_path):
    (tmp_path / "x.db").write_bytes(b"")
    with pytest.raises(IndexStoreError, match="already exists"):
        Index.create(tmp_path / "x.db", "regtest")
    with pytest.raises(IndexStoreError, match="unknown network 'testnet'"):
        Index.create(tmp_path / "y.db", "testnet")
    assert not (tmp_path / "y.db").exists()


def test_create_never_replaces_an_index_another_process_made_meanwhile(tmp_path, monkeypatch):
    path = tmp_path / "x.db"
    with synced(path, CHAIN, stop=2):
        pass
    before = path.read_bytes()
    exists = Path.exists
    monkeypatch.setattr(Path, "exists", lambda p: False if p == path else exists(p))  # it appears after the check
    with pytest.raises(IndexStoreError, match="already exists"):
        Index.create(path, "regtest")
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no scratch file left


def test_a_second_writer_is_refused_while_readers_are_not(index, tmp_path):
    path = tmp_path / "w.db"
    with synced(path, CHAIN, stop=2) as writer, Index.open(path) as second, Index.open(path, readonly=True) as reader:
        with pytest.raises(IndexStoreError, match="being written by another process"):
            second.sync(files_of(CHAIN))
        assert reader.tweaks(2) == index.tweaks(2)
        writer.sync(files_of(CHAIN))
        assert reader.tip() == index.tip()


def test_the_first_height_is_kept_and_a_different_start_is_refused(tmp_path):
    with Index.create(tmp_path / "s.db", "regtest") as idx:
        idx.sync(files_of(CHAIN, stop=4), start=2)
        assert (idx.first_height, idx.tip()[0]) == (2, 4)
        with pytest.raises(IndexStoreError, match="starts at height 2"):
            idx.sync(files_of(CHAIN), start=0)
        idx.sync(files_of(CHAIN), start=2)
        assert idx.tip()[0] == CHAIN.tip
        assert [m.height for m in idx.scan(WALLET)] == [m.height for m in idx.scan(WALLET) if m.height >= 2]


def test_marks_are_packed_height_and_ordinal_pairs(index):
    marks = [struct.unpack("<II", m) for h in SPEND_HEIGHTS for m in _split(index._store.row(h, ("marks",))[0], 8)]
    assert {(h, o) for h, o in marks} == {(h, o) for h in range(len(CHAIN.blocks)) for o in index._store.row_with_spends(h, ("height",))[1]}


def _split(data: bytes, width: int) -> list[bytes]:
    return [data[i : i + width] for i in range(0, len(data), width)]
