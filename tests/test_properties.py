"""Property tests: parsers and decoders only ever return a value or raise a typed SPError.

Bounded for the default run; set SP_SCAN_FUZZ_EXAMPLES=N to run every property
with at least N examples (e.g. SP_SCAN_FUZZ_EXAMPLES=20000 for a long run).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from coincurve import PrivateKey
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import BECH32_CONST, bech32_string, secret
from sp_scan import address, block, crypto, descriptor, extract, psbt, reference, scan, send, summary, wire
from sp_scan import cli as CLI
from sp_scan.wire import Reader, parse_witness
from sp_scan.errors import DescriptorError, InvalidAddressError, MalformedDataError, PrevoutsError, PSBTError, SPError
from sp_scan.types import OutPoint, TxInput

FUZZ_EXAMPLES = int(os.environ.get("SP_SCAN_FUZZ_EXAMPLES", "0"))


def budget(n: int) -> settings:
    """Hypothesis settings with n examples by default, raised by SP_SCAN_FUZZ_EXAMPLES."""
    return settings(
        max_examples=max(n, FUZZ_EXAMPLES),
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def compact_size(n: int) -> bytes:
    """Canonical Bitcoin compact size (an oracle independent of sp_scan.block)."""
    if n < 0xFD:
        return bytes([n])
    if n <= 0xFFFF:
        return b"\xfd" + n.to_bytes(2, "little")
    if n <= 0xFFFFFFFF:
        return b"\xfe" + n.to_bytes(4, "little")
    return b"\xff" + n.to_bytes(8, "little")


def serialize_witness(items: list[bytes]) -> bytes:
    return compact_size(len(items)) + b"".join(compact_size(len(i)) + i for i in items)


# ---------------------------------------------------------------- keys and near-keys

_PRIVS = [PrivateKey(secret(300 + i)) for i in range(6)]
COMPRESSED = [p.public_key.format() for p in _PRIVS]
UNCOMPRESSED = [p.public_key.format(compressed=False) for p in _PRIVS]
HYBRID = [bytes([6 | (u[64] & 1)]) + u[1:] for u in UNCOMPRESSED]


def _off_curve_xs(count: int) -> list[bytes]:
    xs, i = [], 0
    while len(xs) < count:
        x = hashlib.sha256(b"off-curve %d" % i).digest()
        if crypto.lift_x(x) is None:
            xs.append(x)
        i += 1
    return xs


OFF_CURVE_X = [*_off_curve_xs(3), b"\xff" * 32, b"\x00" * 32]
OFF_CURVE_33 = [b"\x02" + x for x in OFF_CURVE_X] + [b"\x03" + x for x in OFF_CURVE_X]
ON_CURVE_X = [c[1:] for c in COMPRESSED]

NEAR_KEYS = (
    UNCOMPRESSED
    + HYBRID
    + OFF_CURVE_33
    + [b"\x04" + c[1:] for c in COMPRESSED]  # 33 bytes with a wrong prefix
    + [c[:32] for c in COMPRESSED]  # one byte short
    + [c + b"\x00" for c in COMPRESSED]  # one byte long
)
key_like = st.one_of(st.sampled_from(COMPRESSED), st.sampled_from(NEAR_KEYS))

# ---------------------------------------------------------------- address decoder

ADDRESS_CHARS = "qpzry9x8gf2tvdw0s3jn54khce6mua7l" + "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L" + "1bio" + "sptSPT" + " \x00é"
valid_secret = st.integers(min_value=1, max_value=crypto.N - 1).map(lambda n: n.to_bytes(32, "big"))
hrp = st.sampled_from(address.HRPS)


def _decode_or_error(text):
    try:
        result = address.decode(text)
    except InvalidAddressError:
        return None
    assert isinstance(result, address.SPAddress)
    return result


@budget(300)
@given(st.one_of(st.text(alphabet=ADDRESS_CHARS, max_size=1100), st.text(max_size=200)))
def test_address_decoder_on_random_text_returns_an_address_or_invalid_address_error(text):
    _decode_or_error(text)


@budget(100)
@given(valid_secret, valid_secret, hrp, st.booleans())
def test_address_encode_decode_round_trip(scan32, spend32, hrp, upper):
    scan33, spend33 = PrivateKey(scan32).public_key.format(), PrivateKey(spend32).public_key.format()
    text = address.encode(scan33, spend33, hrp)
    assert len(text) == 114 + len(hrp)
    decoded = address.decode(text.upper() if upper else text)
    assert decoded == address.SPAddress(hrp, 0, scan33, spend33)


V0_ADDRESS = address.encode(COMPRESSED[0], COMPRESSED[1])


def mutate_text(draw, text: str, alphabet: str, kinds: tuple[str, ...], edits: int) -> str:
    """`text` after 1..edits random edits of the given kinds, each at a random place."""
    chars = list(text)
    for _ in range(draw(st.integers(1, edits))):
        if not chars:
            break
        kind = draw(st.sampled_from(kinds))
        i = draw(st.integers(0, len(chars) - 1))
        c = draw(st.sampled_from(alphabet))
        if kind == "sub":
            chars[i] = c
        elif kind == "del" and len(chars) > 1:
            del chars[i]
        elif kind == "ins":
            chars.insert(i, c)
        elif kind == "swap" and i + 1 < len(chars):
            chars[i], chars[i + 1] = chars[i + 1], chars[i]
        elif kind == "case":
            chars[i] = chars[i].swapcase()
        elif kind == "cut":
            chars = chars[:i]
    return "".join(chars)


@st.composite
def mutated_address(draw):
    text = draw(st.sampled_from([V0_ADDRESS, address.encode(COMPRESSED[2], COMPRESSED[3], "tsp")]))
    return mutate_text(draw, text, ADDRESS_CHARS, ("sub", "del", "ins", "swap", "case", "cut"), 4)


@budget(300)
@given(mutated_address())
def test_address_decoder_on_near_valid_mutations_returns_an_address_or_invalid_address_error(text):
    _decode_or_error(text)


@budget(200)
@given(st.integers(0, len(V0_ADDRESS) - 4), st.sampled_from("qpzry9x8gf2tvdw0s3jn54khce6mua7l"))
def test_any_single_substitution_in_the_data_part_is_rejected(i, c):
    # A one-symbol error is always caught by the BCH checksum, whatever the length.
    pos = 3 + i
    if V0_ADDRESS[pos] == c:
        return
    mutated = V0_ADDRESS[:pos] + c + V0_ADDRESS[pos + 1 :]
    assert _decode_or_error(mutated) is None


@budget(200)
@given(
    st.integers(0, 31),
    st.sampled_from(COMPRESSED + OFF_CURVE_33),
    st.sampled_from(COMPRESSED + OFF_CURVE_33),
    st.binary(max_size=80),
    st.one_of(st.none(), st.integers(0, 65)),
    st.booleans(),
)
def test_address_versions_follow_bip352(version, scan33, spend33, extra, cut, bech32m):
    payload = (scan33 + spend33 + extra)[:cut]
    text = bech32_string("sp", version, payload, const=0x2BC830A3 if bech32m else BECH32_CONST)
    got = _decode_or_error(text)
    expect_ok = (
        bech32m
        and version != 31
        and len(payload) >= 66
        and (version != 0 or len(payload) == 66)
        and scan33 in COMPRESSED
        and spend33 in COMPRESSED
    )
    assert (got is not None) == expect_ok
    if got is not None:
        assert (got.version, got.scan_pubkey33, got.spend_pubkey33) == (version, scan33, spend33)


# ---------------------------------------------------------------- Reader and witness


@budget(300)
@given(st.binary(max_size=300))
def test_parse_witness_on_random_bytes_returns_items_or_malformed_data_error(data):
    try:
        items = parse_witness(data)
    except MalformedDataError:
        return
    assert isinstance(items, tuple) and all(isinstance(i, bytes) for i in items)
    assert (serialize_witness(list(items)) if items or data else b"") == data


@budget(200)
@given(st.lists(st.binary(max_size=300), max_size=8))
def test_parse_witness_round_trips(items):
    assert parse_witness(serialize_witness(items)) == tuple(items)


@budget(200)
@given(st.lists(st.binary(max_size=40), max_size=5), st.binary(min_size=1, max_size=8))
def test_parse_witness_refuses_trailing_bytes(items, trailing):
    try:
        parse_witness(serialize_witness(items) + trailing)
    except MalformedDataError:
        return
    raise AssertionError("trailing bytes accepted")


@budget(300)
@given(st.integers(0, 2**64 - 1), st.sampled_from([1, 3, 5, 9]))
def test_compact_size_accepts_only_the_canonical_width(value, width):
    prefix = {1: b"", 3: b"\xfd", 5: b"\xfe", 9: b"\xff"}[width]
    if width > 1 and value >= 1 << 8 * (width - 1):
        return
    if width == 1 and value >= 0xFD:
        return
    data = prefix + value.to_bytes(width - 1 if width > 1 else 1, "little")
    r = Reader(data)
    try:
        got = r.compact_size()
    except MalformedDataError:
        assert compact_size(value) != data
        return
    assert compact_size(value) == data and got == value and r.pos == len(data)


@budget(100)
@given(st.sampled_from([2**64 - 1, 2**32, 2**32 - 1, 0x10000, 0xFFFF]), st.binary(max_size=64))
def test_huge_witness_counts_and_lengths_fail_as_truncated(n, tail):
    for data in (compact_size(n) + tail, b"\x01" + compact_size(n) + tail):
        try:
            parse_witness(data)
        except MalformedDataError:
            continue
        raise AssertionError("a truncated witness was accepted")


# ---------------------------------------------------------------- extraction inputs

OPS_NON_PUSH = [0x4F, 0x50, 0x51, 0x60, 0x61, 0x63, 0x67, 0x68, 0x75, 0x76, 0x87, 0x88, 0xA9, 0xAC, 0xFF]


def encode_push(data: bytes, how: str) -> bytes:
    """A push of data: minimal, PUSHDATA1/2/4, or truncated (declared longer than given)."""
    n = len(data)
    if how == "direct" and n < 0x4C:
        return bytes([n]) + data
    if how == "pd1" and n <= 0xFF:
        return b"\x4c" + bytes([n]) + data
    if how == "pd2":
        return b"\x4d" + n.to_bytes(2, "little") + data
    if how == "pd4":
        return b"\x4e" + n.to_bytes(4, "little") + data
    if how == "truncated":
        return (bytes([n + 1]) if n + 1 < 0x4C else b"\x4d" + (n + 1).to_bytes(2, "little")) + data
    if how == "cut-length":
        return b"\x4d\x01"  # PUSHDATA2 with a 1-byte length field, at the end
    return b"\x4c" + bytes([n]) + data if n <= 0xFF else b"\x4d" + n.to_bytes(2, "little") + data


push_how = st.sampled_from(["direct"] * 5 + ["pd1", "pd2", "pd4", "truncated", "cut-length"])
blob = st.one_of(st.binary(max_size=80), st.sampled_from([b"\x30" * 71, b"\x01" * 64, b""]))


@st.composite
def script_sig(draw, keys: list[bytes]):
    parts = []
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["key", "key", "key", "blob", "op", "op", "raw"]))
        if kind == "key":
            parts.append(encode_push(draw(st.sampled_from(keys)), draw(push_how)))
        elif kind == "blob":
            parts.append(encode_push(draw(blob), draw(push_how)))
        elif kind == "op":
            parts.append(bytes([draw(st.sampled_from(OPS_NON_PUSH))]))
        else:
            parts.append(draw(st.binary(max_size=6)))
    return b"".join(parts)


@st.composite
def control_block(draw):
    internal = draw(st.sampled_from([extract.NUMS_H, extract.NUMS_H, *ON_CURVE_X, OFF_CURVE_X[0]]))
    nodes = draw(st.sampled_from([0, 0, 1, 2, 128, 129]))
    delta = draw(st.sampled_from([0, 0, 0, -1, 1, -32, 31]))
    body = bytes([draw(st.sampled_from([0xC0, 0xC1, 0x50, 0x00]))]) + internal + b"\x11" * (32 * nodes)
    if delta < 0:
        return body[:delta]
    return body + b"\x22" * delta


@st.composite
def witness(draw, keys: list[bytes]):
    items = []
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["sig", "key", "blob", "control", "empty"]))
        if kind == "sig":
            items.append(draw(st.sampled_from([b"\x01" * 64, b"\x30" * 71, b"\x01" * 65])))
        elif kind == "key":
            items.append(draw(st.sampled_from(keys)))
        elif kind == "blob":
            items.append(draw(blob))
        elif kind == "control":
            items.append(draw(control_block()))
        else:
            items.append(b"")
    last = draw(st.sampled_from(["key", "key", "control", "none"]))
    if last == "key":
        items.append(draw(st.sampled_from(keys)))
    elif last == "control":
        items.append(draw(control_block()))
    if draw(st.integers(0, 3)) == 0:
        items.append(b"\x50" + draw(st.binary(max_size=10)))  # annex, or a 1-item stack starting with 0x50
    return tuple(items)


def p2pkh(h20: bytes) -> bytes:
    return b"\x76\xa9\x14" + h20 + b"\x88\xac"


@st.composite
def prevout_script(draw, keys: list[bytes]):
    kind = draw(st.sampled_from(["p2pkh", "p2pkh", "p2sh", "p2wpkh", "p2tr", "p2tr", "v2plus", "near", "random"]))
    if kind == "p2pkh":
        committed = draw(st.sampled_from(keys)) if draw(st.integers(0, 3)) else draw(st.binary(min_size=33, max_size=33))
        return p2pkh(crypto.hash160(committed))
    if kind == "p2sh":
        return b"\xa9\x14" + draw(st.binary(min_size=20, max_size=20)) + b"\x87"
    if kind == "p2wpkh":
        return b"\x00\x14" + draw(st.binary(min_size=20, max_size=20))
    if kind == "p2tr":
        return b"\x51\x20" + draw(st.sampled_from(ON_CURVE_X + OFF_CURVE_X))
    if kind == "v2plus":
        n = draw(st.integers(2, 40))
        return bytes([draw(st.integers(0x52, 0x60)), n]) + draw(st.binary(min_size=n, max_size=n))
    if kind == "near":
        return draw(
            st.sampled_from(
                [
                    b"\x51\x21" + b"\x02" + ON_CURVE_X[0],  # v1, 33-byte program
                    b"\x51\x02\x4e\x73",  # P2A
                    b"\x00\x20" + b"\x01" * 32,  # P2WSH
                    b"\x00\x15" + b"\x01" * 21,
                    p2pkh(b"\x01" * 20)[:-1],
                    p2pkh(b"\x01" * 20) + b"\x00",
                    b"\xa9\x14" + b"\x01" * 20 + b"\x88",
                    b"\x51\x20" + ON_CURVE_X[0] + b"\x00",
                    b"\x61\x02\x00\x00",  # not a witness version
                    b"\x4f\x02\x00\x00",
                    b"",
                ]
            )
        )
    return draw(st.binary(max_size=45))


@st.composite
def tx_input(draw):
    keys = list(draw(st.lists(key_like, min_size=1, max_size=3)))
    spk = draw(prevout_script(keys))
    if spk[:2] == b"\xa9\x14" and draw(st.integers(0, 3)):
        sig = b"\x16\x00\x14" + draw(st.binary(min_size=20, max_size=20))
        sig = draw(st.sampled_from([sig, sig, sig, sig[:-1], b"\x4c" + sig, sig + b"\x00"]))
    else:
        sig = draw(script_sig(keys))
    wit = draw(witness(keys))
    op = OutPoint(draw(st.binary(min_size=32, max_size=32)), draw(st.integers(0, 2**32 - 1)))
    return TxInput(op, sig, wit, spk)


@budget(400)
@given(tx_input())
def test_reference_extraction_returns_none_or_a_key_that_fits_the_prevout(i):
    key = extract.input_pubkey(i.prevout_script, i.script_sig, i.witness)
    kind = extract.script_type(i.prevout_script)
    if key is None:
        return
    if kind is extract.ScriptType.P2TR:
        assert key == i.prevout_script[2:] and crypto.lift_x(key) is not None
        return
    assert kind in (extract.ScriptType.P2PKH, extract.ScriptType.P2SH, extract.ScriptType.P2WPKH)
    assert key[0] in (2, 3) and crypto.point(key) is not None
    if kind is extract.ScriptType.P2PKH:
        assert crypto.hash160(key) == i.prevout_script[3:23]
    else:
        assert key == i.witness[-1]


# ---------------------------------------------------------------- native == reference


@budget(600)
@given(tx_input())
def test_native_extraction_equals_the_reference(i):
    expected = reference.extract.input_pubkey(i.prevout_script, i.script_sig, i.witness)
    assert extract.input_pubkey(i.prevout_script, i.script_sig, i.witness) == expected


@budget(200)
@given(st.lists(tx_input(), min_size=1, max_size=5))
def test_native_tx_keys_and_summary_equal_the_reference(inputs):
    assert extract.tx_pubkeys(inputs) == reference.extract.tx_pubkeys(inputs)
    assert summary.summarize(inputs) == reference.summary.summarize(inputs)


@st.composite
def paid_tx(draw):
    """A tx paying a receiver (some outputs labelled), plus unrelated and off-curve outputs, shuffled."""
    scan_key, spend_key = secret(400), secret(401)
    labels = tuple(draw(st.lists(st.integers(0, 2**32 - 1), max_size=3, unique=True)))
    receiver = scan.Receiver(scan_key, PrivateKey(spend_key).public_key.format(), labels)
    base = address.SPAddress("sp", 0, PrivateKey(scan_key).public_key.format(), receiver.spend_pubkey33)
    paid_labels = draw(st.lists(st.sampled_from([None, 0, *labels, 99]), max_size=5))
    recipients = [
        base if m is None else address.SPAddress("sp", 0, base.scan_pubkey33, address.labelled_spend_pubkey(scan_key, base.spend_pubkey33, m))
        for m in paid_labels
    ]
    in_keys = [secret(410 + n) for n in range(draw(st.integers(1, 2)))]
    inputs = [
        TxInput(OutPoint(hashlib.sha256(b"%d" % n).digest(), n), b"", (b"\x01" * 71, PrivateKey(k).public_key.format()),
                b"\x00\x14" + crypto.hash160(PrivateKey(k).public_key.format()))
        for n, k in enumerate(in_keys)
    ]  # fmt: skip
    outputs = send.create_outputs([i.outpoint for i in inputs], [send.InputKey(k, False) for k in in_keys], recipients) if recipients else []
    outputs += draw(st.lists(st.sampled_from(OFF_CURVE_X + ON_CURVE_X), max_size=3))
    outputs += draw(st.lists(st.binary(min_size=32, max_size=32), max_size=2))
    return inputs, draw(st.permutations(outputs)), receiver


@budget(60)
@given(paid_tx())
def test_native_scan_equals_the_reference_with_off_curve_and_unrelated_outputs(case):
    inputs, outputs, receiver = case
    expected = reference.scan.scan_tx(inputs, outputs, receiver)
    assert scan.scan_tx(inputs, outputs, receiver) == expected
    # off-curve x are skipped, never found
    assert not {f.output32 for f in expected} & set(OFF_CURVE_X)


# ---------------------------------------------------------------- block and spent-outputs parsers

BLOCKS = Path(__file__).resolve().parent.parent / "vectors" / "blocks"
SMALL_BLOCK = bytes.fromhex((BLOCKS / "small.hex").read_text())
SMALL_SPENT = bytes.fromhex((BLOCKS / "small.spent.hex").read_text())


def outcome(f, *args):
    """(result, None) or (None, error type) for an SPError; any other exception propagates."""
    try:
        return f(*args), None
    except SPError as exc:
        return None, type(exc)


def _huge_compact_size(draw) -> bytes:
    return draw(st.sampled_from([b"\xff" * 9, b"\xff" + (2**64 - 2).to_bytes(8, "little"), b"\xfe\xff\xff\xff\xff",
                                 b"\xfd\xff\xff", b"\xfd\x00\x00", b"\xfe\x00\x00\x01\x00", b"\xff\x00\x00\x00\x00\x01\x00\x00\x00"]))  # fmt: skip


@st.composite
def mutated(draw, data: bytes, start: int = 0):
    """data with 1-3 byte flips, cuts, insertions, deletions or compact-size splices."""
    data = bytearray(data)
    for _ in range(draw(st.integers(1, 3))):
        if not data:
            break
        i = draw(st.integers(min(start, len(data) - 1), len(data) - 1))
        kind = draw(st.sampled_from(["flip", "set", "cut", "insert", "delete", "compact"]))
        if kind == "flip":
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set":
            data[i] = draw(st.sampled_from([0x00, 0x01, 0xFC, 0xFD, 0xFE, 0xFF, 0x50, 0x20]))
        elif kind == "cut":
            del data[i:]
        elif kind == "insert":
            data[i:i] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del data[i : i + draw(st.integers(1, 40))]
        else:
            data[i : i + 1] = _huge_compact_size(draw)
    return bytes(data)


@budget(120)
@given(st.one_of(mutated(SMALL_BLOCK, 80), st.binary(max_size=300), st.just(SMALL_BLOCK[:80] + b"\xff" * 9)))
def test_block_parsers_on_mutated_blocks_agree_and_raise_only_typed_errors(block_bytes):
    expected = outcome(reference.block.tweaks, block_bytes, SMALL_SPENT)
    assert outcome(block.tweaks, block_bytes, SMALL_SPENT) == expected
    if expected[1] is not None:
        assert issubclass(expected[1], (MalformedDataError, PrevoutsError))


@budget(120)
@given(st.one_of(mutated(SMALL_SPENT), st.binary(max_size=200)))
def test_spent_output_parsers_on_mutated_data_agree_and_raise_only_typed_errors(spent_bytes):
    expected = outcome(reference.block.tweaks, SMALL_BLOCK, spent_bytes)
    assert outcome(block.tweaks, SMALL_BLOCK, spent_bytes) == expected
    if expected[1] is not None:
        assert issubclass(expected[1], (MalformedDataError, PrevoutsError))
    parsed, error = outcome(wire.parse_spent, spent_bytes)
    assert error in (None, MalformedDataError)
    if parsed is not None:
        assert wire.serialize_spent(parsed) == spent_bytes


WALLET = scan.Receiver(
    bytes.fromhex((BLOCKS / "test-wallet.scan").read_text().strip()),
    bytes.fromhex("02c61fbcf12345bb98fbc3a14441d38bf6cf67d400026d80c03af2fccba6c2df37"),
    (1, 7),
)


@budget(40)
@given(mutated(SMALL_BLOCK, 80))
def test_block_scans_on_mutated_blocks_agree(block_bytes):
    assert outcome(block.scan, block_bytes, SMALL_SPENT, WALLET) == outcome(reference.block.scan, block_bytes, SMALL_SPENT, WALLET)


# ---------------------------------------------------------------- the CLI on random files

SMALL_HEX = (BLOCKS / "small.hex").read_bytes()
SMALL_SPENT_HEX = (BLOCKS / "small.spent.hex").read_bytes()
JSONISH = [b"[", b"{}", b"[]", b"[[]]", b'{"tx": []}', b'{"result": {"tx": ["00"]}}', b"[[{}]]", b'[[], [{"value": 1e400}]]', b"\xef\xbb\xbf[]"]


def check_cli_result(result, as_json: bool = True) -> None:
    """Exit 0, or exit 2 with one `sp-scan: error:` line; never a traceback; stdout stays valid."""
    assert result.exit_code in (0, 2), (result.exit_code, result.output, result.exception)
    assert "Traceback" not in result.output
    if result.exit_code == 2:
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("sp-scan: error: "), result.stderr
    if as_json:
        for line in result.stdout.splitlines():
            json.loads(line)


@pytest.fixture(scope="module")
def cli_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("cli-fuzz")


file_bytes = st.one_of(
    st.binary(max_size=200),
    st.sampled_from(JSONISH),
    st.text(alphabet="0123456789abcdefABCDEF \n\t", max_size=200).map(str.encode),
)


@budget(60)
@given(
    st.one_of(mutated(SMALL_HEX), mutated(SMALL_BLOCK, 80), file_bytes),
    st.one_of(st.just(SMALL_SPENT_HEX), mutated(SMALL_SPENT_HEX), mutated(SMALL_SPENT), file_bytes),
    st.sampled_from(["tweaks", "extract", "scan", "auto"]),
)
def test_cli_on_random_files_exits_0_or_2_with_one_line(cli_dir, block_file, spent_file, command):
    (cli_dir / "b.hex").write_bytes(block_file)
    (cli_dir / "b.spent.hex").write_bytes(spent_file)
    args = [str(cli_dir / "b.hex"), "--json"]
    env = {"SP_SCAN_KEY": WALLET.scan_key32.hex(), "SP_SCAN_SPEND_PUBKEY": WALLET.spend_pubkey33.hex()}
    if command != "auto":
        args.insert(0, command)
    result = CliRunner().invoke(CLI.app, args, env=env)
    check_cli_result(result)
    assert WALLET.scan_key32.hex() not in result.output


# --- wallet interop: PSBTs and descriptors ---

BIP375 = json.loads((Path(__file__).resolve().parent.parent / "vectors" / "bip375" / "bip375_test_vectors.json").read_text())
PSBTS = [base64.b64decode(c["psbt"]) for c in BIP375["valid"] + BIP375["invalid"]]
DESCRIPTORS = [
    str(descriptor.from_keys(secret(1), secret(2), annotations=(("bh", 10), ("ml", 2)))),
    str(descriptor.from_keys(secret(1), PrivateKey(secret(2)).public_key.format(), network="test")),
    "sp(L4rK1yDtCWekvXuE6oXD9jCYfFNV2cWRpVuPLBcCU2z8TrisoyY1,0260b2003c386519fc9eadf2b5cf124dd8eea4c4e68d5e154050a9346ea98ce600)#sjd9eg3d",
]


@budget(150)
@given(st.data())
def test_psbt_on_mutated_vectors_parses_and_verifies_or_raises_psbt_error(data):
    raw = bytes(data.draw(mutated(data.draw(st.sampled_from(PSBTS)), 5)))
    try:
        p = psbt.Psbt.from_bytes(raw)
    except PSBTError as exc:
        assert exc.rule == psbt.STRUCTURE
        return
    assert psbt.Psbt.from_bytes(p.to_bytes()) == p
    try:
        psbt.verify(p)
    except PSBTError as exc:
        assert exc.rule in (psbt.COVERAGE, psbt.ELIGIBILITY, psbt.OUTPUT_SCRIPTS)


@budget(200)
@given(st.data())
def test_descriptor_on_near_valid_mutations_decodes_or_raises_descriptor_error(data):
    text = data.draw(st.sampled_from(DESCRIPTORS))
    text = mutate_text(data.draw, text, "0123456789abcdefhpqsz()[]/,?&=#'*Hx", ("sub", "del", "ins", "cut"), 3)
    try:
        d = descriptor.decode(text)
    except DescriptorError:
        return
    assert descriptor.decode(str(d)) == d
