"""Syncing the index from Core-like REST and RPC stand-ins: sources agree, reorgs, kill -9, failing nodes, readers."""

from __future__ import annotations

import threading

import pytest

from cli_support import NodeServer, RestHandler, RpcHandler, spending_chain
from index_support import content, files_of, kill_9_then_resume, synced
from sp_scan.errors import HeightError, NodeError
from sp_scan.index import Index, Retry
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
            rest.httpd.chain = BRANCH

    with Index.create(tmp_path / "m.db", "regtest") as idx:
        stats = idx.sync(RestNode(rest.url), progress=switch)
        assert (stats.reorgs, stats.rolled_back) == (1, 3)
    assert content(tmp_path / "m.db") == reference[1]


def test_a_shorter_branch_on_the_node_rolls_the_index_back(tmp_path, rest):
    short = spending_chain(9, CHAIN, fork_height=7, salt=2)
    with Index.create(tmp_path / "s.db", "regtest") as idx:
        idx.sync(RestNode(rest.url))
        rest.httpd.chain = short
        idx.sync(RestNode(rest.url))
        assert idx.tip() == (short.tip, short.blocks[-1].header.GetHash())
    assert content(tmp_path / "s.db") == content(synced(tmp_path / "f.db", short).path)


def test_a_node_that_stops_answering_raises_naming_the_height_to_resume_at(tmp_path, rest, reference):
    rest.stop_answering(after=20)
    with Index.create(tmp_path / "n.db", "regtest") as idx:
        with pytest.raises(NodeError, match=r"cannot reach the node .*intact up to height (\d+); sync again to resume at") as info:
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
        with pytest.raises(NodeError, match="the node's chain 'testnet' is not one of main, test, testnet4, signet, regtest"):
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
    tips = kill_9_then_resume(path, rest, rounds=5, delay=0.03, window=(0.3, 0.9), seed=9)
    assert content(path) == reference[0]
    assert tips == sorted(tips) and any(-1 < t < CHAIN.tip for t in tips), tips


def test_block_files_that_do_not_continue_the_index_are_refused(tmp_path):
    with synced(tmp_path / "x.db", CHAIN, stop=8) as idx:
        with pytest.raises(HeightError, match="cannot find where the source's chain leaves the index's"):
            idx.sync(files_of(BRANCH, start=9))
        with pytest.raises(HeightError, match="no block file at height 9"):
            idx.sync(files_of(CHAIN, start=10))
        assert idx.tip()[0] == 8
