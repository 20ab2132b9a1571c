"""The kernel-validated regtest chains of tests/kernelchain.py: accepted by Core, read back as served, scanned as paid."""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from bitcoin.core import CBlock, CTxInWitness, CTxOut, CTxWitness
from bitcoin.core.script import CScriptWitness
from click.testing import CliRunner

import kernelchain as kc
from cli_support import ROOT
from helpers import load_script
from sp_scan import block, cli, wire
from sp_scan.errors import ServerError
from sp_scan.node import RestNode, RpcNode
from sp_scan.wire import TxOut, parse_spent

SAMPLE_CHAIN = ROOT / "vectors" / "chain"


def by_name(chain: kc.KernelChain) -> dict[str, tuple[int, kc.TxRecord]]:
    return {t.name: (b.height, t) for b in chain.active() for t in b.txs}


def test_every_block_of_the_sample_chain_is_on_the_kernels_active_chain(kernel_chain):
    active = kernel_chain.active()
    assert kernel_chain.best() == (kc.SAMPLE_TIP, active[-1].hash32)
    for h, record in enumerate(active):
        raw = kernel_chain.block(h)
        assert record.height == h and wire.sha256d(raw[:80]) == record.hash32 == kernel_chain.hash_at(h)
        if h:
            assert raw[4:36] == active[h - 1].hash32
            assert [tx.GetTxid() for tx in CBlock.deserialize(raw).vtx[1:]] == [t.txid32 for t in record.txs]
    assert kernel_chain.hash_at(kc.SAMPLE_TIP + 1) is None


@pytest.mark.parametrize(("height", "push"), [(1, "51"), (16, "60"), (17, "0111"), (100, "0164")])
def test_coinbases_carry_the_bip34_height_as_core_pushes_it(kernel_chain, height, push):
    coinbase = CBlock.deserialize(kernel_chain.block(height)).vtx[0]
    assert bytes(coinbase.vin[0].scriptSig).hex().startswith(push)


def test_the_chain_spends_every_input_kind_of_the_sample_blocks(kernel_chain):
    kinds = {k for b in kernel_chain.active() for t in b.txs for k in t.kinds}
    assert kinds >= kc.gen.ELIGIBLE_KINDS | kc.gen.INELIGIBLE_KINDS


def test_spent_outputs_read_back_from_the_kernel_are_the_prevouts_the_txs_spend(kernel_chain):
    assert kernel_chain.spent(0) == kc.GENESIS_SPENT
    for record in kernel_chain.active()[1:]:
        prevouts = [[kernel_chain.coins[op].prevout for op in t.inputs36] for t in record.txs]
        expected = [[]] + [[TxOut(p.nValue, bytes(p.scriptPubKey)) for p in tx] for tx in prevouts]
        assert parse_spent(kernel_chain.spent(record.height)) == expected


def test_tweaks_of_every_block_equal_the_ones_the_sender_computed_from_private_keys(kernel_chain):
    count = 0
    for h in range(kernel_chain.tip_height + 1):
        tweaks = block.tweaks(kernel_chain.block(h), kernel_chain.spent(h))
        assert tweaks == kernel_chain.tweaks(h)
        count += len(tweaks)
    assert count == sum(t.tweak33 is not None for b in kernel_chain.active() for t in b.txs) > 15


@pytest.mark.parametrize("wallet", [kc.TEST_WALLET, kc.OTHER_WALLET], ids=lambda w: w.name)
def test_scanning_every_block_finds_exactly_what_the_sender_paid(kernel_chain, wallet):
    found = []
    for h in range(kernel_chain.tip_height + 1):
        for m in block.scan(kernel_chain.block(h), kernel_chain.spent(h), wallet.receiver()):
            found.append((h, m.txid32, m.vout, m.amount, m.found.output32, m.found.tweak32, m.found.label))
    expected = [(f.height, f.txid32, f.vout, f.amount, f.output32, f.tweak32, f.label) for f in kernel_chain.found(wallet)]
    assert found == expected
    if wallet is kc.TEST_WALLET:
        assert {f[-1] for f in found} == {None, 0, 1, 7}


def test_the_segwit_v2_decoy_and_the_other_wallet_are_not_the_test_wallets(kernel_chain):
    txs = by_name(kernel_chain)
    paid = {(f.txid32, f.vout) for f in kernel_chain.found()}
    decoy = txs["segwit-v2-spend"][1]
    assert decoy.tweak33 is None and not decoy.payments
    assert not any(txid == txs["other-wallet"][1].txid32 for txid, _ in paid)


def test_spends_record_full_and_partial_spends_of_paid_transactions(kernel_chain):
    txs = by_name(kernel_chain)
    spends = kernel_chain.spends()

    def spent_at(name: str) -> list[int | None]:
        t = txs[name][1]
        return [spends.get(kc.outpoint36(t.txid32, n)) for n in t.taproot_vouts]

    assert spent_at("p2tr-key-path") == [105] * 4
    assert sorted(spent_at("p2tr-script-path")) == [105, 107]
    assert spent_at("p2pkh") == [107]
    assert sorted(spent_at("many-outputs"), key=str) == [108, None, None, None, None, None]
    cut = {t.txid32 for t in kernel_chain.active()[101].txs} - {t.txid32 for t in kernel_chain.tweaks(101, cut_through=True)}
    assert cut == {txs["p2tr-key-path"][1].txid32, txs["p2pkh"][1].txid32}
    assert [t.txid32 for t in kernel_chain.tweaks(102, cut_through=True)] == [
        t.txid32 for t in kernel_chain.active()[102].txs if t.tweak33 is not None and t.name != "p2tr-script-path"
    ]


def test_the_dust_limit_leaves_out_txs_whose_largest_taproot_output_is_below_it(kernel_chain):
    limit = 1_000_000
    kept = kernel_chain.tweaks(104, dust_limit=limit)
    for t in kernel_chain.active()[104].txs:
        if t.tweak33 is not None:
            largest = max(t.tx.vout[n].nValue for n in t.taproot_vouts)
            assert (t.txid32 in {k.txid32 for k in kept}) == (largest >= limit)


def _flip_first_witness_bit(record: kc.TxRecord) -> None:
    stack = list(record.tx.wit.vtxinwit[0].scriptWitness.stack)
    stack[0] = bytes([stack[0][0] ^ 1]) + stack[0][1:]
    record.tx.wit = CTxWitness([CTxInWitness(CScriptWitness(stack)), *record.tx.wit.vtxinwit[1:]])


@pytest.fixture(scope="module")
def scratch(kernel_chain):
    with tempfile.TemporaryDirectory(prefix="sp-scan-kernel-") as datadir:
        chain = kc.replay(kernel_chain, Path(datadir))
        yield chain
        chain.close()


def test_a_block_with_a_bad_schnorr_signature_is_rejected_with_cores_reason(scratch):
    tip = scratch.best()
    coin = next(c for c in scratch.reserve if c.kind == "p2tr-key")
    record = scratch.transaction("bad-signature", [coin], [("wallet", None)])
    _flip_first_witness_bit(record)
    with pytest.raises(kc.BlockRejected, match="Invalid Schnorr signature") as info:
        scratch.mine([record])
    assert any("ConnectBlock" in line for line in info.value.reasons)
    assert scratch.best() == tip


def test_spending_a_coinbase_output_before_maturity_is_rejected(scratch):
    coin = scratch.fund(["p2wpkh"])[0]
    tip = scratch.best()
    with pytest.raises(kc.BlockRejected, match="bad-txns-premature-spend-of-coinbase"):
        scratch.mine([scratch.transaction("premature", [coin], [("wallet", None)])])
    assert scratch.best() == tip


def test_a_coinbase_with_the_wrong_bip34_height_is_rejected(scratch):
    height, tip = scratch.best()
    raw = kc._assemble(height, tip, b"\x00" * 4, [CTxOut(kc.subsidy(height + 1), scratch.miner_script)], [])
    with pytest.raises(kc.BlockRejected, match="bad-cb-height"):
        scratch.submit(raw)
    assert scratch.best() == (height, tip)


def test_the_shared_session_chain_refuses_to_grow(kernel_chain):
    with pytest.raises(RuntimeError, match="kernel_copy"):
        kernel_chain.mine()


def test_restnode_reads_the_kernels_bytes_from_the_rest_stand_in(kernel_chain, kernel_rest):
    node = RestNode(kernel_rest.url)
    assert node.tip_height() == kernel_chain.tip_height
    for h in range(kernel_chain.tip_height + 1):
        hash_hex = node.block_hash(h)
        assert hash_hex == kernel_chain.hash_at(h)[::-1].hex()
        assert node.block(hash_hex) == (kernel_chain.block(h), kernel_chain.spent(h))
    with pytest.raises(ServerError, match="HTTP 404 Block height out of range"):
        node.block_hash(kernel_chain.tip_height + 1)


def test_rpcnode_reads_the_same_blocks_and_prevouts_from_the_json_rpc_stand_in(kernel_chain):
    with kc.rpc_server(kernel_chain, "alice:pw") as server:
        node = RpcNode(server.url, user="alice", password="pw")
        assert node.call("getblockchaininfo")["bestblockhash"] == kernel_chain.tip_hash[::-1].hex()
        for h in (0, 1, 101, 102, 103, 105, kernel_chain.tip_height):
            assert node.block(node.block_hash(h)) == (kernel_chain.block(h), kernel_chain.spent(h))
        with pytest.raises(ServerError, match="Block height out of range"):
            node.block_hash(kernel_chain.tip_height + 1)


def test_a_stand_in_told_to_stop_answering_hangs_up_until_resumed(kernel_copy):
    with kc.rest_server(kernel_copy) as server:
        node = RestNode(server.url, timeout=5)
        server.stop_answering(after=1)
        assert node.tip_height() == kc.SAMPLE_TIP
        with pytest.raises(ServerError, match="cannot reach the node"):
            node.block_hash(1)
        server.resume_answering()
        assert node.block_hash(1) == kernel_copy.hash_at(1)[::-1].hex()


def test_a_longer_branch_reorganises_the_kernel_while_a_client_is_connected(kernel_copy):
    before = {f.txid32: f for f in kernel_copy.found()}
    with kc.rest_server(kernel_copy) as server:
        node = RestNode(server.url)
        old_hash = node.block_hash(kc.REORG_FORK + 1)
        reorg = kc.make_reorg(kernel_copy)
        assert node.tip_height() == kc.SAMPLE_TIP + 1
        assert node.block_hash(kc.REORG_FORK + 1) == reorg.new_hashes[0][::-1].hex() != old_hash
        assert node.block(old_hash)[0] == kernel_copy.lookup(reorg.old_hashes[0])[1]  # stale blocks stay readable
    assert kernel_copy.tip_hash == reorg.new_hashes[-1]
    assert [kernel_copy.hash_at(h) for h in range(reorg.fork_height + 1, kernel_copy.tip_height + 1)] == list(reorg.new_hashes)

    after = {f.txid32: f for f in kernel_copy.found()}
    assert reorg.dropped.txid32 in before and reorg.dropped.txid32 not in after
    assert reorg.conflicted.txid32 not in after and reorg.replacement.txid32 in after
    assert (before[reorg.kept.txid32].height, after[reorg.kept.txid32].height) == (109, 110)
    assert after[reorg.added.txid32].height == 111
    spends = kernel_copy.spends()
    assert spends[reorg.conflicted.inputs36[0]] == 109
    assert all(op not in spends for op in reorg.dropped.inputs36)
    for h in range(reorg.fork_height, kernel_copy.tip_height + 1):
        matches = block.scan(kernel_copy.block(h), kernel_copy.spent(h), kc.TEST_WALLET.receiver())
        assert [(m.txid32, m.vout) for m in matches] == [(f.txid32, f.vout) for f in kernel_copy.found(start=h, end=h)]


def test_a_replayed_prefix_is_the_same_chain_up_to_its_height(kernel_chain):
    with tempfile.TemporaryDirectory(prefix="sp-scan-kernel-") as datadir:
        copy = kc.replay(kernel_chain, Path(datadir), height=104)
        try:
            assert copy.best() == (104, kernel_chain.hash_at(104))
            assert [copy.block(h) for h in (0, 101, 104)] == [kernel_chain.block(h) for h in (0, 101, 104)]
            record = copy.mine()
            assert copy.best() == (105, record.hash32) and record.hash32 != kernel_chain.hash_at(105)
        finally:
            copy.close()


def test_the_shipped_sample_chain_is_what_its_generator_writes(kernel_chain):
    generator = load_script("vectors/chain/generate.py", "sample_chain_generate")
    written = generator.files(kernel_chain)
    shipped = {p.name: p.read_text() for p in SAMPLE_CHAIN.iterdir() if p.suffix in (".hex", ".json")}
    assert sorted(shipped) == sorted(written)
    assert [name for name in written if shipped[name] != written[name]] == []


def test_sp_scan_reads_the_shipped_chain_files_and_scans_what_expected_json_says():
    expected = json.loads((SAMPLE_CHAIN / "expected.json").read_text())
    blocks = [str(SAMPLE_CHAIN / f"{h:04d}.hex") for h in range(expected["tip"]["height"] + 1)]
    wallet = ["--scan-key-file", str(ROOT / "vectors" / "blocks" / "test-wallet.scan"), "--spend-pubkey", expected["wallet"]["spend_pubkey"]]
    wallet += [a for m in expected["wallet"]["labels"] for a in ("--label", str(m))]
    app = cli.app
    tweaks = CliRunner().invoke(app, ["tweaks", *blocks, "--json"], env={"SP_SCAN_KEY": None})
    assert [json.loads(line) for line in tweaks.stdout.splitlines()] == [{"txid": t["txid"], "tweak": t["tweak"]} for t in expected["tweaks"]]
    found = CliRunner().invoke(app, ["scan", *blocks, *wallet, "--json"], env={"SP_SCAN_KEY": None})
    keys = ("txid", "vout", "amount", "output", "tweak", "label")
    assert [json.loads(line) for line in found.stdout.splitlines()] == [{k: f[k] for k in keys} for f in expected["found"]]


def test_the_sample_chain_readme_states_the_totals_of_expected_json():
    expected = json.loads((SAMPLE_CHAIN / "expected.json").read_text())
    labels = Counter(f["label"] for f in expected["found"])
    totals = (
        f"Totals: {len(expected['tweaks'])} tweaks; {len(expected['found'])} outputs to the test wallet ({labels[None]} unlabelled, "
        f"{labels[0]} change m=0, {labels[1]} label 1, {labels[7]} label 7),\n{sum(f['spent'] for f in expected['found'])} of them spent later;"
    )
    assert totals in (SAMPLE_CHAIN / "README.md").read_text()
