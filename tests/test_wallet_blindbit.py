"""The wallet's BlindBit Oracle v1 source: against `sp-scan serve` over kernel-validated chains (through a
proxy that can hold, drop or rewrite answers), and over BlindBit's own recorded answers for four signet blocks.
"""

from __future__ import annotations

import struct

import pytest
from coincurve import PrivateKey

import kernelchain as kc
import serving
from blindbit_support import INFLATED, INVENTED, Proxy, Recorded, height_of, inflate, invent
from index_support import wait_until
from sp_scan import filters
from sp_scan.scan import Receiver
from sp_scan.wallet import Wallet
from sp_scan.wallet.sources import MAX_BLOCK_TXS, Spend
from sp_scan.wallet.sources import blindbit as bb
from sp_scan.wallet.sources.blindbit import BlindBitSource
from sp_scan.wallet.sync import keys0, pair, scan_txs
from test_cli import assert_fails, invoke, json_lines
from wallet_support import W, create, index_scan, kill_9_while_syncing, listed, paid, scan_key_file, sync, unverified, wallet_tip


@pytest.fixture(scope="module")
def oracle(kernel_index):
    """`sp-scan serve` over the sample chain's index."""
    with serving.ServerThread(kernel_index) as server:
        yield server


@pytest.fixture
def proxy(oracle):
    with Proxy(oracle.url) as p:
        yield p


def outpoint(row: dict) -> bytes:
    return bytes.fromhex(row["txid"])[::-1] + struct.pack("<I", row["vout"])


def test_a_blindbit_sync_lists_what_index_scan_lists_asking_utxos_and_spent_index_only_on_filter_hits(kernel_chain, kernel_index, proxy, tmp_path):
    path = create(tmp_path)
    result = sync(path, "--blindbit", proxy.url)
    assert result.exit_code == 0, result.output
    rows = unverified(path)
    assert rows == index_scan(kernel_index) == paid(kernel_chain)
    heights = lambda route: {height_of(p) for p in proxy.paths if p.startswith(route)}  # noqa: E731
    assert heights("/utxos/") == {r["height"] for r in rows}
    assert heights("/spent-index/") == {kernel_chain.spends()[outpoint(r)] for r in rows if r["spent"]}
    for route in ("/tweak-index/", "/filter/new-utxos/", "/filter/spent/"):
        assert heights(route) == set(range(kc.SAMPLE_TIP + 1)) and proxy.count(route) == kc.SAMPLE_TIP + 1
    assert all(p.endswith("?dustLimit=0") for p in proxy.paths if p.startswith("/tweak-index/"))
    near = range(kc.SAMPLE_TIP - bb.REORG_WINDOW + 1, kc.SAMPLE_TIP + 1)  # read between two /block-hash answers each
    assert {height_of(p) for p in proxy.paths if p.startswith("/block-hash/")} == set(near)
    assert proxy.count("/block-hash/") == 2 * len(near) + 1  # and the last round's look at the tip
    assert proxy.count("/tweaks/") == 0


@pytest.mark.parametrize(("dust", "cut"), [(0, True), (1_000_000, False), (1_000_000, True)])
def test_cut_through_and_dust_limit_list_the_payments_of_the_txs_the_server_keeps(dust, cut, kernel_chain, proxy, tmp_path):
    path = create(tmp_path)
    assert sync(path, "--blindbit", proxy.url, "--dust-limit", str(dust), *(["--cut-through"] if cut else [])).exit_code == 0
    kept = {t.txid32[::-1].hex() for h in range(kc.SAMPLE_TIP + 1) for t in kernel_chain.tweaks(h, dust_limit=dust, cut_through=cut)}
    expected = [r for r in paid(kernel_chain) if r["txid"] in kept]
    assert unverified(path) == expected and 0 < len(expected) < len(paid(kernel_chain))
    assert proxy.count("/tweaks/" if cut else "/tweak-index/") == kc.SAMPLE_TIP + 1
    assert all(p.endswith(f"?dustLimit={dust}") for p in proxy.paths if p.startswith(("/tweaks/", "/tweak-index/")))


def test_answers_come_gzipped_and_many_requests_are_in_flight(kernel_chain, proxy, tmp_path):
    proxy.hold(5)  # blocks 0..4 answer; the eight connections then each wait on one request of a later block
    source = BlindBitSource(proxy.url, ahead=32, connections=8)
    with Wallet.open(create(tmp_path)) as w:
        blocks = source.blocks(0, kc.SAMPLE_TIP)
        first = next(blocks)
        wait_until(lambda: proxy.held >= 8, what="8 requests held at once")
        proxy.release()
        blocks.close()
        assert first.height == 0 and first.hash32 == kernel_chain.hash_at(0)
        w.sync(source, W.scan_key32)
        assert unverified(w.path) == paid(kernel_chain)
    unzipped = BlindBitSource(proxy.url)
    unzipped.client._once = _without_gzip(unzipped.client)
    with Wallet.open(create(tmp_path, "plain.wallet")) as w:
        w.sync(unzipped, W.scan_key32)
    assert 0 < source.received < unzipped.received  # the same answers, fewer bytes gzipped


def _without_gzip(client):
    """The client's request with the answer asked for without gzip (no Accept-Encoding)."""
    import http.client

    def once(path: str) -> bytes:
        conn = http.client.HTTPConnection(client.host, client.port, timeout=30)
        try:
            conn.request("GET", client.base + path)
            reply = conn.getresponse()
            body = reply.read()
        finally:
            conn.close()
        client.received += len(body)
        return body

    return once


def test_a_fork_between_syncs_rolls_back_and_rescans_over_blindbit(kernel_copy, tmp_path):
    with kc.rest_server(kernel_copy) as rest:
        db = serving.synced_index(tmp_path / "index.db", rest.url)
        with serving.ServerThread(db) as server, Proxy(server.url) as proxy:
            path = create(tmp_path)
            assert sync(path, "--blindbit", proxy.url).exit_code == 0
            reorg = kc.make_reorg(kernel_copy)
            serving.sync(db, rest.url)
            result = sync(path, "--blindbit", proxy.url)
            assert result.exit_code == 0, result.output
            assert "1 fork(s) rolled back 2 block(s)" in result.stdout
            assert unverified(path) == paid(kernel_copy) == index_scan(db)
            asked = {height_of(p) for p in proxy.paths if p.startswith("/block-hash/")}
            assert set(range(reorg.fork_height, kernel_copy.tip_height + 1)) <= asked  # the old tip, down to the fork; the new tip


def test_a_block_near_the_tip_that_changes_between_answers_is_read_again(kernel_chain, proxy, tmp_path):
    changed = []

    def reorg_once(path, body):  # the first /block-hash of the tip names another block: as if a reorg came and went
        if path == f"/block-hash/{kc.SAMPLE_TIP}" and not changed:
            changed.append(path)
            return {"block_hash": "22" * 32}
        return None

    proxy.tamper = reorg_once
    path = create(tmp_path)
    assert sync(path, "--blindbit", proxy.url).exit_code == 0
    assert unverified(path) == paid(kernel_chain)
    near = range(kc.SAMPLE_TIP - bb.REORG_WINDOW + 1, kc.SAMPLE_TIP + 1)
    assert [proxy.paths.count(f"/tweak-index/{h}?dustLimit=0") for h in near] == [1] * (len(near) - 1) + [2]
    assert {height_of(p) for p in proxy.paths if p.startswith("/block-hash/")} == set(near)


def test_kill_9_mid_sync_then_resume_gives_the_same_wallet_over_blindbit(kernel_chain, proxy, tmp_path):
    path = create(tmp_path)
    tips = []
    for height in (30, 102, 106):
        proxy.hold(height)
        kill_9_while_syncing(path, ["--blindbit", proxy.url], lambda: proxy.held > 0, f"a request for block {height}")
        proxy.release()
        tips.append(wallet_tip(path))
    assert sync(path, "--blindbit", proxy.url).exit_code == 0
    assert tips == sorted(tips) and all(t < 106 for t in tips)
    assert unverified(path) == paid(kernel_chain)


def test_a_server_that_dies_mid_sync_fails_in_one_line_naming_the_height_to_resume_at(kernel_chain, proxy, tmp_path):
    path = create(tmp_path)
    proxy.stop_answering(after=150)
    result = sync(path, "--blindbit", proxy.url, "--retries", "1")
    assert result.exit_code == 2 and "Traceback" not in result.output
    *notices, line = result.stderr.splitlines()
    assert line.startswith("sp-scan: error: cannot reach BlindBit")
    assert len(notices) == 1 and notices[0].endswith("retry 1 of 1 in 0.5 s")  # once, for every request in flight
    tip = wallet_tip(path)
    assert f"resume at {tip + 1}" in line and tip < kc.SAMPLE_TIP
    proxy.resume_answering()
    assert sync(path, "--blindbit", proxy.url).exit_code == 0
    assert unverified(path) == paid(kernel_chain)


PAYMENT = 101  # the first block paying the test wallet


def test_a_blindbit_sync_verified_with_the_node_lists_every_output_as_proven(kernel_chain, kernel_rest, proxy, tmp_path):
    path = create(tmp_path)
    result = sync(path, "--blindbit", proxy.url, "--verify-with", kernel_rest.url)
    assert result.exit_code == 0, result.output
    assert listed(path) == paid(kernel_chain) and unverified(path) == []
    assert_fails(sync(path, "--rest", kernel_rest.url, "--verify-with", kernel_rest.url), "--verify-with goes with --blindbit or --grpc")


def _attack(kind: str, kernel_chain, proxy) -> tuple[str, int]:
    """Start an attack on the wallet through `proxy`; (the txid (display hex) of the coin it touches, its height)."""
    if kind == "invented":
        return invent(proxy, PAYMENT, W.scan_pubkey33, W.spend_pubkey33), PAYMENT
    honest = next(r for r in paid(kernel_chain) if not r["spent"])
    inflate(proxy, honest["height"], honest["output"])
    return honest["txid"], honest["height"]


@pytest.mark.parametrize("kind", ["invented", "inflated"])
def test_a_coin_blindbit_alone_vouches_for_is_listed_and_counted_apart_spent_only_when_asked_and_later_proven_or_refuted(kind, kernel_chain, kernel_rest, proxy, tmp_path):
    txid, _ = _attack(kind, kernel_chain, proxy)
    path = create(tmp_path)
    result = sync(path, "--blindbit", proxy.url)
    assert result.exit_code == 0, result.output
    assert "unverified: `wallet list --unverified`" in result.stdout
    touched = [r for r in unverified(path) if r["txid"] == txid and r["amount"] in (INVENTED, INFLATED)]
    assert listed(path) == [] and len(touched) == 1
    honest_unspent = sum(r["amount"] for r in paid(kernel_chain) if not r["spent"])
    extra = INVENTED if kind == "invented" else INFLATED - next(r["amount"] for r in paid(kernel_chain) if r["txid"] == txid)
    balance = json_lines(invoke("wallet", "balance", str(path), "--json").stdout)[0]
    assert balance == {"confirmed": 0, "unverified": honest_unspent + extra, "reserved": 0, "outgoing": 0, "incoming": 0}
    to = ["--to", "bcrt1qw508d6qejxtdg4y5r3zarvary0c5xw7kygt080:20000", "--fee-rate", "2"]
    assert_fails(invoke("wallet", "send", str(path), *to), "unverified", "--allow-unverified")
    sent = invoke("wallet", "send", str(path), *to, "--allow-unverified", "--json", "-o", str(tmp_path / "p.psbt"))
    assert sent.exit_code == 0, sent.output
    assert json_lines(sent.stdout)[0]["inputs"] == [f"{txid}:{touched[0]['vout']}"]  # largest first: what the user asked for
    assert invoke("wallet", "abandon", str(path), "--all").exit_code == 0

    proxy.tamper = None
    assert sync(path, "--blindbit", proxy.url).exit_code == 0  # honest now, nothing new: still only its word
    assert touched[0] in unverified(path)
    result = sync(path, "--blindbit", proxy.url, "--verify-with", kernel_rest.url)
    assert result.exit_code == 0, result.output
    gone = 1 if kind == "invented" else 0
    assert f"{len(paid(kernel_chain))} proven, {gone} shown not to exist" in result.stdout
    assert listed(path) == paid(kernel_chain) and unverified(path) == []
    assert json_lines(invoke("wallet", "balance", str(path), "--json").stdout)[0]["confirmed"] == honest_unspent


@pytest.mark.parametrize(("kind", "needle"), [("invented", "does not show it there"), ("inflated", "shows")])
def test_a_coin_the_node_does_not_show_as_blindbit_lists_it_is_refused_with_verify_with(kind, needle, kernel_chain, kernel_rest, proxy, tmp_path):
    txid, height = _attack(kind, kernel_chain, proxy)
    path = create(tmp_path)
    line = assert_fails(sync(path, "--blindbit", proxy.url, "--verify-with", kernel_rest.url), f"lists output {txid}:", f"in block {height}", needle, f"resume at {height}")
    assert f"{INVENTED if kind == 'invented' else INFLATED:,} sats" in line
    assert wallet_tip(path) == height - 1 and unverified(path) == [] and listed(path) == [r for r in paid(kernel_chain) if r["height"] < height and (r.update(spent=False) or True)]


def test_a_server_that_sends_half_an_answer_and_stalls_fails_the_sync_at_the_deadline_naming_the_request(kernel_index, proxy, tmp_path):
    path = create(tmp_path)
    assert sync(path, "--blindbit", proxy.url, "--to", str(PAYMENT - 1)).exit_code == 0
    proxy.stall(f"/utxos/{PAYMENT}")
    try:
        line = assert_fails(sync(path, "--blindbit", proxy.url, "--timeout", "2"), f"(GET /utxos/{PAYMENT})", "no answer for 2 s, retries included", f"resume at {PAYMENT}")
    finally:
        proxy.release()
    assert "timed out" in line and proxy.stalled == 1  # not tried again: the deadline covers the retries
    assert BlindBitSource(proxy.url).client.retry.deadline == 60  # the default: a stalled request fails the sync within 2 minutes


def _hostile(proxy: Proxy, route: str, change) -> None:
    """Rewrite the answer of `route` for block PAYMENT with change(body)."""
    proxy.tamper = lambda path, body: change(body) if path.split("?")[0] == f"/{route}/{PAYMENT}" else None


def _filter_of(keys32: list[bytes], hash_hex: str) -> str:
    return filters.new_utxos_filter(bytes.fromhex(hash_hex)[::-1], keys32).hex()


HOSTILE = {
    "oversized tweaks": ("tweak-index", lambda b: b * (MAX_BLOCK_TXS // len(b) + 1), "more than a block holds"),
    "a tweak of 32 bytes": ("tweak-index", lambda b: [b[0][:64], *b[1:]], "33 bytes of hex"),
    "a tweak that is not a point": ("tweak-index", lambda b: ["02" + "ff" * 32, *b[1:]], "not a valid point"),
    "a filter of another block": ("filter/new-utxos", lambda b: {**b, "block_hash": "00" * 32}, "name different blocks"),
    "a filter of another height": ("filter/spent", lambda b: {**b, "block_height": PAYMENT + 1}, "block_height is not"),
    "a filter cut short": ("filter/new-utxos", lambda b: {**b, "data": b["data"][:8]}, "filter"),
    "utxos of a wrong width": ("utxos", lambda b: [{**b[0], "txid": b[0]["txid"][:62]}, *b[1:]], "32 bytes of hex"),
    "utxos of another block": ("utxos", lambda b: [{**b[0], "block_hash": "11" * 32}, *b[1:]], "block_hash is not"),
    "a non-taproot utxo": ("utxos", lambda b: [{**b[0], "scriptpubkey": "0014" + "00" * 32}, *b[1:]], "not taproot"),
    "an impossible amount": ("utxos", lambda b: [{**b[0], "value": 21_000_001 * 10**8}, *b[1:]], "value"),
    "an output listed twice": ("utxos", lambda b: [b[0], *b], "twice"),
    "not JSON": ("utxos", lambda b: b"<html>", "not JSON"),
}


@pytest.mark.parametrize("case", HOSTILE, ids=list(HOSTILE))
def test_a_hostile_answer_is_refused_in_one_line_and_the_wallet_keeps_every_block_before_it(case, proxy, tmp_path):
    route, change, needle = HOSTILE[case]
    _hostile(proxy, route, change)
    path = create(tmp_path)
    assert_fails(sync(path, "--blindbit", proxy.url), needle, f"resume at {PAYMENT}")
    assert wallet_tip(path) == PAYMENT - 1 and unverified(path) == []


@pytest.mark.parametrize(
    ("height", "hash_hex", "needle"),
    [(PAYMENT, "ff" * 32, "above the network's proof-of-work limit"), (0, "00" * 32, "is not the checkpoint 0f9188f1")],
    ids=["above-the-limit", "not-the-checkpoint"],
)
def test_a_block_hash_no_block_of_the_network_has_is_refused(height, hash_hex, needle, proxy, tmp_path):
    filters_of = (f"/filter/new-utxos/{height}", f"/filter/spent/{height}")
    proxy.tamper = lambda path, body: {**body, "block_hash": hash_hex} if path in filters_of else None
    path = create(tmp_path)
    assert_fails(sync(path, "--blindbit", proxy.url), f"block {height}", needle, f"at {height})")
    assert wallet_tip(path) == height - 1


def test_a_filter_that_hides_an_output_its_utxos_show_is_refused(kernel_chain, proxy, tmp_path):
    receiver = W.receiver()
    tweaks = b"".join(t.tweak33 for t in kernel_chain.tweaks(PAYMENT))
    ours = keys0(tweaks, receiver).of(0)[0]  # the address's k = 0 key of the block's first tx: a hit

    def lie(body):  # a filter holding that key alone: /utxos then shows outputs the filter hides
        return {**body, "data": _filter_of([ours], body["block_hash"])}

    _hostile(proxy, "filter/new-utxos", lie)
    path = create(tmp_path)
    assert_fails(sync(path, "--blindbit", proxy.url), "does not hold an output its /utxos lists", f"resume at {PAYMENT}")
    assert wallet_tip(path) == PAYMENT - 1


def test_an_output_that_does_not_match_its_tweak_is_never_stored(kernel_chain, proxy, tmp_path):
    ours = {r["output"] for r in paid(kernel_chain) if r["height"] == PAYMENT}
    stranger = PrivateKey(b"\x07" * 32).public_key.format()[1:].hex()

    def swap(body):  # each output paying the wallet replaced by a stranger's key, the filter made to agree
        return [{**u, "scriptpubkey": "5120" + (stranger if u["scriptpubkey"][4:] in ours else u["scriptpubkey"][4:])} for u in body]

    def keys_of(body):
        rows = serving.ok(f"{proxy.upstream}/utxos/{PAYMENT}")
        keys = [bytes.fromhex(u["scriptpubkey"][4:]) for u in swap(rows)] + [bytes.fromhex(k) for k in ours]
        return {**body, "data": _filter_of(keys, body["block_hash"])}

    proxy.tamper = lambda path, body: swap(body) if path == f"/utxos/{PAYMENT}" else keys_of(body) if path == f"/filter/new-utxos/{PAYMENT}" else None
    path = create(tmp_path)
    assert sync(path, "--blindbit", proxy.url, "--to", str(PAYMENT)).exit_code == 0
    assert [r for r in unverified(path) if r["height"] == PAYMENT] == []
    assert wallet_tip(path) == PAYMENT


def test_a_spent_index_its_filter_does_not_hold_is_refused(kernel_chain, proxy, tmp_path):
    spent_at = min(kernel_chain.spends()[outpoint(r)] for r in paid(kernel_chain) if r["spent"])
    proxy.tamper = lambda path, body: {**body, "data": [*body["data"], "ab" * 8]} if path == f"/spent-index/{spent_at}" else None
    path = create(tmp_path)
    assert_fails(sync(path, "--blindbit", proxy.url), "spent filter", f"resume at {spent_at}")
    assert wallet_tip(path) == spent_at - 1


def test_an_answer_larger_than_the_bound_is_refused_gzipped_or_not(proxy, tmp_path, monkeypatch):
    monkeypatch.setattr(bb, "MAX_BODY", 4000)  # the bound, lowered: a bomb of 64 MB is not needed to test it
    proxy.tamper = lambda path, body: b"[" + b'"' + b"0" * 5000 + b'"]' if path.startswith(f"/utxos/{PAYMENT}") else None
    path = create(tmp_path)
    with Wallet.open(path) as w, pytest.raises(Exception, match="more than 4,000 bytes"):
        w.sync(BlindBitSource(proxy.url), W.scan_key32)
    assert wallet_tip(path) == PAYMENT - 1


def test_a_wallet_created_for_another_network_or_a_server_without_the_route_is_refused(proxy, tmp_path):
    path = tmp_path / "signet.wallet"
    assert invoke("wallet", "create", str(path), "--network", "signet", "--scan-key-file", str(scan_key_file(tmp_path)), "--spend-pubkey", W.spend_pubkey33.hex()).exit_code == 0
    assert_fails(sync(path, "--blindbit", proxy.url), "regtest")
    proxy.tamper = lambda path, body: {**body, "tweaks_full_basic": False} if path == "/info" else None
    assert_fails(sync(create(tmp_path), "--blindbit", proxy.url), "tweaks_full_basic")
    assert_fails(sync(create(tmp_path, "x.wallet"), "--db", "x.db", "--cut-through"), "--blindbit")


# ---- BlindBit's own answers (spdk's wallet test resources) ----

SPDK_SCAN, SPDK_SPEND = b"\x01" * 32, PrivateKey(b"\x02" * 32).public_key.format()
SPDK_OUTPOINT = bytes.fromhex("93a9b81f81244f8e6be29d8d6b0a9dbe6d6de6d2d4b018001ebf855bc870be88")[::-1] + struct.pack("<I", 0)


@pytest.fixture(scope="module")
def recorded():
    with Recorded() as server:
        yield server


def test_blindbits_recorded_answers_pay_what_spdks_test_finds_at_295125(recorded, tmp_path):
    key = tmp_path / "spdk.scan"
    key.write_text(SPDK_SCAN.hex())
    path = tmp_path / "spdk.wallet"
    created = invoke("wallet", "create", str(path), "--network", "signet", "--scan-key-file", str(key), "--spend-pubkey", SPDK_SPEND.hex(), "--birthday", "295125")
    assert created.exit_code == 0, created.output
    result = invoke("wallet", "sync", str(path), "--scan-key-file", str(key), "--blindbit", recorded.url, "--cut-through", "--dust-limit", "546", "--to", "295125")
    assert result.exit_code == 0, result.output
    assert unverified(path) == [{
        "height": 295125,
        "txid": "93a9b81f81244f8e6be29d8d6b0a9dbe6d6de6d2d4b018001ebf855bc870be88",
        "vout": 0,
        "amount": 10000,
        "output": "dbd93fdd869e3522405749a594c2e3f4833ac98d0f4e70da6e7294f6623258c3",
        "tweak": "78258954dccdba6597729dab70068bc4353ebd046f7156d9a3f8db8438b62aa5",
        "label": None,
        "spent": False,
    }]  # fmt: skip


def test_blindbits_recorded_answers_spend_that_output_at_295147_and_pay_nothing_at_200000_and_200001(recorded, tmp_path):
    source = BlindBitSource(recorded.url, dust_limit=546, cut_through=True)
    (block,) = source.blocks(295147, 295147)
    assert block.spends([SPDK_OUTPOINT]) == [Spend(SPDK_OUTPOINT)]
    assert block.spends([SPDK_OUTPOINT[:-4] + struct.pack("<I", 1)]) == []
    receiver = Receiver(SPDK_SCAN, SPDK_SPEND)
    blocks = list(source.blocks(200000, 200001))
    assert [b.hash32[::-1].hex() for b in blocks] == [
        "0000007d60f5ffc47975418ac8331c0ea52cf551730ef7ead7ff9082a536f13c",
        "000000ad6bf1ea934186822de99a611924d94aff8fbcb1ad6be2c790c3b92ae1",
    ]
    for b in blocks:
        txs = b.txs(keys0(b.tweaks33, receiver)) if b.tweaks33 else b.txs(None)
        paired, positions = pair(txs, b.tweaks33, keys0(b.tweaks33, receiver)) if txs.n_tx else (txs, [])
        assert scan_txs(paired, receiver, 1, positions) == []
        assert b.spends([SPDK_OUTPOINT]) == []
