"""The index's mempool table kept in step with a stand-in node's mempool, on a chain the kernel validates.

Every tx put in the stand-in's mempool is signed by the kernel chain's builder, and the ones that
stay are mined afterwards: the kernel accepting the block proves they were valid. What the index
lists is compared with what the sender side recorded (payments, tweaks from private keys).
"""

from __future__ import annotations

import contextlib
import signal
import sqlite3
import struct
import subprocess
import threading

import pytest

import kernelchain as kc
from index_support import as_format3, as_old_version
from node_mempool import MEMPOOL_HEIGHT, PATIENCE, NodeMempool, wait_for
from sp_scan.errors import IndexStoreError
from sp_scan.index import Index, mempool, store
from sp_scan.node import RestNode, RpcNode

INTERVAL = 0.05


class Following:
    """`Index.sync(follow=True, mempool=True)` in a thread over a stand-in node, and a reader of the same file."""

    def __init__(self, path, node, **options) -> None:
        self.path, self.node, self.options = path, node, options
        self.stats = None
        self.logged: list[str] = []
        self._stop = threading.Event()
        self.error: BaseException | None = None
        self.index = Index.open(path) if path.exists() else Index.create(path, "regtest")
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        self.reader = Index.open(path, readonly=True)

    def _progress(self, stats) -> None:
        self.stats = stats
        if self._stop.is_set():
            raise KeyboardInterrupt

    def _run(self) -> None:
        try:
            options = {"interval": INTERVAL, **self.options}
            self.index.sync(self.node, follow=True, progress=self._progress, mempool=True, log=self.logged.append, **options)
        except KeyboardInterrupt:
            pass
        except BaseException as exc:  # noqa: BLE001  (reported by the test)
            self.error = exc

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(PATIENCE)
        assert not self.thread.is_alive()
        self.index.close()
        self.reader.close()
        assert self.error is None, self.error

    def listed(self) -> set[bytes]:
        return {t.txid32 for t in self.reader.mempool_tweaks().txs}

    def at(self, height: int) -> bool:
        assert self.error is None, self.error
        tip = self.reader.tip()
        return tip is not None and tip[0] == height and self.stats is not None and self.stats.waiting


@contextlib.contextmanager
def following(path, chain: kc.KernelChain, pool: NodeMempool, rpc: bool = False, **options):
    server = kc.rpc_server(chain, mempool=pool) if rpc else kc.rest_server(chain, mempool=pool)
    with server:
        node = RpcNode(server.url, user="user", password="pass") if rpc else RestNode(server.url)
        f = Following(path, node, **options)
        try:
            wait_for("the first listing", lambda: f.at(chain.tip_height) and f.stats.mempool.polls > 0)
            yield f
        finally:
            f.stop()


def mine(chain: kc.KernelChain, pool: NodeMempool, txs) -> int:
    """Mine `txs` (the kernel validates them) and let the node's mempool follow; return the new height."""
    height = chain.mine(list(txs)).height
    pool.chain_moved()
    return height


def paid(chain: kc.KernelChain, tx: kc.TxRecord, wallet: kc.Wallet = kc.TEST_WALLET) -> list[tuple]:
    """(txid32, vout, amount, output32, tweak32, label) of what `tx` paid `wallet`, in vout order."""
    return [(tx.txid32, p.vout, p.amount, p.output32, p.tweak32, p.label) for p in sorted(tx.payments, key=lambda p: p.vout) if p.wallet == wallet.name]


def rows(matches) -> list[tuple]:
    return [(m.height, m.txid32, m.vout, m.amount, m.found.output32, m.found.tweak32, m.found.label, m.spent) for m in matches]


def unconfirmed(chain, *txs) -> list[tuple]:
    return [(None, *p[:5], p[5], False) for tx in txs for p in paid(chain, tx)]


def test_a_payment_is_listed_unconfirmed_then_at_its_height_never_twice(kernel_copy, tmp_path):
    chain, pool = kernel_copy, NodeMempool(kernel_copy)
    with following(tmp_path / "m.db", chain, pool) as f:
        parent = chain.transaction("parent", [chain.reserve.pop()], [("wallet", None), ("other",)])
        other = next(p for p in parent.payments if p.wallet == "other")
        child = chain.transaction("child", [chain.coin(parent.txid32, other.vout)], [("wallet", 1), ("p2wpkh",)])
        pool.accept(parent.tx.serialize())
        pool.accept(child.tx.serialize())
        wait_for("parent and child listed", lambda: f.listed() == {parent.txid32, child.txid32})
        view = f.reader.mempool_tweaks()
        assert [(t.txid32, t.tweak33) for t in view.txs] == [(parent.txid32, parent.tweak33), (child.txid32, child.tweak33)]
        assert view.tip_height == chain.tip_height and view.version > 0
        assert [[v for v, _, _ in t.outputs] for t in view.txs] == [parent.taproot_vouts, child.taproot_vouts]
        confirmed = rows(f.reader.scan(kc.TEST_WALLET.receiver()))
        found = rows(f.reader.scan(kc.TEST_WALLET.receiver(), mempool=True))
        assert found == confirmed + unconfirmed(chain, parent, child)
        assert {r[6] for r in found[len(confirmed) :]} == {None, 1}  # the child pays the wallet's label 1
        assert rows(f.reader.scan(kc.OTHER_WALLET.receiver(), mempool=True))[-1][1:3] == (parent.txid32, other.vout)

        height = mine(chain, pool, [parent, child])
        wait_for("the block indexed and the mempool emptied", lambda: f.at(height) and not f.listed())
        found = rows(f.reader.scan(kc.TEST_WALLET.receiver(), mempool=True))
        assert found == rows(f.reader.scan(kc.TEST_WALLET.receiver()))
        mined = [(height, *p[:5], p[5], False) for tx in (parent, child) for p in paid(chain, tx)]
        assert found[-len(mined) :] == mined and len({r[1:3] for r in found}) == len(found)
        assert [(f.height, f.txid32, f.vout) for f in chain.found()] == [r[:3] for r in found]


def test_rbf_replaces_and_eviction_removes(kernel_copy, tmp_path):
    chain, pool = kernel_copy, NodeMempool(kernel_copy)
    with following(tmp_path / "r.db", chain, pool) as f:
        coin = chain.reserve.pop()
        first = chain.transaction("first", [coin], [("wallet", None), ("p2wpkh",)])
        pool.accept(first.tx.serialize())
        wait_for("the first tx listed", lambda: f.listed() == {first.txid32})
        bumped = chain.transaction("bumped", [coin], [("wallet", 7)])
        pool.accept(bumped.tx.serialize(), replace=True)
        wait_for("the replacement listed instead", lambda: f.listed() == {bumped.txid32})
        assert rows(f.reader.scan(kc.TEST_WALLET.receiver(), mempool=True))[-1:] == unconfirmed(chain, bumped)

        evicted = chain.transaction("evicted", [chain.reserve.pop()], [("wallet", 1), ("other",)])
        pool.accept(evicted.tx.serialize())
        wait_for("the tx to evict listed", lambda: f.listed() == {bumped.txid32, evicted.txid32})
        pool.evict(evicted.txid32)
        wait_for("the evicted tx gone", lambda: f.listed() == {bumped.txid32})
        height = mine(chain, pool, [bumped])  # the replacement was valid
        wait_for("the replacement confirmed", lambda: f.at(height) and not f.listed())


def test_a_chain_of_25_unconfirmed_txs_over_rpc(kernel_copy, tmp_path):
    chain, pool = kernel_copy, NodeMempool(kernel_copy)
    with following(tmp_path / "c.db", chain, pool, rpc=True) as f:
        coin = max(chain.reserve, key=lambda s: s.prevout.nValue)
        chain.reserve.remove(coin)
        txs = []
        for n in range(25):
            outs = [("other",), ("wallet", None if n % 2 else 7)] if n % 5 == 0 else [("other",)]
            txs.append(chain.transaction(f"chained-{n}", [coin], outs))
            nxt = next(p for p in txs[-1].payments if p.wallet == "other")
            coin = chain.coin(txs[-1].txid32, nxt.vout)
        for tx in txs:
            pool.accept(tx.tx.serialize())
        wait_for("all 25 listed", lambda: len(f.listed()) == 25)
        assert [t.tweak33 for t in f.reader.mempool_tweaks().txs] == [t.tweak33 for t in txs]
        assert rows(f.reader.scan(kc.TEST_WALLET.receiver(), mempool=True))[-5:] == unconfirmed(chain, *txs)
        height = mine(chain, pool, txs)
        wait_for("the chain confirmed", lambda: f.at(height) and not f.listed())


def test_a_missing_parent_is_skipped_counted_and_retried(kernel_copy, tmp_path):
    chain, pool = kernel_copy, NodeMempool(kernel_copy)
    with following(tmp_path / "p.db", chain, pool) as f:
        parent = chain.transaction("parent", [chain.reserve.pop()], [("other",)])
        child = chain.transaction("child", [chain.coin(parent.txid32, parent.payments[0].vout)], [("wallet", None)])
        pool.accept(child.tx.serialize(), check=False)  # the node no longer gives its parent
        polls = f.stats.mempool.polls
        wait_for("a poll that skipped the child", lambda: f.stats.mempool.polls > polls + 1 and f.stats.mempool.missing == 1)
        assert f.listed() == set()
        pool.accept(parent.tx.serialize())
        wait_for("the child retried", lambda: f.listed() == {parent.txid32, child.txid32})
        assert f.stats.mempool.missing == 0


@pytest.mark.parametrize("rpc", [False, True], ids=["rest", "rpc"])
def test_a_tx_the_node_answers_with_garbage_is_skipped_with_one_line_and_the_rest_listed(kernel_copy, tmp_path, rpc):
    chain, pool = kernel_copy, NodeMempool(kernel_copy)
    bad = chain.transaction("garbled", [chain.reserve.pop()], [("wallet", None)])
    good = chain.transaction("fine", [chain.reserve.pop()], [("wallet", 1)])
    pool.garbled.add(bad.txid32)
    pool.accept(bad.tx.serialize())
    pool.accept(good.tx.serialize())
    with following(tmp_path / "b.db", chain, pool, rpc=rpc) as f:
        assert f.listed() == {good.txid32}
        polls = f.stats.mempool.polls
        wait_for("two more listings", lambda: f.stats.mempool.polls > polls + 1)
        assert f.logged == [f"sp-scan: mempool tx {bad.txid32[::-1].hex()}: the node's answer is not this transaction; skipped"]


def test_a_node_restarted_with_an_empty_mempool_empties_the_table(kernel_copy, tmp_path):
    chain, pool = kernel_copy, NodeMempool(kernel_copy)
    with following(tmp_path / "e.db", chain, pool) as f:
        tx = chain.transaction("lost", [chain.reserve.pop()], [("wallet", None)])
        pool.accept(tx.tx.serialize())
        wait_for("the tx listed", lambda: f.listed() == {tx.txid32})
        pool.restart()
        wait_for("the table emptied", lambda: not f.listed())
        pool.accept(tx.tx.serialize())  # rebroadcast
        wait_for("the tx listed again", lambda: f.listed() == {tx.txid32})


def test_a_reorg_brings_its_disconnected_tx_back_unconfirmed(kernel_copy, tmp_path):
    chain, pool = kernel_copy, NodeMempool(kernel_copy)
    with following(tmp_path / "g.db", chain, pool) as f:
        reorg = kc.make_reorg(chain)
        pool.chain_moved()
        wait_for("the new branch indexed, the dropped tx listed", lambda: f.at(chain.tip_height) and f.listed() == {reorg.dropped.txid32})
        assert rows(f.reader.scan(kc.TEST_WALLET.receiver(), mempool=True))[-1:] == unconfirmed(chain, reorg.dropped)
        height = mine(chain, pool, [reorg.dropped])
        wait_for("it confirmed again", lambda: f.at(height) and not f.listed())


def test_the_table_is_rebuilt_after_a_restart_and_a_killed_syncs_rows_are_not_trusted(kernel_copy, tmp_path):
    chain, pool = kernel_copy, NodeMempool(kernel_copy)
    path = tmp_path / "k.db"
    tx = chain.transaction("kept", [chain.reserve.pop()], [("wallet", None)])
    pool.accept(tx.tx.serialize())
    with following(path, chain, pool) as f:
        wait_for("the tx listed", lambda: f.listed() == {tx.txid32})
    with Index.open(path, readonly=True) as idx:
        assert idx.mempool_tweaks().txs == () and idx.mempool_version() == 0  # a clean stop empties it
    stale = (b"\x01" * 32, kc.TEST_WALLET.spend_pubkey33, b"\x00" * 4, b"\x03" * 32, b"\x00" * 8)
    with Index.open(path) as idx:  # rows a killed sync left behind (it held the file; now nobody does)
        idx._store.lock_writer()
        idx._store.mempool_update([stale], [])
        assert idx.mempool_tweaks().txs[0].txid32 == stale[0]
    with Index.open(path, readonly=True) as idx:
        assert idx.mempool_tweaks().txs == () and idx.mempool_version() == 0
        assert len(sqlite3.connect(path).execute("SELECT * FROM mempool").fetchall()) == 1
    with Index.open(path) as idx:  # a damaged row is an IndexStoreError, never a wrong answer
        idx._store.lock_writer()
        idx._store.mempool_update([(b"\x02" * 32, stale[1], b"\x00" * 4, b"\x03" * 31, b"\x00" * 8)], [])
        with pytest.raises(IndexStoreError, match="a malformed mempool row"):
            idx.mempool_tweaks()
        idx._store.mempool_clear()
    with following(path, chain, pool) as f:
        assert f.listed() == {tx.txid32}  # the first listing replaced the stale row


def test_a_version_1_index_is_upgraded_by_a_writer_and_refused_by_a_reader_until_then(kernel_index, tmp_path):
    path = tmp_path / "v1.db"
    path.write_bytes(kernel_index.read_bytes())
    with Index.open(path, readonly=True) as idx:
        before = [(m.height, m.txid32, m.vout) for m in idx.scan(kc.TEST_WALLET.receiver(), mempool=True)]
    as_format3(path)
    as_old_version(path, 1)
    with pytest.raises(IndexStoreError, match="v1.db is an index of format version 1: `sp-scan index sync` upgrades it to version 4"):
        Index.open(path, readonly=True)
    with Index.open(path):
        pass
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == store.FORMAT_VERSION
    assert conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()[0] == store.FORMAT_VERSION
    assert conn.execute("SELECT COUNT(*) FROM mempool").fetchone()[0] == 0
    conn.close()
    with Index.open(path, readonly=True) as idx:
        assert [(m.height, m.txid32, m.vout) for m in idx.scan(kc.TEST_WALLET.receiver(), mempool=True)] == before


def test_the_pseudo_block_gives_the_blocks_own_rows(kernel_chain):
    """The mempool's batch computes through block_index: a block's txs as a batch give the block's columns."""
    from bitcoin.core import CBlock

    from sp_scan import block, wire

    for h in range(101, kc.SAMPLE_TIP + 1):
        raw, spent = kernel_chain.block(h), kernel_chain.spent(h)
        txs = [t.serialize() for t in CBlock.deserialize(raw).vtx[1:]]
        got = mempool.eligible_rows(txs, wire.parse_spent(spent)[1:])
        data = block.block_index(raw, spent)
        assert [b"".join(r[i] for r in got) for i in range(5)] == [data.txids, data.tweaks33, data.out_vouts, data.out_keys, data.out_values]


def _record(tx: kc.TxRecord, p: kc.Payment) -> dict:
    return {"height": None, "txid": tx.txid32[::-1].hex(), "vout": p.vout, "amount": p.amount, "output": p.output32.hex(), "tweak": p.tweak32.hex(), "label": p.label, "spent": False}


def test_the_cli_syncs_the_mempool_and_scan_lists_it_with_height_null_also_with_wallets_and_dask(kernel_copy, tmp_path):
    import distributed

    from index_support import SYNC
    from test_cli import invoke, json_lines
    from test_index_wallets import write_wallets

    chain, pool = kernel_copy, NodeMempool(kernel_copy)
    db = tmp_path / "cli.db"
    key = tmp_path / "wallet.scan"
    key.write_text(kc.TEST_WALLET.scan_key32.hex() + "\n")
    key_args = ["--scan-key-file", str(key), "--spend-pubkey", kc.TEST_WALLET.spend_pubkey33.hex(), "--label", "1", "--label", "7"]
    tx = chain.transaction("cli", [chain.reserve.pop()], [("wallet", 7), ("other",)])
    pool.accept(tx.tx.serialize())
    with kc.rest_server(chain, mempool=pool) as node:
        proc = subprocess.Popen([*SYNC, "--db", str(db), "--rest", node.url, "--follow", "--mempool", "--interval", "0.05"], stderr=subprocess.PIPE, text=True)
        try:
            wait_for("the index file", db.exists)
            with Index.open(db, readonly=True) as idx:
                wait_for("the tx listed", lambda: [t.txid32 for t in idx.mempool_tweaks().txs] == [tx.txid32])
            result = invoke("index", "scan", "--db", str(db), *key_args, "--mempool", "--json")
            assert result.exit_code == 0, result.output
            confirmed = [f.to_json() for f in chain.found()]
            mine_ = [_record(tx, p) for p in tx.payments if p.wallet == "wallet"]
            assert json_lines(result.stdout) == confirmed + mine_
            table = invoke("index", "scan", "--db", str(db), *key_args, "--mempool")
            assert table.stdout.splitlines()[-1].split()[:2] == ["-", tx.txid32[::-1].hex()]
            wallets = write_wallets(tmp_path)
            local = invoke("index", "scan", "--db", str(db), "--wallets", str(wallets), "--mempool", "--json")
            assert local.exit_code == 0, local.output
            rows = json_lines(local.stdout)
            unconfirmed = [r for r in rows if r["height"] is None]
            expected = [(p.vout, w, name) for p in tx.payments for w, name in enumerate(("wallet", "other", "late")) if p.wallet == ("other" if name == "other" else "wallet")]
            assert [(r["vout"], r["wallet"]) for r in unconfirmed] == [(v, name) for v, _, name in sorted(expected)]  # vout, then wallet order
            with distributed.LocalCluster(n_workers=1, processes=True, threads_per_worker=1, host="127.0.0.1", dashboard_address="127.0.0.1:0") as c:
                dask = invoke("index", "scan", "--db", str(db), "--wallets", str(wallets), "--mempool", "--json", "--dask", c.scheduler_address, "--partition-blocks", "50")
            assert dask.exit_code == 0, dask.output
            assert dask.stdout == local.stdout
            assert "--mempool lists what is unconfirmed" in invoke("index", "scan", "--db", str(db), *key_args, "--mempool", "--to", "5").stderr
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=PATIENCE)
    assert proc.returncode == 0, err
    with Index.open(db, readonly=True) as idx:
        assert idx.mempool_tweaks().txs == ()
    for args, needle in ((["--mempool"], "--mempool goes with --follow"), (["--follow", "--zmq", "tcp://127.0.0.1:1"], "--zmq goes with --mempool")):
        result = invoke("index", "sync", "--db", str(tmp_path / "x.db"), "--rest", "http://127.0.0.1:1", *args)
        assert result.exit_code == 2 and needle in result.stderr, result.output


def test_zmq_lists_a_tx_without_a_poll_falls_back_to_polling_when_it_drops_and_comes_back(kernel_copy, tmp_path, monkeypatch):
    from node_mempool import ZmqPublisher

    monkeypatch.setattr(mempool, "SAFETY_POLLS", 10**6)  # no safety listing during the test: only events and drops list
    chain, publisher = kernel_copy, ZmqPublisher()
    pool = NodeMempool(chain, zmq=publisher)
    try:
        with following(tmp_path / "z.db", chain, pool, zmq=publisher.url) as f:
            wait_for("the ZMQ connection", lambda: f.stats.mempool.zmq == "connected")
            warm = chain.transaction("warm-up", [chain.reserve.pop()], [("wallet", None)])
            pool.accept(warm.tx.serialize())  # the first message after connecting lists the mempool once
            wait_for("the warm-up tx listed", lambda: f.listed() == {warm.txid32})
            polls, events = f.stats.mempool.polls, f.stats.mempool.events
            fast = chain.transaction("fast", [chain.reserve.pop()], [("wallet", 1)])
            pool.accept(fast.tx.serialize())
            wait_for("the tx listed from its A message", lambda: f.listed() == {warm.txid32, fast.txid32})
            assert f.stats.mempool.polls == polls and f.stats.mempool.events > events
            pool.evict(fast.txid32)
            wait_for("the evicted tx gone at its R message", lambda: f.listed() == {warm.txid32})
            assert f.stats.mempool.polls == polls

            publisher.drop()
            wait_for("the drop noticed", lambda: f.stats.mempool.zmq == "polling")
            late = chain.transaction("while-dropped", [chain.reserve.pop()], [("other",)])
            pool.accept(late.tx.serialize())  # no message reaches the follower: polling finds it
            wait_for("the tx listed by polling", lambda: late.txid32 in f.listed())
            polls = f.stats.mempool.polls
            wait_for("more polls while dropped", lambda: f.stats.mempool.polls > polls + 2)
            assert [line for line in f.logged if "dropped" in line] == [f"sp-scan: ZMQ {publisher.url} dropped; polling the mempool every {INTERVAL:g} s until it is back"]

            publisher.restart()  # a restarted node: numbering from 0, the mempool kept here
            wait_for("the reconnection", lambda: f.stats.mempool.zmq == "connected")
            assert f.logged[-1] == f"sp-scan: ZMQ {publisher.url} is back"
            height = mine(chain, pool, [warm, late])  # C: the loop syncs the block, then lists again
            wait_for("the block indexed, the mempool empty", lambda: f.at(height) and not f.listed())
    finally:
        publisher.close()


def test_under_zmq_a_node_restarted_with_an_empty_mempool_and_no_message_empties_the_table_at_once(kernel_copy, tmp_path, monkeypatch):
    from node_mempool import ZmqPublisher

    monkeypatch.setattr(mempool, "SAFETY_POLLS", 10**6)  # no safety listing: only noticing the restart lists again
    chain, publisher = kernel_copy, ZmqPublisher()
    pool = NodeMempool(chain, zmq=publisher)
    try:  # intervals long enough for the reconnection to come within one: polling while dropped does not list
        with following(tmp_path / "zr.db", chain, pool, zmq=publisher.url, interval=3.0) as f:
            wait_for("the ZMQ connection", lambda: f.stats.mempool.zmq == "connected")
            tx = chain.transaction("lost", [chain.reserve.pop()], [("wallet", None)])
            pool.accept(tx.tx.serialize())
            wait_for("the tx listed", lambda: f.listed() == {tx.txid32})
            pool.restart()  # empty, its ZMQ socket closed and bound again; it has nothing to announce
            wait_for("the table emptied", lambda: not f.listed())
            wait_for("the sync subscribed to the restarted node", publisher.subscribed)
            pool.accept(tx.tx.serialize())  # rebroadcast: announced by A
            wait_for("the tx listed again", lambda: f.listed() == {tx.txid32})
    finally:
        publisher.close()


def test_rest_and_rpc_mempool_calls_answer_alike_in_cores_formats(kernel_copy):
    """getutxos without checkmempool still gives an output a mempool tx spends; with it, the mempool's view."""
    import json
    import urllib.request

    chain, pool = kernel_copy, NodeMempool(kernel_copy)
    coin = chain.reserve.pop()
    parent = chain.transaction("parent", [coin], [("other",), ("wallet", None)])
    pool.accept(parent.tx.serialize())
    confirmed = [op for op, (h, _, _) in list(pool.utxo_set().items())[:19]]
    spent = coin.outpoint.hash + coin.outpoint.n.to_bytes(4, "little")  # confirmed, spent by the mempool tx
    unknown = b"\x07" * 32 + b"\x00" * 4
    in_mempool = parent.txid32 + b"\x00" * 4  # only in the mempool
    outpoints = [*confirmed[:7], spent, unknown, in_mempool, *confirmed[7:]]
    with kc.rest_server(chain, mempool=pool) as rest, kc.rpc_server(chain, mempool=pool) as rpc:
        nodes = (RestNode(rest.url), RpcNode(rpc.url, user="user", password="pass"))
        answers = [n.utxos(outpoints) for n in nodes]
        assert answers[0] == answers[1]
        utxos = pool.utxo_set()
        assert answers[0] == [utxos[op][1] if op in utxos else None for op in outpoints]
        assert answers[0][7] is not None and answers[0][8] is None and answers[0][9] is None
        assert sum(1 for r in rest.requests if r.startswith("/rest/getutxos/")) == 2  # 23 outpoints: 15 + 8
        assert [n.mempool_txids() for n in nodes] == [[parent.txid32]] * 2
        assert [n.transactions([parent.txid32, unknown[:32]]) for n in nodes] == [{parent.txid32: parent.tx.serialize()}] * 2

        def get(path: str) -> tuple[int, bytes]:
            try:
                with urllib.request.urlopen(rest.url + path) as reply:
                    return reply.status, reply.read()
            except urllib.error.HTTPError as exc:
                return exc.code, exc.read()

        def op_text(op: bytes) -> str:
            return f"{op[:32][::-1].hex()}-{int.from_bytes(op[32:], 'little')}"

        four = "/".join(op_text(op) for op in (confirmed[0], spent, unknown, in_mempool))
        status, body = get(f"/rest/getutxos/{four}.json")
        reply = json.loads(body)
        assert status == 200 and reply["bitmap"] == "1100" and len(reply["utxos"]) == 2 and reply["chainHeight"] == chain.tip_height
        assert json.loads(get(f"/rest/getutxos/checkmempool/{four}.json")[1])["bitmap"] == "1001"  # the mempool's view
        raw = get(f"/rest/getutxos/checkmempool/{four}.bin")[1]
        assert raw[:4] == chain.tip_height.to_bytes(4, "little") and raw[4:36] == chain.tip_hash and raw[36:38] == b"\x01\x09"
        height0, out0, _ = utxos[confirmed[0]]
        coins = struct.pack("<II", 0, height0) + out0.to_bytes() + struct.pack("<II", 0, MEMPOOL_HEIGHT) + parent.tx.vout[0].serialize()
        assert raw[38:] == b"\x02" + coins  # CCoin: u32 0, u32 height (a mempool coin's is 0x7fffffff), CTxOut
        assert get(f"/rest/getutxos/{four}.hex")[1].strip() == get(f"/rest/getutxos/{four}.bin")[1].hex().encode()
        too_many = "/".join(op_text(op) for op in confirmed[:16])
        assert get(f"/rest/getutxos/{too_many}.bin") == (400, b"Error: max outpoints exceeded (max: 15, tried: 16)\r\n")
        assert get("/rest/getutxos/nothex-0.bin") == (400, b"Parse error\r\n")
        assert get("/rest/getutxos.bin") == (400, b"Error: empty request\r\n")
        assert json.loads(get("/rest/mempool/contents.json?verbose=false&mempool_sequence=true")[1]) == {"txids": [parent.txid32[::-1].hex()], "mempool_sequence": pool.sequence}
        entry = json.loads(get("/rest/mempool/contents.json")[1])[parent.txid32[::-1].hex()]
        assert entry["depends"] == [] and entry["spentby"] == [] and entry["fees"]["base"] > 0
        assert json.loads(get("/rest/mempool/info.json")[1])["size"] == 1
        assert get("/rest/mempool/contents.json?verbose=true&mempool_sequence=true")[0] == 400
        assert get("/rest/mempool/other.json")[0] == 400
        assert get(f"/rest/tx/{unknown[:32][::-1].hex()}.bin") == (404, f"{unknown[:32][::-1].hex()} not found\r\n".encode())
        assert get(f"/rest/tx/{parent.txid32[::-1].hex()}.hex")[1] == parent.tx.serialize().hex().encode() + b"\n"
