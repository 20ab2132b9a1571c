"""`sp-scan serve` over a kernel-validated regtest chain, through a real HTTP client on 127.0.0.1.

Every body is checked against values computed here from the kernel's blocks and the sender's
records, never from the index: tweaks from `sp_scan.block.tweaks` and the sender's private
keys, filters read back with an independent Golomb-coded-set decoder, spent-index hashes
recomputed from outpoints, UTXO spent flags from the chain's own spends.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import threading
import urllib.error
import urllib.request

import pytest
from bitcoin.core import CBlock

import kernelchain
from gcsdecode import GolombSet
from serving import ServerThread, get, ok, sync, synced_index
from sp_scan import block
from sp_scan.wire import parse_spent

TIP = kernelchain.SAMPLE_TIP
P2TR_PREFIX = b"\x51\x20"


def is_p2tr(script: bytes) -> bool:
    return len(script) == 34 and script[:2] == P2TR_PREFIX


def display(hash32: bytes) -> str:
    return hash32[::-1].hex()


def p2tr_keys(raw: bytes) -> list[bytes]:
    """The x-only key of every P2TR output of the block (coinbase included), duplicates kept."""
    return [bytes(o.scriptPubKey)[2:] for tx in CBlock.deserialize(raw).vtx for o in tx.vout if is_p2tr(bytes(o.scriptPubKey))]


def spent_p2tr_outpoints(raw: bytes, spent: bytes) -> list[bytes]:
    """txid ‖ vout LE32 of every input spending a P2TR output, tx then vin order."""
    txs, prevouts = CBlock.deserialize(raw).vtx, parse_spent(spent)
    return [
        txin.prevout.hash + txin.prevout.n.to_bytes(4, "little")
        for tx, outs in zip(txs[1:], prevouts[1:])
        for txin, out in zip(tx.vin, outs)
        if is_p2tr(out.script)
    ]


def expected_utxos(chain, height: int) -> list[dict]:
    """/utxos/h: every taproot output of the eligible txs, spent as the chain says, sorted by (txid, vout)."""
    raw, spent = chain.block(height), chain.spent(height)
    eligible = {t.txid32 for t in block.tweaks(raw, spent)}
    spends = chain.spends()
    header = CBlock.deserialize(raw)
    rows = [
        {
            "txid": display(tx.GetTxid()),
            "vout": n,
            "value": out.nValue,
            "scriptpubkey": bytes(out.scriptPubKey).hex(),
            "block_height": height,
            "block_hash": display(chain.hash_at(height)),
            "timestamp": header.nTime,
            "spent": tx.GetTxid() + n.to_bytes(4, "little") in spends,
        }
        for tx in header.vtx
        if tx.GetTxid() in eligible
        for n, out in enumerate(tx.vout)
        if is_p2tr(bytes(out.scriptPubKey))
    ]
    return sorted(rows, key=lambda r: (r["txid"], r["vout"]))


def largest_taproot_values(chain) -> list[tuple[int, int, str]]:
    """(height, largest taproot output value, tweak hex) of every tx with a tweak on the chain."""
    return [
        (b.height, max(t.tx.vout[n].nValue for n in t.taproot_vouts), t.tweak33.hex())
        for b in chain.active()
        for t in b.txs
        if t.tweak33 is not None
    ]


@pytest.fixture(scope="module")
def served(kernel_index):
    """A server over an index of the whole sample chain, synced by the real sync from the REST stand-in."""
    with ServerThread(kernel_index) as server:
        yield server.url


# ---- every route's body ----
def test_info_names_the_network_the_tip_and_every_tweak_route(served):
    assert ok(f"{served}/info") == {
        "network": "regtest",
        "height": TIP,
        "tweaks_only": False,
        "tweaks_full_basic": True,
        "tweaks_full_with_dust_filter": True,
        "tweaks_cut_through_with_dust_filter": True,
    }
    assert ok(f"{served}/block-height") == {"block_height": TIP}


def test_block_hash_is_the_kernels_at_every_height(served, kernel_chain):
    for h in range(TIP + 1):
        assert ok(f"{served}/block-hash/{h}") == {"block_hash": display(kernel_chain.hash_at(h))}


def test_tweak_index_is_every_eligible_txs_tweak_in_block_order(served, kernel_chain):
    nonempty = 0
    for h in range(TIP + 1):
        expected = [t.tweak33.hex() for t in block.tweaks(kernel_chain.block(h), kernel_chain.spent(h))]
        assert expected == [t.tweak33.hex() for t in kernel_chain.tweaks(h)]  # the sender's private keys agree
        assert ok(f"{served}/tweak-index/{h}?dustLimit=0") == expected
        assert ok(f"{served}/tweak-index/{h}") == expected  # dustLimit defaults to 0
        nonempty += bool(expected)
    assert nonempty >= 8


def test_tweaks_leave_out_txs_whose_taproot_outputs_are_all_spent(served, kernel_chain):
    dropped = 0
    for h in range(TIP + 1):
        expected = [t.tweak33.hex() for t in kernel_chain.tweaks(h, cut_through=True)]
        assert ok(f"{served}/tweaks/{h}?dustLimit=0") == expected
        dropped += len(kernel_chain.tweaks(h)) - len(expected)
    assert dropped >= 2  # p2tr-key-path (all four outputs spent at 105), p2tr-script-path (one at 105, one at 107)


def test_dust_limit_keeps_a_tx_whose_largest_taproot_output_is_at_or_above_it(served, kernel_chain):
    cases = largest_taproot_values(kernel_chain)
    assert len({v for _, v, _ in cases}) >= 5
    for height, value, tweak in cases:
        for limit in (value - 1, value, value + 1):
            for route, cut in (("tweak-index", False), ("tweaks", True)):
                expected = [t.tweak33.hex() for t in kernel_chain.tweaks(height, dust_limit=limit, cut_through=cut)]
                assert ok(f"{served}/{route}/{height}?dustLimit={limit}") == expected
        assert tweak in ok(f"{served}/tweak-index/{height}?dustLimit={value}")
        assert tweak in ok(f"{served}/tweak-index/{height}?dustLimit={value - 1}")
        assert tweak not in ok(f"{served}/tweak-index/{height}?dustLimit={value + 1}")


def test_new_utxos_filter_holds_every_p2tr_output_key_of_the_block(served, kernel_chain):
    rng = random.Random(10)
    false_positives = members = 0
    for h in range(TIP + 1):
        body = ok(f"{served}/filter/new-utxos/{h}")
        keys = p2tr_keys(kernel_chain.block(h))
        assert (body["block_hash"], body["block_height"], body["filter_type"]) == (display(kernel_chain.hash_at(h)), h, 4)
        gcs = GolombSet(bytes.fromhex(body["data"]), kernel_chain.hash_at(h)[:16])
        assert gcs.n == len(keys)
        assert all(k in gcs for k in keys)
        members += len(keys)
        false_positives += sum(rng.randbytes(32) in gcs for _ in range(50) if keys)
    assert members >= 40
    assert false_positives <= 2


def test_spent_index_and_spent_filter_are_recomputed_from_the_spent_outpoints(served, kernel_chain):
    spending_blocks = 0
    for h in range(TIP + 1):
        hash32 = kernel_chain.hash_at(h)
        outpoints = spent_p2tr_outpoints(kernel_chain.block(h), kernel_chain.spent(h))
        hashes = [hashlib.sha256(o + hash32).digest()[:8] for o in outpoints]
        assert ok(f"{served}/spent-index/{h}") == {"block_hash": display(hash32), "data": [x.hex() for x in hashes]}
        body = ok(f"{served}/filter/spent/{h}")
        assert (body["block_hash"], body["block_height"], body["filter_type"]) == (display(hash32), h, 4)
        gcs = GolombSet(bytes.fromhex(body["data"]), hash32[:16])
        assert gcs.n == len(hashes) and all(x in gcs for x in hashes)
        spending_blocks += bool(hashes)
    assert spending_blocks >= 5


def test_utxos_are_the_taproot_outputs_of_eligible_txs_with_their_spent_flags(served, kernel_chain):
    flags = set()
    for h in range(TIP + 1):
        expected = expected_utxos(kernel_chain, h)
        assert ok(f"{served}/utxos/{h}") == expected
        flags |= {u["spent"] for u in expected}
    assert flags == {True, False}


def test_empty_answers_are_empty_lists(served):
    assert ok(f"{served}/tweak-index/50") == []
    assert ok(f"{served}/tweaks/50?dustLimit=1000") == []
    assert ok(f"{served}/utxos/50") == []
    assert ok(f"{served}/spent-index/50")["data"] == []
    assert ok(f"{served}/filter/spent/50")["data"] == "00"


def test_gzip_only_when_the_client_accepts_it(served):
    url = f"{served}/utxos/101"
    status, head, body = get(url, {"Accept-Encoding": "gzip"})
    assert (status, head["Content-Encoding"]) == (200, "gzip")
    status, plain_head, plain = get(url)
    assert status == 200 and "Content-Encoding" not in plain_head and plain == body
    _, head, _ = get(url, {"Accept-Encoding": "gzip;q=0, identity"})
    assert "Content-Encoding" not in head
    assert head["Content-Type"].startswith("application/json")
    assert head["Access-Control-Allow-Origin"] == "*"


# ---- bad requests: a JSON error with the right status, and the server goes on ----
@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        ("/tweak-index/abc", 400, "could not parse block height"),
        ("/tweaks/-1", 400, "could not parse block height"),
        ("/block-hash/1.5", 400, "could not parse block height"),
        ("/utxos/%20101", 400, "could not parse block height"),
        ("/spent-index/99999999999", 400, "could not parse block height"),
        ("/tweak-index/111", 404, "not in the index"),
        ("/block-hash/4294967295", 404, "not in the index"),
        ("/filter/new-utxos/200", 404, "not in the index"),
        ("/tweak-index/101?dustLimit=-5", 400, "invalid dustLimit"),
        ("/tweaks/101?dustLimit=18446744073709551616", 400, "invalid dustLimit"),
        ("/tweaks/101?dustLimit=1e3", 400, "invalid dustLimit"),
        ("/tweaks/101?dustLimit=", 400, "invalid dustLimit"),
        ("/tweaks/101?dustLimit=0x10", 400, "invalid dustLimit"),
        ("/filter/basic/101", 404, "unknown filter type"),
        ("/filter/new-utxos", 404, "not found"),
        ("/tweak-index", 404, "not found"),
        ("/forward", 404, "not found"),
        ("/", 404, "not found"),
    ],
)
def test_bad_requests_get_a_json_error_and_the_server_keeps_serving(served, path, status, message):
    got, head, body = get(served + path)
    assert got == status
    assert head["Content-Type"].startswith("application/json")
    assert set(body) == {"error"} and message in body["error"]
    assert ok(f"{served}/block-height") == {"block_height": TIP}


def test_a_huge_dust_limit_is_accepted_and_filters_everything(served):
    assert ok(f"{served}/tweak-index/101?dustLimit=18446744073709551615") == []


def test_only_get_is_served(served):
    request = urllib.request.Request(f"{served}/info", data=b"{}", method="POST")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(request, timeout=10)
    assert err.value.code == 405 and set(json.loads(err.value.read())) == {"error"}


# ---- a chain that moves while the server runs ----
def test_cut_through_follows_later_spends_while_serving(kernel_copy, tmp_path):
    """p2tr-script-path (block 102) pays two outputs: one spent at 105, the other at 107."""
    tx = next(t for t in kernel_copy.active()[102].txs if t.name == "p2tr-script-path")
    with kernelchain.rest_server(kernel_copy) as node:
        db = synced_index(tmp_path / "index.db", node.url, stop=106)
        with ServerThread(db) as server:
            flags = {u["vout"]: u["spent"] for u in ok(f"{server.url}/utxos/102") if u["txid"] == display(tx.txid32)}
            assert sorted(flags.values()) == [False, True]  # half spent: still served, spent output flagged
            assert tx.tweak33.hex() in ok(f"{server.url}/tweaks/102")
            sync(db, node.url, stop=107)
            assert tx.tweak33.hex() not in ok(f"{server.url}/tweaks/102")
            assert tx.tweak33.hex() in ok(f"{server.url}/tweak-index/102")
            assert {u["spent"] for u in ok(f"{server.url}/utxos/102") if u["txid"] == display(tx.txid32)} == {True}


def test_a_reorg_while_serving_replaces_the_branch(kernel_copy, tmp_path):
    with kernelchain.rest_server(kernel_copy) as node:
        db = synced_index(tmp_path / "index.db", node.url)
        with ServerThread(db) as server:
            url = server.url
            before = {h: ok(f"{url}/block-hash/{h}")["block_hash"] for h in (108, 109, 110)}
            dropped = next(t for b in kernel_copy.active() for t in b.txs if t.name == "reorg-dropped")
            assert dropped.tweak33.hex() in ok(f"{url}/tweak-index/110")
            both = next(t for b in kernel_copy.active() for t in b.txs if t.name == "both-wallets")
            spent_by_dropped = {u["vout"]: u["spent"] for u in ok(f"{url}/utxos/104") if u["txid"] == display(both.txid32)}
            assert True in spent_by_dropped.values()

            for h in (108, 109, 110):  # cached now, keyed by the hashes the reorg replaces
                ok(f"{url}/tweak-index/{h}"), ok(f"{url}/utxos/{h}"), ok(f"{url}/filter/spent/{h}")
            replaced = {bytes.fromhex(before[h])[::-1] for h in (109, 110)}
            assert any(replaced & set(key) for key in server.server.cache._entries)

            reorg = kernelchain.make_reorg(kernel_copy)
            sync(db, node.url)

            assert ok(f"{url}/block-height") == {"block_height": TIP + 1}
            assert ok(f"{url}/block-hash/108")["block_hash"] == before[108]
            for h, new in zip((109, 110, 111), reorg.new_hashes):
                assert ok(f"{url}/block-hash/{h}")["block_hash"] == display(new)
                assert ok(f"{url}/tweak-index/{h}") == [t.tweak33.hex() for t in kernel_copy.tweaks(h)]
                assert ok(f"{url}/filter/new-utxos/{h}")["block_hash"] == display(new)
                assert ok(f"{url}/spent-index/{h}")["block_hash"] == display(new)
            assert before[110] != ok(f"{url}/block-hash/110")["block_hash"]
            everywhere = [t for h in range(TIP + 2) for t in ok(f"{url}/tweak-index/{h}")]
            assert dropped.tweak33.hex() not in everywhere
            assert reorg.added.tweak33.hex() in everywhere
            assert {u["vout"]: u["spent"] for u in ok(f"{url}/utxos/104") if u["txid"] == display(both.txid32)} == {
                v: False for v in spent_by_dropped
            }
            assert ok(f"{url}/utxos/104") == expected_utxos(kernel_copy, 104)
            assert not any(replaced & set(key) for key in server.server.cache._entries)  # dropped with their blocks


def test_requests_are_answered_while_the_index_syncs(kernel_rest, kernel_chain, tmp_path):
    db = synced_index(tmp_path / "index.db", kernel_rest.url, stop=60)
    expected = {h: [t.tweak33.hex() for t in kernel_chain.tweaks(h)] for h in range(TIP + 1)}
    seen, errors = [], []
    with ServerThread(db) as server:
        writer = threading.Thread(target=sync, args=(db, kernel_rest.url))
        writer.start()
        while writer.is_alive() or not seen or seen[-1] < TIP:
            height = ok(f"{server.url}/block-height")["block_height"]
            seen.append(height)
            for h in (height, max(60, height - 3), 101):
                if h <= height:
                    status, _, body = get(f"{server.url}/tweak-index/{h}")
                    if status != 200 or body != expected[h]:
                        errors.append((h, status, body))
            status, _, body = get(f"{server.url}/tweak-index/{height + 1}")
            if status not in (200, 404):
                errors.append((height + 1, status, body))
        writer.join()
    assert errors == []
    assert seen == sorted(seen) and seen[0] >= 60 and seen[-1] == TIP
    assert len(set(seen)) > 2  # requests really arrived between commits


def test_a_client_that_hangs_up_while_its_answer_is_built_does_not_cancel_the_build_others_wait_for():
    async def scenario() -> list[int]:
        from sp_scan.server.answers import AnswerCache, answer

        cache, release = AnswerCache(), asyncio.Event()

        async def make():
            await release.wait()
            return answer(200, b"[]")

        first = asyncio.ensure_future(cache.build("key", make))
        others = [asyncio.ensure_future(cache.build("key", make)) for _ in range(3)]
        await asyncio.sleep(0)
        first.cancel()  # the first requester's client went away
        release.set()
        results = await asyncio.gather(*others)
        return [r.status for r in results] + [len(cache)]

    assert asyncio.run(scenario()) == [200, 200, 200, 1]
