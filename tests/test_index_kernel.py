"""The tweak index on chains that Bitcoin Core's own validation accepted (tests/kernelchain.py).

What the index serves is compared with what the sender side recorded while building the chain
(payments, tweaks from private keys, spends), never with the index itself.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

import kernelchain as kc
from cli_support import ROOT
from index_support import content, kill_9_then_resume
from sp_scan import descriptor
from sp_scan.errors import ServerError
from sp_scan.index import Index, Retry
from sp_scan.node import RestNode, RpcNode
from test_cli import assert_fails, invoke, json_lines

KEY_ARGS = ["--spend-pubkey", kc.TEST_WALLET.spend_pubkey33.hex(), *[a for m in kc.TEST_WALLET.labels for a in ("--label", str(m))]]


@pytest.fixture(scope="module")
def synced(kernel_chain, kernel_rest, tmp_path_factory):
    """An index synced by `sp-scan index sync` from the REST stand-in over the sample chain."""
    path = tmp_path_factory.mktemp("kernel") / "sample.db"
    result = invoke("index", "sync", "--db", str(path), "--rest", kernel_rest.url, "--jobs", "2")
    assert result.exit_code == 0, result.output
    with Index.open(path, readonly=True) as idx:
        yield idx


def found_rows(index: Index, wallet: kc.Wallet) -> list[tuple]:
    return [(m.height, m.txid32, m.vout, m.amount, m.found.output32, m.found.tweak32, m.found.label, m.spent) for m in index.scan(wallet.receiver())]


def paid_rows(chain: kc.KernelChain, wallet: kc.Wallet) -> list[tuple]:
    return [(f.height, f.txid32, f.vout, f.amount, f.output32, f.tweak32, f.label, f.spent_height is not None) for f in chain.found(wallet)]


@pytest.mark.parametrize("wallet", [kc.TEST_WALLET, kc.OTHER_WALLET], ids=lambda w: w.name)
def test_an_index_scan_finds_exactly_what_the_sender_paid_with_spent_status(kernel_chain, synced, wallet):
    found = found_rows(synced, wallet)
    assert found == paid_rows(kernel_chain, wallet)
    if wallet is kc.TEST_WALLET:
        assert {f[6] for f in found} == {None, 0, 1, 7} and any(f[7] for f in found) and not all(f[7] for f in found)


def test_index_scan_json_is_what_the_sender_paid(kernel_chain, synced, tmp_path):
    key = tmp_path / "wallet.scan"
    key.write_text(kc.TEST_WALLET.scan_key32.hex() + "\n")
    result = invoke("index", "scan", "--db", str(synced.path), "--scan-key-file", str(key), *KEY_ARGS, "--json")
    assert result.exit_code == 0, result.output
    assert json_lines(result.stdout) == [f.to_json() for f in kernel_chain.found()]


def test_index_scan_with_a_descriptor_starts_at_its_birthday_height(kernel_chain, synced, tmp_path):
    wallet = descriptor.from_keys(kc.TEST_WALLET.scan_key32, kc.TEST_WALLET.spend_pubkey33, network="test", annotations=(("bh", 104), ("ml", 7)))
    path = tmp_path / "wallet.desc"
    path.write_text(str(wallet) + "\n")
    result = invoke("index", "scan", "--db", str(synced.path), "--descriptor-file", str(path), "--json")
    assert result.exit_code == 0, result.output
    assert json_lines(result.stdout) == [f.to_json() for f in kernel_chain.found(start=104)]
    assert_fails(invoke("index", "scan", "--db", str(synced.path), "--descriptor-file", str(path), "--label", "1"), "not both")


def test_the_index_tweaks_equal_sp_scan_tweaks_block_by_block(kernel_chain, kernel_rest, synced):
    result = invoke("tweaks", "--rest", kernel_rest.url, "--from", "0", "--to", str(kc.SAMPLE_TIP), "--json")
    assert result.exit_code == 0, result.output
    printed = [r["tweak"] for r in json_lines(result.stdout)]
    assert [t.hex() for h in range(kc.SAMPLE_TIP + 1) for t in synced.tweaks(h)] == printed
    for h in range(kc.SAMPLE_TIP + 1):
        assert synced.tweaks(h) == [t.tweak33 for t in kernel_chain.tweaks(h)]
        assert synced.block_hash(h) == kernel_chain.hash_at(h)
    assert len(printed) > 15


def test_cut_through_and_dust_answers_match_the_senders_spends(kernel_chain, synced):
    limits = sorted({o.nValue for b in kernel_chain.active() for t in b.txs for o in t.tx.vout})
    dropped = 0
    for h in [b.height for b in kernel_chain.active() if b.txs]:  # the others have no tweaks (checked above)
        for dust in (0, limits[len(limits) // 2], limits[-1]):
            expected = [t.tweak33 for t in kernel_chain.tweaks(h, dust_limit=dust, cut_through=True)]
            assert synced.tweaks(h, dust_limit=dust, cut_through=True) == expected
            assert synced.tweaks(h, dust_limit=dust) == [t.tweak33 for t in kernel_chain.tweaks(h, dust_limit=dust)]
        dropped += len(synced.tweaks(h)) - len(synced.tweaks(h, cut_through=True))
    assert dropped >= 1


def test_utxos_flag_exactly_the_outputs_the_chain_spends(kernel_chain, synced):
    spends = kernel_chain.spends()
    for h in range(kc.SAMPLE_TIP + 1):
        for u in synced.utxos(h):
            assert u.spent == (kc.outpoint36(u.txid32, u.vout) in spends)


def test_rpc_in_worker_processes_gives_the_same_index_as_rest(kernel_chain, synced, tmp_path):
    with kc.rpc_server(kernel_chain) as rpc, Index.create(tmp_path / "rpc.db", "regtest") as idx:
        idx.sync(RpcNode(rpc.url, user="user", password="pass"), jobs=2)
    assert content(tmp_path / "rpc.db") == content(synced.path)


def test_a_reorg_rolls_back_tweaks_and_spending_marks_and_takes_the_new_branch(kernel_copy, tmp_path):
    with kc.rest_server(kernel_copy) as rest, Index.create(tmp_path / "reorg.db", "regtest") as idx:
        idx.sync(RestNode(rest.url))
        before = {h: idx.tweaks(h) for h in range(kc.SAMPLE_TIP + 1)}
        paid_at = {t.txid32: b.height for b in kernel_copy.active() for t in b.txs}
        spent_by_dropped = kc.outpoint36(*_outpoint(kernel_copy, "reorg-dropped"))
        assert _spent(idx, paid_at, spent_by_dropped)
        reorg = kc.make_reorg(kernel_copy)
        stats = idx.sync(RestNode(rest.url))
        assert (stats.reorgs, stats.rolled_back, stats.blocks) == (1, len(reorg.old_hashes), len(reorg.new_hashes))
        tip = kernel_copy.tip_height
        assert [idx.block_hash(h) for h in range(reorg.fork_height + 1, tip + 1)] == list(reorg.new_hashes)
        old_tweaks = {t for h in range(reorg.fork_height + 1, kc.SAMPLE_TIP + 1) for t in before[h]}
        new_tweaks = {t for h in range(reorg.fork_height + 1, tip + 1) for t in idx.tweaks(h)}
        assert reorg.dropped.tweak33 in old_tweaks and reorg.dropped.tweak33 not in new_tweaks
        assert reorg.added.tweak33 in new_tweaks
        assert not _spent(idx, paid_at, spent_by_dropped)  # the mark the dropped tx made is undone
        for h in range(tip + 1):
            assert idx.tweaks(h, cut_through=True) == [t.tweak33 for t in kernel_copy.tweaks(h, cut_through=True)]
        assert found_rows(idx, kc.TEST_WALLET) == paid_rows(kernel_copy, kc.TEST_WALLET)
        with Index.create(tmp_path / "fresh.db", "regtest") as fresh:
            fresh.sync(RestNode(rest.url))
    assert content(tmp_path / "reorg.db") == content(tmp_path / "fresh.db")


def _outpoint(chain: kc.KernelChain, name: str) -> tuple[bytes, int]:
    op = next(t for b in chain.active() for t in b.txs if t.name == name).inputs36[0]
    return op[:32], int.from_bytes(op[32:], "little")


def _spent(index: Index, paid_at: dict[bytes, int], outpoint36: bytes) -> bool:
    txid32, vout = outpoint36[:32], int.from_bytes(outpoint36[32:], "little")
    return next(u.spent for u in index.utxos(paid_at[txid32]) if (u.txid32, u.vout) == (txid32, vout))


def test_kill_9_at_random_points_of_a_sync_then_resume_gives_the_same_index(kernel_chain, synced, tmp_path):
    path = tmp_path / "killed.db"
    with kc.rest_server(kernel_chain) as rest:
        tips = kill_9_then_resume(path, rest, kc.SAMPLE_TIP, rounds=4, seed=110, delay=0.004)
    assert content(path) == content(synced.path)
    assert tips == sorted(tips) and any(-1 < t < kc.SAMPLE_TIP for t in tips), tips


def test_a_node_that_stops_answering_mid_sync_loses_nothing(kernel_chain, synced, tmp_path):
    with kc.rest_server(kernel_chain) as rest, Index.create(tmp_path / "stop.db", "regtest") as idx:
        rest.stop_answering(after=150)
        with pytest.raises(ServerError, match=r"cannot reach the node .*sync again to resume at (\d+)"):
            idx.sync(RestNode(rest.url), retry=Retry(attempts=1, delay=0.05))
        assert 0 < idx.tip()[0] < kc.SAMPLE_TIP
        rest.resume_answering()
        idx.sync(RestNode(rest.url))
    assert content(tmp_path / "stop.db") == content(synced.path)


def test_the_shipped_sample_chain_files_index_as_expected_json_says(tmp_path):
    chain_dir = ROOT / "vectors" / "chain"
    expected = json.loads((chain_dir / "expected.json").read_text())
    db = str(tmp_path / "files.db")
    blocks = sorted(str(p) for p in chain_dir.glob("????.hex"))
    assert invoke("index", "sync", "--db", db, "--network", "regtest", *blocks).exit_code == 0
    key = chain_dir / expected["wallet"]["scan_key_file"]
    result = invoke("index", "scan", "--db", db, "--scan-key-file", str(key), *KEY_ARGS, "--json")
    assert json_lines(result.stdout) == [{k: v for k, v in f.items() if k != "spent_height"} for f in expected["found"]]
    info = json.loads(invoke("index", "info", "--db", db, "--json").stdout)
    assert (info["tip_height"], info["tip_hash"], info["eligible_transactions"]) == (expected["tip"]["height"], expected["tip"]["hash"], len(expected["tweaks"]))


@pytest.fixture(scope="module")
def files_index(tmp_path_factory) -> Path:
    """`sp-scan index sync` of the shipped sample chain's block files (81,920 bytes)."""
    path = tmp_path_factory.mktemp("files") / "ref.db"
    assert invoke("index", "sync", "--db", str(path), "--network", "regtest", *CHAIN_FILES).exit_code == 0
    return path


CHAIN_FILES = sorted(str(p) for p in (ROOT / "vectors" / "chain").glob("????.hex"))


def test_block_files_below_the_tip_are_refused_and_the_index_keeps_every_block(files_index, tmp_path):
    path = tmp_path / "s.db"
    path.write_bytes(files_index.read_bytes())
    line = assert_fails(invoke("index", "sync", "--db", str(path), "--network", "regtest", *CHAIN_FILES[:10]), "never roll it back")
    assert f"the block files end at height 9, below the index's tip {kc.SAMPLE_TIP}" in line
    assert content(path) == content(files_index)


def test_a_truncated_copy_of_an_index_is_refused_by_scan_info_and_sync(files_index, tmp_path):
    path = tmp_path / "t.db"
    whole = files_index.read_bytes()
    cut = len(whole) // 2
    path.write_bytes(whole[:cut])  # head -c $cut ref.db > t.db
    page_size, pages = int.from_bytes(whole[16:18], "big"), int.from_bytes(whole[28:32], "big")  # SQLite's header
    assert len(whole) == pages * page_size > cut
    key = ROOT / "vectors" / "chain" / json.loads((ROOT / "vectors" / "chain" / "expected.json").read_text())["wallet"]["scan_key_file"]
    needle = f"t.db is truncated: its {pages} pages of {page_size:,} bytes need {pages * page_size:,}, the file has {cut:,}"
    assert_fails(invoke("index", "scan", "--db", str(path), "--scan-key-file", str(key), *KEY_ARGS, "--json"), needle)
    assert_fails(invoke("index", "info", "--db", str(path)), needle)
    assert_fails(invoke("index", "sync", "--db", str(path), "--network", "regtest", *CHAIN_FILES), needle)
    assert path.stat().st_size == cut and not Path(f"{path}-wal").exists()


def test_index_info_check_reads_the_whole_file(files_index, tmp_path):
    record = json.loads(invoke("index", "info", "--db", str(files_index), "--json", "--check").stdout)
    assert record["check"] == "ok" and record["tip_height"] == kc.SAMPLE_TIP
    assert f"check         ok ({kc.SAMPLE_TIP + 1} blocks)" in invoke("index", "info", "--db", str(files_index), "--check").stdout
    path = tmp_path / "d.db"
    path.write_bytes(files_index.read_bytes())
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM spends WHERE height = (SELECT MAX(height) FROM spends)")
    assert_fails(invoke("index", "info", "--db", str(path), "--check"), f"d.db is damaged: block {kc.SAMPLE_TIP}'s spends row is missing")
