"""The wallet's BlindBit v2 source (`--grpc`) against `sp-scan serve --grpc-port` over kernel-validated chains,
through a stand-in that can hold, cut off or rewrite its messages (tests/remote_support.py).

BlindBit v2 orders a block's txs by txid and names no positions: the wallet lists what `index scan` lists,
in txid order within a block.
"""

from __future__ import annotations

import pytest
from coincurve import PrivateKey

import kernelchain as kc
import serving
from remote_support import GrpcProxy
from sp_scan.node import RestNode
from sp_scan.proto import blindbit_oracle_pb2 as pb
from sp_scan.wallet.sources import MAX_BLOCK_TXS
from test_cli import assert_fails, invoke
from wallet_support import W, create, index_scan, kill_9_while_syncing, listed, paid, scan_key_file, sync, unverified, wallet_tip

PAYMENT = 101  # the first block paying the test wallet


def in_txid_order(rows: list[dict]) -> list[dict]:
    """`index scan`'s rows as BlindBit v2 orders a block: by internal txid, then vout."""
    return sorted(rows, key=lambda r: (r["height"], bytes.fromhex(r["txid"])[::-1], r["vout"]))


@pytest.fixture(scope="module")
def oracle(kernel_index, kernel_rest):
    """`sp-scan serve --grpc-port` over the sample chain's index, with the node GetFullBlock needs."""
    with serving.ServerThread(kernel_index, grpc_port=0, node=RestNode(kernel_rest.url)) as server:
        yield server.server.urls["grpc"]


@pytest.fixture
def proxy(oracle):
    with GrpcProxy(oracle) as p:
        yield p


def stream_heights(proxy: GrpcProxy) -> list[tuple[int, int]]:
    return [(r.start, r.end) for n, r in proxy.seen if n == "StreamBlockScanDataShort"]


def full_blocks(proxy: GrpcProxy) -> set[int]:
    return {r.block_height for n, r in proxy.seen if n == "GetFullBlock"}


def test_a_grpc_sync_lists_what_index_scan_lists_asking_full_blocks_only_where_it_is_paid(kernel_chain, kernel_index, proxy, tmp_path):
    path = create(tmp_path)
    result = sync(path, "--grpc", proxy.target)
    assert result.exit_code == 0, result.output
    rows = unverified(path)
    assert rows == in_txid_order(index_scan(kernel_index)) == in_txid_order(paid(kernel_chain))
    assert rows != index_scan(kernel_index)  # a block pays the wallet twice, in the other order
    assert {r["label"] for r in rows} == {None, 0, 1, 7} and any(r["spent"] for r in rows) and not all(r["spent"] for r in rows)
    assert stream_heights(proxy) == [(0, kc.SAMPLE_TIP)]
    assert full_blocks(proxy) == {r["height"] for r in rows}
    again = sync(path, "--grpc", proxy.target)
    assert again.exit_code == 0 and "0 block(s) scanned" in again.stdout and unverified(path) == rows


def test_a_grpc_sync_verified_with_the_node_lists_every_output_as_proven(kernel_chain, kernel_rest, proxy, tmp_path):
    path = create(tmp_path)
    assert sync(path, "--grpc", proxy.target, "--verify-with", kernel_rest.url).exit_code == 0
    assert listed(path) == in_txid_order(paid(kernel_chain)) and unverified(path) == []


@pytest.mark.parametrize(("dust", "cut"), [(0, True), (1_000_000, False)])
def test_dust_limit_and_cut_through_are_asked_of_the_stream(dust, cut, kernel_chain, proxy, tmp_path):
    path = create(tmp_path)
    assert sync(path, "--grpc", proxy.target, "--dust-limit", str(dust), *(["--cut-through"] if cut else [])).exit_code == 0
    kept = {t.txid32[::-1].hex() for h in range(kc.SAMPLE_TIP + 1) for t in kernel_chain.tweaks(h, dust_limit=dust, cut_through=cut)}
    expected = in_txid_order([r for r in paid(kernel_chain) if r["txid"] in kept])
    assert unverified(path) == expected and 0 < len(expected) < len(paid(kernel_chain))
    assert [(r.dustlimit, r.cut_through) for n, r in proxy.seen if n == "StreamBlockScanDataShort"] == [(dust, cut)]


def test_a_fork_between_syncs_rolls_back_and_rescans_over_grpc(kernel_copy, tmp_path):
    with kc.rest_server(kernel_copy) as rest:
        db = serving.synced_index(tmp_path / "index.db", rest.url)
        with serving.ServerThread(db, grpc_port=0, node=RestNode(rest.url)) as server:
            target = server.server.urls["grpc"]
            path = create(tmp_path)
            assert sync(path, "--grpc", target).exit_code == 0
            reorg = kc.make_reorg(kernel_copy)
            serving.sync(db, rest.url)
            result = sync(path, "--grpc", target)
            assert result.exit_code == 0, result.output
            assert "1 fork(s) rolled back 2 block(s)" in result.stdout
            assert unverified(path) == in_txid_order(paid(kernel_copy)) == in_txid_order(index_scan(db))
            assert reorg.added.txid32[::-1].hex() in {r["txid"] for r in unverified(path)}


def test_kill_9_mid_sync_then_resume_gives_the_same_wallet_over_grpc(kernel_chain, proxy, tmp_path):
    path = create(tmp_path)
    tips = []
    for height in (30, 102, 106):
        proxy.hold(lambda name, m, h=height: name == "StreamBlockScanDataShort" and m.block_identifier.block_height >= h)
        kill_9_while_syncing(path, ["--grpc", proxy.target], lambda: proxy.held > 0, f"block {height} held")
        proxy.release()
        tips.append(wallet_tip(path))
    assert sync(path, "--grpc", proxy.target).exit_code == 0
    assert tips == sorted(tips) and all(t < 106 for t in tips)
    assert unverified(path) == in_txid_order(paid(kernel_chain))


def test_a_server_that_dies_mid_sync_fails_in_one_line_naming_the_height_to_resume_at(kernel_chain, proxy, tmp_path):
    path = create(tmp_path)
    proxy.stop_answering(after=60)
    result = sync(path, "--grpc", proxy.target, "--retries", "1")
    assert result.exit_code == 2 and "Traceback" not in result.output
    *notices, line = result.stderr.splitlines()
    assert line.startswith("sp-scan: error: BlindBit v2 at") and "UNAVAILABLE" in line
    assert len(notices) == 1 and notices[0].endswith("retry 1 of 1 in 0.5 s")
    tip = wallet_tip(path)
    assert f"resume at {tip + 1}" in line and 0 <= tip < kc.SAMPLE_TIP
    proxy.resume_answering()
    assert sync(path, "--grpc", proxy.target).exit_code == 0
    assert unverified(path) == in_txid_order(paid(kernel_chain))


def test_a_server_without_its_node_fails_at_the_first_hit_without_retrying(kernel_index, tmp_path):
    with serving.ServerThread(kernel_index, grpc_port=0) as server:
        path = create(tmp_path)
        result = sync(path, "--grpc", server.server.urls["grpc"])
    line = assert_fails(result, "GetFullBlock: UNAVAILABLE", "needs the server's node", f"resume at {PAYMENT}")
    assert "retry" not in line and wallet_tip(path) == PAYMENT - 1


def test_a_stream_broken_off_is_opened_again_where_it_stopped(kernel_chain, proxy, tmp_path):
    path = create(tmp_path)
    proxy.cut_once(lambda name, m: name == "StreamBlockScanDataShort" and m.block_identifier.block_height == 50)
    result = sync(path, "--grpc", proxy.target)
    assert result.exit_code == 0, result.output
    assert unverified(path) == in_txid_order(paid(kernel_chain))
    starts = [s for s, _ in stream_heights(proxy)]
    assert starts[0] == 0 and len(starts) == 2 and 0 < starts[1] <= 50


def _comp(name, message, change):
    """Apply change(message) to the stream's message of block PAYMENT."""
    if name == "StreamBlockScanDataShort" and message.block_identifier.block_height == PAYMENT:
        return change(message)
    return None


def _items(message, items):
    return pb.BlockScanDataShortResponse(block_identifier=message.block_identifier, comp_index=items, spent_outputs=message.spent_outputs)


def _first(message, **fields):
    first = pb.ComputeIndexTxItem()
    first.CopyFrom(message.comp_index[0])
    for k, v in fields.items():
        setattr(first, k, v)
    return _items(message, [first, *message.comp_index[1:]])


def _full(name, message, change):
    if name == "GetFullBlock" and message.block_identifier.block_height == PAYMENT:
        return change(message)
    return None


def _full_first(message, **fields):
    out = pb.FullBlockResponse()
    out.CopyFrom(message)
    for item in out.index:
        for k, v in fields.items():
            if callable(v):
                v(item)
            else:
                setattr(item, k, v)
    return out


def _bump(item):
    item.utxos[0].amount = 21_000_001 * 10**8


def _other_key(item):
    item.utxos[0].pubkey = b"\x11" * 32


HOSTILE = {
    "oversized block": (lambda n, m: _comp(n, m, lambda m: _items(m, [m.comp_index[0]] * (MAX_BLOCK_TXS + 1))), "more than a block holds"),
    "a tweak of 32 bytes": (lambda n, m: _comp(n, m, lambda m: _first(m, tweak=m.comp_index[0].tweak[:32])), "wrong width"),
    "a txid of 31 bytes": (lambda n, m: _comp(n, m, lambda m: _first(m, txid=m.comp_index[0].txid[:31])), "wrong width"),
    "prefixes cut mid-key": (lambda n, m: _comp(n, m, lambda m: _first(m, outputs_short=m.comp_index[0].outputs_short[:-1])), "wrong width"),
    "a tweak that is not a point": (lambda n, m: _comp(n, m, lambda m: _first(m, tweak=b"\x02" + b"\xff" * 32)), "not a valid point"),
    "a block of another height": (lambda n, m: _comp(n, m, lambda m: pb.BlockScanDataShortResponse(block_identifier=pb.BlockIdentifier(block_hash=m.block_identifier.block_hash, block_height=PAYMENT + 1))), f"sent block {PAYMENT + 1}"),
    "a hash of 31 bytes": (lambda n, m: _comp(n, m, lambda m: pb.BlockScanDataShortResponse(block_identifier=pb.BlockIdentifier(block_hash=b"\x01" * 31, block_height=PAYMENT))), "not 32 bytes"),
    "spent prefixes cut": (lambda n, m: _comp(n, m, lambda m: pb.BlockScanDataShortResponse(block_identifier=m.block_identifier, comp_index=m.comp_index, spent_outputs=b"\x01" * 9)), "spent-output prefixes"),
    "a message that does not parse": (lambda n, m: _comp(n, m, lambda m: b"\x0a\xff\xff"), "does not parse"),
    "a full block of another hash": (lambda n, m: _full(n, m, lambda m: pb.FullBlockResponse(block_identifier=pb.BlockIdentifier(block_hash=b"\x00" * 32, block_height=PAYMENT), index=m.index)), "names another block"),
    "a full block without the tx": (lambda n, m: _full(n, m, lambda m: pb.FullBlockResponse(block_identifier=m.block_identifier)), "does not hold transaction"),
    "a full block with other tweaks": (lambda n, m: _full(n, m, lambda m: _full_first(m, tweak=b"\x03" + b"\x01" * 32)), "does not hold transaction"),
    "an impossible amount": (lambda n, m: _full(n, m, lambda m: _full_first(m, utxos=_bump)), "amount"),
    "keys that are not the stream's": (lambda n, m: _full(n, m, lambda m: _full_first(m, utxos=_other_key)), "not the keys the stream gave"),
}


@pytest.mark.parametrize("case", HOSTILE, ids=list(HOSTILE))
def test_a_hostile_answer_is_refused_in_one_line_and_the_wallet_keeps_every_block_before_it(case, proxy, tmp_path):
    tamper, needle = HOSTILE[case]
    proxy.tamper = tamper
    path = create(tmp_path)
    assert_fails(sync(path, "--grpc", proxy.target, "--retries", "0"), needle, f"resume at {PAYMENT}")
    assert wallet_tip(path) == PAYMENT - 1 and unverified(path) == []


def test_an_output_that_does_not_match_its_tweak_is_never_stored(kernel_chain, proxy, tmp_path):
    ours = {bytes.fromhex(r["output"]) for r in paid(kernel_chain) if r["height"] == PAYMENT}
    stranger = PrivateKey(b"\x07" * 32).public_key.format()[1:]

    def swap_full(item):
        for u in item.utxos:
            if u.pubkey in ours:
                u.pubkey = stranger[:8] + u.pubkey[8:]  # the prefix the stream shows, another key behind it

    proxy.tamper = lambda n, m: _full(n, m, lambda m: _full_first(m, utxos=swap_full))
    path = create(tmp_path)
    assert_fails(sync(path, "--grpc", proxy.target, "--to", str(PAYMENT)), "not the keys the stream gave")

    def swap_both(name, message):  # the stream and the full block agree on a key that is not the tweak's output
        if name == "StreamBlockScanDataShort" and message.block_identifier.block_height == PAYMENT:
            out = pb.BlockScanDataShortResponse()
            out.CopyFrom(message)
            for item in out.comp_index:
                item.outputs_short = b"".join(stranger[:8] if item.outputs_short[j : j + 8] in {k[:8] for k in ours} else item.outputs_short[j : j + 8] for j in range(0, len(item.outputs_short), 8))
            return out
        if name == "GetFullBlock":
            return _full_first(message, utxos=lambda item: [setattr(u, "pubkey", stranger) for u in item.utxos if u.pubkey in ours])
        return None

    proxy.tamper = swap_both
    assert sync(path, "--grpc", proxy.target, "--to", str(PAYMENT)).exit_code == 0
    assert [r for r in unverified(path) if r["height"] == PAYMENT] == [] and wallet_tip(path) == PAYMENT


def test_a_server_on_another_network_or_without_the_tweaks_asked_for_is_refused(proxy, tmp_path):
    path = tmp_path / "signet.wallet"
    assert invoke("wallet", "create", str(path), "--network", "signet", "--scan-key-file", str(scan_key_file(tmp_path)), "--spend-pubkey", W.spend_pubkey33.hex()).exit_code == 0
    assert_fails(sync(path, "--grpc", proxy.target), "regtest")
    proxy.tamper = lambda n, m: pb.InfoResponse(network="regtest", height=m.height, tweaks_full_basic=True) if n == "GetInfo" else None
    assert_fails(sync(create(tmp_path), "--grpc", proxy.target, "--cut-through"), "tweaks_cut_through_with_dust_filter")
    assert_fails(sync(create(tmp_path, "x.wallet"), "--grpc", "no-port"), "HOST:PORT")
    assert_fails(sync(create(tmp_path, "y.wallet"), "--db", "x.db", "--tls"), "--tls goes with")
