"""The receiving wallet over its local sources (an index, a node over REST and RPC) on kernel-validated chains.

What a wallet lists is compared with `sp-scan index scan --json` over the same chain and with what the
sender paid (tests/kernelchain.py records every payment, tweak and spend from the sender side).
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess

import pytest
from coincurve import PrivateKey

import kernelchain as kc
import serving
from cli_support import closed_port_url
from index_support import wait_until
from sp_scan.errors import InvalidKeyError, ServerError, WalletStoreError
from sp_scan.index import Index
from sp_scan.node import RestNode
from sp_scan.wallet import OutputFound, OutputSpent, Wallet
from sp_scan.wallet.sources.index import IndexSource
from sp_scan.wallet.sources.node import NodeSource
from test_cli import assert_fails, invoke, json_lines
from wallet_support import WALLET_CLI, W, create, index_scan, kill_9_while_syncing, listed, paid, scan_key_file, sync, wallet_tip


@pytest.fixture(scope="module")
def kernel_rpc(kernel_chain):
    with kc.rpc_server(kernel_chain) as server:
        yield server


def source_args(kind: str, kernel_index, kernel_rest, kernel_rpc) -> list[str]:
    if kind == "db":
        return ["--db", str(kernel_index)]
    if kind == "rest":
        return ["--rest", kernel_rest.url]
    return ["--rpc", kernel_rpc.url.replace("http://", "http://user:pass@")]


@pytest.mark.parametrize("kind", ["db", "rest", "rpc"])
def test_every_local_source_lists_what_index_scan_lists_and_the_sender_paid(kind, kernel_chain, kernel_index, kernel_rest, kernel_rpc, tmp_path):
    path = create(tmp_path)
    result = sync(path, *source_args(kind, kernel_index, kernel_rest, kernel_rpc))
    assert result.exit_code == 0, result.output
    assert f"wallet at height {kc.SAMPLE_TIP} " in result.stdout
    rows = listed(path)
    assert rows == index_scan(kernel_index) == paid(kernel_chain)
    assert {r["label"] for r in rows} == {None, 0, 1, 7} and any(r["spent"] for r in rows) and not all(r["spent"] for r in rows)
    balance = json_lines(invoke("wallet", "balance", str(path), "--json").stdout)
    assert balance == [{"confirmed": sum(r["amount"] for r in rows if not r["spent"]), "unverified": 0, "reserved": 0, "outgoing": 0, "incoming": 0}]
    again = sync(path, *source_args(kind, kernel_index, kernel_rest, kernel_rpc))
    assert again.exit_code == 0 and "0 block(s) scanned" in again.stdout
    assert listed(path) == rows


def test_a_wallet_scans_from_its_birthday(kernel_chain, kernel_index, tmp_path):
    path = create(tmp_path, birthday=104)
    assert sync(path, "--db", str(kernel_index)).exit_code == 0
    assert listed(path) == paid(kernel_chain, start=104) != paid(kernel_chain)


def test_the_spend_tweak_of_each_output_gives_its_key_and_the_spend_is_recorded_with_its_txid(kernel_chain, kernel_rest, tmp_path):
    path = create(tmp_path)
    with Wallet.open(path) as w:
        w.sync(NodeSource(f"rest+{kernel_rest.url}"), W.scan_key32)
        outputs = w.outputs()
    spends = kernel_chain.spends()
    spending = {op: t.txid32 for b in kernel_chain.active() for t in b.txs for op in t.inputs36}
    for o in outputs:
        assert kc._spend_key(W, o.tweak32).public_key.format()[1:] == o.output32
        assert o.spent_height == spends.get(o.outpoint36)
        assert o.spent_txid32 == spending.get(o.outpoint36)
        assert o.block_hash32 == kernel_chain.hash_at(o.height)


def test_sync_refuses_a_scan_key_that_is_not_the_wallets_and_the_file_never_holds_it(kernel_index, tmp_path):
    path = create(tmp_path)
    other = scan_key_file(tmp_path, kc.OTHER_WALLET)
    assert_fails(invoke("wallet", "sync", str(path), "--scan-key-file", str(other), "--db", str(kernel_index)), "scan key", "not")
    assert wallet_tip(path) == -1
    assert {p.stat().st_mode & 0o777 for p in tmp_path.glob("test.wallet*")} == {0o600}  # the file, its -wal and -shm
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("test.wallet*"))
    assert W.scan_key32 not in raw and W.scan_key32.hex().encode() not in raw
    assert W.scan_pubkey33 in raw
    with Wallet.open(path) as w, pytest.raises(InvalidKeyError):
        w.sync(IndexSource(kernel_index), kc.OTHER_WALLET.scan_key32)


@pytest.mark.parametrize("kind", ["rest", "db"])
def test_a_fork_between_syncs_rolls_back_what_came_after_it_and_rescans(kind, kernel_copy, tmp_path):
    with kc.rest_server(kernel_copy) as rest:
        db = serving.synced_index(tmp_path / "index.db", rest.url)
        source = ["--db", str(db)] if kind == "db" else ["--rest", rest.url]
        path = create(tmp_path)
        assert sync(path, *source).exit_code == 0
        before = listed(path)
        assert before == paid(kernel_copy)
        reorg = kc.make_reorg(kernel_copy)
        serving.sync(db, rest.url)
        result = sync(path, *source)
        assert result.exit_code == 0, result.output
        assert "1 fork(s) rolled back 2 block(s)" in result.stdout
        after = listed(path)
        assert after == paid(kernel_copy) == index_scan(db)
        txids = {r["txid"] for r in after}
        assert reorg.added.txid32[::-1].hex() in txids and reorg.dropped.txid32[::-1].hex() not in txids
        assert before != after
        with Wallet.open(path) as w:
            assert w.tip() == (kernel_copy.tip_height, kernel_copy.tip_hash)


def test_kill_9_mid_sync_then_resume_gives_the_same_wallet(kernel_chain, kernel_index, tmp_path):
    whole = create(tmp_path, "whole.wallet")
    assert sync(whole, "--db", str(kernel_index)).exit_code == 0
    path = create(tmp_path)
    tips = []
    with kc.rest_server(kernel_chain) as rest:
        for height in (20, 102, 105, 107):  # a held block: the kill lands while the sync waits for it
            rest.hold(height)
            kill_9_while_syncing(path, ["--rest", rest.url], rest.held.is_set, f"a request for block {height}")
            rest.release()
            tips.append(wallet_tip(path))
        rest.httpd.delay = 0.002  # then wherever the sync is once it committed a block past 104
        kill_9_while_syncing(path, ["--rest", rest.url], lambda: wallet_tip(path) >= 104, "a commit past height 104")
        tips.append(wallet_tip(path))
        rest.httpd.delay = 0
        assert sync(path, "--rest", rest.url).exit_code == 0
    assert tips == sorted(tips) and tips[-1] >= 104 and all(t < 107 for t in tips[:-1])
    assert listed(path) == listed(whole) == paid(kernel_chain)


def test_a_node_that_stops_answering_mid_sync_fails_in_one_line_naming_the_height_to_resume_at(kernel_chain, tmp_path):
    path = create(tmp_path)
    with kc.rest_server(kernel_chain) as rest:
        rest.stop_answering(after=60)
        line = assert_fails(sync(path, "--rest", rest.url, "--retries", "0"), "sync again to resume at")
        rest.resume_answering()
        tip = wallet_tip(path)
        assert f"resume at {tip + 1}" in line and 0 <= tip < kc.SAMPLE_TIP
        assert sync(path, "--rest", rest.url).exit_code == 0
    assert listed(path) == paid(kernel_chain)
    assert_fails(sync(path, "--rest", closed_port_url(), "--retries", "0"), "cannot reach", f"resume at {kc.SAMPLE_TIP + 1}")


def test_a_listener_sees_each_output_found_then_spent_after_its_commit(kernel_chain, kernel_index, tmp_path):
    path = create(tmp_path)
    seen = []

    def listener(event):
        assert isinstance(event, (OutputFound, OutputSpent)), event
        o = event.output
        with sqlite3.connect(path) as conn:  # another connection: the row is committed
            row = conn.execute("SELECT spent_height FROM outputs WHERE txid = ? AND vout = ?", (o.txid32, o.vout)).fetchone()
        assert row == (o.spent_height,)
        seen.append(o)

    with Wallet.open(path) as w:
        w.listen(listener)
        stats = w.sync(IndexSource(kernel_index), W.scan_key32)
        outputs = w.outputs()
    found = [o for o in seen if not o.spent]
    spent = [o for o in seen if o.spent]
    assert [o.outpoint36 for o in found] == [o.outpoint36 for o in outputs]  # every output once, in block order
    assert sorted(o.outpoint36 for o in spent) == sorted(o.outpoint36 for o in outputs if o.spent)
    assert stats.found == len(found) and stats.spent == len(spent) > 0


def test_two_syncs_of_one_wallet_are_refused_and_create_never_replaces_a_file(kernel_index, tmp_path):
    path = create(tmp_path)
    with Wallet.open(path) as w:
        w.sync(IndexSource(kernel_index), W.scan_key32, stop=3)  # the writer lock is held until close
        with Wallet.open(path) as other, pytest.raises(WalletStoreError, match="another process"):
            other.sync(IndexSource(kernel_index), W.scan_key32)
    with Wallet.open(path) as w:
        w.sync(IndexSource(kernel_index), W.scan_key32, stop=4)
        assert w.tip()[0] == 4
    result = invoke("wallet", "create", str(path), "--network", "regtest", "--scan-key-file", str(scan_key_file(tmp_path)), "--spend-pubkey", W.spend_pubkey33.hex())
    assert_fails(result, "already exists")
    (tmp_path / "junk").write_text("not a wallet")
    assert_fails(invoke("wallet", "info", str(tmp_path / "junk")), "not")
    assert_fails(invoke("wallet", "list", str(tmp_path / "missing")), "no wallet")


def test_list_balance_and_info_print_tables_and_json(kernel_chain, kernel_index, tmp_path):
    path = create(tmp_path)
    assert sync(path, "--db", str(kernel_index), "--to", "104").exit_code == 0
    rows = listed(path)
    assert rows == [r for r in paid(kernel_chain) if r["height"] <= 104 and (r.update(spent=False) or True)]
    table = invoke("wallet", "list", str(path)).stdout.splitlines()
    assert table[0].split()[:3] == ["HEIGHT", "TXID", "VOUT"] and len(table) == 1 + len(rows)
    info = json_lines(invoke("wallet", "info", str(path), "--json").stdout)[0]
    assert info["height"] == 104 and info["hash"] == kernel_chain.hash_at(104)[::-1].hex() and info["labels"] == [0, 1, 7]
    assert info["address"].startswith("sprt1") and info["outputs"] == len(rows) and info["spent"] == 0
    assert info["confirmed"] == sum(r["amount"] for r in rows) and info["incoming"] == 0
    assert "synced to    104" in invoke("wallet", "info", str(path)).stdout
    balance = invoke("wallet", "balance", str(path)).stdout
    assert "confirmed" in balance and f"{info['confirmed']:,} sats" in balance
    assert sync(path, "--db", str(kernel_index)).exit_code == 0
    unspent = json_lines(invoke("wallet", "list", str(path), "--unspent", "--json").stdout)
    assert unspent == [r for r in listed(path) if not r["spent"]] != listed(path)


def test_a_source_on_another_network_behind_the_wallet_or_starting_after_it_is_refused(kernel_index, kernel_rest, tmp_path):
    path = tmp_path / "main.wallet"
    assert invoke("wallet", "create", str(path), "--network", "main", "--scan-key-file", str(scan_key_file(tmp_path)), "--spend-pubkey", W.spend_pubkey33.hex()).exit_code == 0
    assert_fails(sync(path, "--db", str(kernel_index)), "regtest")
    ahead = create(tmp_path)
    assert sync(ahead, "--rest", kernel_rest.url).exit_code == 0
    short = serving.synced_index(tmp_path / "short.db", kernel_rest.url, stop=50)
    assert_fails(sync(ahead, "--db", str(short)), "below the wallet's", f"resume at {kc.SAMPLE_TIP + 1}")
    late = create(tmp_path, "late.wallet", birthday=60)
    assert sync(late, "--db", str(short)).exit_code == 0 and wallet_tip(late) == -1  # nothing to scan yet
    fresh = create(tmp_path, "fresh.wallet")
    assert sync(fresh, "--db", str(short), "--to", "40").exit_code == 0 and wallet_tip(fresh) == 40
    with Index.create(tmp_path / "from80.db", "regtest") as idx:
        idx.sync(RestNode(kernel_rest.url), start=80)
    assert_fails(sync(fresh, "--db", str(tmp_path / "from80.db")), "height 40 is not in the index", "holds 80..110", "resume at 41")
    assert_fails(sync(create(tmp_path, "new.wallet"), "--db", str(tmp_path / "from80.db")), "needs heights 0..110", "holds 80..110", "start at 0")


def test_mempool_payments_are_listed_unconfirmed_then_once_at_their_height(kernel_copy, tmp_path):
    from node_mempool import NodeMempool, wait_for
    from test_index_mempool import following, mine

    chain, pool = kernel_copy, NodeMempool(kernel_copy)
    db, path = tmp_path / "m.db", create(tmp_path)
    with following(db, chain, pool) as f:
        tx = chain.transaction("pay", [chain.reserve.pop()], [("wallet", None), ("wallet", 7), ("other",)])
        pool.accept(tx.tx.serialize())
        wait_for("the tx listed", lambda: f.listed() == {tx.txid32})
        assert sync(path, "--db", str(db), "--mempool").exit_code == 0
        pending = [
            {"height": None, "txid": tx.txid32[::-1].hex(), "vout": p.vout, "amount": p.amount, "output": p.output32.hex(), "tweak": p.tweak32.hex(), "label": p.label, "spent": False}
            for p in sorted(tx.payments, key=lambda p: p.vout)
            if p.wallet == W.name
        ]
        assert listed(path) == paid(chain) + pending and len(pending) == 2
        balance = json_lines(invoke("wallet", "balance", str(path), "--json").stdout)[0]
        assert balance["incoming"] == sum(r["amount"] for r in pending)
        height = mine(chain, pool, [tx])
        wait_for("the block indexed and the mempool emptied", lambda: f.at(height) and not f.listed())
        assert sync(path, "--db", str(db), "--mempool").exit_code == 0
    rows = listed(path)
    assert rows == paid(chain) and [r for r in rows if r["txid"] == tx.txid32[::-1].hex()] == [{**r, "height": height} for r in pending]
    assert json_lines(invoke("wallet", "balance", str(path), "--json").stdout)[0]["incoming"] == 0
    assert_fails(sync(path, "--rest", "http://127.0.0.1:1", "--mempool"), "--mempool goes with --db")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_follow_finds_a_new_block_and_a_stop_signal_says_where_the_wallet_is(signum, kernel_copy, tmp_path):
    path = create(tmp_path)
    with kc.rest_server(kernel_copy) as rest:
        args = [*WALLET_CLI, "sync", str(path), "--scan-key-file", str(scan_key_file(tmp_path)), "--rest", rest.url, "--follow", "--interval", "0.05"]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_until(lambda: wallet_tip(path) == kc.SAMPLE_TIP, proc, "the first catch-up")
            tx = kernel_copy.transaction("late", [kernel_copy.reserve.pop()], [("wallet", 1), ("p2wpkh",)])
            kernel_copy.mine([tx])
            wait_until(lambda: wallet_tip(path) == kc.SAMPLE_TIP + 1, proc, "the new block")
        finally:
            proc.send_signal(signum)
            _, err = proc.communicate(timeout=60)
    assert proc.returncode == (0 if signum == signal.SIGTERM else 130)
    assert err.strip().endswith(f"the wallet is synced to height {kc.SAMPLE_TIP + 1} (sync again to resume)")
    assert listed(path) == paid(kernel_copy) and listed(path)[-1]["txid"] == tx.txid32[::-1].hex()


def test_a_descriptor_gives_the_wallet_its_keys_labels_and_birthday(kernel_chain, kernel_index, tmp_path):
    from sp_scan import descriptor

    desc = descriptor.from_keys(W.scan_key32, W.spend_pubkey33, network="test", annotations=(("bh", 104), ("ml", 7)))
    (tmp_path / "w.desc").write_text(str(desc) + "\n")
    path = tmp_path / "d.wallet"
    result = invoke("wallet", "create", str(path), "--network", "regtest", "--descriptor-file", str(tmp_path / "w.desc"))
    assert result.exit_code == 0, result.output
    assert invoke("wallet", "sync", str(path), "--descriptor-file", str(tmp_path / "w.desc"), "--db", str(kernel_index)).exit_code == 0
    info = json_lines(invoke("wallet", "info", str(path), "--json").stdout)[0]
    assert info["labels"] == list(range(8)) and info["birthday"] == 104
    assert listed(path) == paid(kernel_chain, start=104)
    assert_fails(invoke("wallet", "create", str(tmp_path / "m.wallet"), "--network", "main", "--descriptor-file", str(tmp_path / "w.desc")), "test networks")


def test_a_node_whose_next_block_does_not_link_to_its_own_is_asked_again_then_refused(tmp_path):
    from cli_support import NodeServer, RestHandler, StaleHeights, spending_chain
    from index_support import SCAN_HEX, SPEND_HEX

    chain = spending_chain(12)
    branch = spending_chain(15, chain, fork_height=7, salt=1)
    scan = bytes.fromhex(SCAN_HEX)
    with NodeServer(RestHandler, StaleHeights(chain, branch, {9})) as server:  # a cache answering height 9 from the branch
        with Wallet.create(tmp_path / "s.wallet", "regtest", PrivateKey(scan).public_key.format(), bytes.fromhex(SPEND_HEX), (), 1) as w:  # block 0 is not regtest's genesis
            w.sync(NodeSource(f"rest+{server.url}"), scan, stop=8)
            found = w.outputs()
            with pytest.raises(ServerError, match=f"block 9 names {branch.blocks[8].hash_hex} as its parent, not the wallet's {chain.blocks[8].hash_hex}.*seen 6 times"):
                w.sync(NodeSource(f"rest+{server.url}"), scan)
            assert w.tip() == (8, chain.hash_at(8)) and w.outputs() == found != []
