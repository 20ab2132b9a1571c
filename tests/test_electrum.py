"""The Electrum listener (`sp-scan serve --electrum-port`) over the kernel-validated sample chain.

Real parts: ElectrumX (e-x from PyPI) indexes the same chain through the Core RPC stand-in and is
the backend every proxied call reaches; clients speak raw newline-delimited JSON-RPC over sockets.
Expected histories come from the sender's records (kernelchain), never from the index. Wire shapes
follow sparrowwallet/frigate (README, ElectrumServerService.java, SilentPaymentsTxEntry.java,
SilentPaymentsSubscription.java, the *Exception.java error codes) and cake-tech/blockstream-electrs
(src/electrum/server.rs), cake-tech/bitcoin_base (tweaks_subscribe.dart, tweaks_get.dart) and
cake-tech/sp_scanner (rust/src/lib.rs, test/scan_block_v2_test.dart).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import socket
import struct
import threading
import time

import pytest
from coincurve import PrivateKey

import kernelchain
from electrum_support import ElectrumThread, ElectrumX, RawClient, Relay
from serving import sync, synced_index
from sp_scan import address as sp_address
from sp_scan import crypto
from sp_scan.proto import electrum_sp
from sp_scan.server.electrum import ElectrumLimits, cake
from sp_scan.server.electrum.caps import SubscriptionCaps
from sp_scan.server.limits import Gate, Limits, ip_group

SP = "blockchain.silentpayments.subscribe"
WALLET = kernelchain.TEST_WALLET
N = crypto.N
GENESIS_REGTEST = "0f9188f13cb7b2c71f2a335e3a4fc328bf5beb436012afca590b1a11466e2206"


def keys(wallet=WALLET) -> list[str]:
    return [wallet.scan_key32.hex(), wallet.spend_pubkey33.hex()]


def expected(chain, labels=(1, 7), start=0, end=None, wallet=WALLET) -> list[dict]:
    """The history entries a subscription must report: every tx paying `wallet` (change and `labels` scanned)."""
    out = []
    for b in chain.active()[start : None if end is None else end + 1]:
        for t in b.txs:
            if any(p.wallet == wallet.name and (p.label in (None, 0) or p.label in labels) for p in t.payments):
                out.append({"height": b.height, "tx_hash": t.txid32[::-1].hex(), "tweak_key": t.tweak33.hex()})
    return sorted(out, key=lambda e: (e["height"], e["tx_hash"]))


def address(wallet=WALLET) -> str:
    """The wallet's address on the sample chain: regtest's "sprt" (rust-silentpayments, spdk, drongo)."""
    return sp_address.encode(wallet.scan_pubkey33, wallet.spend_pubkey33, "sprt")


def flat(notes: list[dict]) -> list[dict]:
    return [e for n in notes for e in n["history"]]


def check_history(notes: list[dict], reply: dict) -> None:
    """Frigate's rules on a subscription's notifications up to the first progress 1.0."""
    progress = [n["progress"] for n in notes]
    assert progress[-1] == 1.0 and all(0.0 <= p < 1.0 for p in progress[:-1]) and progress == sorted(progress)
    for n in notes:
        assert list(n) == ["subscription", "progress", "history"] and n["subscription"] == reply
        assert len(n["history"]) <= 100
        for e in n["history"]:
            assert list(e) == ["height", "tx_hash", "tweak_key"]
    entries = flat(notes)
    assert entries == sorted(entries, key=lambda e: (e["height"] == 0, e["height"], e["tx_hash"]))
    assert len({e["tx_hash"] for e in entries}) == len(entries)


@pytest.fixture(scope="module")
def electrumx(kernel_chain, tmp_path_factory):
    with kernelchain.rpc_server(kernel_chain) as rpc:
        server = ElectrumX(int(rpc.url.rsplit(":", 1)[1]), tmp_path_factory.mktemp("electrumx"), kernel_chain.tip_height)
        try:
            yield server.start()
        finally:
            server.stop()


@pytest.fixture(scope="module")
def electrum(kernel_index, electrumx):
    with ElectrumThread(kernel_index, backend=electrumx.url) as server:
        yield server


@pytest.fixture
def client(electrum):
    with RawClient(electrum.port) as c:
        yield c


def negotiated(port: int) -> RawClient:
    c = RawClient(port)
    c.result("server.version", ["test", ["1.4", "1.6"]])
    return c


# --- version, features, proxy ---


def test_calls_before_server_version_are_refused_with_frigates_error(client):
    for method, params in [("server.features", []), ("server.ping", []), (SP, keys()), ("blockchain.block.header", [1])]:
        assert client.call(method, params)["error"] == {"code": -1, "message": "server.version must be the first message"}
    assert client.result("server.version", ["test", "1.4"])[1] == "1.4"


def test_version_is_the_lower_of_the_clients_and_the_backends_within_frigates_range(electrum, electrumx):
    with RawClient(electrumx.port) as direct:
        assert direct.result("server.version", ["test", ["1.4", "1.7"]])[1] == "1.7"  # the backend would go to 1.7
    with RawClient(electrum.port) as c:
        name, version = c.result("server.version", ["test", ["1.4", "1.7"]])
        assert name.startswith("sp-scan ") and version == "1.6"
    with RawClient(electrum.port) as c:
        assert c.result("server.version", {"client_name": "test", "protocol_version": "1.4.2"}) [1] == "1.4.2"
    with RawClient(electrum.port) as c:
        assert "error" in c.call("server.version", ["test", "1.2"])  # below every side's minimum
        assert c.call("server.ping")["error"]["code"] == -1


def test_without_a_backend_the_version_is_local_and_below_1_4_is_frigates_unsupported_version(kernel_index):
    with ElectrumThread(kernel_index) as server, RawClient(server.port) as c:
        assert c.call("server.version", ["test", "1.3"])["error"] == {"code": -32003, "message": "Unsupported version", "data": "1.3"}
        assert c.result("server.version", ["test", ["1.4", "1.9"]])[1] == "1.6"
        assert c.call("blockchain.block.header", [1])["error"]["code"] == -32601
        features = c.result("server.features")
        assert features["genesis_hash"] == GENESIS_REGTEST
        assert features["silent_payments"] == [0] and features["protocol_min"] == "1.4" and features["hash_function"] == "sha256"
        assert features["hosts"] == {"127.0.0.1": {"tcp_port": server.port}}


def test_server_features_are_the_backends_with_silent_payments_added(electrum, electrumx):
    with RawClient(electrumx.port) as direct:
        direct.result("server.version", ["test", ["1.4", "1.6"]])
        theirs = direct.result("server.features")
    with negotiated(electrum.port) as c:
        ours = c.result("server.features")
    here = {"127.0.0.1": {"tcp_port": electrum.port}}  # this server, never the backend's port
    assert theirs["hosts"] == {"127.0.0.1": {"tcp_port": electrumx.port}} and theirs["services"] == [f"tcp://127.0.0.1:{electrumx.port}"]
    assert ours == {**theirs, "hosts": here, "services": [f"tcp://127.0.0.1:{electrum.port}"], "silent_payments": [0]}
    assert ours["genesis_hash"] == GENESIS_REGTEST


def test_proxied_methods_are_answered_by_the_backend(electrum, kernel_chain):
    with negotiated(electrum.port) as c:
        assert c.result("blockchain.block.header", [104]) == kernel_chain.block(104)[:80].hex()
        record = next(t for t in kernel_chain.active()[101].txs if t.name == "p2tr-key-path")
        assert c.result("blockchain.transaction.get", [record.txid32[::-1].hex()]) == record.tx.serialize().hex()
        header = c.result("blockchain.headers.subscribe")
        assert header == {"height": kernelchain.SAMPLE_TIP, "hex": kernel_chain.block(kernelchain.SAMPLE_TIP)[:80].hex()}
        script = bytes(record.tx.vout[record.payments[0].vout].scriptPubKey)
        scripthash = hashlib.sha256(script).digest()[::-1].hex()
        history = c.result("blockchain.scripthash.get_history", [scripthash])
        assert {h["tx_hash"] for h in history} >= {record.txid32[::-1].hex()}
        assert c.result("blockchain.scripthash.subscribe", [scripthash]) is not None
        assert c.call("blockchain.no_such_method", [])["error"]["code"] == -32601


# --- Frigate's subscribe ---


def test_subscribe_reports_every_tx_paying_the_wallet_labels_included_each_once_then_progress_1(electrum, kernel_chain):
    with negotiated(electrum.port) as c:
        reply = c.result(SP, [*keys(), 0, [7, 1, 1]])
        assert reply == {"address": address(), "labels": [0, 1, 7], "start_height": 0}
        notes = c.history()
        check_history(notes, reply)
        assert flat(notes) == expected(kernel_chain)
        assert len(flat(notes)) > 10


def test_subscribes_in_a_batch_are_answered_in_the_batch_reply_and_each_history_follows_it(electrum, kernel_chain):
    wallets = (WALLET, kernelchain.OTHER_WALLET)
    with negotiated(electrum.port) as c:
        batch = [{"jsonrpc": "2.0", "id": 10 + i, "method": SP, "params": [*keys(w), 0, [1, 7]]} for i, w in enumerate(wallets)]
        c.send_line(json.dumps(batch).encode())
        replies = {r["id"]: r["result"] for r in c.read()}  # the first message: the batch reply, then the notifications
        notes: dict[str, list] = {}
        while len(notes) < 2 or any(n[-1]["progress"] < 1.0 for n in notes.values()):
            params = c.notification(SP)["params"]
            notes.setdefault(params["subscription"]["address"], []).append(params)
    for i, wallet in enumerate(wallets):
        check_history(notes[address(wallet)], replies[10 + i])
        assert flat(notes[address(wallet)]) == expected(kernel_chain, wallet=wallet)


def test_a_wallet_without_labels_gets_only_its_unlabelled_and_change_payments(electrum, kernel_chain):
    with negotiated(electrum.port) as c:
        reply = c.result(SP, {"scan_private_key": keys()[0], "spend_public_key": keys()[1]})
        assert reply["labels"] == [0]
        notes = c.history()
        check_history(notes, reply)
        assert flat(notes) == expected(kernel_chain, labels=())
        other = kernelchain.OTHER_WALLET
        reply = c.result(SP, keys(other))
        assert flat(c.history()) == expected(kernel_chain, labels=(), wallet=other)


@pytest.mark.parametrize(
    "start, first, last",
    [(104, 104, None), ("101-102", 101, 102), (kernelchain.GENESIS_TIME + 600 * 103, 103, None), ("0-110", 0, 110)],
    ids=["height", "range", "unix-time", "whole-range"],
)
def test_start_as_a_height_a_unix_time_or_a_range(electrum, kernel_chain, start, first, last):
    with negotiated(electrum.port) as c:
        reply = c.result(SP, [*keys(), start, [1, 7]])
        assert reply["start_height"] == first
        notes = c.history()
        check_history(notes, reply)
        assert flat(notes) == expected(kernel_chain, start=first, end=last)


@pytest.mark.parametrize(
    "params",
    [
        [(N).to_bytes(32, "big").hex(), keys()[1]],
        [(N + 5).to_bytes(32, "big").hex(), keys()[1]],
        ["00" * 32, keys()[1]],
        ["zz" * 32, keys()[1]],
        [keys()[0][:-2], keys()[1]],
        [keys()[0], "02" + "00" * 32],
        [keys()[0], keys()[1][2:]],
        [keys()[0]],
        [*keys(), 0, list(range(1, 12))],
        [*keys(), 0, [0]],
        [*keys(), 0, [2**31]],
        [*keys(), 0, [True]],
        [*keys(), 0, "1"],
        [*keys(), -1],
        [*keys(), "5-2"],
        [*keys(), "0-111"],
        [*keys(), "x"],
        [*keys(), 1.5],
        [*keys(), 0, [], "extra"],
    ],
    ids=[
        "scan-key-n", "scan-key-above-n", "scan-key-zero", "not-hex", "short-key", "spend-not-a-point", "spend-x-only",
        "no-spend-key", "11-labels", "label-0", "label-2^31", "label-bool", "labels-not-array", "negative-start",
        "reversed-range", "range-past-tip", "start-word", "start-float", "too-many-params",
    ],
)  # fmt: skip
def test_bad_params_are_frigates_invalid_params(client, params):
    client.result("server.version", ["test", "1.4"])
    error = client.call(SP, params)["error"]
    assert error["code"] == -32602 and error["message"]
    assert client.result("server.ping") is None  # the connection serves on


def test_resubscribe_keeps_the_lower_start_and_rescans_and_unsubscribe_answers_the_address(electrum, kernel_chain):
    with negotiated(electrum.port) as c:
        reply = c.result(SP, [*keys(), 103, [1, 7]])
        assert flat(c.history()) == expected(kernel_chain, start=103)
        again = c.result(SP, [*keys(), 105, [1, 7]])
        assert again == {**reply, "start_height": 103}
        notes = c.history()
        check_history(notes, again)
        assert flat(notes) == expected(kernel_chain, start=103)
        assert c.result("blockchain.silentpayments.unsubscribe", keys()) == address()
        assert c.result("blockchain.silentpayments.unsubscribe", keys()) == address()
        assert electrum.call(_watch_count(electrum)) == 0


async def _watch_count(server) -> int:
    return server.server.state.scans.watch_count


def test_at_most_100_subscriptions_per_connection(electrum):
    wallets = [kernelchain.Wallet(f"w{i}", (i + 1).to_bytes(32, "big"), (i + 1000).to_bytes(32, "big")) for i in range(101)]
    with negotiated(electrum.port) as c:
        ids = [c.send(SP, keys(w) + [kernelchain.SAMPLE_TIP]) for w in wallets]
        answers = [c.answer(i) for i in ids]
        assert all("result" in a for a in answers[:100]), [a for a in answers[:100] if "result" not in a][:3]
        assert answers[100]["error"]["code"] == -32602 and "limit" in answers[100]["error"]["message"]
        assert c.result(SP, keys(wallets[0]) + [kernelchain.SAMPLE_TIP])["address"]  # a resubscribe is not a new one


# --- live blocks, reorgs (a private chain and index) ---


@pytest.fixture
def private(kernel_copy, tmp_path):
    """A copy of the chain, a REST stand-in over it, its own index and an Electrum server over that (no backend)."""
    with kernelchain.rest_server(kernel_copy) as rest:
        db = synced_index(tmp_path / "private.db", rest.url)
        with ElectrumThread(db) as server:
            yield kernel_copy, rest, db, server


def test_a_new_block_is_notified_live_and_a_reorg_renotifies_from_the_fork(private):
    chain, rest, db, server = private
    with negotiated(server.port) as c:
        reply = c.result(SP, [*keys(), 100, [1, 7]])
        assert flat(c.history()) == expected(chain, start=100)
        reorg = kernelchain.make_reorg(chain)
        sync(db, rest.url)
        found = []
        want = expected(chain, start=reorg.fork_height + 1)
        while {e["tx_hash"] for e in found} != {e["tx_hash"] for e in want}:
            note = c.notification(SP)["params"]
            assert note["progress"] == 1.0 and note["subscription"] == reply
            found += note["history"]
        assert {(e["height"], e["tx_hash"]) for e in found} == {(e["height"], e["tx_hash"]) for e in want}
        assert {e["tx_hash"] for e in want} >= {reorg.replacement.txid32[::-1].hex(), reorg.added.txid32[::-1].hex()}
        spend = chain.transaction("live", [chain.reserve.pop()], [("wallet", 7), ("p2wpkh",)])
        block = chain.mine([spend])
        sync(db, rest.url)
        note = c.notification(SP)["params"]
        assert note["progress"] == 1.0
        assert note["history"] == [{"height": block.height, "tx_hash": spend.txid32[::-1].hex(), "tweak_key": spend.tweak33.hex()}]


# --- Cake's methods ---


def taproot_outputs(chain, height):
    """Per eligible tx of the block: (txid32, tweak33, [(vout, key32, amount, spent)]) from the sender's records."""
    spends = chain.spends()
    out = []
    for t in chain.active()[height].txs:
        if t.tweak33 is not None:
            outs = [(n, bytes(t.tx.vout[n].scriptPubKey)[2:], t.tx.vout[n].nValue, kernelchain.outpoint36(t.txid32, n) in spends) for n in t.taproot_vouts]
            out.append((t.txid32, t.tweak33, outs))
    return out


def spending_inputs(chain) -> dict[bytes, dict]:
    """outpoint36 -> electrs's SpendingInput of the active-chain input that spends it: {"txid", "vin", "confirmed"}."""
    out = {}
    for b in chain.active():
        confirmed = {"height": b.height, "hash": b.hash32[::-1].hex(), "time": int.from_bytes(chain.block(b.height)[68:72], "little")}
        for t in b.txs:
            for vin, op in enumerate(t.inputs36):
                out[op] = {"txid": t.txid32[::-1].hex(), "vin": vin, "confirmed": confirmed}
    return out


def cake_v1(chain, height, historical):
    """electrs's message for one block: with `historical` every output, a spent one with its SpendingInput;
    without, spent outputs left out below tip - 5 (and kept, unmarked, above)."""
    spenders = spending_inputs(chain)
    keep_spent = historical or height >= chain.tip_height - 5
    txs = {}
    for txid32, tweak33, outs in taproot_outputs(chain, height):
        marker = lambda v: [spenders[kernelchain.outpoint36(txid32, v)]] if historical else []  # noqa: E731
        kept = {str(v): [k.hex(), a, *(marker(v) if s else [])] for v, k, a, s in outs if keep_spent or not s}
        if kept:
            txs[txid32[::-1].hex()] = {"tweak": tweak33.hex(), "output_pubkeys": kept}
    return txs


def decode_compact(blob: bytes) -> tuple[int, list]:
    """cake-tech/sp_scanner's reading of a protocol-2 record, written from its layout."""
    pos = 4
    height = struct.unpack_from("<I", blob)[0]

    def size():
        nonlocal pos
        first = blob[pos]
        pos += 1
        if first < 0xFD:
            return first
        width = {0xFD: 2, 0xFE: 4, 0xFF: 8}[first]
        pos += width
        return int.from_bytes(blob[pos - width : pos], "little")

    txs = []
    for _ in range(size()):
        txid, tweak = blob[pos : pos + 32], blob[pos + 32 : pos + 65]
        pos += 65
        outs = []
        for _ in range(size()):
            vout = size()
            outs.append((vout, blob[pos : pos + 32]))
            pos += 32
        txs.append((txid, tweak, outs))
    assert pos == len(blob)
    return height, txs


def test_the_compact_form_matches_cakes_captured_fixture():
    """cake-tech/sp_scanner test/scan_block_v2_test.dart: the block at height 112 and the empty bookmark at 1."""
    txid32 = bytes.fromhex("38088f720c1f30e5c54a56e385984ebd11d6855b14d6158f8833771501709e68")[::-1]
    tweak33 = bytes.fromhex("0302cc2a75db0e06919f9d3312c17c831b68ff1ead95498a529fd366d64921e3c0")
    key32 = bytes.fromhex("46db9bd8d491531b2e783d32e07acb0624093fcdad75573e7e6da39ac21d0c13")
    blob = cake.compact_block(112, [(txid32, tweak33, [(0, key32)])])
    assert base64.b64encode(blob).decode() == "cAAAAAFonnABFXcziI8V1hRbhdYRvU6YheNWSsXlMB8Mco8IOAMCzCp12w4GkZ+dMxLBfIMbaP8erZVJilKf02bWSSHjwAEARtub2NSRUxsueD0y4HrLBiQJP82tdVc+fm2jmsIdDBM="
    assert base64.b64encode(cake.compact_block(1, [])).decode() == "AQAAAAA="
    assert cake.compact_size(0xFC) == b"\xfc" and cake.compact_size(0xFD) == b"\xfd\xfd\x00" and cake.compact_size(2**32) == b"\xff" + (2**32).to_bytes(8, "little")


@pytest.mark.parametrize("historical", [True, False], ids=["historical", "unspent-only"])
def test_tweaks_subscribe_streams_the_index_tweaks_per_block_then_done(electrum, kernel_chain, historical):
    with negotiated(electrum.port) as c:
        response = c.call(electrum_sp.CAKE_TWEAKS_SUBSCRIBE, [95, 1000, historical])
        done = {"jsonrpc": "2.0", "method": electrum_sp.CAKE_TWEAKS_SUBSCRIBE, "params": [{"max_protocol_version": 2, "message": "done"}]}
        assert response["result"] == done
        blocks = [n["params"] for n in c.notifications if n["method"] == electrum_sp.CAKE_TWEAKS_SUBSCRIBE]
        assert blocks[-1] == done["params"]
        want = {h: cake_v1(kernel_chain, h, historical) for h in range(95, kernelchain.SAMPLE_TIP + 1)}
        want = {str(h): v for h, v in want.items() if v or h == kernelchain.SAMPLE_TIP}
        got = {}
        for (block,) in blocks[:-1]:
            (height, txs), = block.items()
            got[height] = txs
        assert got == want
        assert any(len(o) == 3 for txs in got.values() for t in txs.values() for o in t["output_pubkeys"].values()) == historical
        spent_recent = [h for h in range(kernelchain.SAMPLE_TIP - 5, kernelchain.SAMPLE_TIP + 1) for _, _, outs in taproot_outputs(kernel_chain, h) for o in outs if o[3]]
        assert spent_recent  # the rule for the last blocks is exercised


def test_cake_errors_are_electrs_strings_and_historical_markers_need_the_backend(electrum, kernel_index):
    with negotiated(electrum.port) as c:
        for method, params in [(electrum_sp.CAKE_TWEAKS_SUBSCRIBE, [0, 10, True, 3]), (electrum_sp.CAKE_TWEAKS_SUBSCRIBE, ["x", 10]), (electrum_sp.CAKE_BLOCK_TWEAKS, [5000]), (electrum_sp.CAKE_TWEAKS_GET, ["xx", 0, 101])]:
            error = c.call(method, params)["error"]
            assert isinstance(error, str) and error, (method, params, error)  # electrs: "error": "<message>"
        assert c.result("server.ping") is None
    with ElectrumThread(kernel_index) as bare, negotiated(bare.port) as c:
        assert "backend" in c.call(electrum_sp.CAKE_TWEAKS_SUBSCRIBE, [95, 10, True])["error"]
        assert c.call(electrum_sp.CAKE_TWEAKS_SUBSCRIBE, [95, 10, False])["result"]["params"][0]["message"] == "done"


def test_tweaks_subscribe_protocol_2_sends_one_compact_record_per_block(electrum, kernel_chain):
    with negotiated(electrum.port) as c:
        response = c.call(electrum_sp.CAKE_TWEAKS_SUBSCRIBE, {"height": 0, "count": 2000, "historical": True, "protocol_version": 2})
        assert response["result"]["params"] == [{"max_protocol_version": 2, "message": "done"}]
        records = [decode_compact(base64.b64decode(n["params"][0]["tweaks_v2"])) for n in c.notifications if "tweaks_v2" in n["params"][0]]
        want = {h: [(t, w, [(v, k) for v, k, _, _ in outs]) for t, w, outs in taproot_outputs(kernel_chain, h)] for h in range(kernelchain.SAMPLE_TIP + 1)}
        assert dict(records) == {h: txs for h, txs in want.items() if txs or h == kernelchain.SAMPLE_TIP}


def test_block_tweaks_and_tweaks_get(electrum, kernel_chain):
    with negotiated(electrum.port) as c:
        for h in (0, 101, 104, 108):
            assert c.result(electrum_sp.CAKE_BLOCK_TWEAKS, [h]) == [t.tweak33.hex() for t in kernel_chain.tweaks(h)]
        for txid32, _, outs in taproot_outputs(kernel_chain, 101):
            for vout, _, amount, spent in outs:
                assert c.result(electrum_sp.CAKE_TWEAKS_GET, [txid32[::-1].hex(), vout, 101]) == {"amount": amount, "spent": spent}
        txid32, _, outs = taproot_outputs(kernel_chain, 101)[0]
        assert "no tweak row" in c.call(electrum_sp.CAKE_TWEAKS_GET, [txid32[::-1].hex(), 99, 101])["error"]
        assert "no tweak row" in c.call(electrum_sp.CAKE_TWEAKS_GET, [txid32[::-1].hex(), outs[0][0], 102])["error"]


# --- load and hostile input ---


def test_100_clients_subscribed_at_once_each_get_their_history(electrum, kernel_chain):
    want = expected(kernel_chain)
    results: list = [None] * 100
    barrier = threading.Barrier(100)

    def run(i: int) -> None:
        with negotiated(electrum.port) as c:
            barrier.wait()
            reply = c.result(SP, [*keys(), 0, [1, 7]])
            notes = c.history()
            check_history(notes, reply)
            results[i] = flat(notes)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(100)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert all(r == want for r in results)


def test_not_json_and_bad_requests_get_errors_and_the_connection_serves_on(client):
    client.send_line(b"this is not json")
    assert client.read()["error"]["code"] == -32700
    client.send_line(b'{"jsonrpc": "2.0", "id": 5, "method": 7}')
    assert client.read()["error"]["code"] in (-32600, -32601)
    client.send_line(b"[]")
    assert client.read()["error"]["code"] == -32600
    assert client.result("server.version", ["test", "1.4"])[1] == "1.4"


def test_a_10_mb_line_is_answered_request_too_large_and_the_connection_closed(electrum):
    with negotiated(electrum.port) as big, negotiated(electrum.port) as other:
        try:
            big.sock.sendall(b'{"jsonrpc": "2.0", "id": 1, "method": "server.ping", "params": ["' + b"a" * 10_000_000)
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed while we were still sending
        assert big.read() == {"jsonrpc": "2.0", "error": {"code": -32600, "message": "request too large"}, "id": None}
        assert big.read() is None
        assert other.result("server.ping") is None


def test_10000_subscribe_calls_end_in_errors_or_a_closed_connection_while_others_are_served(electrum, kernel_chain):
    lines = b"".join(
        json.dumps({"jsonrpc": "2.0", "id": i, "method": SP, "params": [(i + 1).to_bytes(32, "big").hex(), keys()[1], kernelchain.SAMPLE_TIP]}).encode() + b"\n"
        for i in range(10_000)
    )
    with negotiated(electrum.port) as flood, negotiated(electrum.port) as other:
        sender = threading.Thread(target=_send_quietly, args=(flood.sock, lines))
        sender.start()
        answers = []  # aiorpcx throttles a client whose errors cost too much, then disconnects it: read 150
        while len(answers) < 150 and (message := flood.read()) is not None:
            if "id" in message:
                answers.append(message)
        assert sum("result" in a for a in answers) <= 100
        codes = {a["error"]["code"] for a in answers if "error" in a}
        assert codes <= {-32602, -32005, -101, -102}, codes  # aiorpcx: -101 excessive resource usage (then closed), -102 busy
        reply = other.result(SP, [*keys(), 0, [1, 7]])
        assert flat(other.history()) == expected(kernel_chain)
        assert reply["address"] == address()
        flood.sock.shutdown(socket.SHUT_RDWR)
        sender.join(60)


def _send_quietly(sock: socket.socket, data: bytes) -> None:
    try:
        sock.sendall(data)
    except OSError:
        pass


def test_a_client_that_never_reads_is_disconnected_and_the_others_are_served(kernel_index, kernel_chain):
    with ElectrumThread(kernel_index, limits=ElectrumLimits(outbox=20), gate=Gate(Limits(write_timeout=2.0), ("electrum",))) as server:
        sleeper = socket.socket()
        sleeper.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sleeper.connect(("127.0.0.1", server.port))
        sleeper.sendall(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "server.version", "params": ["s", "1.4"]}).encode() + b"\n")
        sleeper.sendall(json.dumps({"jsonrpc": "2.0", "id": 1, "method": SP, "params": [*keys(), 0, [1, 7]]}).encode() + b"\n")
        request = json.dumps({"jsonrpc": "2.0", "id": 2, "method": electrum_sp.CAKE_TWEAKS_SUBSCRIBE, "params": [0, 1000, False]}).encode() + b"\n"
        sleeper.settimeout(5)
        for _ in range(2000):  # each streams every block's tweaks: far more than the socket buffers hold
            try:
                sleeper.sendall(request)
            except OSError:
                break
        with negotiated(server.port) as c:
            c.result(SP, [*keys(), 0, [1, 7]])
            assert flat(c.history()) == expected(kernel_chain)
        deadline = time.monotonic() + 120
        while server.call(_sessions(server)) > 0:
            assert time.monotonic() < deadline, "the client that never reads was not disconnected"
            time.sleep(0.05)
        sleeper.close()


async def _sessions(server) -> int:
    return len([s for s in server.server.state.sessions if not s.is_closing()])


def test_a_connection_that_sends_nothing_for_the_idle_timeout_is_closed_and_a_talking_one_is_not(kernel_index):
    with ElectrumThread(kernel_index, limits=ElectrumLimits(idle_timeout=1.0)) as server:
        with negotiated(server.port) as quiet, negotiated(server.port) as talking:
            quiet.sock.settimeout(0.05)
            deadline = time.monotonic() + 60
            while True:  # the talking client pings while it waits for the quiet one to be closed
                assert talking.result("server.ping") is None and time.monotonic() < deadline
                try:
                    if quiet.sock.recv(1) == b"":
                        break
                except TimeoutError:
                    pass
            assert talking.result("server.ping") is None


def test_per_ip_caps_on_connections_and_subscriptions():
    assert ip_group("2001:db8:1:2:3:4:5:6") == ip_group("2001:db8:1:2::9") == "2001:db8:1:2::/64"
    assert ip_group("2001:db8:1:3::1") != ip_group("2001:db8:1:2::1")
    assert ip_group("::ffff:192.0.2.7") == ip_group("192.0.2.7") == "192.0.2.7"
    gate, caps = Gate(Limits(per_ip_connections=2), ("electrum",), fd_limit=10_000), SubscriptionCaps(per_ip=3)
    a, b = gate.admit("electrum", "2001:db8::1"), gate.admit("electrum", "2001:db8::2")
    assert a and b and gate.admit("electrum", "2001:db8::3") is None and gate.admit("electrum", "2001:db9::1")
    gate.release(a)
    assert gate.admit("electrum", "2001:db8::4")
    assert [caps.take(b) for _ in range(4)] == [True, True, True, False]
    loopback = [gate.admit("electrum", "127.0.0.1") for _ in range(3)]
    assert all(loopback) and all(caps.take(loopback[0]) for _ in range(5))  # loopback is exempt


def test_the_per_ip_caps_hold_on_the_wire(kernel_index):
    gate = Gate(Limits(per_ip_connections=2, per_ip_exempt=()), ("electrum",))
    with ElectrumThread(kernel_index, gate=gate, limits=ElectrumLimits(max_subscriptions_per_ip=2)) as server:
        with negotiated(server.port) as one, negotiated(server.port) as two:
            with RawClient(server.port) as third, pytest.raises((ConnectionResetError, EOFError, BrokenPipeError)):
                third.send("server.version", ["t", "1.4"])
                if third.read() is None:  # refused: closed (or reset) unanswered
                    raise EOFError
            one.result(SP, [*keys(), kernelchain.SAMPLE_TIP])
            two.result(SP, [*keys(kernelchain.OTHER_WALLET), kernelchain.SAMPLE_TIP])
            assert two.call(SP, [PrivateKey().secret.hex(), keys()[1]])["error"] == {"code": -32005, "message": "subscription limit exceeded"}
        deadline = time.monotonic() + 30
        while server.call(_sessions(server)) or server.server.gate.open_connections:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        with negotiated(server.port) as again:  # the two connections are forgotten once closed
            again.result(SP, [*keys(), kernelchain.SAMPLE_TIP])


def test_the_listener_speaks_tls_with_a_given_certificate(kernel_index, tmp_path):
    import ssl
    import subprocess

    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-keyout", str(key), "-out", str(cert), "-days", "1", "-nodes", "-subj", "/CN=localhost"],
        check=True, capture_output=True,
    )  # fmt: skip
    with ElectrumThread(kernel_index, tls=(str(cert), str(key))) as server:
        assert server.url.startswith("ssl://")
        context = ssl.create_default_context(cafile=str(cert))
        context.check_hostname = False
        raw = socket.create_connection(("127.0.0.1", server.port))
        with RawClient(server.port, sock=context.wrap_socket(raw)) as c:
            assert c.result("server.version", ["t", "1.4"])[1] == "1.4"
            assert c.result("server.features")["hosts"] == {"127.0.0.1": {"ssl_port": server.port}}


def test_unsubscribe_and_disconnect_wipe_the_native_copy_of_the_keys(kernel_index):
    from sp_scan import native

    if not native.ENABLED:
        pytest.skip("the reference backend has no native copy")
    with ElectrumThread(kernel_index) as server:
        with negotiated(server.port) as c:
            c.result(SP, [*keys(), 0, [1, 7]])
            c.history()
            assert any(r.scan_key32 == WALLET.scan_key32 for r in list(native._scanners))
            c.result("blockchain.silentpayments.unsubscribe", keys())
            c.result(SP, [*keys(kernelchain.OTHER_WALLET), 0])
            c.history()
        deadline = time.monotonic() + 30
        while any(r.scan_key32 in (WALLET.scan_key32, kernelchain.OTHER_WALLET.scan_key32) for r in list(native._scanners)):
            assert time.monotonic() < deadline, "a native copy of a key outlived its subscription"
            time.sleep(0.05)


def test_a_mempool_payment_is_notified_once_at_height_0_and_again_with_its_height_when_it_confirms(kernel_copy, tmp_path):
    """The index's mempool table, kept by a following sync over the stand-in node's mempool (kernel-signed txs).
    Frigate's new-block scan reports every paying tx of the new blocks, those first sent from the mempool too."""
    from node_mempool import NodeMempool, wait_for
    from sp_scan.index import Index
    from sp_scan.node import RestNode

    chain, pool = kernel_copy, NodeMempool(kernel_copy)
    path = tmp_path / "m.db"
    stop = threading.Event()

    def progress(stats) -> None:
        if stop.is_set():
            raise KeyboardInterrupt

    with kernelchain.rest_server(chain, mempool=pool) as rest, Index.create(path, "regtest") as index:
        index.sync(RestNode(rest.url))
        follower = threading.Thread(target=_follow, args=(index, RestNode(rest.url), progress), daemon=True)
        follower.start()
        try:
            with ElectrumThread(path) as server, negotiated(server.port) as c:
                reply = c.result(SP, [*keys(), 100, [1, 7]])
                assert flat(c.history()) == expected(chain, start=100)
                tx = chain.transaction("unconfirmed", [chain.reserve.pop()], [("wallet", 1), ("other",)])
                pool.accept(tx.tx.serialize())
                note = c.notification(SP)["params"]
                assert note == {"subscription": reply, "progress": 1.0, "history": [{"height": 0, "tx_hash": tx.txid32[::-1].hex(), "tweak_key": tx.tweak33.hex()}]}
                other = chain.transaction("confirmed-directly", [chain.reserve.pop()], [("wallet", None), ("p2wpkh",)])
                height = chain.mine([tx, other]).height
                pool.chain_moved()
                note = c.notification(SP)["params"]  # the block: both its payments, the one seen in the mempool again
                mined = [{"height": height, "tx_hash": t.txid32[::-1].hex(), "tweak_key": t.tweak33.hex()} for t in (tx, other)]
                assert note["history"] == sorted(mined, key=lambda e: e["tx_hash"])
                wait_for("the mempool emptied", lambda: not index.mempool_tweaks().txs)
                assert c.call("server.ping")["result"] is None and not [n for n in c.notifications if n["method"] == SP]
        finally:
            stop.set()
            follower.join(60)


def _follow(index, node, progress) -> None:
    try:
        index.sync(node, follow=True, interval=0.05, progress=progress, mempool=True)
    except KeyboardInterrupt:
        pass


def test_a_backend_that_goes_away_gives_errors_not_hangs_and_is_reconnected_with_the_subscriptions(kernel_index, electrumx, kernel_chain):
    relay = Relay(electrumx.port)
    try:
        with ElectrumThread(kernel_index, backend=f"tcp://127.0.0.1:{relay.port}") as server, negotiated(server.port) as c:
            header = c.result("blockchain.headers.subscribe")
            record = next(t for t in kernel_chain.active()[104].txs if t.payments)
            scripthash = hashlib.sha256(bytes(record.tx.vout[record.payments[0].vout].scriptPubKey)).digest()[::-1].hex()
            status = c.result("blockchain.scripthash.subscribe", [scripthash])
            relay.down()
            deadline = time.monotonic() + 30
            while "error" not in (answer := c.call("blockchain.block.header", [5])):
                assert time.monotonic() < deadline
            assert answer["error"]["code"] == -32000 and answer["error"]["message"] == "Backend Electrum server unavailable"
            assert isinstance(answer["error"]["data"], str)
            assert c.result(SP, [*keys(), kernelchain.SAMPLE_TIP])["address"] == address()  # served from the index meanwhile
            relay.up()
            while "error" in (answer := c.call("blockchain.block.header", [5])):
                assert time.monotonic() < deadline + 60
            assert answer["result"] == kernel_chain.block(5)[:80].hex()
            assert c.notification("blockchain.headers.subscribe")["params"] == [header]  # renewed after the reconnect
            assert c.result("blockchain.scripthash.subscribe", [scripthash]) == status
    finally:
        relay.close()


def test_sp_scan_serve_starts_the_electrum_listener_beside_the_http_one_and_stops_on_sigterm(kernel_index, kernel_chain, electrumx):
    import re
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "sp_scan.cli", "serve", "--db", str(kernel_index), "--port", "0", "--electrum-port", "0",
         "--electrum-backend", electrumx.url, "--electrum-limit", "labels=2"],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        first = proc.stderr.readline()
        port = int(re.search(r"sp-scan serve: tcp://127\.0\.0\.1:(\d+) \(electrum\)", first).group(1))
        assert "http://127.0.0.1:" in proc.stderr.readline()
        with negotiated(port) as c:
            assert c.result("blockchain.block.header", [3]) == kernel_chain.block(3)[:80].hex()
            assert c.call(SP, [*keys(), 0, [1, 7, 9]])["error"]["code"] == -32602  # labels=2
            assert c.result(SP, [*keys(), 0, [1, 7]])["labels"] == [0, 1, 7]
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err


@pytest.mark.parametrize(
    "args, message",
    [
        (["--electrum-backend", "tcp://127.0.0.1:1"], "need --electrum-port"),
        (["--electrum-port", "0", "--electrum-backend", "http://x:1"], "tcp://HOST:PORT or ssl://HOST:PORT"),
        (["--electrum-port", "0", "--electrum-backend", "tcp://x"], "has no port"),
        (["--electrum-port", "0", "--electrum-limit", "labels=0"], "NAME=N"),
        (["--electrum-port", "0", "--electrum-limit", "bogus=3"], "NAME=N"),
        (["--electrum-port", "0", "--electrum-limit", "connections-per-ip=3"], "use --per-ip-connections"),
        (["--electrum-port", "0", "--per-ip-exempt", "10.0.0.0/33"], "'10.0.0.0/33' is not an IPv4 or IPv6 network"),
    ],
    ids=["no-port", "scheme", "no-backend-port", "zero-limit", "unknown-limit", "shared-limit", "bad-exempt"],
)
def test_bad_electrum_options_are_one_line_and_exit_2(kernel_index, args, message):
    from click.testing import CliRunner

    from sp_scan.cli import app

    result = CliRunner().invoke(app, ["serve", "--db", str(kernel_index), *args])
    assert result.exit_code == 2 and message in result.output, result.output


def test_concurrent_subscriptions_share_the_partition_reads_and_each_reports_in_order(kernel_index, kernel_chain, monkeypatch):
    from sp_scan.server.electrum import frigate

    monkeypatch.setattr(frigate, "MIN_PROGRESS_GAP", 0.0)  # every partition's progress is sent
    cells = kernelchain.SAMPLE_TIP // 5 + 1
    with ElectrumThread(kernel_index, partition_blocks=5) as server:
        results: list = [None] * 10
        barrier = threading.Barrier(10)

        def run(i: int) -> None:
            with negotiated(server.port) as c:
                barrier.wait()
                reply = c.result(SP, [*keys(), 0, [1, 7]])
                results[i] = (reply, c.history())

        threads = [threading.Thread(target=run, args=(i,)) for i in range(10)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        for reply, notes in results:
            check_history(notes, reply)
            assert flat(notes) == expected(kernel_chain)
            assert len(notes) >= cells // 2 and len({n["progress"] for n in notes}) == len(notes)  # rising, per partition
        passes = server.call(_passes(server))
    assert passes <= 3 * cells, f"{passes} partition reads for 10 subscriptions over {cells} partitions"


async def _passes(server) -> int:
    return server.server.state.scans.passes


def test_a_long_history_scan_sends_empty_progress_notifications_while_a_partition_read_hangs(kernel_index, kernel_chain, monkeypatch):
    from sp_scan.server.electrum import frigate, passes, session

    monkeypatch.setattr(frigate, "PROGRESS_EVERY", 0.3)
    monkeypatch.setattr(frigate, "MIN_PROGRESS_GAP", 60.0)  # partitions without payments stay quiet
    monkeypatch.setattr(session, "PROGRESS_TICK", 0.05)
    turn, reads = passes.ScanService._turn, threading.Semaphore(0)

    def hanging_turn(self, *args):  # a stuck disk: each partition read waits until the client got an empty note
        reads.acquire()
        return turn(self, *args)

    monkeypatch.setattr(passes.ScanService, "_turn", hanging_turn)
    with ElectrumThread(kernel_index, partition_blocks=10) as server, negotiated(server.port) as c:
        try:
            reply = c.result(SP, [*keys(), 0, [1, 7]])
            notes = []
            while not notes or notes[-1]["progress"] < 1.0:  # no note in the socket's 60 s: the scan never ends
                notes.append(c.notification(SP)["params"])
                if not notes[-1]["history"]:
                    reads.release()
        finally:
            reads.release(1_000_000)  # the server's stop waits for its scan thread
        check_history(notes, reply)
        assert flat(notes) == expected(kernel_chain)
        empty = [n for n in notes[:-1] if not n["history"]]
        assert len(empty) >= len(kernel_chain.active()) // 10, notes  # one per partition read at least


# --- the aiorpcx contracts the listener relies on (sp_scan/server/electrum/rpc.py) ---


class _Probe:
    """A bare `rpc.LineSession` on 127.0.0.1 run by its own loop thread; what its callbacks saw goes to `seen`.

    Methods: "sub" answers "ok" and, after its reply, records aiorpcx's count of sent messages and sends
    a "note" notification; "after-sub" waits until a "sub" of the same batch has returned, then answers;
    "big" answers 4 MB (counted in `built`). `limits` are set on each session (max_in_flight, max_unsent).
    """

    def __init__(self, max_send_delay: float = 30.0, **limits) -> None:
        from sp_scan.server.electrum.rpc import LineSession, serve_lines

        seen, sessions, built = [], set(), []
        self.seen, self.sessions, self.built = seen, sessions, built

        class Session(LineSession):
            max_line = 1000

            def __init__(self, transport) -> None:
                super().__init__(transport)
                self.max_send_delay = max_send_delay
                for name, value in limits.items():
                    setattr(self, name, value)
                self.returned = asyncio.Event()
                sessions.add(self)

            async def serve_request(self, request):
                if request.method == "sub":
                    self.after_reply(self.replied)
                    self.returned.set()
                    return "ok"
                if request.method == "after-sub":
                    await self.returned.wait()
                    for _ in range(3):
                        await asyncio.sleep(0)  # the "sub" task finishes: its part of the batch reply is built
                    return "later"
                if request.method == "big":
                    built.append(request.method)
                    return "b" * 4_000_000
                return None

            def replied(self) -> None:
                seen.append(("after reply", self.send_count))
                asyncio.ensure_future(self.send_notification("note", ["n"]))

            def drop(self, why: str) -> None:
                seen.append(("drop", why))
                super().drop(why)

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = asyncio.run_coroutine_threadsafe(serve_lines(Session, "127.0.0.1", 0), self.loop).result(10)
        self.port = self.server.sockets[0].getsockname()[1]

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        async def close() -> None:
            self.server.close()
            await asyncio.gather(*(s.close(force_after=1) for s in self.sessions))

        asyncio.run_coroutine_threadsafe(close(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def test_aiorpcx_writes_a_reply_before_what_its_after_reply_callbacks_send():
    with _Probe() as probe, RawClient(probe.port, timeout=20) as c:
        c.send_line(b'{"jsonrpc": "2.0", "id": 1, "method": "sub", "params": []}')
        assert c.read() == {"jsonrpc": "2.0", "result": "ok", "id": 1}
        assert c.read() == {"jsonrpc": "2.0", "method": "note", "params": ["n"]}
        assert probe.seen == [("after reply", 1)]  # the callback ran once aiorpcx had sent the reply


def test_aiorpcx_writes_a_batch_reply_before_what_any_of_its_requests_after_reply_callbacks_send():
    with _Probe() as probe, RawClient(probe.port, timeout=20) as c:
        c.send_line(b'[{"jsonrpc": "2.0", "id": 1, "method": "sub"}, {"jsonrpc": "2.0", "id": 2, "method": "after-sub"}]')
        assert sorted(c.read(), key=lambda r: r["id"]) == [{"jsonrpc": "2.0", "result": "ok", "id": 1}, {"jsonrpc": "2.0", "result": "later", "id": 2}]
        assert c.read() == {"jsonrpc": "2.0", "method": "note", "params": ["n"]}
        c.send_line(b'{"jsonrpc": "2.0", "method": "sub"}')  # a notification: no reply to wait for
        assert c.read() == {"jsonrpc": "2.0", "method": "note", "params": ["n"]}
        assert probe.seen == [("after reply", 1), ("after reply", 2)]  # the batch reply and the first note were sent


def test_aiorpcx_reports_a_line_over_max_line_which_is_answered_and_closed():
    with _Probe() as probe, RawClient(probe.port, timeout=20) as c:
        c.sock.sendall(b'{"jsonrpc": "2.0", "id": 1, "method": "x", "params": ["' + b"a" * 5000)
        assert c.read() == {"jsonrpc": "2.0", "error": {"code": -32600, "message": "request too large"}, "id": None}
        assert c.read() is None
        assert probe.seen == []


def _asks_and_never_reads(probe: _Probe, lines: bytes) -> socket.socket:
    """A client that sends `lines` to the probe and reads nothing; returned once the probe has dropped it."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(30)
    sock.connect(("127.0.0.1", probe.port))
    sock.sendall(lines)
    deadline = time.monotonic() + 60
    while probe.seen != [("drop", "it does not read what it is sent")]:
        assert time.monotonic() < deadline, probe.seen
        time.sleep(0.02)
    return sock


def test_aiorpcx_aborts_a_client_that_does_not_read_after_max_send_delay_and_the_session_reports_it():
    with _Probe(max_send_delay=0.5) as probe:
        sock = _asks_and_never_reads(probe, b'{"jsonrpc": "2.0", "id": 1, "method": "big"}\n{"jsonrpc": "2.0", "id": 2, "method": "big"}\n' * 2)
        with pytest.raises((ConnectionResetError, TimeoutError)):
            while sock.recv(1 << 20):
                pass
            raise ConnectionResetError  # EOF: closed too
        sock.close()


def test_no_answer_is_built_while_a_connections_unsent_bytes_are_at_max_unsent():
    """Ten 4 MB answers asked at once by a client that never reads: once one waits unsent (1 MiB allowed),
    the others are not built; the socket itself takes at most tcp_wmem's maximum."""
    with _Probe(max_send_delay=1.0, max_in_flight=100, max_unsent=1 << 20) as probe:
        _asks_and_never_reads(probe, b'{"jsonrpc": "2.0", "id": 1, "method": "big"}\n' * 10).close()
    wmem_max = int(open("/proc/sys/net/ipv4/tcp_wmem").read().split()[2])
    assert len(probe.built) <= 1 + -(-(wmem_max + 65536) // 4_000_000)


class _CountingTxids(bytes):
    """A partition's txids that count the bytes each `find` may examine (its span)."""

    examined = 0

    def find(self, sub, start=0, end=None):  # noqa: D102
        stop = len(self) if end is None else min(end, len(self))
        type(self).examined += max(stop - start, 0)
        return super().find(sub, start, end)


def test_a_history_entry_costs_no_search_of_the_partition(kernel_index, kernel_chain):
    """A subscribe's cost per history entry must not grow with the partition (a wallet paid in 17% of txs
    took twice `index scan`, each entry's tweak found by searching the partition's txids from the start):
    the entries come from the scan's tx positions, and the txids are searched for at most one block's
    worth per entry."""
    import dataclasses

    from sp_scan.index import Index
    from sp_scan.server.electrum.passes import ScanService, Watch

    got: list = []
    _CountingTxids.examined = 0
    watch = Watch(WALLET.receiver(), 0, None, lambda entries, progress: got.extend(entries), lambda message: None)
    service = ScanService(kernel_index)
    with Index.open(kernel_index, readonly=True) as index:
        tip = index.tip()[0]
        partition = index.partition(0, tip)
    blocks = memoryview(partition.tx_starts).cast("I").tolist() + [partition.n_tx]
    largest_block = 32 * max(b - a for a, b in zip(blocks, blocks[1:]))
    service._settle(watch, tip, 0)
    service._scan(dataclasses.replace(partition, txids=_CountingTxids(partition.txids)), [watch], 0, tip, tip)
    assert [{"height": e.height, "tx_hash": e.txid32[::-1].hex(), "tweak_key": e.tweak33.hex()} for e in got] == expected(kernel_chain)
    assert _CountingTxids.examined <= len(got) * largest_block
