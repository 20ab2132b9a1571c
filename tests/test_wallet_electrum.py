"""The wallet's Electrum sources, Frigate's remote scanning (`--electrum`) and Cake's tweak stream (`--cake`),
against `sp-scan serve --electrum-port` over kernel-validated chains, with ElectrumX (e-x) as its backend for
headers, transactions, merkle proofs and script histories, through a stand-in that can hold, cut off or
rewrite what the server sends (tests/remote_support.py).
"""

from __future__ import annotations

import json
import struct
import subprocess

import pytest
from coincurve import PrivateKey

import kernelchain as kc
import serving
from blindbit_support import INVENTED, Proxy, invent
from electrum_support import ElectrumThread, ElectrumX, RawClient
from index_support import wait_until
from remote_support import JsonRpcProxy
from sp_scan.network import get as get_network
from sp_scan.wire import sha256d
from sp_scan.wallet import Wallet
from sp_scan.wallet.sources import MAX_BLOCK_TXS
from sp_scan.wallet.sources import electrum as electrum_source
from test_cli import assert_fails, invoke
from test_headers import mine
from wallet_support import WALLET_CLI, W, create, index_scan, kill_9_while_syncing, listed, paid, scan_key_file, sync, wallet_tip

SP = "blockchain.silentpayments.subscribe"
TWEAKS = "blockchain.tweaks.subscribe"
PAYMENT = 101  # the first block paying the test wallet
KINDS = ["electrum", "cake"]
REGTEST = get_network("regtest").pow


def start_electrumx(chain, datadir):
    """ElectrumX over the chain's RPC stand-in, answering at once (padding_wait 0: it would hold each small answer up to 1 s)."""
    rpc = kc.rpc_server(chain).__enter__()
    server = ElectrumX(int(rpc.url.rsplit(":", 1)[1]), datadir, chain.tip_height, padding_wait=0.0)
    server.rpc = rpc
    return server.start()


def stop_electrumx(server) -> None:
    server.stop()
    server.rpc.__exit__(None, None, None)


@pytest.fixture(scope="module")
def electrumx(kernel_chain, tmp_path_factory):
    server = start_electrumx(kernel_chain, tmp_path_factory.mktemp("electrumx"))
    try:
        yield server
    finally:
        stop_electrumx(server)


@pytest.fixture(scope="module")
def electrum(kernel_index, electrumx):
    with ElectrumThread(kernel_index, backend=electrumx.url) as server:
        yield server


@pytest.fixture
def proxy(electrum):
    with JsonRpcProxy(electrum.port) as p:
        yield p


def source(kind: str, port: int) -> list[str]:
    return ["--electrum", f"127.0.0.1:{port}", "--share-scan-key"] if kind == "electrum" else ["--cake", f"127.0.0.1:{port}"]


def outpoint(row: dict) -> bytes:
    return bytes.fromhex(row["txid"])[::-1] + struct.pack("<I", row["vout"])


@pytest.mark.parametrize("kind", KINDS)
def test_an_electrum_sync_lists_what_index_scan_lists_with_each_spends_txid(kind, kernel_chain, kernel_index, proxy, tmp_path):
    path = create(tmp_path)
    result = sync(path, *source(kind, proxy.port))
    assert result.exit_code == 0, result.output
    rows = listed(path)
    assert rows == index_scan(kernel_index) == paid(kernel_chain)
    assert {r["label"] for r in rows} == {None, 0, 1, 7} and any(r["spent"] for r in rows) and not all(r["spent"] for r in rows)
    spending = {op: t.txid32 for b in kernel_chain.active() for t in b.txs for op in t.inputs36}
    with Wallet.open(path) as w:
        assert all(o.spent_txid32 == spending.get(o.outpoint36) for o in w.outputs())
    methods = proxy.methods()
    assert methods[0] == "server.version" and methods.count("server.version") == 1  # Sparrow's order, one connection
    proven = {m["params"][0] for m in proxy.seen if m.get("method") == "blockchain.transaction.get_merkle"}
    assert {r["txid"] for r in rows} <= proven  # every paying tx proven in its block
    if kind == "electrum":
        assert [m["params"][2:] for m in proxy.seen if m.get("method") == SP] == [[f"0-{kc.SAMPLE_TIP}", [1, 7]]]
    else:
        asked = [m["params"] for m in proxy.seen if m.get("method") == TWEAKS]
        assert asked == [[h, 1, True] for h in range(kc.SAMPLE_TIP + 1)]
        assert len(proven) < 2 * len({r["txid"] for r in rows})  # only the txs holding a k = 0 key, and the spends
    again = sync(path, *source(kind, proxy.port))
    assert again.exit_code == 0 and "0 block(s) scanned" in again.stdout and listed(path) == rows


def test_frigate_is_not_sent_the_scan_key_without_share_scan_key(proxy, tmp_path):
    path = create(tmp_path)
    assert_fails(sync(path, "--electrum", f"127.0.0.1:{proxy.port}"), "--share-scan-key")
    assert proxy.seen == []
    assert_fails(sync(path, "--cake", f"127.0.0.1:{proxy.port}", "--share-scan-key"), "--share-scan-key goes with --electrum")
    other = scan_key_file(tmp_path, kc.OTHER_WALLET)
    assert_fails(invoke("wallet", "sync", str(path), "--scan-key-file", str(other), "--electrum", f"127.0.0.1:{proxy.port}", "--share-scan-key"), "not")
    assert proxy.seen == []  # a key that is not the wallet's is never sent


def test_a_fork_between_syncs_rolls_back_and_rescans_over_both(kernel_copy, tmp_path):
    with kc.rest_server(kernel_copy) as rest:
        db = serving.synced_index(tmp_path / "index.db", rest.url)
        (tmp_path / "electrumx").mkdir()
        backend = start_electrumx(kernel_copy, tmp_path / "electrumx")
        try:
            with ElectrumThread(db, backend=backend.url) as server:
                paths = {kind: create(tmp_path, f"{kind}.wallet") for kind in KINDS}
                for kind, path in paths.items():
                    assert sync(path, *source(kind, server.port)).exit_code == 0
                reorg = kc.make_reorg(kernel_copy)
                serving.sync(db, rest.url)
                backend.wait_for(kernel_copy.tip_height)
                for kind, path in paths.items():
                    result = sync(path, *source(kind, server.port))
                    assert result.exit_code == 0, result.output
                    assert "1 fork(s) rolled back 2 block(s)" in result.stdout
                    assert listed(path) == paid(kernel_copy) == index_scan(db)
                    assert reorg.added.txid32[::-1].hex() in {r["txid"] for r in listed(path)}
        finally:
            stop_electrumx(backend)


def _nth(method: str, n: int):
    """A pred holding for the server's n-th answer to `method` (1-based)."""
    count = [0]

    def pred(message, request):
        if request is not None and request.get("method") == method:
            count[0] += 1
            return count[0] == n
        return False

    return pred


def _tweaks_of(height: int):
    """A pred holding for Cake's notification of block `height`."""
    return lambda m, r: m.get("method") == TWEAKS and isinstance(m.get("params"), list) and str(height) in m["params"][0]


def resumes(line: str, tip: int) -> bool:
    """The error line names where the next sync starts."""
    return line.endswith(f"resume at {tip + 1})" if tip >= 0 else "start at 0)")


# Where a sync is held: Cake, at a block's tweaks (many are asked ahead, so the wallet is somewhere below it);
# Frigate, at the window's history, then at the script histories asked when block 101 and block 103 found outputs.
def holds(kind: str) -> list:
    """(pred, the block it holds the sync at) of each hold, fresh (the counting ones count from here)."""
    if kind == "cake":
        return [(_tweaks_of(30), 30), (_tweaks_of(105), 105), (_tweaks_of(108), 108)]
    return [(lambda m, r: m.get("method") == SP, 0), (_nth("blockchain.scripthash.get_history", 1), 101), (_nth("blockchain.scripthash.get_history", 3), 103)]


@pytest.mark.parametrize("kind", KINDS)
def test_kill_9_mid_sync_then_resume_gives_the_same_wallet(kind, kernel_chain, proxy, tmp_path):
    path = create(tmp_path)
    tips = []
    for pred, height in holds(kind):
        proxy.hold(pred)
        kill_9_while_syncing(path, source(kind, proxy.port), lambda: proxy.held > 0, f"a hold at block {height}")
        proxy.release()
        tips.append(wallet_tip(path))
    assert sync(path, *source(kind, proxy.port)).exit_code == 0
    assert tips == sorted(tips) and all(t < h for t, (_, h) in zip(tips, holds(kind)))
    assert listed(path) == paid(kernel_chain)


@pytest.mark.parametrize("kind", KINDS)
def test_a_server_that_dies_mid_sync_fails_in_one_line_naming_the_height_to_resume_at(kind, kernel_chain, proxy, tmp_path):
    pred, height = holds(kind)[-1]
    proxy.hold(pred)
    path = create(tmp_path)
    args = [*WALLET_CLI, "sync", str(path), "--scan-key-file", str(scan_key_file(tmp_path)), *source(kind, proxy.port), "--retries", "1"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: proxy.held > 0, proc, f"a hold at block {height}")
        proxy.stop_answering(after=0)  # every connection cut, new ones refused
    finally:
        proxy.release()
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and "Traceback" not in err
    *notices, line = err.splitlines()
    assert line.startswith("sp-scan: error: cannot reach the Electrum server") and len(notices) == 1 and notices[0].endswith("retry 1 of 1 in 0.5 s")
    tip = wallet_tip(path)
    assert resumes(line, tip) and tip < height
    proxy.resume_answering()
    assert sync(path, *source(kind, proxy.port)).exit_code == 0
    assert listed(path) == paid(kernel_chain)


@pytest.mark.parametrize("kind", KINDS)
def test_a_connection_cut_mid_stream_is_opened_again(kind, kernel_chain, proxy, tmp_path):
    proxy.cut_once(_tweaks_of(60) if kind == "cake" else _nth("blockchain.scripthash.get_history", 2))
    path = create(tmp_path)
    result = sync(path, *source(kind, proxy.port))
    assert result.exit_code == 0, result.output
    assert listed(path) == paid(kernel_chain) and proxy.methods().count("server.version") == 2


# ---- hostile answers ----


def _answer(method: str, change):
    """Rewrite the result of every call of `method` (change(result, params) -> new result, or None to keep it)."""

    def tamper(message, request):
        if request is not None and request.get("method") == method and "result" in message:
            new = change(message["result"], request["params"])
            return None if new is None else {**message, "result": new}
        return None

    return tamper


def _history(change):
    """Rewrite the Frigate history notifications (change(entries) -> entries)."""

    def tamper(message, request):
        if message.get("method") == SP and message["params"]["history"]:
            return {**message, "params": {**message["params"], "history": change(message["params"]["history"])}}
        return None

    return tamper


def _tweaks(change):
    """Rewrite Cake's block PAYMENT (change(txs) -> txs)."""

    def tamper(message, request):
        params = message.get("params")
        if message.get("method") == TWEAKS and isinstance(params, list) and str(PAYMENT) in params[0]:
            return {**message, "params": [{str(PAYMENT): change(params[0][str(PAYMENT)])}]}
        return None

    return tamper


def _first_tx(change):
    return _tweaks(lambda txs: {k: (change(v) if i == 0 else v) for i, (k, v) in enumerate(txs.items())})


def _paying_tx(chain, change):
    """Change Cake's entry of the block's first tx paying the wallet (a hit)."""
    ours = next(t.txid32[::-1].hex() for t in chain.active()[PAYMENT].txs if any(p.wallet == W.name for p in t.payments))
    return _tweaks(lambda txs: {k: (change(v) if k == ours else v) for k, v in txs.items()})


def _first_output(tx, item):
    vout = next(iter(tx["output_pubkeys"]))
    return {**tx, "output_pubkeys": {**tx["output_pubkeys"], vout: item(tx["output_pubkeys"][vout])}}


def _bad_merkle(result, params):
    return {**result, "pos": result["pos"] ^ 1} if params[1] == PAYMENT and result["merkle"] else None


def _other_tx(result, params):
    raw = bytearray(bytes.fromhex(result))
    raw[-1] ^= 1  # locktime: another txid
    return raw.hex()


def _broken_headers(result, params):
    raw = bytearray(bytes.fromhex(result["hex"]))
    if len(raw) >= 160:
        raw[80 + 4] ^= 1  # the second header names another parent
    return {**result, "hex": raw.hex()}


HOSTILE = {
    ("electrum", "a tweak of 32 bytes"): (_history(lambda h: [{**h[0], "tweak_key": h[0]["tweak_key"][:64]}, *h[1:]]), "33 bytes of hex"),
    ("electrum", "a txid that is not hex"): (_history(lambda h: [{**h[0], "tx_hash": "zz" * 32}, *h[1:]]), "32 bytes of hex"),
    ("electrum", "a height beyond the range"): (_history(lambda h: [{**h[0], "height": 5000}, *h[1:]]), "height 5000"),
    ("electrum", "a tweak that is not a point"): (_history(lambda h: [{**h[0], "tweak_key": "02" + "ff" * 32}, *h[1:]]), "not a valid point"),
    ("electrum", "a page of 10,001 entries"): (_history(lambda h: h * (10_001 // len(h) + 1)), "malformed"),
    ("electrum", "another wallet's address"): (_answer(SP, lambda r, p: {**r, "address": r["address"][:-4] + "qqqq"}), "not the wallet's"),
    ("electrum", "labels not scanned"): (_answer(SP, lambda r, p: {**r, "labels": [0]}), "scans labels"),
    ("electrum", "no silent payments"): (_answer("server.features", lambda r, p: {k: v for k, v in r.items() if k != "silent_payments"}), "offers no silent payments"),
    ("electrum", "a tx that is another"): (_answer("blockchain.transaction.get", _other_tx), "hashes to"),
    ("electrum", "a proof that leads elsewhere"): (_answer("blockchain.transaction.get_merkle", _bad_merkle), "merkle root"),
    ("electrum", "headers that do not chain"): (_answer("blockchain.block.headers", _broken_headers), "parent"),
    ("cake", "an oversized block"): (_tweaks(lambda txs: {f"{i:064x}": next(iter(txs.values())) for i in range(MAX_BLOCK_TXS + 1)}), "more than a block holds"),
    ("cake", "a tweak of 32 bytes"): (_first_tx(lambda tx: {**tx, "tweak": tx["tweak"][:64]}), "33 bytes of hex"),
    ("cake", "a key that is not hex"): (_first_tx(lambda tx: _first_output(tx, lambda o: ["xy" * 32, *o[1:]])), "32 bytes of hex"),
    ("cake", "an impossible amount"): (_first_tx(lambda tx: _first_output(tx, lambda o: [o[0], 21_000_001 * 10**8])), "amount"),
    ("cake", "a spend marker of nothing"): (_first_tx(lambda tx: _first_output(tx, lambda o: [*o[:2], "spent"])), "spend marker"),
    ("cake", "a tweak that is not a point"): (_first_tx(lambda tx: {**tx, "tweak": "02" + "ff" * 32}), "not a valid point"),
    ("cake", "a vout that is not a number"): (_first_tx(lambda tx: {**tx, "output_pubkeys": {"x": list(tx["output_pubkeys"].values())[0]}}), "<vout>"),
    ("cake", "a proof that leads elsewhere"): (_answer("blockchain.transaction.get_merkle", _bad_merkle), "merkle root"),
    ("cake", "headers that do not chain"): (_answer("blockchain.block.headers", _broken_headers), "parent"),
}


@pytest.mark.parametrize("case", HOSTILE, ids=[f"{k}-{c}" for k, c in HOSTILE])
def test_a_hostile_answer_is_refused_in_one_line_and_the_wallet_keeps_every_block_before_it(case, proxy, tmp_path):
    kind, _ = case
    tamper, needle = HOSTILE[case]
    proxy.tamper = tamper
    path = create(tmp_path)
    line = assert_fails(sync(path, *source(kind, proxy.port), "--retries", "0"), needle)
    tip = wallet_tip(path)
    assert resumes(line, tip) and tip < PAYMENT and listed(path) == []


def _with_headers(replace: dict[int, bytes]):
    """Rewrite every answer that holds the header of one of these heights (ranges, single headers, the tip)."""

    def tamper(message, request):
        if request is None or "result" not in message:
            return None
        method, params, result = request.get("method"), request.get("params"), message["result"]
        if method == "blockchain.block.headers":
            raw = bytearray(bytes.fromhex(result["hex"]))
            for height, header80 in replace.items():
                if 0 <= height - params[0] < result["count"]:
                    raw[80 * (height - params[0]) : 80 * (height - params[0] + 1)] = header80
            return {**message, "result": {**result, "hex": raw.hex()}}
        if method == "blockchain.block.header" and params[0] in replace:
            return {**message, "result": replace[params[0]].hex()}
        if method == "blockchain.headers.subscribe" and result["height"] in replace:
            return {**message, "result": {**result, "hex": replace[result["height"]].hex()}}
        return None

    return tamper


def server_headers(port: int, heights) -> dict[int, bytes]:
    with RawClient(port) as client:
        client.result("server.version", ["test", "1.4"])
        return {h: bytes.fromhex(client.result("blockchain.block.header", [h])) for h in heights}


def _rebuilt(header80: bytes, bits: int) -> bytes:
    """The header with other nBits, its nonce ground until its hash meets them."""
    return mine(header80[4:36], struct.unpack_from("<I", header80, 68)[0], bits, REGTEST, salt=header80)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("bits", "needle"), [(0x03000001, "does not meet its own nBits 03000001"), (0x2000FFFF, "has nBits 2000ffff, not the 207fffff")], ids=["own-nbits", "rules"])
def test_a_tip_header_that_breaks_the_proof_of_work_rules_is_refused(kind, bits, needle, proxy, tmp_path):
    (tip,) = server_headers(proxy.port, [kc.SAMPLE_TIP]).values()
    forged = tip[:72] + struct.pack("<I", bits) + tip[76:] if bits == 0x03000001 else _rebuilt(tip, bits)
    proxy.tamper = _with_headers({kc.SAMPLE_TIP: forged})
    path = create(tmp_path)
    assert_fails(sync(path, *source(kind, proxy.port), "--retries", "0"), f"the header of block {kc.SAMPLE_TIP} {needle}")
    assert wallet_tip(path) == -1


def test_a_branch_with_no_more_work_than_the_wallets_is_not_followed(kernel_chain, proxy, tmp_path):
    path = create(tmp_path)
    assert sync(path, *source("cake", proxy.port)).exit_code == 0
    before = listed(path)
    real = server_headers(proxy.port, [kc.SAMPLE_TIP - 2, kc.SAMPLE_TIP - 1, kc.SAMPLE_TIP])
    first = mine(sha256d(real[kc.SAMPLE_TIP - 2]), struct.unpack_from("<I", real[kc.SAMPLE_TIP - 1], 68)[0], 0x207FFFFF, REGTEST, salt=b"other branch")
    second = mine(sha256d(first), struct.unpack_from("<I", real[kc.SAMPLE_TIP], 68)[0], 0x207FFFFF, REGTEST, salt=b"other branch")
    proxy.tamper = _with_headers({kc.SAMPLE_TIP - 1: first, kc.SAMPLE_TIP: second})  # two other blocks: the same work
    line = assert_fails(sync(path, *source("cake", proxy.port), "--retries", "0"), f"leaves the wallet's above block {kc.SAMPLE_TIP - 2} with no more work than the wallet's 2 block(s)")
    assert "nothing is rolled back" in line and wallet_tip(path) == kc.SAMPLE_TIP and listed(path) == before


def test_verify_with_an_electrum_server_proves_what_blindbit_finds_and_refuses_what_it_cannot_prove(kernel_chain, kernel_index, electrum, tmp_path):
    with serving.ServerThread(kernel_index) as oracle, Proxy(oracle.url) as bb:
        verify = ["--verify-with", f"tcp://127.0.0.1:{electrum.port}"]
        path = create(tmp_path)
        result = sync(path, "--blindbit", bb.url, *verify)
        assert result.exit_code == 0, result.output
        assert listed(path) == paid(kernel_chain)
        txid = invent(bb, PAYMENT, W.scan_pubkey33, W.spend_pubkey33)
        forged = create(tmp_path, "forged.wallet")
        line = assert_fails(sync(forged, "--blindbit", bb.url, *verify), f"lists output {txid}:0 of {INVENTED:,} sats in block {PAYMENT}", "cannot prove it there")
        assert f"resume at {PAYMENT}" in line and wallet_tip(forged) == PAYMENT - 1


def test_cake_outputs_that_are_not_the_hit_txs_own_are_refused(kernel_chain, proxy, tmp_path):
    proxy.tamper = _paying_tx(kernel_chain, lambda tx: {**tx, "output_pubkeys": {v: [o[0], o[1] + 1, *o[2:]] for v, o in tx["output_pubkeys"].items()}})
    path = create(tmp_path)
    assert_fails(sync(path, *source("cake", proxy.port)), "are not the transaction's", f"resume at {PAYMENT}")
    assert wallet_tip(path) == PAYMENT - 1


def test_cake_accepts_electrs_spend_markers_and_a_block_it_does_not_send(kernel_chain, proxy, tmp_path):
    marker = {"txid": "ab" * 32, "vin": 0, "confirmed": {"height": 105, "hash": "cd" * 32, "time": 1}}

    def tamper(message, request):
        params = message.get("params")
        if message.get("method") == TWEAKS and isinstance(params, list) and "message" not in params[0]:
            (height, txs), = params[0].items()
            if height == "50":
                return b""  # sent nothing for block 50 (as electrs below its first height)
            return {**message, "params": [{height: {t: {**tx, "output_pubkeys": {v: [*o[:2], marker] if len(o) == 3 else o for v, o in tx["output_pubkeys"].items()}} for t, tx in txs.items()}}]}
        return None

    proxy.tamper = tamper
    path = create(tmp_path)
    assert sync(path, *source("cake", proxy.port)).exit_code == 0
    assert listed(path) == paid(kernel_chain)


@pytest.mark.parametrize("kind", KINDS)
def test_a_reported_output_that_does_not_match_its_tweak_is_never_stored(kind, kernel_chain, proxy, tmp_path):
    stranger = PrivateKey(b"\x07" * 32).public_key.format().hex()  # a point, but not the tx's tweak
    if kind == "electrum":
        proxy.tamper = _history(lambda h: [{**e, "tweak_key": stranger} if e["height"] == PAYMENT else e for e in h])
    else:
        proxy.tamper = _tweaks(lambda txs: {t: {**tx, "tweak": stranger} for t, tx in txs.items()})
    path = create(tmp_path)
    assert sync(path, *source(kind, proxy.port), "--to", str(PAYMENT)).exit_code == 0
    assert listed(path) == [r for r in paid(kernel_chain) if r["height"] < PAYMENT] == [] and wallet_tip(path) == PAYMENT


def test_a_history_that_names_a_spend_which_is_not_one_is_ignored_and_a_false_proof_refused(kernel_chain, proxy, tmp_path):
    spent = [r for r in paid(kernel_chain) if r["spent"]]
    unrelated = next(t for t in kernel_chain.active()[103].txs if t.name == "unrelated")

    def lie(result, params):  # every wallet output's script also "used" by an unrelated tx of block 103
        return [*result, {"height": 103, "tx_hash": unrelated.txid32[::-1].hex()}]

    proxy.tamper = _answer("blockchain.scripthash.get_history", lie)
    path = create(tmp_path)
    assert sync(path, *source("cake", proxy.port)).exit_code == 0
    assert listed(path) == paid(kernel_chain) and len(spent) > 0

    def false_spend(result, params):  # a spend at 106, where no block has the tx
        return [*result, {"height": 106, "tx_hash": unrelated.txid32[::-1].hex()}]

    proxy.tamper = _answer("blockchain.scripthash.get_history", false_spend)
    path = create(tmp_path, "false.wallet")
    assert_fails(sync(path, *source("electrum", proxy.port), "--retries", "0"), "refused blockchain.transaction.get_merkle", "resume at 106")


def test_notifications_of_another_subscription_are_dropped(kernel_chain, proxy, tmp_path):
    def decoy(message, request):
        if message.get("method") == SP and message["params"]["history"]:
            other = {**message["params"], "subscription": {**message["params"]["subscription"], "address": "tsp1other"}}
            fake = [{"height": 101, "tx_hash": "00" * 32, "tweak_key": "02" + "11" * 32}]
            return json_lines([{**message, "params": {**other, "history": fake}}, message])
        return None

    proxy.tamper = decoy
    path = create(tmp_path)
    assert sync(path, *source("electrum", proxy.port)).exit_code == 0
    assert listed(path) == paid(kernel_chain)


def json_lines(messages: list[dict]) -> bytes:
    return b"".join(json.dumps(m).encode() + b"\n" for m in messages)


def test_a_mempool_payment_is_listed_unconfirmed_then_once_at_its_height(kernel_chain, proxy, tmp_path):
    """The server reports block 105's payment as unconfirmed (height 0) to the mempool's subscription (of the tip)."""
    tx = next(t for t in kernel_chain.active()[105].txs if any(p.wallet == W.name for p in t.payments))

    def pending(message, request):
        params = message.get("params")
        if message.get("method") == SP and params["subscription"]["start_height"] == kc.SAMPLE_TIP and params["progress"] == 1.0:
            entry = {"height": 0, "tx_hash": tx.txid32[::-1].hex(), "tweak_key": tx.tweak33.hex()}
            return {**message, "params": {**params, "history": [*params["history"], entry]}}
        return None

    proxy.tamper = pending
    path = create(tmp_path)
    assert sync(path, *source("electrum", proxy.port), "--to", "104", "--mempool").exit_code == 0
    rows = listed(path)
    unconfirmed = [r for r in rows if r["height"] is None]
    assert [r["txid"] for r in unconfirmed] == [tx.txid32[::-1].hex()] and rows[: -len(unconfirmed)] == [r for r in paid(kernel_chain) if r["height"] <= 104 and (r.update(spent=False) or True)]
    assert sync(path, *source("electrum", proxy.port)).exit_code == 0
    assert listed(path) == paid(kernel_chain)


def test_a_line_longer_than_the_bound_is_refused(proxy, tmp_path, monkeypatch):
    monkeypatch.setattr(electrum_source, "MAX_LINE", 10_000)  # the chain's 111 headers are 17,760 hex digits
    path = create(tmp_path)
    assert_fails(sync(path, *source("cake", proxy.port)), "more than 10,000 bytes")
    assert wallet_tip(path) == -1  # the tip's header is checked first, with the 110 headers below it: the long line


def test_tls_checks_the_servers_certificate(kernel_index, electrumx, tmp_path, monkeypatch):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-keyout", str(key), "-out", str(cert), "-days", "1", "-nodes", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost"],
        check=True, capture_output=True,
    )  # fmt: skip
    with ElectrumThread(kernel_index, backend=electrumx.url, tls=(str(cert), str(key))) as server:
        path = create(tmp_path)
        assert_fails(sync(path, "--cake", f"localhost:{server.port}", "--tls", "--retries", "0"), "certificate verify failed")
        assert_fails(sync(path, "--cake", f"localhost:{server.port}", "--retries", "0"))  # plain TCP to a TLS listener: one line
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the server's certificate as the one authority trusted
        result = sync(path, "--cake", f"localhost:{server.port}", "--tls", "--to", "3")
        assert result.exit_code == 0, result.output
        assert wallet_tip(path) == 3


@pytest.mark.parametrize("value", ["0a  ", "0a 0", " 0a0", "0g0a", "0a0a0a", 10, None])
def test_every_source_takes_hex_of_hex_digits_only_and_of_its_width(value):
    """One validator for every source's answers: bytes.fromhex alone takes spaces ("0a  " would be 1 byte
    passed off as 2)."""
    from sp_scan.errors import SourceError
    from sp_scan.wallet.sources.base import hex_bytes

    assert hex_bytes("0A0b", 2, "x") == b"\x0a\x0b"
    with pytest.raises(SourceError, match="x is not 2 bytes of hex"):
        hex_bytes(value, 2, "x")
