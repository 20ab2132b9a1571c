"""The tweak index's store and read API: round trips, cut-through, rollback, refusals, partitions and scans."""

from __future__ import annotations

import pickle
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import blockfactory as bf
from cli_support import Chain, spending_chain
from index_support import WALLET, as_format3, as_old_version, content, damage, files_of, flip, resum, synced
from sp_scan import block
from sp_scan.errors import HeightError, IndexStoreError, ServerError
from sp_scan.index import Index, scan_partition, store
from sp_scan.index.store import reader, rows, spends
from sp_scan.types import IndexMatch, Utxo

CHAIN = spending_chain(9)
SPEND_HEIGHTS = [h for h in range(len(CHAIN.blocks)) if h % 3 == 2]
FOLD = 4
"""The writers here fold every FOLD blocks: the 9-block chain's marks are folded up to block 7, block 8's pending."""


@pytest.fixture(scope="module", autouse=True)
def folding():
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(store, "fold_interval", lambda blocks: FOLD)
        yield


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    with synced(tmp_path_factory.mktemp("index") / "chain.db", CHAIN) as idx:
        yield idx


def test_the_index_holds_folded_and_pending_marks(index):
    assert index._store._meta_checked("folded") == 7
    assert any(u.spent for u in index.utxos(8 - 2)) or SPEND_HEIGHTS[-1] == 8


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


def unspent_tracked(idx: Index) -> int:
    return sum(not u.spent for h in range(idx.tip()[0] + 1) for u in idx.utxos(h))


def test_spends_are_resolved_alike_by_a_writer_that_kept_its_output_map_and_by_one_that_built_it_from_the_file(index, tmp_path):
    """One run per block builds its map of unspent outputs from the file each time; it holds just those outputs."""
    with Index.create(tmp_path / "one-by-one.db", "regtest") as idx:
        for h in range(len(CHAIN.blocks)):
            with Index.open(idx.path) as run:
                run.sync(files_of(CHAIN, stop=h))
                assert len(run._store._resolver.outputs) == unspent_tracked(run)
    assert content(tmp_path / "one-by-one.db") == content(index.path)


def test_a_fold_changes_no_answer(index, tmp_path, monkeypatch):
    """The same chain with every mark pending, and with them folded after each block."""
    monkeypatch.setattr(store, "fold_interval", lambda blocks: 1 << 30)
    with synced(tmp_path / "pending.db", CHAIN) as pending:
        assert pending._store._meta_checked("folded") is None
        assert every_read(pending) == every_read(index)
    monkeypatch.setattr(store, "fold_interval", lambda blocks: 1)
    with synced(tmp_path / "folded.db", CHAIN) as folded:
        assert folded._store._meta_checked("folded") == CHAIN.tip and folded.check() == len(CHAIN.blocks)
        assert every_read(folded) == every_read(index)


def test_the_fold_interval_grows_with_the_index_within_its_bounds():
    """Between its bounds the interval is proportional to the index's blocks: a fold's cost, which grows with
    the `spends` table, stays the same per block."""
    sizes = range(0, 1 << 20, 4093)
    intervals = [spends.fold_interval(n) for n in sizes]
    assert intervals == sorted(intervals) and (intervals[0], intervals[-1]) == (spends.FOLD_MIN, spends.FOLD_MAX)
    ratios = [n / spends.fold_interval(n) for n in sizes if spends.FOLD_MIN < spends.fold_interval(n) < spends.FOLD_MAX]
    assert ratios and max(ratios) / min(ratios) < 1.02  # indexed blocks per block of interval: the same


@pytest.mark.parametrize("to", [4, 7, 2])
def test_a_rollback_removes_blocks_and_the_marks_they_made_folded_or_pending(index, tmp_path, to):
    with synced(tmp_path / "a.db", CHAIN, stop=to) as short:
        expected = every_read(short, to)
    with synced(tmp_path / "b.db", CHAIN) as idx:
        idx._store.rollback(to)
        assert idx.tip()[0] == to and idx.check() == to + 1
        with pytest.raises(HeightError, match=f"height {to + 1} is not in the index"):
            idx.tweaks(to + 1)
        assert every_read(idx, to) == expected
        assert len(idx._store._resolver.outputs) == unspent_tracked(idx)  # what the rolled blocks spent is back, what they made is gone
        idx.sync(files_of(CHAIN))
        assert every_read(idx) == every_read(index) and idx.check() == len(CHAIN.blocks)


def test_block_files_of_a_longer_competing_branch_are_refused_never_rolled_back(tmp_path):
    other = spending_chain(11, CHAIN, fork_height=4, salt=1)
    with synced(tmp_path / "kept.db", CHAIN) as idx:
        before = content(idx.path)
        with pytest.raises(ServerError, match="block files must extend the index; they never roll it back"):
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
        assert len(rows.unpack_marks(idx._store.row(len(CHAIN.blocks), ("marks",))[0])) == 1  # one mark: the fresh output
        assert _is_spent(idx, *again) and _is_spent(idx, *fresh)
        idx._store.rollback(CHAIN.tip)
        assert _is_spent(idx, *again) and not _is_spent(idx, *fresh)


def _is_spent(idx: Index, txid32: bytes, vout: int) -> bool:
    return next(u.spent for h in range(len(CHAIN.blocks)) for u in idx.utxos(h) if (u.txid32, u.vout) == (txid32, vout))


def test_the_store_refuses_a_block_that_does_not_follow_or_link_to_the_tip(index, tmp_path):
    data = block.block_index(CHAIN.blocks[1].raw, CHAIN.blocks[1].spent_bytes)
    with synced(tmp_path / "x.db", CHAIN, stop=1) as idx:
        with pytest.raises(IndexStoreError, match="block 5 does not follow the index"):
            idx._store.append(store.block_row(5, data, None))
        with pytest.raises(IndexStoreError, match="does not link to the tip"):
            idx._store.append(store.block_row(2, data, None))
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
    path = tmp_path / "v5.db"
    Index.create(path, "regtest").close()
    sqlite3.connect(path).execute("PRAGMA user_version = 5").connection.close()
    with pytest.raises(IndexStoreError, match="format version 5; this sp-scan reads version 4"):
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


def test_the_marks_are_the_places_of_every_spent_output(index):
    marks = [p for h in range(len(CHAIN.blocks)) for p in rows.unpack_marks(index._store.row(h, ("marks",))[0])]
    assert len(marks) == len(set(marks))
    assert {(p >> 32, p & 0xFFFFFFFF) for p in marks} == {(h, o) for h in range(len(CHAIN.blocks)) for o in index._store.row_with_spends(h, ("hash",))[1]}


# ---- a truncated or damaged file: detected, never a wrong answer ----


def damaged_copy(tmp_path: Path, index: Index, sql: str) -> Path:
    """A copy of the index damaged by `damage`."""
    path = tmp_path / "damaged.db"
    source = sqlite3.connect(index.path)
    target = sqlite3.connect(path)
    source.backup(target)
    source.close()
    target.close()
    damage(path, sql)
    return path


def every_read(idx: Index, tip: int = CHAIN.tip) -> list:
    """What each read API answers over every height up to `tip`, and a scan (not info: a file's size differs)."""
    answers = [idx.first_height, idx.tip(), list(idx.scan(WALLET)), idx.block_hashes(0, tip)]
    for h in range(tip + 1):
        answers += [idx.block_hash(h), idx.block_time(h), idx.tweaks(h), idx.tweaks(h, cut_through=True), idx.utxos(h)]
        answers += [idx.eligible_txs(h, cut_through=True), idx.filter(h, "new-utxos"), idx.filter(h, "spent"), idx.spent_index(h), idx.spent_keys(h)]
    return answers


def test_a_truncated_copy_is_refused_on_open_by_every_reader_and_writer(tmp_path, index):
    data = damaged_copy(tmp_path, index, "SELECT 1").read_bytes()
    assert len(data) > 3 * store.PAGE_SIZE
    path = tmp_path / "cut.db"
    path.write_bytes(data[: len(data) - store.PAGE_SIZE // 2])
    for readonly in (True, False):
        with pytest.raises(IndexStoreError, match=r"cut.db is truncated: its \d+ pages of 4,096 bytes need [\d,]+, the file has"):
            Index.open(path, readonly=readonly)


SPENT_AT = min(h for h, tb in enumerate(CHAIN.blocks) if any((t, v) in spent_outpoints() for t, v, _ in bf.taproot_outputs(tb)))
"""A block some of whose taproot outputs later blocks spent."""
SPENDER = SPEND_HEIGHTS[0]
"""A block that spends taproot outputs (it has marks and spent keys)."""
BLOCK_FLIPS = ("hash", "prev", "tweaks33", "outs", "txids", "out_keys")
SPENT_FLIPS = ("spent_hashes", "filter_new", "spent_keys", "marks")
DAMAGE = {
    "a changed first height": ("UPDATE meta SET value = 1 WHERE key = 'first_height'", "its meta row first_height does not match its checksum"),
    "a text first height": ("UPDATE meta SET value = '0' WHERE key = 'first_height'", "its meta row first_height does not match its checksum"),
    "an unknown network": ("UPDATE meta SET value = 'mainnet' WHERE key = 'network'", "its meta row network does not match its checksum"),
    "a missing network": ("DELETE FROM meta WHERE key = 'network'", "its meta row network is missing"),
    "a missing first height": ("DELETE FROM meta WHERE key = 'first_height'", "its meta row first_height is missing"),
    "a missing tip": ("DELETE FROM meta WHERE key = 'tip'", "its meta row tip is missing"),
    "a changed tip": ("UPDATE meta SET value = 7, sum = 0 WHERE key = 'tip'", "its meta row tip does not match its checksum"),
    "a changed fold height": ("UPDATE meta SET value = 3 WHERE key = 'folded'", "its meta row folded does not match its checksum"),
    "a deleted block between": ("DELETE FROM blocks WHERE height = 4", "block 4 is missing"),
    "a deleted first block": ("DELETE FROM blocks WHERE height = 0", "block 0 is missing"),
    "a deleted tip block": (f"DELETE FROM blocks WHERE height = {CHAIN.tip}", f"block {CHAIN.tip} is missing"),
    "a block moved up": ("UPDATE blocks SET height = 99 WHERE height = 4", f"holds blocks 0..99, not its heights 0..{CHAIN.tip}"),
    "two blocks swapped": ("UPDATE blocks SET height = 99 WHERE height = 5; UPDATE blocks SET height = 5 WHERE height = 7; UPDATE blocks SET height = 7 WHERE height = 99", "block 5's"),
    **{f"a flipped bit in {c}": (f"UPDATE blocks SET {c} = flip({c}, 13) WHERE height = {SPENDER}", f"block {SPENDER}'s {c} does not match its checksum") for c in BLOCK_FLIPS},
    **{f"a flipped bit in {c}": (f"UPDATE spent SET {c} = flip({c}, 13) WHERE height = {SPENDER}", f"block {SPENDER}'s {c} does not match its checksum") for c in SPENT_FLIPS},
    "a changed time": ("UPDATE blocks SET time = time + 1 WHERE height = 3", "block 3's time does not match its checksum"),
    "a changed transaction count": ("UPDATE blocks SET block_txs = block_txs + 1 WHERE height = 3", "block 3's block_txs does not match its checksum"),
    "a changed output count": ("UPDATE blocks SET n_out = n_out + 1 WHERE height = 3", "block 3's n_out does not match its checksum"),
    "a negative eligible count": ("UPDATE blocks SET n_tx = -1 WHERE height = 4", "block 4's n_tx does not match its checksum"),
    "a text hash": ("UPDATE blocks SET hash = 'abc' WHERE height = 4", "block 4's hash does not match its checksum"),
    "a short tweak column": ("UPDATE blocks SET tweaks33 = substr(tweaks33, 2) WHERE height = 3", "block 3's tweaks33 does not match its checksum"),
    "a deleted spent row": (f"DELETE FROM spent WHERE height = {SPENDER}", f"block {SPENDER}'s spent row is missing"),
    "cut sums": ("UPDATE blocks SET sums = substr(sums, 2) WHERE height = 3", "block 3's blocks row's sums are malformed"),
    "a flipped bit in sums": ("UPDATE blocks SET sums = flip(sums, 9) WHERE height = 3", "block 3's hash does not match its checksum"),
    "a stray spent row": ("INSERT INTO spent SELECT 99, sums, filter_new, spent_hashes, spent_keys, marks FROM spent WHERE height = 3", "spent has 10 rows for 9 blocks"),
    "a deleted spends row": (f"DELETE FROM spends WHERE height = {SPENT_AT}", f"block {SPENT_AT}'s spends row is missing"),
    "a cleared spent bit": (f"UPDATE spends SET bits = zeroblob(length(bits)) WHERE height = {SPENT_AT}", f"block {SPENT_AT}'s spent outputs do not match their checksum"),
    "a stray spends row": ("INSERT INTO spends VALUES (99, x'', 0)", "spends has 10 rows for 9 blocks"),
}


@pytest.mark.parametrize(("sql", "needle"), DAMAGE.values(), ids=DAMAGE.keys())
def test_every_read_path_turns_damage_into_index_store_error_and_check_names_it(tmp_path, index, sql, needle):
    path = damaged_copy(tmp_path, index, sql)
    try:
        with Index.open(path, readonly=True) as idx:
            idx.info()
            answers = every_read(idx)
    except IndexStoreError as exc:
        assert re.search("damaged.db is damaged: .*" + re.escape(needle), str(exc)), exc
    else:  # rows no read answer depends on (a stray row): the answers stay right
        assert answers == every_read(index)
    with pytest.raises(IndexStoreError, match=re.escape(needle)):
        with Index.open(path, readonly=True) as idx:
            idx.check()


def test_a_damaged_row_is_refused_by_a_sync_and_a_rollback_too(tmp_path, index):
    path = damaged_copy(tmp_path, index, f"UPDATE spent SET marks = x'010203' WHERE height = {CHAIN.tip}")
    with Index.open(path) as idx:
        with pytest.raises(IndexStoreError, match=f"block {CHAIN.tip}'s marks does not match its checksum"):
            idx._store.rollback(CHAIN.tip - 1)
        assert idx.tip()[0] == CHAIN.tip
    path.unlink()
    path = damaged_copy(tmp_path, index, f"UPDATE blocks SET txids = flip(txids, 3) WHERE height = {SPENT_AT}")
    with Index.open(path) as idx:
        idx._store.rollback(SPENDER - 1)
        with pytest.raises(IndexStoreError, match=f"block {SPENT_AT}'s txids does not match its checksum"):
            idx.sync(files_of(CHAIN))  # (the writer reads every block's outputs before its first block)
        assert idx.tip()[0] == SPENDER - 1
    path.unlink()
    path = damaged_copy(tmp_path, index, "SELECT 1")
    with Index.open(path) as idx:
        idx._store.rollback(SPENDER - 1)
    damage(path, f"UPDATE spends SET bits = flip(bits, 0) WHERE height = {SPENT_AT}")
    with Index.open(path) as idx:  # the marks of a new block never rewrite a damaged spends row with a fresh sum
        with pytest.raises(IndexStoreError, match=f"block {SPENT_AT}'s spent outputs do not match their checksum"):
            idx.sync(files_of(CHAIN))
        assert idx.tip()[0] == SPENDER - 1


def rewrite(path: Path, height: int, table: str, field: str, value) -> None:
    """Change one field of a block's row and its sum together, as someone who knows the format would."""
    conn = sqlite3.connect(path)
    conn.create_function("resum", 5, resum)
    with conn:
        conn.execute(f"UPDATE {table} SET {field} = ?1, sums = resum(height, ?2, sums, ?3, ?1) WHERE height = ?4", (value, table, field, height))
    conn.close()


def test_a_pending_mark_naming_an_output_its_block_lacks_is_damage(tmp_path, index):
    path = damaged_copy(tmp_path, index, "SELECT 1")
    places = list(rows.unpack_marks(index._store.row(CHAIN.tip, ("marks",))[0]))
    rewrite(path, CHAIN.tip, "spent", "marks", rows.pack_marks([*places, index._store.row(0, ("n_out",))[0] + 8]))
    with Index.open(path, readonly=True) as idx:
        with pytest.raises(IndexStoreError, match="a block's marks name an output of block 0 beyond its"):
            idx.utxos(0)
        assert idx.tweaks(0) == index.tweaks(0)  # (a read without spends needs no marks)
        with pytest.raises(IndexStoreError, match=f"block {CHAIN.tip}'s marks name output \\d+ of block 0, which is not indexed"):
            idx.check()


def test_check_finds_what_only_a_whole_file_read_shows(tmp_path, index):
    """Rows changed together with their sums read as they are; the whole file's check finds them."""
    assert Index.open(index.path, readonly=True).check() == len(CHAIN.blocks)
    unlinked = damaged_copy(tmp_path, index, "SELECT 1")
    rewrite(unlinked, 5, "blocks", "prev", bytes(32))
    with Index.open(unlinked, readonly=True) as idx, pytest.raises(IndexStoreError, match="block 5 does not link to block 4"):
        idx.check()
    unlinked.unlink()
    unmarked = damaged_copy(tmp_path, index, f"UPDATE spends SET bits = zeroblob(length(bits)), sum = spends_sum(height, zeroblob(length(bits))) WHERE height = {SPENT_AT}")
    with Index.open(unmarked, readonly=True) as idx, pytest.raises(IndexStoreError, match=f"block {SPENT_AT}'s spent outputs are not the marks the blocks above it made"):
        idx.check()
    unmarked.unlink()
    twice = damaged_copy(tmp_path, index, "SELECT 1")
    places = list(rows.unpack_marks(index._store.row(SPENDER, ("marks",))[0]))
    rewrite(twice, SPENDER, "spent", "marks", rows.pack_marks([*places, places[0]]))
    with Index.open(twice, readonly=True) as idx, pytest.raises(IndexStoreError, match=f"is marked spent twice \\(again by block {SPENDER}\\)"):
        idx.check()
    twice.unlink()
    folded = damaged_copy(tmp_path, index, "SELECT 1")
    places = list(rows.unpack_marks(index._store.row(SPENDER, ("marks",))[0]))
    rewrite(folded, SPENDER, "spent", "marks", rows.pack_marks(places[1:]))  # a folded mark lost: its bit stays set
    with Index.open(folded, readonly=True) as idx, pytest.raises(IndexStoreError, match="spent outputs are not the marks the blocks above it made"):
        idx.check()


def test_a_damaged_page_is_found_on_open_when_small_and_by_check_at_any_size(tmp_path, index, monkeypatch):
    data = bytearray(index.path.read_bytes())
    page = len(data) // store.PAGE_SIZE - 1  # the last page: a leaf of some table
    data[page * store.PAGE_SIZE : page * store.PAGE_SIZE + 200] = b"\xa5" * 200
    path = tmp_path / "page.db"
    path.write_bytes(bytes(data))
    with pytest.raises(IndexStoreError, match="page.db is damaged: SQLite's quick_check says"):
        Index.open(path, readonly=True)
    monkeypatch.setattr(reader, "QUICK_CHECK_BYTES", 0)  # as for a file too large to check on every open
    with Index.open(path, readonly=True) as idx, pytest.raises(IndexStoreError, match="quick_check says"):
        idx.check()


# ---- older formats: upgraded by a writer into a new file, refused by a reader ----


def old_copy(tmp_path: Path, index: Index, version: int = 3, sql: str = "") -> Path:
    """A copy of the index in the layout of format `version`, then changed by `sql`."""
    path = tmp_path / f"v{version}.db"
    with sqlite3.connect(index.path) as source, sqlite3.connect(path) as target:
        source.backup(target)
    as_format3(path)
    if version < 3:
        as_old_version(path, version)
    if sql:
        with sqlite3.connect(path) as conn:
            conn.create_function("flip", 2, flip)
            conn.execute(sql)
    return path


def stored_blocks(path: Path) -> dict:
    """The block rows of an index file: what an upgrade must write as a sync does (the fold state may differ)."""
    found = content(path)
    return {table: found[table] for table in ("blocks", "spent")}


@pytest.mark.parametrize("version", [1, 2, 3])
def test_an_older_index_is_upgraded_to_the_rows_a_sync_writes(tmp_path, index, version):
    path = old_copy(tmp_path, index, version)
    with pytest.raises(IndexStoreError, match=f"v{version}.db is an index of format version {version}: `sp-scan index sync` upgrades it to version 4"):
        Index.open(path, readonly=True)
    Index.open(path).close()
    assert stored_blocks(path) == stored_blocks(index.path)
    with Index.open(path, readonly=True) as idx:
        assert idx.check() == len(CHAIN.blocks) and every_read(idx) == every_read(index)
        assert idx._store._meta_checked("folded") == CHAIN.tip  # an old file's bitmaps hold every mark
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no scratch file left


OLD_DAMAGE = {
    "a spends row deleted": (2, f"DELETE FROM spends WHERE height = {SPENT_AT}", f"block {SPENT_AT}'s spent outputs are not the marks the blocks above it made"),
    "a spends row added": (2, "INSERT INTO spends VALUES ({unspent[0]}, {unspent[1]})", "block {unspent[0]}'s spent outputs are not the marks the blocks above it made"),
    "a malformed marks blob": (2, f"UPDATE blocks SET marks = x'010203' WHERE height = {SPEND_HEIGHTS[0]}", f"block {SPEND_HEIGHTS[0]}'s marks is 3 bytes"),
    "a block deleted": (2, "DELETE FROM blocks WHERE height = 4", f"its 8 blocks at 0..{CHAIN.tip} are not the heights from its first height 0 on"),
    "an unlinked block": (2, "UPDATE blocks SET prev = zeroblob(32) WHERE height = 5", "block 5 does not link to block 4"),
    "a flipped bit in a format-3 txid": (3, "UPDATE blocks SET txids = flip(txids, 5) WHERE height = 4", "block 4's txids does not match its checksum"),
    "a changed format-3 spends bitmap": (3, f"UPDATE spends SET bits = zeroblob(length(bits)) WHERE height = {SPENT_AT}", f"block {SPENT_AT}'s spent outputs do not match their checksum"),
}


@pytest.mark.parametrize(("version", "sql", "needle"), OLD_DAMAGE.values(), ids=OLD_DAMAGE.keys())
def test_a_damaged_older_index_is_not_upgraded_and_stays_as_it_was(tmp_path, index, version, sql, needle):
    unspent = next((h, o) for h in range(len(CHAIN.blocks)) for o in range(len(index.utxos(h))) if o not in index._store.row_with_spends(h, ())[1])
    sql, needle = sql.format(unspent=unspent), needle.format(unspent=unspent)
    path = old_copy(tmp_path, index, version, sql)
    before = content(path)
    with pytest.raises(IndexStoreError, match=re.escape(f"v{version}.db stays at format version {version}, not upgraded to 4: {path} is damaged: {needle}")):
        Index.open(path)
    assert content(path) == before and sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == version
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # the half-built file is gone


_KILLED_UPGRADE = """
import sys, time
from sp_scan.index.store import Store, check

def hold(reader, batch):  # the new file is written and about to be checked: hold it there
    print("upgrading", flush=True)
    time.sleep(600)

check.check_file = hold
Store.open(sys.argv[1])
"""


def test_an_upgrade_killed_midway_leaves_the_older_file_as_it_was(tmp_path, index):
    path = old_copy(tmp_path, index)
    before = content(path)
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_UPGRADE, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "upgrading\n"
    finally:
        proc.kill()
        proc.communicate()
    assert content(path) == before
    assert [p for p in tmp_path.iterdir() if p.name.startswith(".v3.db.")]  # the half-built file the kill left
    with pytest.raises(IndexStoreError, match="format version 3"):
        Index.open(path, readonly=True)
    Index.open(path).close()
    assert stored_blocks(path) == stored_blocks(index.path)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # removed by the upgrade that finished
