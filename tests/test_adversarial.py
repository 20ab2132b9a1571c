"""Adversarial inputs: worst-case transactions, hostile serialization, truncation, and the scan key.

A scanner reads blocks anyone can fill. Each test names the attack; both backends must give a
typed error (or the right result) in bounded time, and the CLI one line with exit status 2.
"""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from coincurve import PrivateKey

from helpers import secret
from sp_scan import address, block, crypto, extract, native, reference, scan, send, wire
from sp_scan import cli as CLI
from sp_scan.wire import TxOut, compact_size, serialize_spent
from sp_scan.errors import MalformedBlockError, MalformedDataError, PrevoutsError, SPError
from sp_scan.types import OutPoint, TxInput

ROOT = Path(__file__).resolve().parent.parent
BLOCKS = ROOT / "vectors" / "blocks"
SMALL_BLOCK = bytes.fromhex((BLOCKS / "small.hex").read_text())
SMALL_SPENT = bytes.fromhex((BLOCKS / "small.spent.hex").read_text())
REFERENCE_RUN = os.environ.get("SP_SCAN_BACKEND") == "reference"
native_only = pytest.mark.skipif(REFERENCE_RUN, reason="the native path is off under SP_SCAN_BACKEND=reference")

SCAN_KEY, SPEND_KEY = secret(500), secret(501)
SCAN_HEX = SCAN_KEY.hex()
SPEND_PUB = PrivateKey(SPEND_KEY).public_key.format()
RECEIVER = scan.Receiver(SCAN_KEY, SPEND_PUB, (3,))
SCAN_PUB = PrivateKey(SCAN_KEY).public_key.format()


def sp_address(label: int | None = None) -> address.SPAddress:
    spend = SPEND_PUB if label is None else address.labelled_spend_pubkey(SCAN_KEY, SPEND_PUB, label)
    return address.SPAddress("sp", 0, SCAN_PUB, spend)


# ---- a tiny block writer, with hooks to plant hostile compact sizes ----

HEADER = bytes(80)
COINBASE = (
    b"\x01\x00\x00\x00" + b"\x01" + bytes(32) + b"\xff" * 4 + b"\x02\x51\x51" + b"\xff" * 4
    + b"\x01" + (50 * 10**8).to_bytes(8, "little") + b"\x01\x51" + bytes(4)
)  # fmt: skip


def p2wpkh(key33: bytes) -> bytes:
    return b"\x00\x14" + crypto.hash160(key33)


def p2tr(x32: bytes) -> bytes:
    return b"\x51\x20" + x32


def txout(amount: int, script: bytes, script_len: bytes | None = None) -> bytes:
    return amount.to_bytes(8, "little") + (script_len or compact_size(len(script))) + script


def tx(inputs: list[tuple[OutPoint, bytes, tuple[bytes, ...]]], outputs: list[bytes], **raw: bytes) -> bytes:
    """A segwit tx; `raw` replaces the encoding of n_in, n_out, sig_len, wit_count or wit_len (first input / item)."""
    body = b"\x02\x00\x00\x00\x00\x01" + raw.get("n_in", compact_size(len(inputs)))
    for n, (op, sig, _) in enumerate(inputs):
        body += op.to_bytes() + (raw.get("sig_len", compact_size(len(sig))) if n == 0 else compact_size(len(sig))) + sig + b"\xfd\xff\xff\xff"
    body += raw.get("n_out", compact_size(len(outputs))) + b"".join(outputs)
    for n, (_, _, wit) in enumerate(inputs):
        body += raw.get("wit_count", compact_size(len(wit))) if n == 0 else compact_size(len(wit))
        for j, item in enumerate(wit):
            body += (raw.get("wit_len", compact_size(len(item))) if n == j == 0 else compact_size(len(item))) + item
    return body + bytes(4)


def make_block(*txs: bytes, n_tx: bytes | None = None) -> bytes:
    return HEADER + (n_tx or compact_size(1 + len(txs))) + COINBASE + b"".join(txs)


def spend_p2wpkh(n: int, key32: bytes) -> tuple[tuple[OutPoint, bytes, tuple[bytes, ...]], TxOut]:
    """An input spending a P2WPKH output of key32, and the TxOut it spends."""
    key33 = PrivateKey(key32).public_key.format()
    return (OutPoint(crypto.tagged_hash(crypto.TAG_LABEL, b"prev %d" % n), n), b"", (b"\x30" * 71, key33)), TxOut(10_000 + n, p2wpkh(key33))


def paying_tx(n_paid: int, label: int | None = None, extra: list[bytes] = (), seed: int = 1):
    """A one-input tx paying RECEIVER n_paid times, shuffled with the x-only keys in `extra`.

    Returns (tx bytes, its TxOut spent, the inputs as TxInput, the outputs32 in tx order, the paid outputs32).
    """
    (inp, prev) = spend_p2wpkh(seed, secret(600 + seed))
    paid = send.create_outputs([inp[0]], [send.InputKey(secret(600 + seed), False)], [sp_address(label)] * n_paid)
    outputs32 = list(paid) + list(extra)
    random.Random(seed).shuffle(outputs32)
    raw = tx([inp], [txout(330, p2tr(x)) for x in outputs32])
    return raw, prev, [TxInput(inp[0], inp[1], inp[2], prev.script)], outputs32, paid


def spent_for(*prevs: TxOut) -> bytes:
    return serialize_spent([[], *([p] for p in prevs)])


# ---- helpers to run both backends and the CLI ----

BACKENDS = {
    "tweaks": lambda b, s: block.tweaks(b, s),
    "tweaks_reference": lambda b, s: reference.block.tweaks(b, s),
    "scan": lambda b, s: block.scan(b, s, RECEIVER),
    "scan_reference": lambda b, s: reference.block.scan(b, s, RECEIVER),
}


def assert_every_backend_raises(error: type[SPError], block_bytes: bytes, spent_bytes: bytes, seconds: float = 1.0) -> None:
    for name, f in BACKENDS.items():
        start = time.perf_counter()
        with pytest.raises(error) as caught:
            f(block_bytes, spent_bytes)
        assert type(caught.value) is error, (name, caught.value)  # the exact class, not a subclass
        assert time.perf_counter() - start < seconds, name


def invoke(*args: str, env: dict | None = None, input: str | None = None):
    clean = {"SP_SCAN_KEY": None, "SP_SCAN_SPEND_PUBKEY": None, "SP_SCAN_RPC_PASSWORD": None}
    return CliRunner().invoke(CLI.app, list(args), env={**clean, **(env or {})}, input=input)


def assert_cli_fails(result) -> str:
    """Exit 2, one `sp-scan: error:` line on stderr, no traceback, no scan key anywhere."""
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("sp-scan: error: "), result.stderr
    assert "Traceback" not in result.output and SCAN_HEX not in result.output
    return lines[0]


def write(dir_: Path, name: str, block_bytes: bytes, spent_bytes: bytes) -> str:
    (dir_ / f"{name}.hex").write_text(block_bytes.hex() + "\n")
    (dir_ / f"{name}.spent.hex").write_text(spent_bytes.hex() + "\n")
    return str(dir_ / f"{name}.hex")


def scan_args(*paths: str) -> list[str]:
    return ["scan", *paths, "--spend-pubkey", SPEND_PUB.hex(), "--label", "3", "--json"]


KEY_ENV = {"SP_SCAN_KEY": SCAN_HEX}


# ---- worst-case transactions ----


@pytest.fixture(scope="module")
def huge_tx():
    """23,250 P2TR outputs, 2,323 of them paying RECEIVER's change label, spread among 20,927 others."""
    rng = random.Random(23250)
    others = [rng.randbytes(32) for _ in range(23_250 - scan.K_MAX)]
    return paying_tx(scan.K_MAX, label=0, extra=others, seed=23250)


@native_only
def test_a_23250_output_tx_with_2323_change_label_matches_scans_in_bounded_time(huge_tx):
    raw, prev, inputs, outputs32, paid = huge_tx
    assert native.ENABLED
    start = time.perf_counter()
    found = scan.scan_tx(inputs, outputs32, RECEIVER)
    elapsed = time.perf_counter() - start
    assert len(found) == scan.K_MAX == 2323
    assert {f.output32 for f in found} == set(paid) and {f.label for f in found} == {0}
    assert elapsed < 10, elapsed


@native_only
def test_the_23250_output_tx_in_a_block_scans_in_bounded_time_from_the_library_and_the_cli(huge_tx, tmp_path):
    raw, prev, _, _, paid = huge_tx
    block_bytes, spent_bytes = make_block(raw), spent_for(prev)
    start = time.perf_counter()
    found = block.scan(block_bytes, spent_bytes, RECEIVER)
    assert time.perf_counter() - start < 10
    assert len(found) == 2323 and {m.found.output32 for m in found} == set(paid)
    assert [m.vout for m in found] == sorted(m.vout for m in found)
    result = invoke(*scan_args(write(tmp_path, "huge", block_bytes, spent_bytes)), env=KEY_ENV)
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(lines) == 2323 and {r["output"] for r in lines} == {p.hex() for p in paid}


def worst_case_script_sig(key33: bytes, dummies: int = 291) -> bytes:
    """Core's P2PKH worst case: 291 pushes of a 33-byte dummy, then <sig71> <key>: exactly 10,000 bytes."""
    return (b"\x21" + b"\x02" * 33) * dummies + b"\x47" + b"\x30" * 71 + b"\x21" + key33


def test_the_10000_byte_p2pkh_script_sig_gives_the_key_from_both_backends_quickly():
    key33 = PrivateKey(secret(700)).public_key.format()
    sig = worst_case_script_sig(key33)
    spk = b"\x76\xa9\x14" + crypto.hash160(key33) + b"\x88\xac"
    assert len(sig) == 10_000
    for f in (extract.input_pubkey, reference.extract.input_pubkey):
        start = time.perf_counter()
        assert f(spk, sig, ()) == key33
        assert time.perf_counter() - start < 0.5


def test_a_10000_byte_script_sig_without_the_key_or_with_a_truncated_tail_gives_none():
    key33 = PrivateKey(secret(700)).public_key.format()
    spk = b"\x76\xa9\x14" + crypto.hash160(key33) + b"\x88\xac"
    other = PrivateKey(secret(701)).public_key.format()
    for sig in (
        worst_case_script_sig(other),  # every push hashed, none matches
        worst_case_script_sig(key33)[:-1],  # the last push is truncated: unparsable, so no key
        b"\x4e\xff\xff\xff\xff" + b"\x00" * 9995,  # PUSHDATA4 claiming 4 GiB
        (b"\x4d\xff\xff") + b"\x21" * 9997,  # PUSHDATA2 past the end
    ):
        assert extract.input_pubkey(spk, sig, ()) is None
        assert reference.extract.input_pubkey(spk, sig, ()) is None


def test_the_10000_byte_script_sig_in_a_block_gives_the_same_tweak_from_both_backends():
    key32 = secret(702)
    key33 = PrivateKey(key32).public_key.format()
    op = OutPoint(b"\x42" * 32, 0)
    prev = TxOut(5000, b"\x76\xa9\x14" + crypto.hash160(key33) + b"\x88\xac")
    paid = send.create_outputs([op], [send.InputKey(key32, False)], [sp_address()])
    block_bytes = make_block(tx([(op, worst_case_script_sig(key33), (b"\x01",))], [txout(330, p2tr(paid[0]))]))
    # A legacy scriptSig with a witness would be rejected by Core; the parser only needs it well-formed.
    spent_bytes = spent_for(prev)
    tweaks = block.tweaks(block_bytes, spent_bytes)
    assert tweaks == reference.block.tweaks(block_bytes, spent_bytes) and len(tweaks) == 1
    assert [m.found.output32 for m in block.scan(block_bytes, spent_bytes, RECEIVER)] == paid


# ---- hostile compact sizes ----

HUGE = [b"\xff" * 9, b"\xff" + (2**64 - 2).to_bytes(8, "little"), b"\xff" + (2**32).to_bytes(8, "little"), b"\xfe\xff\xff\xff\xff"]
NON_CANONICAL_ONE = [b"\xfd\x01\x00", b"\xfe\x01\x00\x00\x00", b"\xff\x01" + bytes(7)]


def _valid_tx():
    (inp, prev) = spend_p2wpkh(1, secret(800))
    return [inp], [txout(330, p2tr(PrivateKey(secret(801)).public_key.format()[1:]))], prev


def test_the_unaltered_hostile_block_template_parses():
    inputs, outputs, prev = _valid_tx()
    block_bytes, spent_bytes = make_block(tx(inputs, outputs)), spent_for(prev)
    assert len(block.tweaks(block_bytes, spent_bytes)) == 1
    assert block.tweaks(block_bytes, spent_bytes) == reference.block.tweaks(block_bytes, spent_bytes)


@pytest.mark.parametrize("size", HUGE, ids=lambda b: b.hex())
@pytest.mark.parametrize("where", ["n_tx", "n_in", "n_out", "sig_len", "wit_count", "wit_len"])
def test_a_huge_compact_size_in_a_block_fails_fast_as_malformed(where, size):
    inputs, outputs, prev = _valid_tx()
    if where == "n_tx":
        block_bytes = make_block(tx(inputs, outputs), n_tx=size)
    else:
        block_bytes = make_block(tx(inputs, outputs, **{where: size}))
    assert_every_backend_raises(MalformedBlockError, block_bytes, spent_for(prev))


@pytest.mark.parametrize("size", NON_CANONICAL_ONE, ids=lambda b: b.hex())
@pytest.mark.parametrize("where", ["n_tx", "n_in", "n_out", "wit_count"])
def test_a_non_canonical_compact_size_in_a_block_is_malformed(where, size):
    inputs, outputs, prev = _valid_tx()
    if where == "n_tx":
        block_bytes = make_block(tx(inputs, outputs), n_tx=b"\xfd\x02\x00")
    else:
        block_bytes = make_block(tx(inputs, outputs, **{where: size}))
    assert_every_backend_raises(MalformedBlockError, block_bytes, spent_for(prev))


def test_a_tx_count_of_2_64_minus_1_with_nothing_after_it_fails_fast():
    assert_every_backend_raises(MalformedBlockError, HEADER + b"\xff" * 9, b"\x00")


def _spent(n_tx: bytes = b"\x02", n_in: bytes = b"\x01", script_len: bytes | None = None) -> bytes:
    _, _, prev = _valid_tx()
    return n_tx + b"\x00" + n_in + txout(prev.amount, prev.script, script_len)


@pytest.mark.parametrize("size", HUGE + NON_CANONICAL_ONE, ids=lambda b: b.hex())
@pytest.mark.parametrize("where", ["n_tx", "n_in", "script_len"])
def test_a_huge_or_non_canonical_compact_size_in_spent_data_is_malformed(where, size):
    inputs, outputs, prev = _valid_tx()
    assert _spent() == spent_for(prev)
    if where == "script_len" and size in NON_CANONICAL_ONE:
        size = b"\xfd" + len(prev.script).to_bytes(2, "little")
    spent_bytes = _spent(**{where: size})
    assert_every_backend_raises(MalformedDataError, make_block(tx(inputs, outputs)), spent_bytes)
    with pytest.raises(MalformedDataError):
        wire.parse_spent(spent_bytes)


@pytest.mark.parametrize("size", HUGE, ids=lambda b: b.hex())
def test_a_huge_witness_count_or_item_length_is_malformed(size):
    for data in (size, b"\x01" + size, b"\x02\x00" + size + b"\x00"):
        with pytest.raises(MalformedDataError):
            wire.parse_witness(data)


# ---- spent data that does not match the block ----


def _two_tx_block():
    a, pa = spend_p2wpkh(1, secret(810))
    b, pb = spend_p2wpkh(2, secret(811))
    out = [txout(330, p2tr(PrivateKey(secret(812)).public_key.format()[1:]))]
    return make_block(tx([a], out), tx([a, b], out)), pa, pb


@pytest.mark.parametrize(
    "shape",
    ["one tx fewer", "one tx more", "coinbase given a prevout", "one input fewer", "one input more", "swapped counts", "empty"],
)
def test_spent_data_that_does_not_match_the_blocks_inputs_is_a_prevouts_error(shape, tmp_path):
    block_bytes, pa, pb = _two_tx_block()
    assert block.tweaks(block_bytes, serialize_spent([[], [pa], [pa, pb]])) is not None
    spent = {
        "one tx fewer": [[], [pa]],
        "one tx more": [[], [pa], [pa, pb], []],
        "coinbase given a prevout": [[pa], [pa], [pa, pb]],
        "one input fewer": [[], [pa], [pa]],
        "one input more": [[], [pa], [pa, pb, pb]],
        "swapped counts": [[], [pa, pb], [pa]],
        "empty": [],
    }[shape]
    spent_bytes = serialize_spent(spent)
    assert_every_backend_raises(PrevoutsError, block_bytes, spent_bytes)
    assert_cli_fails(invoke(*scan_args(write(tmp_path, "b", block_bytes, spent_bytes)), env=KEY_ENV))


def test_the_small_sample_block_with_another_blocks_spent_data_is_a_prevouts_error():
    _, pa, _ = _two_tx_block()
    assert_every_backend_raises(PrevoutsError, SMALL_BLOCK, spent_for(pa))


# ---- outputs off the curve, keys summing to infinity ----


def _off_curve_xs(count: int) -> list[bytes]:
    xs = [b"\xff" * 32, bytes(32)]
    i = 0
    while len(xs) < count:
        x = crypto.tagged_hash(crypto.TAG_LABEL, b"off %d" % i)
        if crypto.lift_x(x) is None:
            xs.append(x)
        i += 1
    return xs


OFF_CURVE = _off_curve_xs(6)


@pytest.mark.parametrize("label", [None, 0, 3], ids=["unlabelled", "change", "label-3"])
def test_outputs_whose_x_is_not_on_the_curve_are_skipped(label):
    raw, prev, inputs, outputs32, paid = paying_tx(3, label=label, extra=OFF_CURVE, seed=5)
    expected = reference.scan.scan_tx(inputs, outputs32, RECEIVER)
    assert {f.output32 for f in expected} == set(paid) and len(expected) == 3
    assert scan.scan_tx(inputs, outputs32, RECEIVER) == expected
    assert scan.scan_tx(inputs, OFF_CURVE, RECEIVER) == [] == reference.scan.scan_tx(inputs, OFF_CURVE, RECEIVER)
    block_bytes, spent_bytes = make_block(raw), spent_for(prev)
    found = block.scan(block_bytes, spent_bytes, RECEIVER)
    assert found == reference.block.scan(block_bytes, spent_bytes, RECEIVER)
    assert {m.found.output32 for m in found} == set(paid)


def test_a_tx_whose_only_p2tr_outputs_are_off_the_curve_still_gets_its_tweak():
    (inp, prev) = spend_p2wpkh(9, secret(820))
    block_bytes, spent_bytes = make_block(tx([inp], [txout(330, p2tr(x)) for x in OFF_CURVE])), spent_for(prev)
    assert len(block.tweaks(block_bytes, spent_bytes)) == 1 == len(reference.block.tweaks(block_bytes, spent_bytes))
    assert block.scan(block_bytes, spent_bytes, RECEIVER) == [] == reference.block.scan(block_bytes, spent_bytes, RECEIVER)


def _negated(key32: bytes) -> bytes:
    return (crypto.N - int.from_bytes(key32, "big")).to_bytes(32, "big")


@pytest.mark.parametrize("kinds", ["p2wpkh+p2wpkh", "p2tr+p2wpkh"])
def test_keys_summing_to_infinity_give_no_tweak_and_no_match(kinds, tmp_path):
    a = secret(830)
    pa = PrivateKey(a).public_key.format()
    if kinds == "p2tr+p2wpkh":
        # The taproot key counts as even-Y lift_x(x): cancel it with the P2WPKH key -lift_x(x).
        if pa[0] == 3:
            a = _negated(a)
            pa = PrivateKey(a).public_key.format()
        first_prev = TxOut(1000, p2tr(pa[1:]))
        first = (OutPoint(b"\x01" * 32, 0), b"", (b"\x01" * 64,))
    else:
        first_prev = TxOut(1000, p2wpkh(pa))
        first = (OutPoint(b"\x01" * 32, 0), b"", (b"\x30" * 71, pa))
    neg33 = PrivateKey(_negated(a)).public_key.format()
    second = (OutPoint(b"\x02" * 32, 0), b"", (b"\x30" * 71, neg33))
    second_prev = TxOut(1000, p2wpkh(neg33))
    outputs = [txout(330, p2tr(PrivateKey(secret(831)).public_key.format()[1:]))]
    block_bytes = make_block(tx([first, second], outputs))
    spent_bytes = serialize_spent([[], [first_prev, second_prev]])
    inputs = [TxInput(op, s, w, p.script) for (op, s, w), p in ((first, first_prev), (second, second_prev))]
    assert len(extract.tx_pubkeys(inputs)) == 2
    assert block.tweaks(block_bytes, spent_bytes) == [] == reference.block.tweaks(block_bytes, spent_bytes)
    assert block.scan(block_bytes, spent_bytes, RECEIVER) == []
    result = invoke("tweaks", write(tmp_path, "inf", block_bytes, spent_bytes), "--json")
    assert result.exit_code == 0 and result.stdout == ""


# ---- truncation at every byte offset ----


def test_the_small_block_truncated_at_every_byte_offset_is_malformed_from_both_backends():
    for cut in range(len(SMALL_BLOCK)):
        for f in (block.tweaks, reference.block.tweaks):
            with pytest.raises(MalformedBlockError):
                f(SMALL_BLOCK[:cut], SMALL_SPENT)


def test_the_small_blocks_spent_data_truncated_at_every_byte_offset_is_malformed_from_both_backends():
    for cut in range(len(SMALL_SPENT)):
        for f in (block.tweaks, reference.block.tweaks):
            with pytest.raises(MalformedDataError):
                f(SMALL_BLOCK, SMALL_SPENT[:cut])


def test_the_cli_exits_2_with_one_line_on_truncated_sample_files(tmp_path):
    rng = random.Random(17)
    cuts = sorted({0, 1, 79, 80, 81, len(SMALL_BLOCK) - 1, *rng.sample(range(len(SMALL_BLOCK)), 12)})
    for cut in cuts:
        line = assert_cli_fails(invoke(*scan_args(write(tmp_path, "cut", SMALL_BLOCK[:cut], SMALL_SPENT)), env=KEY_ENV))
        assert "cut.hex" in line or "block" in line
    for cut in sorted({0, 1, len(SMALL_SPENT) - 1, *rng.sample(range(len(SMALL_SPENT)), 5)}):
        assert_cli_fails(invoke(*scan_args(write(tmp_path, "scut", SMALL_BLOCK, SMALL_SPENT[:cut])), env=KEY_ENV))


# ---- JSON Lines already printed stay valid ----


def _small_scan_args() -> list[str]:
    w = json.loads((BLOCKS / "small.expected.json").read_text())["wallet"]
    args = ["scan", str(BLOCKS / "small.hex"), "--scan-key-file", str(BLOCKS / w["scan_key_file"]), "--spend-pubkey", w["spend_pubkey"]]
    args += [a for m in w["labels"] for a in ("--label", str(m))] + ["--json"]
    return args


BROKEN = {
    "truncated": (SMALL_BLOCK[:-1], SMALL_SPENT),
    "trailing byte": (SMALL_BLOCK + b"\x00", SMALL_SPENT),
    "huge tx count": (SMALL_BLOCK[:80] + b"\xff" * 9 + SMALL_BLOCK[81:], SMALL_SPENT),
    "spent of another block": (SMALL_BLOCK, serialize_spent([[], []])),
    "spent truncated": (SMALL_BLOCK, SMALL_SPENT[:-3]),
}


@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.parametrize("broken", list(BROKEN) + ["not hex"])
def test_json_lines_printed_before_a_malformed_later_block_stay_valid(broken, jobs, tmp_path):
    good_args = _small_scan_args()
    good = invoke(*good_args)
    assert good.exit_code == 0 and good.stdout
    if broken == "not hex":
        (tmp_path / "bad.hex").write_text("zz" * 40)
        (tmp_path / "bad.spent.hex").write_text(SMALL_SPENT.hex())
        bad = str(tmp_path / "bad.hex")
    else:
        bad = write(tmp_path, "bad", *BROKEN[broken])
    args = good_args[:2] + [str(BLOCKS / "small.hex"), bad] + good_args[2:] + ["--jobs", jobs]
    result = invoke(*args)
    assert_cli_fails(result)
    lines = result.stdout.splitlines()
    assert [json.loads(line) for line in lines] == [json.loads(line) for line in good.stdout.splitlines()] * 2


# ---- the scan key: never on argv, never printed ----

KEYED_OPTIONS = ["--label", "--from", "--to", "--jobs", "--spent", "--rest", "--rpc", "--rpc-cookie", "--rpc-user", "--spend-pubkey", "--scan-key-file"]


@pytest.mark.parametrize("command", ["scan", "tweaks", "extract", "auto"])
@pytest.mark.parametrize("option", [*KEYED_OPTIONS, "--scan-key", "--key", "argument"])
def test_a_scan_key_given_on_argv_is_refused_and_never_echoed(command, option):
    args = [] if command == "auto" else [command]
    args += [str(BLOCKS / "small.hex")] + ([SCAN_HEX] if option == "argument" else [option, SCAN_HEX])
    if option != "--spend-pubkey" and command in ("scan", "auto"):
        args += ["--spend-pubkey", SPEND_PUB.hex()]
    result = invoke(*args, "--json", input="")
    assert SCAN_HEX not in result.output and SCAN_HEX.upper() not in result.output
    if option == "--spend-pubkey" and command == "auto":
        assert result.exit_code == 0  # no scan key configured: it lists tweaks, and prints no key
        return
    assert_cli_fails(result)


@pytest.mark.parametrize(
    "args",
    [
        ["address", "encode", "--spend-pubkey", SPEND_PUB.hex(), "--scan-pubkey", SCAN_HEX],
        ["address", "encode", "--spend-pubkey", SPEND_PUB.hex(), SCAN_HEX],
        ["address", "encode", "--spend-pubkey", SPEND_PUB.hex(), "--label", SCAN_HEX],
        ["address", "encode", "--spend-pubkey", SPEND_PUB.hex(), "--hrp", SCAN_HEX],
        ["address", "encode", "--spend-pubkey", SPEND_PUB.hex(), "--network", SCAN_HEX],
        ["address", "encode", "--spend-pubkey", SCAN_HEX],
        ["address", "decode", SCAN_HEX],
        ["address", "decode", "--network", SCAN_HEX, "sp1q"],
    ],
    ids=["scan-pubkey", "argument", "label", "hrp", "network", "spend-pubkey", "decode", "decode-network"],
)
def test_address_commands_refuse_a_scan_key_on_argv_without_echoing_it(args):
    result = invoke(*args, input="")
    assert SCAN_HEX not in result.output
    assert_cli_fails(result)


@pytest.mark.parametrize("source", ["env", "file", "stdin"])
@pytest.mark.parametrize("case", ["ok", "truncated block", "prevouts mismatch", "bad spend key", "missing file"])
def test_the_scan_key_is_never_printed_on_success_or_any_error_path(source, case, tmp_path):
    if case == "missing file":
        path = str(tmp_path / "nope.hex")
    else:
        block_bytes, spent_bytes = {
            "ok": (SMALL_BLOCK, SMALL_SPENT),
            "truncated block": (SMALL_BLOCK[:500], SMALL_SPENT),
            "prevouts mismatch": (SMALL_BLOCK, serialize_spent([[]])),
            "bad spend key": (SMALL_BLOCK, SMALL_SPENT),
        }[case]
        path = write(tmp_path, "blk", block_bytes, spent_bytes)
    spend = "02" + "ff" * 32 if case == "bad spend key" else SPEND_PUB.hex()
    key_file = tmp_path / "scan.key"
    key_file.write_text(SCAN_HEX + "\n")
    extra, env, stdin = {"env": ([], KEY_ENV, None), "file": (["--scan-key-file", str(key_file)], None, None), "stdin": ([], None, SCAN_HEX + "\n")}[source]
    runs = [["scan", path, "--spend-pubkey", spend, *extra], ["scan", path, "--spend-pubkey", spend, *extra, "--json"]]
    if source != "stdin":  # bare BLOCK scans only when a key file or SP_SCAN_KEY is configured
        runs.append([path, "--spend-pubkey", spend, *extra])
    for args in runs:
        result = invoke(*args, env=env, input=stdin)
        assert SCAN_HEX not in result.output and SCAN_HEX.upper() not in result.output
        assert "Traceback" not in result.output
        if case == "ok":
            assert result.exit_code == 0, result.output
        else:
            assert_cli_fails(result)


def test_a_receiver_and_its_native_scanner_never_show_the_scan_key():
    scanner_repr = repr(native._scanner(RECEIVER)) if native.ENABLED else ""
    for text in (repr(RECEIVER), str(RECEIVER), scanner_repr):
        assert SCAN_HEX not in text and SCAN_KEY.hex().upper() not in text and repr(SCAN_KEY) not in text


@pytest.mark.parametrize("command", [[], ["scan"], ["address", "encode"]])
def test_help_says_where_the_scan_key_may_come_from(command):
    text = " ".join(invoke(*command, "--help").stdout.split())
    for needle in ("--scan-key-file", "SP_SCAN_KEY", "stdin"):
        assert needle in text, (command, needle)


def test_a_key_file_given_where_a_block_or_spent_file_goes_fails_without_echoing_the_key(tmp_path):
    key_file = tmp_path / "wallet.hex"
    key_file.write_text(SCAN_HEX + "\n")
    (tmp_path / "wallet.spent.hex").write_text(SCAN_HEX + "\n")
    block_path = write(tmp_path, "blk", SMALL_BLOCK, SMALL_SPENT)
    for args in (
        ["tweaks", str(key_file)],
        ["scan", str(key_file), "--scan-key-file", str(key_file), "--spend-pubkey", SPEND_PUB.hex()],
        ["tweaks", block_path, "--spent", str(key_file), "--json"],
        ["extract", block_path, "--spent", str(key_file)],
    ):
        assert_cli_fails(invoke(*args))


def test_duplicated_paid_outputs_are_found_once_each_at_the_lowest_vout_by_both_backends():
    raw, prev, inputs, _, paid = paying_tx(3, label=3, seed=11)
    doubled = [paid[1], paid[0], paid[2], paid[1], paid[0], paid[2]]
    (op, sig, wit) = (inputs[0].outpoint, inputs[0].script_sig, inputs[0].witness)
    block_bytes = make_block(tx([(op, sig, wit)], [txout(330 + v, p2tr(x)) for v, x in enumerate(doubled)]))
    found = block.scan(block_bytes, spent_for(prev), RECEIVER)
    assert found == reference.block.scan(block_bytes, spent_for(prev), RECEIVER)
    assert [(m.vout, m.amount, m.found.output32) for m in found] == [(v, 330 + v, doubled[v]) for v in range(3)]


@pytest.mark.parametrize("amount", [wire.MAX_MONEY + 1, 2**63 - 1, -1, -(2**63)])
def test_an_amount_out_of_range_is_malformed_in_a_block_and_in_spent_data(amount):
    inputs, outputs, prev = _valid_tx()
    bad_out = amount.to_bytes(8, "little", signed=True) + b"\x01\x51"
    assert_every_backend_raises(MalformedBlockError, make_block(tx(inputs, [*outputs, bad_out])), spent_for(prev))
    bad_spent = b"\x02\x00\x01" + amount.to_bytes(8, "little", signed=True) + compact_size(len(prev.script)) + prev.script
    assert_every_backend_raises(MalformedDataError, make_block(tx(inputs, outputs)), bad_spent)
