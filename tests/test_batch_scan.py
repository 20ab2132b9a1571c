"""The batch scan (`scan_tweaks`, `scan_tweaks_packed`) gives the reference's results for any batch and thread count.

The native batch is one C code path: `scan_tweak`, `scan_tx` and the block scan are batches
through it too, so the per-tx parity tests in test_native.py cover it as well.
"""

from __future__ import annotations

import functools
import os
import random
import struct
import threading
import time

import pytest
from coincurve import PrivateKey, PublicKey

from conftest import RECEIVING, RECEIVING_IDS, tx_inputs
from sp_scan import native, reference, scan
from sp_scan.errors import InvalidKeyError, MalformedDataError
from txgen import Wallet, generate, wallets

pytestmark = pytest.mark.skipif(os.environ.get("SP_SCAN_BACKEND") == "reference", reason="SP_SCAN_BACKEND=reference")

P = 2**256 - 2**32 - 977
WALLETS = wallets()
LABELLED = WALLETS[1].receiver  # labels 0, 1, 2, 1001337: the label-set strategy per tx
THREADS = (1, 2, 3, 8)
SIZES = (0, 1, 7, 8, 9, 63, 64, 65)
STRATEGIES = ("bip", "labelset", "auto")


@pytest.fixture
def strategy():
    """Restore the automatic label strategy after a test forces one."""
    yield native.set_label_strategy
    native.set_label_strategy("auto")


def tweak64(tweak33: bytes) -> bytes:
    return PublicKey(tweak33).format(compressed=False)[1:]


@functools.cache
def batch(seed: int = 11, count: int = 2400, paying: tuple[int, ...] = (0, 1, 2)) -> tuple[list[bytes], list[list[bytes]]]:
    """(tweaks33, outputs) of the SP txs among `count` generated ones paying WALLETS[paying]."""
    tweaks, outputs = [], []
    for tx in generate(seed, count, [WALLETS[i] for i in paying]):
        s = reference.summary.summarize(tx.inputs)
        if s is not None:
            tweaks.append(s.tweak33)
            outputs.append(tx.outputs32)
    return tweaks, outputs


@functools.cache
def expected(wallet: int) -> list[list]:
    tweaks, outputs = batch()
    return reference.scan.scan_tweaks(tweaks, outputs, WALLETS[wallet].receiver)


def pack(tweaks: list[bytes], outputs: list[list[bytes]]) -> tuple[bytes, int, bytes, bytes]:
    width = len(tweaks[0]) if tweaks else 33
    counts = struct.pack(f"<{len(outputs)}I", *map(len, outputs))
    return b"".join(tweaks), width, b"".join(o for outs in outputs for o in outs), counts


# ---- official vectors ----


@pytest.mark.parametrize(("n", "obj"), RECEIVING, ids=RECEIVING_IDS)
@pytest.mark.parametrize("width", [33, 64])
def test_receiving_vector_through_scan_tweaks_equals_the_reference(n, obj, width):
    given = obj["given"]
    keys = given["key_material"]
    spend = PrivateKey(bytes.fromhex(keys["spend_priv_key"])).public_key.format()
    receiver = scan.Receiver(bytes.fromhex(keys["scan_priv_key"]), spend, tuple(given["labels"]))
    inputs, outputs = tx_inputs(given["vin"]), [bytes.fromhex(o) for o in given["outputs"]]
    s = reference.summary.summarize(inputs)
    if s is None:  # not an SP tx: there is no tweak to scan
        assert obj["expected"]["tweak"] is None and reference.scan.scan_tx(inputs, outputs, receiver) == []
        return
    tweak = s.tweak33 if width == 33 else tweak64(s.tweak33)
    # Three copies in one batch: with the IFMA engine a batch of one tx stays on libsecp256k1.
    found = native.scan_tweaks([tweak] * 3, [outputs] * 3, receiver)
    assert found[:1] == reference.scan.scan_tweaks([tweak], [outputs], receiver)
    assert found == [reference.scan.scan_tx(inputs, outputs, receiver)] * 3
    if "n_outputs" in obj["expected"]:
        assert len(found[0]) == obj["expected"]["n_outputs"]
    else:
        assert {f.output32.hex() for f in found[0]} == {o["pub_key"] for o in obj["expected"]["outputs"]}


# ---- generated batches ----


def test_the_generated_batch_has_2000_tweaks_paying_every_wallet_with_labels():
    tweaks, _ = batch()
    assert len(tweaks) >= 2000
    for w in range(3):
        found = [f for fs in expected(w) for f in fs]
        assert len(found) > 100
    assert {f.label for fs in expected(1) for f in fs} >= {None, 0, 1, 2, 1001337}


@pytest.mark.parametrize("wallet", [0, 1, 2])
@pytest.mark.parametrize("width", [33, 64])
def test_generated_batch_equals_the_reference(wallet, width):
    tweaks, outputs = batch()
    if width == 64:
        tweaks = [tweak64(t) for t in tweaks]
    assert native.scan_tweaks(tweaks, outputs, WALLETS[wallet].receiver) == expected(wallet)


def test_the_64_byte_reference_equals_the_33_byte_one():
    tweaks, outputs = batch()
    receiver = WALLETS[1].receiver
    assert reference.scan.scan_tweaks([tweak64(t) for t in tweaks[:200]], outputs[:200], receiver) == expected(1)[:200]


@pytest.mark.parametrize("threads", [*THREADS, 1000])
def test_any_thread_count_gives_the_same_results(threads):
    tweaks, outputs = batch()
    assert native.scan_tweaks(tweaks, outputs, LABELLED, threads=threads) == expected(1)


@pytest.mark.parametrize("size", SIZES)
def test_batches_around_the_group_size_equal_the_reference_for_every_thread_count(size):
    tweaks, outputs = batch()
    want = expected(1)[:size]
    for threads in (*THREADS, size + 5):
        assert native.scan_tweaks(tweaks[:size], outputs[:size], LABELLED, threads=threads) == want, threads


def test_the_packed_form_equals_its_reference_and_counts_outputs_within_each_tx():
    tweaks, outputs = batch()
    packed = pack(tweaks, outputs)
    found = native.scan_tweaks_packed(*packed, LABELLED, threads=2)
    assert found == reference.scan.scan_tweaks_packed(*packed, LABELLED)
    assert found == [
        (tx, outputs[tx].index(f.output32), f.tweak32, f.label) for tx, fs in enumerate(expected(1)) for f in fs
    ]
    assert [tx for tx, *_ in found] == sorted(tx for tx, *_ in found)


def test_packed_buffers_may_be_bytearrays_or_memoryviews():
    tweaks, outputs = batch()
    t, width, o, c = pack(tweaks[:70], outputs[:70])
    want = native.scan_tweaks_packed(t, width, o, c, LABELLED)
    assert native.scan_tweaks_packed(bytearray(t), width, memoryview(o), bytearray(c), LABELLED, threads=3) == want


@pytest.mark.parametrize("name", STRATEGIES)
def test_a_receiver_with_300_labels_equals_the_reference_for_each_label_strategy(name, strategy):
    """300 labels: label-set rounds work in chunks of 13 txs; auto picks the BIP order for most txs."""
    rng = random.Random(300)
    scan_key, spend_key = PrivateKey(rng.randbytes(32)), PrivateKey(rng.randbytes(32))
    wallet = Wallet(scan.Receiver(scan_key.secret, spend_key.public_key.format(), tuple(range(1, 301))), scan_key.public_key.format())
    tweaks, outputs = [], []
    for tx in generate(301, 120, [wallet]):
        s = reference.summary.summarize(tx.inputs)
        if s is not None:
            tweaks.append(s.tweak33)
            outputs.append(tx.outputs32)
    want = reference.scan.scan_tweaks(tweaks, outputs, wallet.receiver)
    assert sum(f.label is not None for fs in want for f in fs) > 20
    strategy(name)
    for threads in (1, 2):
        assert native.scan_tweaks(tweaks, outputs, wallet.receiver, threads=threads) == want


@pytest.mark.parametrize("name", STRATEGIES)
def test_the_kmax_vector_inside_a_batch_finds_k_max_outputs(name, strategy):
    (_, obj), = [(n, o) for n, o in RECEIVING if len(o["given"]["outputs"]) > 2000]
    given = obj["given"]
    keys = given["key_material"]
    spend = PrivateKey(bytes.fromhex(keys["spend_priv_key"])).public_key.format()
    receiver = scan.Receiver(bytes.fromhex(keys["scan_priv_key"]), spend, tuple(given["labels"]))
    inputs, outputs = tx_inputs(given["vin"]), [bytes.fromhex(o) for o in given["outputs"]]
    tweak = reference.summary.summarize(inputs).tweak33
    tweaks, others = batch()
    strategy(name)
    found = native.scan_tweaks([*tweaks[:70], tweak, *tweaks[70:80]], [*others[:70], outputs, *others[70:80]], receiver, threads=2)
    assert len(found[70]) == scan.K_MAX == obj["expected"]["n_outputs"]
    assert found[70] == native.scan_tx(inputs, outputs, receiver)
    assert found[:70] + found[71:] == reference.scan.scan_tweaks(tweaks[:80], others[:80], receiver)


def test_txs_with_no_outputs_find_nothing_and_leave_the_others_alone():
    tweaks, outputs = batch()
    holes = {0, 5, 63, 64, 99}
    cut = [[] if i in holes else outs for i, outs in enumerate(outputs[:100])]
    want = [[] if i in holes else fs for i, fs in enumerate(expected(1)[:100])]
    for threads in (1, 3):
        assert native.scan_tweaks(tweaks[:100], cut, LABELLED, threads=threads) == want
    assert native.scan_tweaks(tweaks[:3], [[], [], []], LABELLED) == [[], [], []]


# ---- errors: typed, naming the tx, nothing returned ----


def _small_x(on_curve: bool) -> int:
    """The smallest x >= 1 that is (or is not) the x of a curve point."""
    x = 1
    while (pow(x**3 + 7, (P - 1) // 2, P) == 1) != on_curve:
        x += 1
    return x


def _bad_tweaks() -> dict[str, bytes]:
    x = _small_x(True)
    y = pow(x**3 + 7, (P + 1) // 4, P)
    off = _small_x(False).to_bytes(32, "big")
    return {
        "33 not on the curve": b"\x02" + off,
        "33 prefix 04": b"\x04" + x.to_bytes(32, "big"),
        "33 prefix 00": b"\x00" + x.to_bytes(32, "big"),
        "33 x = p": b"\x02" + P.to_bytes(32, "big"),
        "33 x + p (x on the curve)": b"\x02" + (x + P).to_bytes(32, "big"),
        "64 y off by one": x.to_bytes(32, "big") + (y + 1).to_bytes(32, "big"),
        "64 x + p": (x + P).to_bytes(32, "big") + y.to_bytes(32, "big"),
        "64 y = p": x.to_bytes(32, "big") + P.to_bytes(32, "big"),
        "64 zero": bytes(64),
    }


BAD = _bad_tweaks()


@pytest.mark.parametrize("kind", list(BAD))
@pytest.mark.parametrize("position", [0, 1, 63, 64, 99])
def test_an_invalid_tweak_anywhere_raises_naming_its_tx(kind, position):
    tweaks, outputs = batch()
    width = len(BAD[kind])
    tweaks = [t if width == 33 else tweak64(t) for t in tweaks[:100]]
    tweaks[position] = BAD[kind]
    for fn in (reference.scan.scan_tweaks, native.scan_tweaks):
        for threads in (1, 3):
            with pytest.raises(InvalidKeyError, match=rf"\btx {position}\b"):
                fn(tweaks, outputs[:100], LABELLED, threads=threads)


@pytest.mark.parametrize(("first", "second"), [(10, 70), (40, 80), (66, 67)])
def test_of_two_invalid_tweaks_the_lower_tx_is_named_for_any_thread_count(first, second):
    tweaks, outputs = batch()
    tweaks = list(tweaks[:100])
    tweaks[first] = tweaks[second] = BAD["33 not on the curve"]
    for threads in (1, 2, 3, 8):
        with pytest.raises(InvalidKeyError, match=rf"\btx {first}\b"):
            native.scan_tweaks(tweaks, outputs[:100], LABELLED, threads=threads)


def test_an_invalid_tweak_of_a_tx_without_outputs_still_raises():
    tweaks, _ = batch()
    for fn in (reference.scan.scan_tweaks, native.scan_tweaks):
        with pytest.raises(InvalidKeyError, match=r"\btx 1\b"):
            fn([tweaks[0], BAD["33 x = p"]], [[], []], LABELLED)


def _misuse_lists():
    tweaks, outputs = batch()
    t, o = tweaks[:3], outputs[:3]
    yield "one outputs list short", t, o[:2], MalformedDataError
    yield "mixed widths", [t[0], tweak64(t[1]), t[2]], o, InvalidKeyError
    yield "a 32-byte tweak", [t[0], t[1][1:], t[2]], o, InvalidKeyError
    yield "a 65-byte tweak", [b"\x04" + tweak64(x) for x in t], o, InvalidKeyError
    yield "a 31-byte output", t, [o[0], [o[1][0][1:]], o[2]], InvalidKeyError
    yield "a str tweak", [t[0].hex(), t[1], t[2]], o, InvalidKeyError


@pytest.mark.parametrize(("what", "tweaks", "outputs", "error"), list(_misuse_lists()), ids=[m[0] for m in _misuse_lists()])
def test_malformed_lists_raise_the_same_error_in_both_backends(what, tweaks, outputs, error):
    for fn in (reference.scan.scan_tweaks, native.scan_tweaks):
        with pytest.raises(error):
            fn(tweaks, outputs, LABELLED)


def _misuse_packed():
    tweaks, outputs = batch()
    t, width, o, c = pack(tweaks[:5], outputs[:5])
    yield "width 32", t, 32, o, c, InvalidKeyError
    yield "width 65", t, 65, o, c, InvalidKeyError
    yield "tweaks cut", t[:-1], width, o, c, InvalidKeyError
    _, _, o2, c2 = pack(tweaks[:2], outputs[:2])
    yield "33-byte tweaks read as 64-byte ones", t[:128], 64, o2, c2, InvalidKeyError
    yield "one count short", t, width, o, c[:-4], MalformedDataError
    yield "counts cut", t, width, o, c[:-1], MalformedDataError
    yield "outputs one key short", t, width, o[:-32], c, MalformedDataError
    yield "outputs one byte long", t, width, o + b"\x00", c, MalformedDataError
    yield "count 2**32 - 1", t, width, o, b"\xff\xff\xff\xff" + c[4:], MalformedDataError
    yield "empty tweaks, a count", b"", width, b"", b"\x00" * 4, MalformedDataError


@pytest.mark.parametrize(
    ("what", "tweaks", "width", "outputs32", "counts", "error"), list(_misuse_packed()), ids=[m[0] for m in _misuse_packed()]
)
def test_malformed_packed_buffers_raise_the_same_error_in_both_backends(what, tweaks, width, outputs32, counts, error):
    for fn in (reference.scan.scan_tweaks_packed, native.scan_tweaks_packed):
        with pytest.raises(error):
            fn(tweaks, width, outputs32, counts, LABELLED)


@pytest.mark.parametrize("threads", [0, -1])
def test_threads_below_one_is_a_value_error(threads):
    tweaks, outputs = batch()
    for fn in (reference.scan.scan_tweaks, native.scan_tweaks):
        with pytest.raises(ValueError):
            fn(tweaks[:2], outputs[:2], LABELLED, threads=threads)
    with pytest.raises(ValueError):
        native.scan_tweaks_packed(*pack(tweaks[:2], outputs[:2]), LABELLED, threads=threads)


def test_the_public_names_are_native_by_default():
    assert scan.scan_tweaks is native.scan_tweaks and scan.scan_tweaks_packed is native.scan_tweaks_packed


# ---- the GIL ----


def test_a_python_thread_runs_while_a_batch_is_scanned():
    """Holding the GIL would freeze the spinner for the whole C call: no tick could land in its middle half."""
    tweaks, outputs = batch()
    tweaks, outputs = tweaks * 2, outputs * 2
    ticks, stop, window = [], threading.Event(), []

    def spin():
        while not stop.is_set():
            ticks.append(time.perf_counter())

    def scan_batch():
        start = time.perf_counter()
        native.scan_tweaks_packed(*packed, LABELLED)
        window.extend((start, time.perf_counter()))

    packed = pack(tweaks, outputs)
    spinner, scanner = threading.Thread(target=spin), threading.Thread(target=scan_batch)
    spinner.start()
    try:
        scanner.start()
        scanner.join()
    finally:
        stop.set()
        spinner.join()
    start, end = window
    quarter = (end - start) / 4
    assert end - start > 0.05
    assert sum(start + quarter < t < end - quarter for t in ticks) > 10
