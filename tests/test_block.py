"""Blocks and prevout sources: parsing, tweaks and scan over blocks built from the vectors."""

from __future__ import annotations

import json
from collections import defaultdict
from decimal import Decimal

import pytest
from bitcoin.core import CMutableTransaction, CScript, CTxIn, CTxOut, COutPoint

import blockfactory as bf
from conftest import CASES, SENDING, SENDING_IDS, tx_inputs
from sp_scan import block, extract, formats, reference, wire
from sp_scan.wire import TxOut
from sp_scan.errors import MalformedBlockError, MalformedDataError, PrevoutsError, SPError
from sp_scan.scan import Receiver

ALL = bf.build(bf.receiving_cases())
KEYS = CASES[0]["receiving"][0]["given"]["key_material"]


def receiver_for(given: dict, labels=None) -> Receiver:
    km = given["key_material"]
    from coincurve import PrivateKey

    spend_pub = PrivateKey(bytes.fromhex(km["spend_priv_key"])).public_key.format()
    return Receiver(bytes.fromhex(km["scan_priv_key"]), spend_pub, tuple(given["labels"] if labels is None else labels))


# --- parsing ---


def test_parsed_txids_and_hash_match_python_bitcoinlib():
    parsed = wire.parse_block(ALL.raw)
    assert [t.txid32 for t in parsed.txs] == [t.GetTxid() for t in ALL.txs]
    assert parsed.hash32 == ALL.header.GetHash()
    assert [len(t.inputs) for t in parsed.txs] == [len(t.vin) for t in ALL.txs]


def test_witnesses_and_outputs_are_read_in_order():
    parsed = wire.parse_block(ALL.raw)
    for tx, ref in zip(parsed.txs[1:], ALL.txs[1:]):
        assert [o.script for o in tx.outputs] == [bytes(o.scriptPubKey) for o in ref.vout]
        assert [o.amount for o in tx.outputs] == [o.nValue for o in ref.vout]
        wits = [tuple(w.scriptWitness.stack) for w in ref.wit.vtxinwit] if ref.has_witness() else [()] * len(ref.vin)
        assert [i.witness for i in tx.inputs] == wits


def test_a_block_without_witnesses_parses_in_legacy_form():
    legacy = [r for r in bf.receiving_cases() if not any(v["txinwitness"] for v in r["given"]["vin"])]
    tb = bf.build(legacy[:3])
    assert not any(t.has_witness() for t in tb.txs)
    assert [t.txid32 for t in wire.parse_block(tb.raw).txs] == [t.GetTxid() for t in tb.txs]


def _cut(raw: bytes) -> list[bytes]:
    return [raw[:n] for n in (0, 40, 80, 81, 100, len(raw) // 2, len(raw) - 1)]


@pytest.mark.parametrize("n", range(7))
def test_a_truncated_block_is_malformed(n):
    with pytest.raises(MalformedBlockError, match="truncated"):
        wire.parse_block(_cut(ALL.raw)[n])


def test_trailing_bytes_after_a_block_are_malformed():
    with pytest.raises(MalformedBlockError, match="1 trailing bytes"):
        wire.parse_block(ALL.raw + b"\x00")


def test_a_non_canonical_tx_count_is_malformed():
    raw = ALL.raw[:80] + b"\xfd" + len(ALL.txs).to_bytes(2, "little") + ALL.raw[81:]
    with pytest.raises(MalformedBlockError, match="non-canonical"):
        wire.parse_block(raw)


def test_python_bitcoinlib_would_accept_that_non_canonical_count():
    # Why the parser is our own Reader: python-bitcoinlib does not check canonical compact sizes.
    from bitcoin.core import CBlock

    raw = ALL.raw[:80] + b"\xfd" + len(ALL.txs).to_bytes(2, "little") + ALL.raw[81:]
    assert len(CBlock.deserialize(raw).vtx) == len(ALL.txs)


def test_a_segwit_flag_other_than_1_is_malformed():
    tb = bf.build([next(r for r in bf.receiving_cases() if any(v["txinwitness"] for v in r["given"]["vin"]))])
    coinbase_len = len(tb.txs[0].serialize())
    start = 81 + coinbase_len
    assert tb.raw[start + 4 : start + 6] == b"\x00\x01"
    raw = tb.raw[: start + 5] + b"\x02" + tb.raw[start + 6 :]
    with pytest.raises(MalformedBlockError, match="flag"):
        wire.parse_block(raw)


def test_a_segwit_tx_whose_witnesses_are_all_empty_is_malformed():
    tx = CMutableTransaction([CTxIn(COutPoint(b"\x11" * 32, 0), CScript(b"\x51"))], [CTxOut(1, CScript(b"\x51"))])
    body = tx.serialize()
    segwit = body[:4] + b"\x00\x01" + body[4:-4] + b"\x00" + body[-4:]
    raw = ALL.raw[:80] + b"\x02" + ALL.txs[0].serialize() + segwit
    with pytest.raises(MalformedBlockError, match="superfluous witness"):
        wire.parse_block(raw)


def test_a_block_must_start_with_a_coinbase():
    raw = ALL.raw[:80] + b"\x01" + ALL.txs[1].serialize()
    with pytest.raises(MalformedBlockError, match="coinbase"):
        wire.parse_block(raw)
    with pytest.raises(MalformedBlockError, match="no transactions"):
        wire.parse_block(ALL.raw[:80] + b"\x00")


def test_a_huge_count_fails_fast_as_truncated():
    raw = ALL.raw[:80] + b"\xff" + (2**40).to_bytes(8, "little")
    with pytest.raises(MalformedBlockError, match="exceeds"):
        wire.parse_block(raw)


def test_malformed_block_is_malformed_data():
    assert issubclass(MalformedBlockError, MalformedDataError)


# --- spent outputs ---


def test_spent_outputs_round_trip():
    assert wire.parse_spent(ALL.spent_bytes) == ALL.spent
    assert wire.serialize_spent(ALL.spent) == ALL.spent_bytes
    assert ALL.spent_bytes[:2] == bytes([len(ALL.txs), 0])  # coinbase counted, with 0 entries


def test_spent_outputs_are_strict():
    with pytest.raises(MalformedDataError, match="truncated"):
        wire.parse_spent(ALL.spent_bytes[:-1])
    with pytest.raises(MalformedDataError, match="trailing"):
        wire.parse_spent(ALL.spent_bytes + b"\x00")
    with pytest.raises(MalformedDataError, match="non-canonical"):
        wire.parse_spent(b"\xfd\x01\x00\x00")
    negative = wire.serialize_spent([[], [TxOut(0, b"")]]).replace(b"\x00" * 8, b"\xff" * 8)
    with pytest.raises(MalformedDataError, match="out of range"):
        wire.parse_spent(negative)


def test_spent_outputs_for_a_different_tx_count_are_a_prevouts_error():
    spent = wire.serialize_spent(ALL.spent[:-1])
    with pytest.raises(PrevoutsError, match="cover 28 transactions, the block has 29"):
        reference.block.tweaks(ALL.raw, spent)
    with pytest.raises(PrevoutsError):
        block.tweaks(ALL.raw, spent)


def test_spent_outputs_for_a_different_input_count_are_a_prevouts_error():
    spent = [list(tx) for tx in ALL.spent]
    spent[3].append(TxOut(1, b"\x51"))
    receiver = receiver_for(CASES[0]["receiving"][0]["given"])
    with pytest.raises(PrevoutsError, match=r"transaction 3 \(\w{64}\) has \d+ inputs but \d+ spent outputs"):
        reference.block.scan(ALL.raw, wire.serialize_spent(spent), receiver)
    with pytest.raises(PrevoutsError):
        block.scan(ALL.raw, wire.serialize_spent(spent), receiver)


def test_spent_outputs_giving_the_coinbase_prevouts_are_a_prevouts_error():
    spent = [[TxOut(1, b"\x51")]] + ALL.spent[1:]
    with pytest.raises(PrevoutsError, match="coinbase"):
        reference.block.tweaks(ALL.raw, wire.serialize_spent(spent))
    with pytest.raises(PrevoutsError):
        block.tweaks(ALL.raw, wire.serialize_spent(spent))


# --- tweaks and scan ---


def test_tweaks_are_the_vectors_tweaks_in_block_order():
    got = block.tweaks(ALL.raw, ALL.spent_bytes)
    expected = [(tx.GetTxid(), r["expected"]["tweak"]) for tx, r in zip(ALL.txs[1:], ALL.cases) if r["expected"]["tweak"]]
    assert [(t.txid32, t.tweak33.hex()) for t in got] == expected
    assert len(got) == 26


def test_a_tx_without_taproot_outputs_has_no_tweak():
    case = dict(bf.receiving_cases()[0])
    case["given"] = dict(case["given"], outputs=[])
    tb = bf.build([case])
    assert block.tweaks(tb.raw, tb.spent_bytes) == []


def test_a_tx_spending_segwit_v2_has_no_tweak():
    case = json.loads(json.dumps(bf.receiving_cases()[0]))
    case["given"]["vin"][0]["prevout"]["scriptPubKey"]["hex"] = "5220" + "11" * 32
    tb = bf.build([case])
    assert block.tweaks(tb.raw, tb.spent_bytes) == []
    reports = list(block.classify_inputs(tb.raw, tb.spent_bytes))
    assert all(r.tx_excluded and r.pubkey is None for r in reports)
    assert reports[0].script_type is extract.ScriptType.WITNESS_UNKNOWN


RECEIVING_IDS = [f"{n:02d}" for n, _ in enumerate(bf.receiving_cases())]


@pytest.mark.parametrize("case", bf.receiving_cases(), ids=RECEIVING_IDS)
def test_scan_finds_each_vector_output_at_its_vout_and_amount(case):
    tb = bf.build([case])
    found = block.scan(tb.raw, tb.spent_bytes, receiver_for(case["given"]))
    outputs = case["given"]["outputs"]
    expected = {(o["pub_key"], o["priv_key_tweak"]) for o in case["expected"]["outputs"]}
    assert {(m.found.output32.hex(), m.found.tweak32.hex()) for m in found} == expected
    txid = tb.txs[1].GetTxid()
    for m in found:
        vout = 1 + outputs.index(m.found.output32.hex())
        assert (m.txid32, m.vout, m.amount) == (txid, vout, bf.amount(0, vout))
    assert [m.vout for m in found] == sorted(m.vout for m in found)


def test_one_wallet_scanning_a_block_finds_every_output_of_its_cases():
    wallet = bf.build(bf.wallet_cases())
    found = block.scan(wallet.raw, wallet.spent_bytes, receiver_for(wallet.cases[0]["given"]))
    by_tx = defaultdict(set)
    for m in found:
        by_tx[m.txid32].add((m.found.output32.hex(), m.found.tweak32.hex()))
    expected = defaultdict(set)
    for tx, r in zip(wallet.txs[1:], wallet.cases):
        expected[tx.GetTxid()] |= {(o["pub_key"], o["priv_key_tweak"]) for o in r["expected"]["outputs"]}
    assert by_tx == {t: s for t, s in expected.items() if s}
    assert len(found) == 18


@pytest.mark.parametrize(("n", "sending"), SENDING, ids=SENDING_IDS)
def test_classify_inputs_gives_the_vectors_input_keys(n, sending):
    vin = sending["given"]["vin"]
    tb = bf.build([{"given": {"vin": vin, "outputs": ["00" * 31 + "01"]}, "expected": {}}])
    reports = list(block.classify_inputs(tb.raw, tb.spent_bytes))
    assert [r.vin for r in reports] == list(range(len(vin)))
    keys = [(r.pubkey if len(r.pubkey) == 33 else b"\x02" + r.pubkey).hex() for r in reports if r.pubkey]
    assert keys == sending["expected"]["input_pub_keys"]
    assert [r.script_type for r in reports] == [extract.script_type(i.prevout_script) for i in tx_inputs(vin)]


# --- text forms ---


def test_spenttxouts_json_converts_to_the_binary_form():
    assert formats.spent_from_json(formats.load_json(bf.spenttxouts_json(ALL.spent).encode(), "x")) == ALL.spent_bytes


def test_getblock3_json_gives_the_raw_block_and_its_spent_outputs():
    data = bf.dumps(bf.getblock3(ALL)).encode()
    raw, spent = formats.load_block(data)
    assert raw == ALL.raw and spent == ALL.spent_bytes
    assert formats.load_spent(data) == ALL.spent_bytes
    wrapped = bf.dumps({"result": bf.getblock3(ALL), "error": None, "id": 1}).encode()
    assert formats.load_block(wrapped) == (ALL.raw, ALL.spent_bytes)


def test_getblock_json_without_prevouts_is_a_prevouts_error():
    obj = bf.getblock3(ALL)
    del obj["tx"][2]["vin"][0]["prevout"]
    with pytest.raises(PrevoutsError, match="verbosity 3"):
        formats.load_block(bf.dumps(obj).encode())
    obj["tx"] = [tx["txid"] for tx in obj["tx"]]
    with pytest.raises(PrevoutsError, match="verbosity 3"):
        formats.load_spent(bf.dumps(obj).encode())


def test_getblock_json_whose_header_does_not_hash_to_its_hash_is_malformed():
    obj = bf.getblock3(ALL)
    obj["nonce"] += 1
    with pytest.raises(MalformedDataError, match="hash"):
        formats.load_block(bf.dumps(obj).encode())
    del obj["merkleroot"]
    with pytest.raises(MalformedDataError, match="merkleroot"):
        formats.load_block(bf.dumps(obj).encode())


@pytest.mark.parametrize(
    ("value", "expected"),
    [(Decimal("0.00000001"), 1), (Decimal("20999999.9769"), 2099999997690000), (0, 0), (1, 100_000_000), (0.1, 10_000_000), (Decimal("0.3"), 30_000_000)],
)
def test_btc_amounts_convert_exactly_to_sats(value, expected):
    assert formats.sats(value) == expected


@pytest.mark.parametrize("value", [Decimal("0.000000001"), Decimal("-1"), Decimal("21000000.00000001"), True, "1", None, Decimal("NaN")])
def test_bad_btc_amounts_are_malformed(value):
    with pytest.raises(MalformedDataError):
        formats.sats(value)


def test_formats_are_detected():
    assert formats.detect_format(ALL.spent_bytes) == "bin"
    assert formats.detect_format(ALL.spent_bytes.hex().encode() + b"\n") == "hex"
    assert formats.detect_format(bf.spenttxouts_json(ALL.spent).encode()) == "json"
    assert formats.detect_format(b"hello world\n") is None
    assert formats.load_spent(ALL.spent_bytes.hex().encode() + b"\n") == ALL.spent_bytes
    assert formats.load_spent(ALL.spent_bytes) == ALL.spent_bytes
    assert formats.load_block(ALL.raw.hex().encode()) == (ALL.raw, None)


@pytest.mark.parametrize("data", [b"hello\n", b"abc", b"zz" * 10, b"ab cd"])
def test_unknown_or_bad_text_is_malformed(data):
    with pytest.raises(MalformedDataError):
        formats.load_spent(data)
    with pytest.raises(MalformedDataError):
        formats.load_block(data)


def test_bad_json_is_malformed():
    with pytest.raises(MalformedDataError, match="not JSON"):
        formats.load_spent(b'[[{"value": 1,')
    with pytest.raises(MalformedDataError, match="array of arrays"):
        formats.load_spent(b'[{"value": 1}]')
    with pytest.raises(MalformedDataError, match="scriptPubKey"):
        formats.load_spent(b'[[], [{"value": 1}]]')


@pytest.mark.parametrize("text", ["0", "0g", "ab cd", " zz", "\u00e9\u00e9"])
def test_from_hex_rejects_non_hex(text):
    with pytest.raises(MalformedDataError, match="thing: not hex"):
        formats.from_hex(text, "thing")


def test_from_hex_allows_surrounding_whitespace():
    assert formats.from_hex(" abCD\n", "x") == b"\xab\xcd"


# --- backends: the dispatched block loop (native when built) agrees with the reference ---


def test_block_backends_agree_on_every_vector_case():
    for case in bf.receiving_cases():
        tb = bf.build([case])
        assert block.tweaks(tb.raw, tb.spent_bytes) == reference.block.tweaks(tb.raw, tb.spent_bytes)
        receiver = receiver_for(case["given"])
        assert block.scan(tb.raw, tb.spent_bytes, receiver) == reference.block.scan(tb.raw, tb.spent_bytes, receiver)


def _bad_inputs():
    spent = [list(tx) for tx in ALL.spent]
    more = [list(tx) for tx in ALL.spent]
    more[2].append(TxOut(1, b"\x51"))
    yield "truncated", ALL.raw[:-3], ALL.spent_bytes
    yield "trailing", ALL.raw + b"\x00", ALL.spent_bytes
    yield "non-canonical", ALL.raw[:80] + b"\xfd" + len(ALL.txs).to_bytes(2, "little") + ALL.raw[81:], ALL.spent_bytes
    yield "no coinbase", ALL.raw[:80] + b"\x01" + ALL.txs[1].serialize(), wire.serialize_spent(spent[1:2])
    yield "spent truncated", ALL.raw, ALL.spent_bytes[:-2]
    yield "spent trailing", ALL.raw, ALL.spent_bytes + b"\x00"
    yield "tx count", ALL.raw, wire.serialize_spent(spent[:-1])
    yield "input count", ALL.raw, wire.serialize_spent(more)
    yield "coinbase prevouts", ALL.raw, wire.serialize_spent([[TxOut(1, b"\x51")]] + spent[1:])


@pytest.mark.parametrize(("name", "raw", "spent"), list(_bad_inputs()), ids=[n for n, _, _ in _bad_inputs()])
def test_block_backends_raise_the_same_error_type(name, raw, spent):
    with pytest.raises(MalformedDataError if "spent" in name else (MalformedBlockError, PrevoutsError)) as ref:
        reference.block.tweaks(raw, spent)
    with pytest.raises(SPError) as got:
        block.tweaks(raw, spent)
    assert type(got.value) is type(ref.value)
