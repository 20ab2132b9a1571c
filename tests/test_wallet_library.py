"""The wallet as a library other programs embed: a cancel token, one typed event stream, asyncio, a wallet made
from a descriptor, labelled addresses without the scan key, sources opened from URLs, a broadcaster that checks
the network. Every source is a real server on 127.0.0.1 (the wallet tests' stand-ins)."""

from __future__ import annotations

import asyncio
import threading

import pytest

import kernelchain as kc
from node_mempool import NodeMempool, wait_for
from sp_scan import descriptor
from sp_scan.address import encode, labelled_spend_pubkey
from sp_scan.errors import IndexStoreError, InvalidKeyError, SourceURLError, WalletStoreError, WrongNetworkError
from sp_scan.wallet import (
    OutputFound, OutputRolledBack, OutputSpent, PendingSpendChanged, SpendRolledBack, UnconfirmedArrived, UnconfirmedLeft, Wallet, sources,
)  # fmt: skip
from sp_scan.wallet.broadcast import Broadcaster
from sp_scan.wallet.sources.blindbit import BlindBitSource
from sp_scan.wallet.sources.blindbit_v2 import BlindBitV2Source
from sp_scan.wallet.sources.cake import CakeSource
from sp_scan.wallet.sources.electrum import ElectrumSource
from sp_scan.wallet.sources.frigate import FrigateSource
from sp_scan.wallet.sources.index import IndexSource
from sp_scan.wallet.sources.node import NodeSource
from test_index_mempool import following, mine

W = kc.TEST_WALLET


def _wallet(path, birthday: int = 0) -> Wallet:
    return Wallet.from_keys(path, "regtest", W.scan_key32, W.spend_pubkey33, W.labels, birthday)


def test_a_fork_tells_the_payments_it_reversed_and_the_spends_it_undid(kernel_copy, tmp_path):
    events = []
    with kc.rest_server(kernel_copy) as rest, _wallet(tmp_path / "w") as w:
        w.listen(events.append)
        w.sync(sources.open(f"rest+{rest.url}"), W.scan_key32)
        before = {o.outpoint36: o for o in w.outputs()}
        found = [e.output.outpoint36 for e in events if isinstance(e, OutputFound)]
        assert found == [o.outpoint36 for o in w.outputs()]  # each once, in block order
        assert {e.output.outpoint36 for e in events if isinstance(e, OutputSpent)} == {op for op, o in before.items() if o.spent}
        events.clear()
        reorg = kc.make_reorg(kernel_copy)
        stats = w.sync(sources.open(f"rest+{rest.url}"), W.scan_key32)
        after = {o.outpoint36: o for o in w.outputs()}
    assert stats.reorgs == 1
    reversed_ = {e.output.outpoint36 for e in events if isinstance(e, OutputRolledBack)}
    assert reversed_ == {op for op, o in before.items() if o.height > reorg.fork_height}
    assert any(op[:32] == reorg.dropped.txid32 for op in reversed_) and not any(op[:32] == reorg.dropped.txid32 for op in after)
    undone = {e.output.outpoint36 for e in events if isinstance(e, SpendRolledBack)}
    assert undone == {op for op, o in before.items() if o.height <= reorg.fork_height and o.spent_height is not None and o.spent_height > reorg.fork_height}
    refound = [e.output for e in events if isinstance(e, OutputFound)]
    assert {o.outpoint36 for o in refound} == {op for op, o in after.items() if o.height > reorg.fork_height}
    assert any(o.txid32 == reorg.added.txid32 for o in refound)


def test_unconfirmed_payments_arrive_and_leave_replaced_evicted_or_confirmed(kernel_copy, tmp_path):
    chain, pool = kernel_copy, NodeMempool(kernel_copy)
    events = []
    db = tmp_path / "m.db"
    with following(db, chain, pool) as f, _wallet(tmp_path / "w") as w:
        w.listen(events.append)

        def sync():
            events.clear()
            w.sync(IndexSource(db), W.scan_key32, mempool=True)
            return [e for e in events if isinstance(e, (UnconfirmedArrived, UnconfirmedLeft))]

        coin = chain.reserve.pop()
        first = chain.transaction("pay", [coin], [("wallet", None), ("other",)])
        pool.accept(first.tx.serialize())
        wait_for("the payment listed", lambda: f.listed() == {first.txid32})
        (arrived,) = sync()
        assert isinstance(arrived, UnconfirmedArrived) and arrived.output.txid32 == first.txid32 and arrived.output.height is None
        bumped = chain.transaction("pay again", [coin], [("wallet", None), ("p2wpkh",)])  # the same input: the same output key
        pool.accept(bumped.tx.serialize(), replace=True)
        wait_for("the replacement listed", lambda: f.listed() == {bumped.txid32})
        left, came = sync()
        assert left == UnconfirmedLeft(arrived.output, "replaced", came.output) and came.output.txid32 == bumped.txid32
        pool.evict(bumped.txid32)
        wait_for("the mempool emptied", lambda: not f.listed())
        assert sync() == [UnconfirmedLeft(came.output, "evicted")]
        paid = chain.transaction("pay later", [chain.reserve.pop()], [("wallet", 7), ("other",)])
        pool.accept(paid.tx.serialize())
        wait_for("the payment listed", lambda: f.listed() == {paid.txid32})
        (arrived,) = sync()
        height = mine(chain, pool, [paid])
        wait_for("the block indexed", lambda: f.at(height) and not f.listed())
        assert sync() == [UnconfirmedLeft(arrived.output, "confirmed")]
        assert [e.output.txid32 for e in events if isinstance(e, OutputFound)] == [paid.txid32]


def test_cancel_ends_a_following_sync_in_its_wait_and_keeps_what_it_committed(kernel_chain, kernel_rest, tmp_path):
    cancel, waiting = threading.Event(), threading.Event()
    done = {}

    def progress(stats):
        if stats.waiting:
            waiting.set()

    with _wallet(tmp_path / "w") as w:
        run = threading.Thread(target=lambda: done.update(stats=w.sync(NodeSource(f"rest+{kernel_rest.url}"), W.scan_key32, follow=True, interval=3600, cancel=cancel, progress=progress)))
        run.start()
        assert waiting.wait(120), "the sync never caught up"
        cancel.set()
        run.join(60)
        assert not run.is_alive(), "the cancelled sync is still waiting"
        assert done["stats"].cancelled and w.tip()[0] == kc.SAMPLE_TIP


def test_cancel_from_a_listener_stops_at_the_next_block_with_its_block_committed(kernel_chain, kernel_index, tmp_path):
    cancel = threading.Event()
    with _wallet(tmp_path / "w") as w:
        first = []

        def listener(event):
            if isinstance(event, OutputFound) and not first:
                first.append(event.output)
                cancel.set()

        w.listen(listener)
        stats = w.sync(IndexSource(kernel_index), W.scan_key32, cancel=cancel)
        assert stats.cancelled and w.tip()[0] == first[0].height < kc.SAMPLE_TIP
        assert {o.height for o in w.outputs()} == {first[0].height}  # that block's outputs, no later one
        assert not w.sync(IndexSource(kernel_index), W.scan_key32).cancelled and w.tip()[0] == kc.SAMPLE_TIP  # resumes


def test_sync_async_runs_beside_the_event_loop_and_a_cancelled_task_leaves_the_wallet_committed(kernel_chain, kernel_rest, kernel_index, tmp_path):
    async def main(w: Wallet) -> None:
        loop = asyncio.get_running_loop()
        waiting = asyncio.Event()
        found = asyncio.Queue()
        w.listen(lambda event: loop.call_soon_threadsafe(found.put_nowait, event))

        def progress(stats):
            if stats.waiting:
                loop.call_soon_threadsafe(waiting.set)

        task = asyncio.create_task(w.sync_async(NodeSource(f"rest+{kernel_rest.url}"), W.scan_key32, follow=True, interval=3600, progress=progress))
        await asyncio.wait_for(waiting.wait(), 120)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert found.qsize() == len(w.outputs()) + sum(o.spent for o in w.outputs())
        stats = await w.sync_async(IndexSource(kernel_index), W.scan_key32)
        assert stats.blocks == 0 and not stats.cancelled

    with _wallet(tmp_path / "w") as w:
        asyncio.run(main(w))
        assert w.tip()[0] == kc.SAMPLE_TIP


def test_the_wallets_own_sends_are_events(kernel_index, tmp_path):
    events = []
    with _wallet(tmp_path / "w") as w:
        w.sync(IndexSource(kernel_index), W.scan_key32)
        w.listen(events.append)
        _, plan = w.create_psbt([(w.address(), 20_000)], fee_rate="2")
        (reserved,) = w.pending()
        w.abandon([plan.pending])
    assert events == [PendingSpendChanged(reserved, "reserved"), PendingSpendChanged(reserved, "abandoned")]


def test_a_wallet_from_a_descriptor_gives_its_labelled_addresses_without_the_scan_key(tmp_path):
    made = descriptor.decode(_descriptor_text())
    receiver = made.receiver()
    with Wallet.from_descriptor(tmp_path / "w", _descriptor_text(), network="regtest") as w:
        assert (w.birthday, w.labels) == (made.birthday_height, receiver.labels)
        for m in receiver.labels:
            assert w.address(m) == encode(w.scan_pubkey33, labelled_spend_pubkey(receiver.scan_key32, receiver.spend_pubkey33, m), "sprt")
        with pytest.raises(InvalidKeyError, match="does not scan label 99"):
            w.address(99)
    with pytest.raises(WalletStoreError, match="needs network="):
        Wallet.from_descriptor(tmp_path / "x", _descriptor_text())
    with pytest.raises(WalletStoreError, match="not main"):
        Wallet.from_descriptor(tmp_path / "x", _descriptor_text(), network="main")


def _descriptor_text() -> str:
    return str(descriptor.from_keys(W.scan_key32, W.spend_pubkey33, network="test", annotations=(("bh", 100), ("ml", 7))))


def test_a_wallet_of_public_keys_learns_its_label_keys_at_its_first_sync(kernel_index, tmp_path):
    with Wallet.create(tmp_path / "w", "regtest", W.scan_pubkey33, W.spend_pubkey33, W.labels) as w:
        with pytest.raises(WalletStoreError, match="sync it once"):
            w.address(W.labels[-1])
        w.sync(IndexSource(kernel_index), W.scan_key32, stop=0)
        m = W.labels[-1]
        assert w.address(m) == encode(W.scan_pubkey33, labelled_spend_pubkey(W.scan_key32, W.spend_pubkey33, m), "sprt")


@pytest.mark.parametrize(
    ("url", "options", "kind"),
    [
        ("rest+http://127.0.0.1:1", {}, NodeSource),
        ("rpc+http://127.0.0.1:1", {"user": "u", "password": "p"}, NodeSource),
        ("http://127.0.0.1:1", {"dust_limit": 1000}, BlindBitSource),
        ("grpc://127.0.0.1:1", {"cut_through": True}, BlindBitV2Source),
        ("grpcs://[::1]:1", {}, BlindBitV2Source),
        ("tcp://127.0.0.1:1", {"scan_key32": W.scan_key32, "spend_pubkey33": W.spend_pubkey33, "labels": W.labels}, FrigateSource),
        ("cake+ssl://127.0.0.1:1", {"timeout": 5}, CakeSource),
    ],
)
def test_sources_open_builds_the_source_a_url_names_as_a_context_manager(url, options, kind):
    with sources.open(url, **options) as source:
        assert type(source) is kind
    with pytest.raises(TypeError):
        sources.open(url, **options, not_an_option=1)


def test_sources_open_refuses_urls_no_source_has(kernel_index):
    with sources.open(kernel_index) as source, sources.open_prover(str(kernel_index)) as prover:
        assert type(source) is type(prover) is IndexSource and source.network() == "regtest"
    assert type(sources.open_prover("http://127.0.0.1:1")) is NodeSource and type(sources.open_prover("ssl://127.0.0.1:1")) is ElectrumSource
    for url, message in [
        ("ftp://127.0.0.1:1", "no source is named by ftp://"),
        ("grpc://127.0.0.1", "grpc://HOST:PORT or grpcs://HOST:PORT, not"),
        ("cake+tcp://:50001", r"cake\+tcp://HOST:PORT"),
        ("rest+ftp://127.0.0.1:1", "no source"),
    ]:
        with pytest.raises(SourceURLError, match=message):
            sources.open(url)
    with pytest.raises(SourceURLError, match="names no prover"):
        sources.open_prover("grpc://127.0.0.1:1")
    with pytest.raises(SourceURLError, match="go with rpc"):
        sources.open("rest+http://127.0.0.1:1", user="u", password="p")
    with pytest.raises(IndexStoreError, match="no index at"):
        sources.open("no/such.db")


def test_a_broadcaster_sends_nothing_through_a_channel_on_another_network(kernel_copy, tmp_path):
    with kc.rpc_server(kernel_copy) as rpc, Broadcaster(f"rpc+{rpc.url}", "signet", user="user", password="pass") as wrong:
        with pytest.raises(WrongNetworkError, match="is on regtest, the wallet on signet: nothing was sent"):
            wrong(bytes(60))
    with pytest.raises(SourceURLError):
        Broadcaster("grpc://127.0.0.1:1", "regtest")
    with pytest.raises(SourceURLError, match="go with an rpc"):
        Broadcaster("http://127.0.0.1:1", "regtest", user="u")



def test_a_source_on_another_network_is_refused_with_its_own_error_before_a_block_is_read(kernel_index, tmp_path):
    from sp_scan.index import Index

    Index.create(tmp_path / "signet.db", "signet").close()
    with _wallet(tmp_path / "w") as w, sources.open(tmp_path / "signet.db") as signet:
        with pytest.raises(WrongNetworkError, match="is a wallet for regtest; .* is on signet"):
            w.sync(signet, W.scan_key32)
        with sources.open(kernel_index) as regtest, pytest.raises(WrongNetworkError, match="is on signet"):
            w.sync(regtest, W.scan_key32, verify_with=signet)
        assert w.tip() is None
