"""Pending spends: a send reserves its coins until it is abandoned or a block spends one of them; a broadcast is
recorded (coins outgoing, change incoming) until its block settles it; a replacement that changes the inputs of a
spend paying a silent-payments address comes only as a PSBT whose outputs are checked for its own inputs (BIP352)."""

from __future__ import annotations

import struct

import kernelchain as kc
import spend_support as ss
from sp_scan import psbt
from sp_scan.address import encode
from sp_scan.wallet import Wallet
from test_cli import assert_fails, invoke, json_lines
from wallet_support import W, create, listed, sync

O = kc.OTHER_WALLET
OTHER_ADDRESS = encode(O.scan_pubkey33, O.spend_pubkey33, "sprt")
ELSEWHERE = ss.p2wpkh_address(b"pending tests")[0]


def send(path, *args: str) -> dict:
    result = invoke("wallet", "send", str(path), *args, "--json")
    assert result.exit_code == 0, result.output
    return json_lines(result.stdout)[0]


def pending(path) -> list[dict]:
    return json_lines(invoke("wallet", "pending", str(path), "--json").stdout)


def balance(path) -> dict:
    return json_lines(invoke("wallet", "balance", str(path), "--json").stdout)[0]


def spend_key_file(directory):
    path = directory / "test.spend"
    path.write_text(W.spend_key32.hex() + "\n")
    return path


def inputs36(plan: dict) -> list[bytes]:
    return [bytes.fromhex(t)[::-1] + struct.pack("<I", int(v)) for t, v in (i.split(":") for i in plan["inputs"])]


def test_two_sends_never_spend_the_same_coin_until_one_is_abandoned(kernel_index, tmp_path):
    path = create(tmp_path)
    assert sync(path, "--db", str(kernel_index)).exit_code == 0
    confirmed = balance(path)["confirmed"]
    first = send(path, "--to", f"{ELSEWHERE}:20000", "--fee-rate", "2", "-o", str(tmp_path / "a.psbt"))
    second = send(path, "--to", f"{ELSEWHERE}:20000", "--fee-rate", "2", "-o", str(tmp_path / "b.psbt"))
    assert set(first["inputs"]).isdisjoint(second["inputs"]) and (first["pending"], second["pending"]) == (1, 2)
    held = pending(path)
    assert [(p["id"], p["state"], p["coins"]) for p in held] == [(1, "reserved", first["inputs"]), (2, "reserved", second["inputs"])]
    after = balance(path)
    assert after["reserved"] == sum(p["outgoing"] for p in held) and after["confirmed"] == confirmed - after["reserved"]
    assert_fails(invoke("wallet", "send", str(path), "--to", f"{ELSEWHERE}:20000", "--fee-rate", "2", "--from", first["inputs"][0]), "is held by pending spend 1")
    assert invoke("wallet", "abandon", str(path), "1").exit_code == 0
    third = send(path, "--to", f"{ELSEWHERE}:20000", "--fee-rate", "2", "--from", first["inputs"][0], "-o", str(tmp_path / "c.psbt"))
    assert third["pending"] == 3 and [p["id"] for p in pending(path)] == [2, 3]  # ids are never given twice
    assert_fails(invoke("wallet", "abandon", str(path), "1"), "no pending spend 1")


def test_a_broadcast_is_outgoing_and_incoming_until_its_block_settles_it(kernel_copy, tmp_path):
    with kc.rest_server(kernel_copy) as rest, kc.rpc_server(kernel_copy) as rpc:
        path = create(tmp_path)
        assert sync(path, "--rest", rest.url).exit_code == 0
        before = balance(path)
        plan = send(path, "--to", f"{OTHER_ADDRESS}:123456", "--fee-rate", "2", "--broadcast", "--rpc", rpc.url.replace("http://", "http://user:pass@"), "--spend-key-file", str(spend_key_file(tmp_path)))
        (record,) = pending(path)
        assert record["state"] == "broadcast" and record["txid"] == plan["txid"] and record["pays_sp"]
        change = plan["outputs"][plan["change"]]
        outgoing = record["outgoing"]
        assert balance(path) == {**before, "confirmed": before["confirmed"] - outgoing, "outgoing": outgoing, "incoming": change}
        ss.mine(kernel_copy, bytes.fromhex(rpc.httpd.relayed[-1]), inputs36(plan), plan["fee"])
        result = sync(path, "--rest", rest.url)
        assert result.exit_code == 0 and "1 pending spend(s) settled" in result.stdout
    assert pending(path) == [] and balance(path) == {**before, "confirmed": before["confirmed"] - 123456 - plan["fee"]}


def test_a_conflicting_spend_mined_ends_the_pending_spend_and_frees_its_other_coins(kernel_copy, tmp_path):
    with kc.rest_server(kernel_copy) as rest:
        path = create(tmp_path)
        assert sync(path, "--rest", rest.url).exit_code == 0
        coins = [r for r in listed(path) if not r["spent"]][:2]
        both = [f"{c['txid']}:{c['vout']}" for c in coins]
        with Wallet.open(path) as w:  # another spend of the first coin alone, made elsewhere (not reserved here)
            p, plan = w.create_psbt([(ELSEWHERE, 10_000)], 2, coins=[(bytes.fromhex(coins[0]["txid"])[::-1], coins[0]["vout"])], reserve=False)
        send(path, "--to", f"{ELSEWHERE}:20000", "--fee-rate", "2", "--from", both[0], "--from", both[1], "-o", str(tmp_path / "a.psbt"))
        raw = psbt.extract(psbt.finalize_sp_inputs(psbt.sign_sp_inputs(p, W.spend_key32)))
        ss.mine(kernel_copy, raw, [c.outpoint36 for c in plan.coins], plan.fee)  # and mined
        assert balance(path)["reserved"] == coins[0]["amount"] + coins[1]["amount"]
        result = sync(path, "--rest", rest.url)
        assert result.exit_code == 0 and "1 pending spend(s) settled" in result.stdout
    assert pending(path) == [] and balance(path)["reserved"] == 0
    assert send(path, "--to", f"{ELSEWHERE}:20000", "--fee-rate", "2", "--from", both[1], "-o", str(tmp_path / "b.psbt"))["inputs"] == [both[1]]


def test_a_replacement_with_other_inputs_of_a_silent_payments_spend_comes_only_as_a_psbt_checked_for_its_inputs(kernel_copy, tmp_path):
    with kc.rest_server(kernel_copy) as rest, kc.rpc_server(kernel_copy) as rpc:
        node = ["--rpc", rpc.url.replace("http://", "http://user:pass@")]
        path = create(tmp_path)
        assert sync(path, "--rest", rest.url).exit_code == 0
        first = send(path, "--to", f"{OTHER_ADDRESS}:50000", "--fee-rate", "2", "--broadcast", *node, "--spend-key-file", str(spend_key_file(tmp_path)))
        extra = next(f"{r['txid']}:{r['vout']}" for r in listed(path) if not r["spent"] and f"{r['txid']}:{r['vout']}" not in first["inputs"])
        assert_fails(invoke("wallet", "send", str(path), "--to", f"{OTHER_ADDRESS}:50000", "--fee-rate", "2", "--replace", "1"), "a replacement must pay at least")
        with Wallet.open(path) as w:  # the replacement made elsewhere: the same payment, one more input
            p, _ = w.create_psbt([(OTHER_ADDRESS, 50_000)], 5, coins=[(bytes.fromhex(extra[:64])[::-1], int(extra[65:]))], replaces=1, reserve=False)
        signed = psbt.sign_sp_inputs(p, W.spend_key32)
        (tmp_path / "r.hex").write_text(psbt.extract(psbt.finalize_sp_inputs(signed)).hex())
        (tmp_path / "r.psbt").write_text(signed.to_base64())
        relayed = len(rpc.httpd.relayed)
        assert_fails(invoke("wallet", "broadcast", str(path), str(tmp_path / "r.hex"), *node), "spends other coins than pending spend 1", "silent-payments address", "signed PSBT")
        assert len(rpc.httpd.relayed) == relayed  # refused before it was sent
        result = invoke("wallet", "broadcast", str(path), str(tmp_path / "r.psbt"), *node)
        assert result.exit_code == 0, result.output
        (record,) = pending(path)
        assert record["id"] == 2 and record["txid"] == result.stdout.strip() and sorted(record["coins"]) == sorted([*first["inputs"], extra])
        replaced = send(path, "--to", f"{OTHER_ADDRESS}:50000", "--fee-rate", "9", "--replace", "2", "-o", str(tmp_path / "again.psbt"))
        assert sorted(replaced["inputs"]) == sorted(record["coins"]) and [p["id"] for p in pending(path)] == [3]
