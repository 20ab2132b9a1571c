"""bench.chain's mainnet-shaped chain, made tiny: Core's blocks folder that CoreBlocks reads, served by bench.scale's
stand-in as the files serve it, its spends hitting earlier blocks' outputs."""

from __future__ import annotations

import sys

import pytest

from cli_support import ROOT, NodeServer, RestHandler
from sp_scan.index import Index
from sp_scan.index.corefiles import CoreBlocks
from sp_scan.node import RestNode

sys.path.insert(0, str(ROOT))  # bench/ is not installed: it is imported from the checkout
from bench import chain, scale  # noqa: E402

BLOCKS, SPENDS = 12, 1600
AGES = chain.Ages(recent=2, window=5)


def make(out, blocks: int):
    chain.Generator(out, SPENDS, AGES, seed=1).run(blocks)
    return out


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    return make(tmp_path_factory.mktemp("chain"), BLOCKS)


@pytest.fixture(scope="module")
def indexes(made, tmp_path_factory):
    """The chain synced over REST from bench.scale's stand-in and from its blocks folder."""
    work = tmp_path_factory.mktemp("indexes")
    with NodeServer(RestHandler, scale.FolderChain(made, BLOCKS)) as server, Index.create(work / "rest.db", "regtest") as idx:
        idx.sync(RestNode(server.url))
    with Index.create(work / "files.db", "regtest") as idx:
        idx.sync(CoreBlocks(made / "blocks", "regtest"))
    with Index.open(work / "rest.db", readonly=True) as rest, Index.open(work / "files.db", readonly=True) as files:
        yield rest, files


def test_core_blocks_sees_every_block_at_its_height_and_each_spend_hits_an_earlier_blocks_output_once(made):
    ages = chain.check(made, range(BLOCKS))  # asserts heights, hashes, parsing, hits and each output spent once
    assert sum(ages.values()) == SPENDS * (BLOCKS - 1)
    assert min(ages) == 1 and max(ages) > AGES.window  # the third category reaches beyond the window


def test_the_rest_stand_in_serves_what_the_blocks_folder_holds(indexes):
    rest, files = indexes
    assert rest.tip() == files.tip() and rest.tip()[0] == BLOCKS - 1
    for h in range(BLOCKS):
        assert rest.block_hash(h) == files.block_hash(h)
        assert rest.tweaks(h) == files.tweaks(h) and len(rest.tweaks(h)) == 1412
        assert rest.utxos(h) == files.utxos(h)


def test_the_index_marks_spent_exactly_the_outputs_later_blocks_spend(indexes):
    _, files = indexes
    spent = sum(u.spent for h in range(BLOCKS) for u in files.utxos(h))
    assert spent == SPENDS * (BLOCKS - 1)
    assert not any(u.spent for u in files.utxos(BLOCKS - 1))


def test_block_zero_is_the_sample_that_pays_the_test_wallet(indexes):
    from bench.test_block import _receiver

    _, files = indexes
    assert len(list(files.scan(_receiver(), 0, 0))) == 84


def test_a_run_resumed_makes_the_same_chain(made, tmp_path):
    make(tmp_path, BLOCKS // 2)
    make(tmp_path, BLOCKS)
    for name in ("blocks.bin", "txids.bin", f"spent-{BLOCKS}.bin", "blocks/blk00000.dat", "blocks/rev00000.dat"):
        assert (tmp_path / name).read_bytes() == (made / name).read_bytes(), name
