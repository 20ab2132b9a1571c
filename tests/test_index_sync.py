"""Syncing the index from Core-like REST and RPC stand-ins: sources agree, reorgs, kill -9, failing nodes, readers."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from cli_support import Chain, Misreported, NodeServer, RestHandler, RpcHandler, StaleHeights, spending_chain
from index_support import WALLET, content, files_of, kill_9_then_resume, synced, wait_until
from sp_scan.errors import HeightError, ServerError
from sp_scan.index import Index, Retry
from sp_scan.index.store import checkpoint
from sp_scan.node import RestNode, RpcNode

CHAIN = spending_chain(12)
BRANCH = spending_chain(15, CHAIN, fork_height=7, salt=1)
FAST = Retry(attempts=1, delay=0.05)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The content of an index synced from CHAIN's block files, and of one synced from BRANCH's."""
    path = tmp_path_factory.mktemp("ref")
    synced(path / "chain.db", CHAIN).close()
    synced(path / "branch.db", BRANCH).close()
    return content(path / "chain.db"), content(path / "branch.db")


@pytest.fixture
def rest():
    with NodeServer(RestHandler, CHAIN) as server:
        yield server


def test_rest_rpc_and_block_files_give_the_same_index(tmp_path, rest, reference):
    with Index.create(tmp_path / "rest.db", "regtest") as idx:
        stats = idx.sync(RestNode(rest.url))
        assert (stats.blocks, stats.height, stats.target) == (len(CHAIN.blocks), CHAIN.tip, CHAIN.tip)
        assert stats.txs == sum(len(tb.txs) for tb in CHAIN.blocks)
    with NodeServer(RpcHandler, CHAIN, credentials="u:p") as rpc, Index.create(tmp_path / "rpc.db", "regtest") as idx:
        idx.sync(RpcNode(rpc.url, user="u", password="p"), jobs=2)
    assert content(tmp_path / "rest.db") == content(tmp_path / "rpc.db") == reference[0]


def test_a_sync_in_worker_processes_commits_in_height_order(tmp_path, rest, reference):
    committed = []
    with Index.create(tmp_path / "jobs.db", "regtest") as idx:
        idx.sync(RestNode(rest.url), stop=5, jobs=2, progress=lambda s: committed.append(s.height))
        idx.sync(RestNode(rest.url), jobs=3, progress=lambda s: committed.append(s.height))
    assert committed == list(range(len(CHAIN.blocks)))
    assert content(tmp_path / "jobs.db") == reference[0]


def test_a_reorg_between_runs_rolls_back_to_the_fork_and_follows_the_new_branch(tmp_path, rest, reference):
    with Index.create(tmp_path / "r.db", "regtest") as idx:
        idx.sync(RestNode(rest.url))
        rest.httpd.chain = BRANCH
        stats = idx.sync(RestNode(rest.url))
        assert (stats.reorgs, stats.rolled_back, stats.blocks) == (1, len(CHAIN.blocks) - 7, len(BRANCH.blocks) - 7)
    assert content(tmp_path / "r.db") == reference[1]


def test_a_reorg_during_a_sync_is_seen_at_the_first_block_that_does_not_link(tmp_path, rest, reference):
    def switch(stats):
        if stats.height == 9:
            rest.httpd.chain = StaleHeights(BRANCH, CHAIN, set())  # as Core, it still serves the old branch's blocks by hash

    with Index.create(tmp_path / "m.db", "regtest") as idx:
        stats = idx.sync(RestNode(rest.url), progress=switch)
        # blocks 7 to 9 of the old branch, and those of 10 and 11 when fetched ahead of the switch (at most 2)
        assert stats.reorgs == 1 and 3 <= stats.rolled_back <= 5
        assert stats.blocks == len(BRANCH.blocks) + stats.rolled_back
    assert content(tmp_path / "m.db") == reference[1]


def test_a_competing_branch_as_long_as_the_index_replaces_its_blocks_above_the_fork(tmp_path, rest):
    rival = spending_chain(len(CHAIN.blocks), CHAIN, fork_height=7, salt=2)  # same length: the node's choice stands
    with Index.create(tmp_path / "s.db", "regtest") as idx:
        idx.sync(RestNode(rest.url))
        rest.httpd.chain = rival
        stats = idx.sync(RestNode(rest.url))
        assert (stats.reorgs, stats.rolled_back, stats.blocks) == (1, len(CHAIN.blocks) - 7, len(CHAIN.blocks) - 7)
    assert content(tmp_path / "s.db") == content(synced(tmp_path / "f.db", rival).path)


def node(kind: str, server: NodeServer):
    return RestNode(server.url) if kind == "rest" else RpcNode(server.url, user="u", password="p")


BEHIND = {
    "the same chain, shorter": Chain(blocks=CHAIN.blocks[:6]),
    "a shorter branch": spending_chain(9, CHAIN, fork_height=7, salt=2),
    "a shorter branch below the first height": spending_chain(3, CHAIN, fork_height=1, salt=3),
    "a tip reported at -5": Misreported(CHAIN, -5),
}


@pytest.mark.parametrize("kind", ["rest", "rpc"])
@pytest.mark.parametrize("behind", BEHIND.values(), ids=BEHIND.keys())
def test_a_node_behind_the_index_is_refused_and_nothing_is_rolled_back(tmp_path, reference, kind, behind):
    path = tmp_path / "b.db"
    with Index.create(path, "regtest") as idx:
        idx.sync(files_of(CHAIN, start=2), start=2)
    before = content(path)
    handler = RestHandler if kind == "rest" else RpcHandler
    with NodeServer(handler, behind, credentials="u:p") as server, Index.open(path) as idx:
        with pytest.raises(ServerError, match=f"below the index's tip {CHAIN.tip}|is -5, not a height") as info:
            idx.sync(node(kind, server), retry=FAST)
        assert f"intact up to height {CHAIN.tip}" in str(info.value)
    assert content(path) == before


@pytest.mark.parametrize("kind", ["rest", "rpc"])
def test_following_waits_for_a_node_behind_then_takes_its_branch_once_it_is_as_long(tmp_path, kind):
    short = spending_chain(9, CHAIN, fork_height=7, salt=2)
    grown = spending_chain(len(CHAIN.blocks) + 1, short, fork_height=9, salt=2)  # that branch, now longer than the index
    seen = []

    def watch(stats):
        seen.append((stats.behind, stats.waiting, stats.height))
        if stats.behind is not None:
            server.httpd.chain = grown
        elif stats.waiting:
            raise KeyboardInterrupt

    handler = RestHandler if kind == "rest" else RpcHandler
    with NodeServer(handler, short, credentials="u:p") as server, synced(tmp_path / "w.db", CHAIN) as idx:
        with pytest.raises(KeyboardInterrupt):
            idx.sync(node(kind, server), follow=True, interval=0.05, progress=watch)
        assert seen[0] == (short.tip, True, CHAIN.tip)  # waited, nothing rolled back
        assert idx.tip() == grown.best()
    assert content(tmp_path / "w.db") == content(synced(tmp_path / "g.db", grown).path)


@pytest.mark.parametrize("kind", ["rest", "rpc"])
def test_a_node_whose_next_block_does_not_link_to_its_own_is_asked_again_then_refused_naming_both(tmp_path, kind):
    stale = StaleHeights(CHAIN, BRANCH, {9})  # a cache answering height 9 with the other branch's block
    handler = RestHandler if kind == "rest" else RpcHandler
    with NodeServer(handler, stale, credentials="u:p") as server, synced(tmp_path / "u.db", CHAIN, stop=8) as idx:
        before = content(idx.path)
        with pytest.raises(ServerError) as info:
            idx.sync(node(kind, server), retry=Retry(attempts=2, delay=0.01))
        hashes = (BRANCH.blocks[9].hash_hex, BRANCH.blocks[8].hash_hex, CHAIN.blocks[8].hash_hex)
        assert f"block 9 ({hashes[0]}) names {hashes[1]} as its parent, but its block 8 is {hashes[2]}; seen 3 times" in str(info.value)
        assert "intact up to height 8" in str(info.value)
        assert server.requests.count("/rest/blockhashbyheight/9.hex" if kind == "rest" else "getblockhash") >= 3
    assert content(tmp_path / "u.db") == before


def test_a_node_that_stops_answering_raises_naming_the_height_to_resume_at(tmp_path, rest, reference):
    rest.stop_answering(after=20)
    with Index.create(tmp_path / "n.db", "regtest") as idx:
        with pytest.raises(ServerError, match=r"cannot reach the node .*intact up to height (\d+); sync again to resume at") as info:
            idx.sync(RestNode(rest.url), retry=FAST)
        tip = idx.tip()[0]
        assert f"height {tip}; sync again to resume at {tip + 1}" in str(info.value)
        assert 0 < tip < CHAIN.tip
        rest.resume_answering()
        idx.sync(RestNode(rest.url), retry=FAST)
    assert content(tmp_path / "n.db") == reference[0]


def test_start_or_stop_heights_beyond_the_nodes_tip_are_refused_before_any_block(tmp_path, rest):
    with Index.create(tmp_path / "t.db", "regtest") as idx:
        with pytest.raises(HeightError, match=f"height 99 is beyond the source's tip {CHAIN.tip}"):
            idx.sync(RestNode(rest.url), stop=99)
        with pytest.raises(HeightError, match=f"height 50 is beyond the source's tip {CHAIN.tip}"):
            idx.sync(RestNode(rest.url), start=50)
        assert idx.tip() is None and idx.first_height is None


def test_a_node_on_a_chain_core_does_not_name_is_refused_before_any_block(tmp_path):
    class OtherChain:
        def chain(self) -> str:
            return "testnet"  # BlindBit's own name; Core says "test"

    with Index.create(tmp_path / "t.db", "test") as idx:
        with pytest.raises(ServerError, match="the node's chain 'testnet' is not one of main, test, testnet4, signet, regtest"):
            idx.sync(OtherChain())
        assert idx.tip() is None


def test_follow_keeps_polling_and_picks_up_new_blocks(tmp_path):
    waits = []

    def grow(stats):
        if stats.waiting:
            waits.append(stats.height)
            if len(waits) == 1:
                server.httpd.chain = CHAIN
            else:
                raise KeyboardInterrupt

    with NodeServer(RestHandler, spending_chain(5, CHAIN, fork_height=5)) as server, Index.create(tmp_path / "f.db", "regtest") as idx:
        with pytest.raises(KeyboardInterrupt):
            idx.sync(RestNode(server.url), follow=True, interval=0.05, progress=grow)
        assert waits == [4, CHAIN.tip]
        assert idx.tip()[0] == CHAIN.tip


def test_a_reader_sees_committed_blocks_while_a_sync_writes(tmp_path, rest, reference):
    path = tmp_path / "wal.db"
    Index.create(path, "regtest").close()
    rest.httpd.delay = 0.01
    seen, errors, done = [], [], threading.Event()

    def read():
        with Index.open(path, readonly=True) as reader:
            while not done.is_set():
                try:
                    tip = reader.tip()
                    if tip is not None:
                        seen.append(tip[0])
                        reader.tweaks(tip[0])
                        reader.utxos(tip[0])
                except Exception as exc:  # noqa: BLE001  (any failure of the reader is the finding)
                    errors.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        with Index.open(path) as idx:
            idx.sync(RestNode(rest.url))
    finally:
        done.set()
        reader.join()
    assert errors == []
    assert seen == sorted(seen) and len(set(seen)) > 3
    assert content(path) == reference[0]


def test_kill_9_at_random_points_then_resume_gives_the_same_index(tmp_path, rest, reference):
    """SIGKILL a running `sp-scan index sync` (and its workers) at random moments; every resume picks up intact."""
    path = tmp_path / "k.db"
    tips = kill_9_then_resume(path, rest, CHAIN.tip, rounds=5, seed=9, delay=0.03)
    assert content(path) == reference[0]
    assert tips == sorted(tips) and any(-1 < t < CHAIN.tip for t in tips), tips


def test_block_files_that_do_not_extend_the_index_are_refused_and_nothing_is_rolled_back(tmp_path, reference):
    with synced(tmp_path / "x.db", CHAIN) as idx:
        refusals = [
            (files_of(CHAIN, stop=5), f"the block files end at height 5, below the index's tip {CHAIN.tip}"),
            (files_of(BRANCH), f"the block file at height {CHAIN.tip} is {BRANCH.blocks[CHAIN.tip].hash_hex}, not the index's"),
            (files_of(BRANCH, start=CHAIN.tip + 1), f"the block file at height {CHAIN.tip + 1} does not link to the index's tip"),
            (files_of(CHAIN, start=2, stop=CHAIN.tip - 1), "below the index's tip"),
        ]
        for files, needle in refusals:
            with pytest.raises(ServerError, match=needle) as info:
                idx.sync(files)
            assert "block files must extend the index; they never roll it back" in str(info.value)
        with pytest.raises(HeightError, match=f"no block file at height {CHAIN.tip + 1}"):
            idx.sync(files_of(BRANCH, start=CHAIN.tip + 2))
    assert content(tmp_path / "x.db") == reference[0]


def test_block_files_that_overlap_the_index_and_go_on_extend_it(tmp_path, reference):
    with synced(tmp_path / "o.db", CHAIN, stop=8) as idx:
        stats = idx.sync(files_of(CHAIN, start=4))
        assert (stats.blocks, stats.reorgs) == (CHAIN.tip - 8, 0)
    assert content(tmp_path / "o.db") == reference[0]


def test_a_syncs_commits_leave_copying_the_log_into_the_file_to_a_thread(tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoint, "WAL_LIMIT", 1 << 60)  # never checkpoint in the writer
    path = tmp_path / "chain.db"

    def file_tip() -> object:  # the tip in the file itself: an immutable reader does not read the log
        conn = sqlite3.connect(f"file:{path}?immutable=1", uri=True)
        try:
            return conn.execute("SELECT value FROM meta WHERE key = 'tip'").fetchone()
        finally:
            conn.close()

    with Index.create(path, "regtest") as idx:

        def at_the_tip(stats):  # still in the sync: only the thread checkpoints (the writer's own are off)
            if stats.height == CHAIN.tip:
                wait_until(lambda: file_tip() == (CHAIN.tip,), what="the checkpoint thread copying the log into the file")

        idx.sync(files_of(CHAIN), progress=at_the_tip)
        assert not [t for t in threading.enumerate() if t.name == "sp-scan-checkpoint"]
    with synced(tmp_path / "plain.db", CHAIN) as plain:
        assert content(path) == content(plain.path)


def test_a_log_the_thread_does_not_empty_is_emptied_by_the_writer_past_its_limit(tmp_path, monkeypatch):
    largest = {}
    for name, limit in (("unchecked", 1 << 60), ("bounded", 1)):
        monkeypatch.setattr(checkpoint, "WAL_LIMIT", limit)
        monkeypatch.setattr(checkpoint.Checkpointer, "_run", lambda self: None)  # the thread never checkpoints
        wal, sizes = tmp_path / f"{name}.db-wal", []
        with Index.create(tmp_path / f"{name}.db", "regtest") as idx:
            idx.sync(files_of(CHAIN), progress=lambda stats: sizes.append(wal.stat().st_size))
        largest[name] = max(sizes)
    assert largest["bounded"] * 3 < largest["unchecked"]  # one commit's frames against every commit's


def test_the_log_stays_bounded_through_a_long_sync_while_readers_read_all_along(tmp_path, monkeypatch):
    """Readers in another thread read from the first block to the last (a snapshot of theirs can keep the log from
    restarting): the writer empties it past WAL_LIMIT, so it never holds much more than that."""
    monkeypatch.setattr(checkpoint, "WAL_LIMIT", 256 << 10)
    chain, path = spending_chain(80), tmp_path / "long.db"
    wal, sizes, reads, done = tmp_path / "long.db-wal", [], [], threading.Event()

    def read() -> None:
        with Index.open(path, readonly=True) as reader:
            while not done.is_set():
                tip = reader.tip()
                if tip is not None:
                    reads.append(len(reader.utxos(tip[0])) + len(list(reader.scan(WALLET, max(0, tip[0] - 9), tip[0]))))

    with Index.create(path, "regtest") as idx:
        readers = [threading.Thread(target=read) for _ in range(2)]
        for r in readers:
            r.start()
        try:
            idx.sync(files_of(chain), progress=lambda stats: sizes.append(wal.stat().st_size))
        finally:
            done.set()
            for r in readers:
                r.join()
        assert idx.tip()[0] == chain.tip and idx.check() == len(chain.blocks)
    assert len(reads) > 10 and sum(sizes) > 4 * checkpoint.WAL_LIMIT  # (read all along; the log written well past its limit)
    assert max(sizes) < 2 * checkpoint.WAL_LIMIT
