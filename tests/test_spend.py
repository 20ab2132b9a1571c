"""Spending what the wallet found (BIP376 PSBTs): built, signed with the spend key, accepted by Bitcoin Core's own
validation (libbitcoinkernel's script interpreter on every input, and the kernel mining the spend), found by its
silent-payment recipient, seen spent by the wallet, and refused whenever a key or tweak does not fit."""

from __future__ import annotations

import hashlib
import struct
from decimal import Decimal

import pytest
from bitcoin.core import CTransaction

import kernelchain as kc
import spend_support as ss
from sp_scan import descriptor, psbt
from sp_scan.address import encode, labelled_spend_pubkey
from sp_scan.errors import InvalidKeyError, PSBTError, SpendError
from sp_scan.network import TEST
from sp_scan.psbt.fields import IN_SP_SPEND_BIP32_DERIVATION, IN_SP_TWEAK, IN_TAP_KEY_SIG, IN_WITNESS_UTXO, field_key
from sp_scan.wallet import Wallet
from sp_scan.wallet import spend as sp_spend
from sp_scan.wallet.store import Found
from sp_scan.wire import TxOut, compact_size
from test_cli import assert_fails, invoke, json_lines
from wallet_support import W, create, listed, sync

O = kc.OTHER_WALLET
OTHER_ADDRESS = encode(O.scan_pubkey33, O.spend_pubkey33, "sprt")
HARD = 0x80000000
ORIGIN = (bytes.fromhex("deadbeef"), (352 | HARD, 1 | HARD, 0 | HARD, 0 | HARD, 0))


def change_to() -> sp_spend.Recipient:
    return sp_spend.Recipient(0, script=ss.p2tr_address(b"change")[1], is_change=False)


def signed_spend(coins, outputs, rate: str, origin=None):
    """(plan, signed PSBT, raw tx) of a spend of synthetic coins of the test wallet."""
    plan = sp_spend.plan_spend(coins, outputs, sp_spend.fee_rate_kvb(rate), change_to())
    signed = psbt.sign_sp_inputs(sp_spend.build_psbt(plan, W.spend_pubkey33, origin), W.spend_key32)
    return plan, signed, psbt.extract(psbt.finalize_sp_inputs(signed))


RATES = ["0.1", "1", "2.5", "7.777", "150"]
OUTPUT_SETS = {
    "silent-payment": [(OTHER_ADDRESS, 60_000)],
    "every-kind": [(OTHER_ADDRESS, 40_000), (ss.p2wpkh_address(b"a")[0], 20_000), (ss.p2tr_address(b"b")[0], 1_000), (ss.p2pkh_address(b"c")[0], 546)],
    "two-sp-one-scan-key": [(encode(O.scan_pubkey33, labelled_spend_pubkey(O.scan_key32, O.spend_pubkey33, 3), "sprt"), 5_000), (OTHER_ADDRESS, 7_000)],
}


@pytest.mark.parametrize("rate", RATES)
@pytest.mark.parametrize("kind", OUTPUT_SETS)
def test_every_input_of_a_signed_spend_is_accepted_by_the_kernel_and_the_fee_is_within_1_sat_per_vb_of_the_rate(kind, rate):
    coins = [ss.sp_coin(W.spend_key32, n, 30_000 + 7_919 * n) for n in range(6)]
    outputs = [sp_spend.recipient(a, amount, "regtest") for a, amount in OUTPUT_SETS[kind]]
    plan, signed, raw = signed_spend(coins, outputs, rate)
    spent = psbt.tx.prevouts(signed)
    assert ss.kernel_verifies(raw, spent) == [True] * len(plan.coins)
    assert ss.tx_vsize(raw) == plan.vsize
    tx = psbt.unsigned_tx(signed)
    assert plan.fee == sum(o.amount for o in spent) - sum(o.amount for o in tx.outputs)
    rate_kvb = int(Decimal(rate) * 1000)
    assert rate_kvb * plan.vsize <= 1000 * plan.fee < (rate_kvb + 1000) * plan.vsize
    assert all(o.amount >= sp_spend.dust_threshold(len(o.script)) for o in tx.outputs)


def test_the_kernel_check_fails_on_a_signature_of_another_message():
    coins = [ss.sp_coin(W.spend_key32, 1, 80_000)]
    plan, signed, raw = signed_spend(coins, [sp_spend.recipient(OTHER_ADDRESS, 50_000, "regtest")], "1")
    spent = psbt.tx.prevouts(signed)
    tampered = bytearray(raw)
    at = raw.index(signed.inputs[0][field_key(IN_TAP_KEY_SIG)])
    tampered[at] ^= 1
    assert ss.kernel_verifies(raw, spent) == [True]
    assert ss.kernel_verifies(bytes(tampered), spent) == [False]


def test_the_psbt_carries_bip376_fields_and_the_signer_leaves_none_after_finalizing():
    coins = [ss.sp_coin(W.spend_key32, n, 40_000) for n in range(2)]
    plan = sp_spend.plan_spend(coins, [sp_spend.recipient(OTHER_ADDRESS, 70_000, "regtest")], 2000, change_to())
    p = sp_spend.build_psbt(plan, W.spend_pubkey33, ORIGIN)
    for coin, m in zip(plan.coins, p.inputs):
        assert m[field_key(IN_SP_TWEAK)] == coin.tweak32
        assert m[field_key(IN_SP_SPEND_BIP32_DERIVATION, W.spend_pubkey33)] == ORIGIN[0] + struct.pack("<5I", *ORIGIN[1])
        assert m[field_key(IN_WITNESS_UTXO)] == TxOut(coin.amount, b"\x51\x20" + coin.output32).to_bytes()
    final = psbt.finalize_sp_inputs(psbt.sign_sp_inputs(p, W.spend_key32))
    removed = {IN_SP_TWEAK, IN_SP_SPEND_BIP32_DERIVATION, IN_TAP_KEY_SIG, IN_WITNESS_UTXO}
    assert all(psbt.fields.split_key(k)[0] not in removed for m in final.inputs for k in m)


def test_a_tweak_that_does_not_give_the_inputs_key_is_refused_and_nothing_is_signed():
    coins = [ss.sp_coin(W.spend_key32, n, 40_000) for n in range(2)]
    plan = sp_spend.plan_spend(coins, [sp_spend.recipient(ss.p2wpkh_address(b"x")[0], 70_000, "regtest")], 1000, change_to())
    p = sp_spend.build_psbt(plan, W.spend_pubkey33)
    maps = list(p.inputs)
    maps[1] = {**maps[1], field_key(IN_SP_TWEAK): maps[0][field_key(IN_SP_TWEAK)]}
    with pytest.raises(PSBTError, match="input 1: b_spend \\+ PSBT_IN_SP_TWEAK is not the key of the output it spends") as err:
        psbt.sign_sp_inputs(psbt.Psbt(p.global_map, maps, p.outputs), W.spend_key32)
    assert err.value.rule == psbt.SP_SPEND
    assert psbt.sign_sp_inputs(p, W.spend_key32).inputs[1][field_key(IN_TAP_KEY_SIG)]


def test_a_wrong_spend_key_is_refused_with_or_without_the_spend_keys_origin():
    coins = [ss.sp_coin(W.spend_key32, 5, 40_000)]
    plan = sp_spend.plan_spend(coins, [sp_spend.recipient(OTHER_ADDRESS, 20_000, "regtest")], 1000, change_to())
    with pytest.raises(PSBTError, match="a wrong spend key or a wrong tweak"):
        psbt.sign_sp_inputs(sp_spend.build_psbt(plan, W.spend_pubkey33), O.spend_key32)
    with pytest.raises(InvalidKeyError, match="not the one PSBT_IN_SP_SPEND_BIP32_DERIVATION names"):
        psbt.sign_sp_inputs(sp_spend.build_psbt(plan, W.spend_pubkey33, ORIGIN), O.spend_key32)
    with pytest.raises(PSBTError, match="no input has PSBT_IN_SP_TWEAK"):
        psbt.sign_sp_inputs(psbt.finalize_sp_inputs(psbt.sign_sp_inputs(sp_spend.build_psbt(plan, W.spend_pubkey33), W.spend_key32)), W.spend_key32)


@pytest.mark.parametrize(
    "key, value, message",
    [
        (field_key(IN_SP_TWEAK), b"\x01" * 31, "PSBT_IN_SP_TWEAK is 31 bytes, expected 32"),
        (field_key(IN_SP_TWEAK, b"\x01"), b"\x01" * 32, "PSBT_IN_SP_TWEAK key data is 1 bytes"),
        (field_key(IN_SP_SPEND_BIP32_DERIVATION, W.spend_pubkey33), b"\xde\xad\xbe\xef\x01", "not a 4-byte fingerprint and 4-byte path steps"),
        (field_key(IN_SP_SPEND_BIP32_DERIVATION, b"\x02" + b"\xff" * 32), b"\xde\xad\xbe\xef", "spend key is not a valid compressed point"),
    ],
)
def test_malformed_bip376_fields_are_refused_as_psbt_structure(key, value, message):
    plan = sp_spend.plan_spend([ss.sp_coin(W.spend_key32, 13, 60_000)], [sp_spend.recipient(OTHER_ADDRESS, 20_000, "regtest")], 1000, change_to())
    p = sp_spend.build_psbt(plan, W.spend_pubkey33)
    with pytest.raises(PSBTError, match=message) as err:
        psbt.Psbt.from_bytes(_with(p, key, value))
    assert err.value.rule == psbt.STRUCTURE


def _with(p, key: bytes, value: bytes) -> bytes:
    """The PSBT's bytes with one entry put into input 0 (unchecked: built by hand)."""
    maps = [p.global_map, {**p.inputs[0], key: value}, *p.outputs]
    out = [psbt.MAGIC]
    for m in maps:
        for k, v in m.items():
            out += [compact_size(len(k)), k, compact_size(len(v)), v]
        out.append(b"\x00")
    return b"".join(out)


@pytest.mark.parametrize(
    "script_kind, threshold",
    [("p2tr", 330), ("p2wpkh", 294), ("p2pkh", 546)],
)
def test_an_output_below_cores_dust_threshold_is_refused(script_kind, threshold):
    address = {"p2tr": ss.p2tr_address, "p2wpkh": ss.p2wpkh_address, "p2pkh": ss.p2pkh_address}[script_kind](b"d")[0]
    coins = [ss.sp_coin(W.spend_key32, 7, 90_000)]
    with pytest.raises(SpendError, match=f"below its dust threshold of {threshold} sats"):
        sp_spend.plan_spend(coins, [sp_spend.recipient(address, threshold - 1, "regtest")], 1000, change_to())
    assert sp_spend.plan_spend(coins, [sp_spend.recipient(address, threshold, "regtest")], 1000, change_to()).outputs


def test_change_below_dust_goes_to_the_fee_only_within_1_sat_per_vb_else_the_coins_are_refused():
    coin = ss.sp_coin(W.spend_key32, 9, 100_000)
    script = ss.p2wpkh_address(b"e")[1]
    size = sp_spend.vsize(1, [sp_spend.Recipient(0, script=script)])
    most = 3000 * size // 1000  # 2 sat/vB asked: at most 3 sat/vB paid

    def pay(amount: int) -> sp_spend.SpendPlan:
        return sp_spend.plan_spend([coin], [sp_spend.Recipient(amount, script=script)], 2000, change_to(), select=False)

    changeless = pay(100_000 - most)
    assert changeless.change is None and changeless.fee == most and changeless.vsize == size
    with pytest.raises(SpendError, match="too little for a change output above dust"):
        pay(100_000 - most - 1)
    with_change = pay(100_000 - most - 2_000)
    assert with_change.change is not None and with_change.outputs[with_change.change].amount >= 330
    assert 2000 * with_change.vsize <= 1000 * with_change.fee < 3000 * with_change.vsize


@pytest.mark.parametrize("rate, message", [("0.09", "below Core's minimum relay fee"), ("1.0001", "at most 3 decimals"), ("fast", "not a number")])
def test_a_fee_rate_core_would_not_take_or_cannot_count_is_refused(rate, message):
    with pytest.raises(SpendError, match=message):
        sp_spend.fee_rate_kvb(rate)


def test_a_fee_rate_above_cores_maxfeerate_or_a_fee_above_the_amount_sent_is_refused_unless_a_ceiling_is_given(tmp_path):
    coins = [ss.sp_coin(W.spend_key32, n, 2_000_000) for n in range(3)]
    change33 = labelled_spend_pubkey(W.scan_key32, W.spend_pubkey33, 0)
    with fabricated_wallet(tmp_path, coins, change_spend_pubkey33=change33) as w:
        to = [(OTHER_ADDRESS, 20_000)]
        with pytest.raises(SpendError, match="fee rate 10000.001 sat/vB is above 10000 sat/vB, Core's default maxfeerate"):
            w.plan_spend(to, "10000.001")
        with pytest.raises(SpendError, match=r"the fee of [0-9,]+ sats is more than the 20,000 sats sent; --max-fee-rate allows it"):
            w.plan_spend(to, "200")
        assert w.plan_spend(to, "100").fee < 20_000  # 100 sat/vB: within both
        planned = w.plan_spend(to, "20000", max_fee_rate="20000")
        assert planned.fee > 2_000_000
        with pytest.raises(SpendError, match="above 15000 sat/vB, the --max-fee-rate given"):
            w.plan_spend(to, "20000", max_fee_rate="15000")


def test_addresses_of_another_network_or_kind_are_refused():
    for address, message in [
        (ss.p2wpkh_address(b"m", "bc")[0], "of main, not of regtest"),
        (ss.p2pkh_address(b"m", 0x00)[0], "not a P2PKH or P2SH address of regtest"),
        (encode(O.scan_pubkey33, O.spend_pubkey33, "sp"), "another network"),
        (ss.p2wpkh_address(b"m")[0][:-1] + "q", "bad checksum"),
    ]:
        with pytest.raises(ValueError, match=message):
            sp_spend.recipient(address, 1_000, "regtest")


def fabricated_wallet(tmp_path, coins, unconfirmed=(), **create) -> Wallet:
    """A wallet file holding these synthetic coins (confirmed at height 100, or unconfirmed)."""
    w = Wallet.create(tmp_path / "fab.wallet", "regtest", W.scan_pubkey33, W.spend_pubkey33, W.labels, 0, **create)
    found = lambda c, i: Found(c.txid32, c.vout, i, c.amount, c.output32, c.tweak32, c.label)  # noqa: E731
    w._store.append(100, b"\x01" * 32, [found(c, i) for i, c in enumerate(coins)], [])
    w._store.commit()
    w._store.set_unconfirmed([found(c, i) for i, c in enumerate(unconfirmed)])
    return w


def test_coin_selection_never_takes_unconfirmed_coins_unless_asked_and_from_spends_exactly_the_coins_given(tmp_path):
    small = [ss.sp_coin(W.spend_key32, n, 20_000) for n in range(3)]
    big = ss.sp_coin(W.spend_key32, 50, 500_000)
    change33 = labelled_spend_pubkey(W.scan_key32, W.spend_pubkey33, 0)
    with fabricated_wallet(tmp_path, small, [big], change_spend_pubkey33=change33) as w:
        to = [(OTHER_ADDRESS, 30_000)]
        planned = w.plan_spend(to, 1)
        assert big not in planned.coins and len(planned.coins) == 2
        planned = w.plan_spend(to, 1, unconfirmed=True)
        assert [c.outpoint36 for c in planned.coins] == [big.outpoint36]
        planned = w.plan_spend(to, 1, coins=[(c.txid32, c.vout) for c in small])
        assert [c.outpoint36 for c in planned.coins] == [c.outpoint36 for c in small]
        change = planned.outputs[planned.change]
        assert change.sp.spend_pubkey33 == change33 and change.label == 0
        with pytest.raises(SpendError, match="holds no unspent coin"):
            w.plan_spend(to, 1, coins=[(b"\x07" * 32, 0)])
        with pytest.raises(SpendError, match="hold 60,000 sats"):
            w.plan_spend([(OTHER_ADDRESS, 70_000)], 1)


def test_a_wallet_that_does_not_know_its_change_key_yet_asks_for_a_sync_or_a_change_address(tmp_path):
    with fabricated_wallet(tmp_path, [ss.sp_coin(W.spend_key32, 21, 90_000)]) as w:
        with pytest.raises(SpendError, match="does not know its change address yet"):
            w.create_psbt([(OTHER_ADDRESS, 30_000)], 1)
        address, script = ss.p2tr_address(b"own change")
        _, planned = w.create_psbt([(OTHER_ADDRESS, 30_000)], 1, change=address)
        assert planned.outputs[planned.change].script == script


def test_a_wallet_from_a_descriptor_with_an_origin_puts_it_in_every_input_and_signs_with_the_descriptor(tmp_path):
    desc = descriptor.from_keys(W.scan_key32, W.spend_key32, network=TEST, origin=descriptor.KeyOrigin(*ORIGIN[:1], ORIGIN[1][:3]))
    assert desc.spend_origin == descriptor.KeyOrigin(ORIGIN[0], ORIGIN[1])
    (tmp_path / "w.desc").write_text(str(desc))
    path = tmp_path / "d.wallet"
    assert invoke("wallet", "create", str(path), "--network", "regtest", "--descriptor-file", str(tmp_path / "w.desc"), "--birthday", "0").exit_code == 0
    with Wallet.open(path) as w:
        assert w.spend_origin == ORIGIN
        assert w.change_spend_pubkey33 == labelled_spend_pubkey(W.scan_key32, W.spend_pubkey33, 0)
        found = lambda c: Found(c.txid32, c.vout, 0, c.amount, c.output32, c.tweak32, c.label)  # noqa: E731
        w._store.append(100, b"\x01" * 32, [found(ss.sp_coin(W.spend_key32, 3, 70_000))], [])
        w._store.commit()
        p, _ = w.create_psbt([(OTHER_ADDRESS, 30_000)], 2)
    assert p.inputs[0][field_key(IN_SP_SPEND_BIP32_DERIVATION, W.spend_pubkey33)] == ORIGIN[0] + struct.pack("<5I", *ORIGIN[1])
    (tmp_path / "u.psbt").write_text(p.to_base64())
    result = invoke("psbt", "sign", str(tmp_path / "u.psbt"), "--descriptor-file", str(tmp_path / "w.desc"), "--out", str(tmp_path / "s.psbt"))
    assert result.exit_code == 0, result.output
    assert "1 of 1 input(s) signed" in result.stderr
    raw = bytes.fromhex(invoke("psbt", "extract", str(tmp_path / "s.psbt")).stdout)
    assert ss.kernel_verifies(raw, psbt.tx.prevouts(p)) == [True]


def test_the_fields_round_trip_through_embits_psbt_parser_which_keeps_them_as_unknown_fields():
    from embit.psbt import PSBT

    coins = [ss.sp_coin(W.spend_key32, n, 45_000) for n in range(2)]
    plan = sp_spend.plan_spend(coins, [sp_spend.recipient(OTHER_ADDRESS, 60_000, "regtest")], 3000, change_to())
    unsigned = sp_spend.build_psbt(plan, W.spend_pubkey33, ORIGIN)
    for p in (unsigned, psbt.sign_sp_inputs(unsigned, W.spend_key32)):
        theirs = PSBT.parse(p.to_bytes())
        assert theirs.version == 2
        for m, scope in zip(p.inputs, theirs.inputs):
            assert scope.unknown[field_key(IN_SP_TWEAK)] == m[field_key(IN_SP_TWEAK)]
            assert scope.unknown[field_key(IN_SP_SPEND_BIP32_DERIVATION, W.spend_pubkey33)] == m[field_key(IN_SP_SPEND_BIP32_DERIVATION, W.spend_pubkey33)]
        back = psbt.parse(theirs.serialize())
        assert (back.global_map, back.inputs, back.outputs) == (p.global_map, p.inputs, p.outputs)


# --- on a kernel chain, through the CLI ---


def spend_key_file(directory, wallet: kc.Wallet = W):
    path = directory / f"{wallet.name}.spend"
    path.write_text(wallet.spend_key32.hex() + "\n")
    return path


def test_a_spend_through_the_cli_is_mined_by_the_kernel_found_by_its_recipient_and_seen_spent_by_the_wallet(kernel_copy, tmp_path):
    p2wpkh, p2wpkh_script = ss.p2wpkh_address(b"cli p2wpkh")
    p2pkh, p2pkh_script = ss.p2pkh_address(b"cli p2pkh")
    with kc.rest_server(kernel_copy) as rest:
        path = create(tmp_path)
        assert sync(path, "--rest", rest.url).exit_code == 0
        before = listed(path)
        balance = sum(r["amount"] for r in before if not r["spent"])
        sent = invoke(
            "wallet", "send", str(path), "--to", f"{OTHER_ADDRESS}:123456", "--to", f"{p2wpkh}:20000", "--to", f"{p2pkh}:5000",
            "--fee-rate", "3.5", "--out", str(tmp_path / "spend.psbt"), "--json",
        )  # fmt: skip
        assert sent.exit_code == 0, sent.output
        plan = json_lines(sent.stdout)[0]
        assert 3500 * plan["vsize"] <= 1000 * plan["fee"] < 4500 * plan["vsize"]
        signed = invoke("psbt", "sign", str(tmp_path / "spend.psbt"), "--spend-key-file", str(spend_key_file(tmp_path)), "--out", str(tmp_path / "signed.psbt"))
        assert signed.exit_code == 0, signed.output
        extracted = invoke("psbt", "extract", str(tmp_path / "signed.psbt"))
        assert extracted.exit_code == 0, extracted.output
        raw = bytes.fromhex(extracted.stdout.strip())
        spent = psbt.tx.prevouts(psbt.parse((tmp_path / "signed.psbt").read_bytes()))
        assert ss.kernel_verifies(raw, spent) == [True] * len(plan["inputs"])
        assert ss.tx_vsize(raw) == plan["vsize"]
        inputs36 = [bytes.fromhex(t)[::-1] + struct.pack("<I", int(v)) for t, v in (i.split(":") for i in plan["inputs"])]
        block = ss.mine(kernel_copy, raw, inputs36, plan["fee"])
        tx = psbt.parse((tmp_path / "signed.psbt").read_bytes())
        scripts = [o.script for o in psbt.unsigned_tx(tx).outputs]
        assert p2wpkh_script in scripts and p2pkh_script in scripts

        other = create(tmp_path, "other.wallet", wallet=O)
        assert sync(other, "--rest", rest.url, wallet=O).exit_code == 0
        paid = [r for r in listed(other) if r["height"] == block.height]
        assert [(r["amount"], r["label"], r["spent"]) for r in paid] == [(123456, None, False)]

        assert sync(path, "--rest", rest.url).exit_code == 0
        after = listed(path)
        spent_now = {(r["txid"], r["vout"]) for r in after if r["spent"]} - {(r["txid"], r["vout"]) for r in before if r["spent"]}
        assert spent_now == {(t, int(v)) for t, v in (i.split(":") for i in plan["inputs"])}
        change = [r for r in after if r["height"] == block.height]
        assert [(r["label"], r["amount"]) for r in change] == [(0, plan["outputs"][plan["change"]])]
        assert sum(r["amount"] for r in after if not r["spent"]) == balance - 123456 - 20000 - 5000 - plan["fee"]


def test_a_send_with_a_fee_rate_of_20000_is_refused_in_one_line_unless_max_fee_rate_allows_it(kernel_index, tmp_path):
    path = create(tmp_path)
    assert sync(path, "--db", str(kernel_index)).exit_code == 0
    to = f"{ss.p2wpkh_address(b'fee ceiling')[0]}:20000"
    assert_fails(invoke("wallet", "send", str(path), "--to", to, "--fee-rate", "20000"), "above 10000 sat/vB", "--max-fee-rate")
    assert_fails(invoke("wallet", "send", str(path), "--to", to, "--fee-rate", "1000"), "more than the 20,000 sats sent")
    sent = invoke("wallet", "send", str(path), "--to", to, "--fee-rate", "20000", "--max-fee-rate", "20000", "--json", "-o", str(tmp_path / "p.psbt"))
    assert sent.exit_code == 0, sent.output
    assert json_lines(sent.stdout)[0]["fee"] > 2_000_000


def test_the_spend_key_is_taken_from_a_file_the_environment_or_stdin_and_never_printed(tmp_path):
    coins = [ss.sp_coin(W.spend_key32, 11, 60_000)]
    plan = sp_spend.plan_spend(coins, [sp_spend.recipient(OTHER_ADDRESS, 20_000, "regtest")], 1000, change_to())
    (tmp_path / "u.psbt").write_text(sp_spend.build_psbt(plan, W.spend_pubkey33).to_base64())
    key_hex = W.spend_key32.hex()
    runs = [
        invoke("psbt", "sign", str(tmp_path / "u.psbt"), "--spend-key-file", str(spend_key_file(tmp_path))),
        invoke("psbt", "sign", str(tmp_path / "u.psbt"), "--spend-key-file", "-", input=key_hex + "\n"),
        invoke("psbt", "sign", str(tmp_path / "u.psbt"), env={"SP_SCAN_SPEND_KEY": key_hex}),
        invoke("psbt", "sign", str(tmp_path / "u.psbt"), input=key_hex + "\n"),
    ]
    for result in runs:
        assert result.exit_code == 0, result.output
        assert psbt.parse(result.stdout.encode()).inputs[0][field_key(IN_TAP_KEY_SIG)]
    failures = [
        (invoke("psbt", "sign", str(tmp_path / "u.psbt"), "--spend-key-file", key_hex), "looks like a key"),
        (invoke("psbt", "sign", str(tmp_path / "u.psbt"), env={"SP_SCAN_SPEND_KEY": O.spend_key32.hex()}), "a wrong spend key"),
        (invoke("psbt", "sign", str(tmp_path / "u.psbt"), env={"SP_SCAN_SPEND_KEY": key_hex[:-2]}), "64 hex digits"),
        (invoke("psbt", "sign", str(tmp_path / "u.psbt"), input=""), "SP_SCAN_SPEND_KEY"),
        (invoke("psbt", "extract", str(tmp_path / "u.psbt")), "not signed yet"),
    ]
    for result, needle in failures:
        assert_fails(result, needle)
    for result in runs + [r for r, _ in failures]:
        for secret in (key_hex, O.spend_key32.hex(), key_hex[:-2]):
            assert secret not in result.output


def test_a_spend_nobody_can_sign_for_is_refused_in_one_line(tmp_path):
    coins = [ss.sp_coin(W.spend_key32, 12, 60_000)]
    plan = sp_spend.plan_spend(coins, [sp_spend.recipient(OTHER_ADDRESS, 20_000, "regtest")], 1000, change_to())
    p = sp_spend.build_psbt(plan, W.spend_pubkey33)
    other_tweak = hashlib.sha256(b"not this output's tweak").digest()
    bad = psbt.Psbt(p.global_map, [{**p.inputs[0], field_key(IN_SP_TWEAK): other_tweak}], p.outputs)
    (tmp_path / "bad.psbt").write_text(bad.to_base64())
    line = assert_fails(invoke("psbt", "sign", str(tmp_path / "bad.psbt"), "--spend-key-file", str(spend_key_file(tmp_path))), "sp spend: input 0")
    assert W.spend_key32.hex() not in line and other_tweak.hex() not in line


def test_a_spend_is_broadcast_through_a_nodes_rpc_a_blindbit_servers_forward_tx_and_an_electrum_server(kernel_copy, tmp_path):
    from electrum_support import ElectrumX
    from serving import ServerThread, synced_index
    from sp_scan.node import RpcNode

    with kc.rest_server(kernel_copy) as rest, kc.rpc_server(kernel_copy) as rpc:
        path = create(tmp_path)
        assert sync(path, "--rest", rest.url).exit_code == 0
        node_url = rpc.url.replace("http://", "http://user:pass@")
        sent = invoke(
            "wallet", "send", str(path), "--to", f"{OTHER_ADDRESS}:77777", "--fee-rate", "2", "--out", str(tmp_path / "spend.psbt"),
            "--broadcast", "--rpc", node_url, "--spend-key-file", str(spend_key_file(tmp_path)), "--json",
        )  # fmt: skip
        assert sent.exit_code == 0, sent.output
        plan = json_lines(sent.stdout)[0]
        raw_hex = rpc.httpd.relayed[-1]
        assert CTransaction.deserialize(bytes.fromhex(raw_hex)).GetTxid()[::-1].hex() == plan["txid"]
        assert f"broadcast {plan['txid']}" in sent.stderr

        signed = invoke("psbt", "sign", str(tmp_path / "spend.psbt"), "--spend-key-file", str(spend_key_file(tmp_path)), "--out", str(tmp_path / "signed.psbt"))
        assert signed.exit_code == 0, signed.output
        (tmp_path / "tx.hex").write_text(raw_hex + "\n")
        with ServerThread(synced_index(tmp_path / "index.db", rest.url), relay=RpcNode(rpc.url, user="user", password="pass")) as server:
            forwarded = invoke("wallet", "broadcast", str(path), str(tmp_path / "signed.psbt"), "--blindbit", server.url)
        assert forwarded.exit_code == 0, forwarded.output
        assert forwarded.stdout.strip() == plan["txid"]
        electrumx = ElectrumX(int(rpc.url.rsplit(":", 1)[1]), tmp_path / "electrumx", kernel_copy.tip_height)
        (tmp_path / "electrumx").mkdir()
        try:
            electrumx.start()
            by_electrum = invoke("wallet", "broadcast", str(path), str(tmp_path / "tx.hex"), "--electrum", electrumx.url)
        finally:
            electrumx.stop()
        assert by_electrum.exit_code == 0, by_electrum.output
        assert by_electrum.stdout.strip() == plan["txid"]
        relayed = [CTransaction.deserialize(bytes.fromhex(h)).GetTxid()[::-1].hex() for h in rpc.httpd.relayed]
        assert relayed == [plan["txid"]] * 3 and rpc.httpd.relayed[2] == raw_hex  # the PSBT signed again: other signatures, same txid

        refused = invoke("wallet", "broadcast", str(path), str(tmp_path / "tx.hex"), "--electrum", "tcp://127.0.0.1:1")
        assert_fails(refused, "cannot reach the Electrum server")
        assert_fails(invoke("wallet", "broadcast", str(path), str(tmp_path / "tx.hex")), "give one of --rpc URL, --blindbit URL or --electrum URL")

        inputs36 = [bytes.fromhex(t)[::-1] + struct.pack("<I", int(v)) for t, v in (i.split(":") for i in plan["inputs"])]
        ss.mine(kernel_copy, bytes.fromhex(raw_hex), inputs36, plan["fee"])
        assert sync(path, "--rest", rest.url).exit_code == 0
        spent = {(r["txid"], r["vout"]) for r in listed(path) if r["spent"]}
        assert {(t, int(v)) for t, v in (i.split(":") for i in plan["inputs"])} <= spent
