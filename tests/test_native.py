"""The native backend (sp_scan.native) gives the reference's results, and libsecp256k1's own.

Reference functions are reached as `reference.<stage>.<name>`; the public names are the
native ones by default. btclib-secp256k1 bundles libsecp256k1 0.8's silentpayments module.
"""

from __future__ import annotations

import itertools
import os
import random
import re
import struct
import subprocess
import sys
import time

import pytest
from btclib_secp256k1 import silentpayments
from coincurve import PrivateKey

from conftest import RECEIVING, RECEIVING_IDS, ROOT, SENDING, SENDING_IDS, tx_inputs
from sp_scan import address, backend, block, extract, native, reference, scan
from sp_scan.crypto import TAG_SHARED_SECRET, N, lift_x, ser32, tagged_hash
from sp_scan.errors import (
    InvalidKeyError,
    KeySumZeroError,
    KmaxExceededError,
    MalformedBlockError,
    MalformedDataError,
    PrevoutsError,
    SendError,
)
from sp_scan.send import InputKey
from sp_scan.types import OutPoint
from txgen import Wallet, generate, wallets

# Only an explicit SP_SCAN_BACKEND=reference run skips this module; a default run without the
# extension fails test_native_is_enabled_by_default.
pytestmark = pytest.mark.skipif(os.environ.get("SP_SCAN_BACKEND") == "reference", reason="SP_SCAN_BACKEND=reference")

WALLETS = wallets()
GENERATED = generate(352, 1000, WALLETS)
STRATEGIES = ("bip", "labelset", "auto")


@pytest.fixture
def strategy():
    """Restore the automatic label strategy after a test forces one."""
    yield native.set_label_strategy
    native.set_label_strategy("auto")


def _receiver(given: dict) -> scan.Receiver:
    keys = given["key_material"]
    spend = PrivateKey(bytes.fromhex(keys["spend_priv_key"])).public_key.format()
    return scan.Receiver(bytes.fromhex(keys["scan_priv_key"]), spend, tuple(given["labels"]))


# ---- the backend is on ----


def test_native_is_enabled_by_default():
    assert native.ENABLED and backend.NAME == "native"
    assert extract.input_pubkey is native.input_pubkey and scan.scan_tx is native.scan_tx


def test_sp_scan_backend_reference_disables_native():
    code = "from sp_scan import backend, native, reference, summary; print(native.ENABLED, backend.NAME, summary.summarize is reference.summary.summarize)"
    env = {**os.environ, "SP_SCAN_BACKEND": "reference", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "reference", "True"]


# ---- official vectors ----


@pytest.mark.parametrize(("n", "obj"), RECEIVING, ids=RECEIVING_IDS)
def test_receiving_vector_native_equals_reference(n, obj, strategy):
    given = obj["given"]
    inputs = tx_inputs(given["vin"])
    for i in inputs:
        args = (i.prevout_script, i.script_sig, i.witness)
        assert native.input_pubkey(*args) == reference.extract.input_pubkey(*args)
    assert native.tx_pubkeys(inputs) == reference.extract.tx_pubkeys(inputs)
    assert native.summarize(inputs) == reference.summary.summarize(inputs)
    receiver = _receiver(given)
    outputs = [bytes.fromhex(o) for o in given["outputs"]]
    if len(outputs) > 100:  # the K_max case: the reference needs minutes; see the strategy test
        return
    expected = reference.scan.scan_tx(inputs, outputs, receiver)
    for name in STRATEGIES:
        strategy(name)
        assert native.scan_tx(inputs, outputs, receiver) == expected
    if expected:
        tweak33 = native.summarize(inputs).tweak33
        assert native.scan_tweak(tweak33, outputs, receiver) == expected
        assert native.shared_secret(tweak33, receiver.scan_key32) == reference.scan.shared_secret(tweak33, receiver.scan_key32)


@pytest.mark.parametrize(("n", "obj"), SENDING, ids=SENDING_IDS)
def test_sending_vector_native_equals_reference(n, obj):
    given = obj["given"]
    inputs = tx_inputs(given["vin"])
    keys = [reference.extract.input_pubkey(i.prevout_script, i.script_sig, i.witness) for i in inputs]
    input_keys = [InputKey(bytes.fromhex(v["private_key"]), len(k) == 32) for v, k in zip(given["vin"], keys) if k is not None]
    recipients = [address.decode(r["address"]) for r in given["recipients"] for _ in range(r.get("count", 1))]
    outpoints = [i.outpoint for i in inputs]
    try:
        expected = reference.send.create_outputs(outpoints, input_keys, recipients)
    except SendError as exc:
        with pytest.raises(type(exc)):
            native.create_outputs(outpoints, input_keys, recipients)
        return
    assert native.create_outputs(outpoints, input_keys, recipients) == expected
    scan33 = recipients[0].scan_pubkey33
    assert native.send_shared_secret(outpoints, input_keys, scan33) == reference.send.shared_secret(outpoints, input_keys, scan33)


def test_both_label_strategies_agree_on_the_kmax_vector(strategy):
    (_, obj), = [(n, o) for n, o in RECEIVING if len(o["given"]["outputs"]) > 2000]
    inputs, receiver = tx_inputs(obj["given"]["vin"]), _receiver(obj["given"])
    outputs = [bytes.fromhex(o) for o in obj["given"]["outputs"]]
    results = []
    for name in STRATEGIES:
        strategy(name)
        results.append(native.scan_tx(inputs, outputs, receiver))
    assert len(results[0]) == scan.K_MAX == obj["expected"]["n_outputs"]
    assert results[0] == results[1] == results[2]


# ---- generated transactions ----


def test_the_generated_set_covers_every_input_kind_and_both_outcomes():
    kinds = {k for tx in GENERATED for k in tx.kind}
    found = sum(bool(native.scan_tx(tx.inputs, tx.outputs32, w.receiver)) for tx in GENERATED for w in WALLETS)
    assert len(GENERATED) >= 1000 and len(kinds) == 18
    assert 300 < found < 3000


def test_generated_extraction_and_summary_equal_the_reference():
    for tx in GENERATED:
        for i in tx.inputs:
            args = (i.prevout_script, i.script_sig, i.witness)
            assert native.input_pubkey(*args) == reference.extract.input_pubkey(*args), tx.kind
        assert native.tx_pubkeys(tx.inputs) == reference.extract.tx_pubkeys(tx.inputs)
        assert native.summarize(tx.inputs) == reference.summary.summarize(tx.inputs)


@pytest.mark.parametrize("name", STRATEGIES)
def test_generated_scans_equal_the_reference(name, strategy):
    strategy(name)
    for tx in GENERATED[:400] if name != "auto" else GENERATED:
        for w in WALLETS:
            assert native.scan_tx(tx.inputs, tx.outputs32, w.receiver) == reference.scan.scan_tx(tx.inputs, tx.outputs32, w.receiver)


def test_generated_sends_equal_the_reference():
    for tx in GENERATED:
        outpoints = [i.outpoint for i in tx.inputs]
        try:
            expected = reference.send.create_outputs(outpoints, tx.input_keys, tx.recipients)
        except SendError as exc:
            with pytest.raises(type(exc)):
                native.create_outputs(outpoints, tx.input_keys, tx.recipients)
            continue
        assert native.create_outputs(outpoints, tx.input_keys, tx.recipients) == expected


def _libsecp_scan(tx, wallet: Wallet, summary_bytes: bytes) -> set:
    receiver = wallet.receiver
    outputs = [o for o in tx.outputs32 if lift_x(o) is not None]
    labels = {label33: tweak32 for label33, (_, tweak32) in receiver.label_table.items()}
    found = silentpayments.scan_outputs(outputs, receiver.scan_key32, summary_bytes, receiver.spend_pubkey33, labels)
    return set(found)


def test_generated_summaries_and_scans_equal_libsecp256k1_silentpayments():
    compared = 0
    for tx in GENERATED:
        s = native.summarize(tx.inputs)
        keys = native.tx_pubkeys(tx.inputs)
        if s is None:
            continue
        smallest = min(i.outpoint.to_bytes() for i in tx.inputs)
        libsecp = silentpayments.prevouts_summary(
            smallest, taproot_pubkeys_bytes=[k for k in keys if len(k) == 32], pubkeys_bytes=[k for k in keys if len(k) == 33]
        )
        assert libsecp == s.outpoint_smallest36 + s.pubkey_sum33
        for w in WALLETS:
            ours = native.scan_tx(tx.inputs, tx.outputs32, w.receiver)
            label33 = {m: p for p, (m, _) in w.receiver.label_table.items()}
            mine = {(f.output32, f.tweak32, None if f.label is None else label33[f.label]) for f in ours}
            assert mine == _libsecp_scan(tx, w, libsecp)
            compared += bool(ours)
    assert compared > 300


def cpu_seconds(call):
    """(call(), the CPU time this thread spent in it): the scan runs in the calling thread; other load does not count."""
    start = time.thread_time()
    result = call()
    return result, time.thread_time() - start


def test_a_huge_tx_scanned_with_the_change_label_costs_k_times_l(strategy):
    """23,250 outputs, 50 of them change: the label-set strategy's cost does not grow with N, so the whole
    scan costs less CPU than the BIP order's (K × N point additions) over a twentieth of the outputs."""
    wallet = WALLETS[0]
    tx = next(t for t in GENERATED if native.summarize(t.inputs) is not None)
    outpoints = [i.outpoint for i in tx.inputs]
    paid = reference.send.create_outputs(outpoints, tx.input_keys, [wallet.address(0)] * 50)
    rng = __import__("random").Random(7)
    others = [rng.randbytes(32) for _ in range(23_200)]
    found, huge = cpu_seconds(lambda: native.scan_tx(tx.inputs, others + paid, wallet.receiver))
    assert [f.output32 for f in found] == paid and {f.label for f in found} == {0}
    strategy("bip")
    found, bip_twentieth = cpu_seconds(lambda: native.scan_tx(tx.inputs, others[:1_100] + paid, wallet.receiver))
    assert [f.output32 for f in found] == paid
    assert huge < bip_twentieth, (huge, bip_twentieth)


def test_a_receiver_with_many_labels_and_few_outputs_uses_the_bip_order(strategy):
    wallet = WALLETS[2]
    tx = next(t for t in GENERATED if native.summarize(t.inputs) is not None)
    outpoints = [i.outpoint for i in tx.inputs]
    paid = reference.send.create_outputs(outpoints, tx.input_keys, [wallet.address(40), wallet.address(None)])
    expected = reference.scan.scan_tx(tx.inputs, paid, wallet.receiver)
    assert [f.label for f in expected] == [None, 40] or [f.label for f in expected] == [40, None]
    for name in STRATEGIES:
        strategy(name)
        assert native.scan_tx(tx.inputs, paid, wallet.receiver) == expected


def test_an_output_hit_by_two_labels_takes_the_one_where_o_minus_p_k_is_the_label(strategy):
    """O − P_k = L_a and −O − P_k = L_b: the reference tries O − P_k first, so label a wins."""
    scan_key, spend_key = (N - 12345).to_bytes(32, "big"), PrivateKey((N - 54321).to_bytes(32, "big"))
    receiver = scan.Receiver(scan_key, spend_key.public_key.format(), ())
    tx = next(t for t in GENERATED if native.summarize(t.inputs) is not None)
    ecdh33 = native.shared_secret(native.summarize(tx.inputs).tweak33, scan_key)
    p = (spend_key.to_int() + int.from_bytes(tagged_hash(TAG_SHARED_SECRET, ecdh33 + ser32(0)), "big")) % N
    o = 777
    if PrivateKey.from_int(o).public_key.format()[0] == 3:
        o = N - o
    entries = {}
    for m, l in ((7, (-o - p) % N), (9, (o - p) % N)):
        entries[PrivateKey.from_int(l).public_key.format()] = (m, l.to_bytes(32, "big"))
    object.__setattr__(receiver, "label_table", {**entries, **receiver.label_table})
    outputs = [PrivateKey.from_int(o).public_key.format()[1:]]
    expected = reference.scan.scan_tx(tx.inputs, outputs, receiver)
    assert [(f.label, f.tweak32) for f in expected] == [(9, ((o - spend_key.to_int()) % N).to_bytes(32, "big"))]
    for name in STRATEGIES:
        strategy(name)
        assert native.scan_tx(tx.inputs, outputs, receiver) == expected


@pytest.mark.parametrize("order", [(1, 2), (2, 1)])
def test_two_outputs_matching_the_same_k_the_first_in_given_order_wins(order, strategy):
    wallet = WALLETS[1]
    tx = next(t for t in GENERATED if native.summarize(t.inputs) is not None)
    outpoints = [i.outpoint for i in tx.inputs]
    outputs = [reference.send.create_outputs(outpoints, tx.input_keys, [wallet.address(m)])[0] for m in order]
    expected = reference.scan.scan_tx(tx.inputs, outputs, wallet.receiver)
    assert [(f.output32, f.label) for f in expected] == [(outputs[0], order[0])]
    for name in STRATEGIES:
        strategy(name)
        assert native.scan_tx(tx.inputs, outputs, wallet.receiver) == expected


# ---- blocks ----


BLOCKS = ROOT / "vectors" / "blocks"


def _sample(name: str) -> tuple[bytes, bytes]:
    if (BLOCKS / f"{name}.hex").exists():
        return bytes.fromhex((BLOCKS / f"{name}.hex").read_text()), bytes.fromhex((BLOCKS / f"{name}.spent.hex").read_text())
    return (BLOCKS / f"{name}.bin").read_bytes(), (BLOCKS / f"{name}.spent.bin").read_bytes()


@pytest.mark.parametrize("name", ["small", "mainnet"])
def test_native_block_loop_equals_the_python_one(name):
    tweaks, scan_block = reference.block.tweaks, reference.block.scan
    block_bytes, spent = _sample(name)
    wallet = WALLETS[1].receiver
    assert native.block_tweaks(block_bytes, spent) == tweaks(block_bytes, spent)
    if name == "small":
        import json

        w = json.loads((BLOCKS / "small.expected.json").read_text())["wallet"]
        wallet = scan.Receiver(bytes.fromhex((BLOCKS / w["scan_key_file"]).read_text().strip()), bytes.fromhex(w["spend_pubkey"]), tuple(w["labels"]))
    found = native.block_scan(block_bytes, spent, wallet)
    assert found == scan_block(block_bytes, spent, wallet)
    assert name != "small" or len(found) > 5


def test_native_spent_marks_equal_the_reference_ones():
    rng = random.Random(352)
    for _ in range(500):
        heights = rng.sample(range(1 << 20), rng.randint(1, 4))
        sizes = {h: rng.randint(1, 40) for h in heights}
        start = {h: bytes(rng.getrandbits(8) for _ in range(n)) for h, n in sizes.items()}  # some outputs spent before
        found = [rng.choice([None, h << 32 | rng.randrange(8 * sizes[h])]) for h in rng.choices(heights, k=rng.randint(0, 60))]
        found += found[: rng.randint(0, 3)]  # an output spent twice: its first spend keeps the mark
        ours, theirs = {h: bytearray(b) for h, b in start.items()}, {h: bytearray(b) for h, b in start.items()}
        marks = native.mark_spent(found, ours)
        assert marks == reference.block.mark_spent(found, theirs) and ours == theirs
        pairs = list(struct.iter_unpack("<II", marks))
        assert len(set(pairs)) == len(pairs) and all(not start[h][o >> 3] >> (o & 7) & 1 for h, o in pairs)


@pytest.mark.parametrize(
    ("found", "bitmaps", "error"),
    [([5 << 32 | 1], {4: bytearray(1)}, KeyError), ([4 << 32 | 8], {4: bytearray(1)}, IndexError), ([4 << 32], {4: b"\x00"}, TypeError)],
    ids=["no bitmap for the height", "an ordinal beyond the bitmap", "a bitmap that is not a bytearray"],
)
def test_native_spent_marks_refuse_what_the_reference_refuses(found, bitmaps, error):
    for mark_spent in (native.mark_spent, reference.block.mark_spent):
        with pytest.raises(error):
            mark_spent(found, bitmaps)


def _random_block(rng: random.Random, earlier: list[tuple[bytes, bytes, bytes]]) -> tuple[bytes, bytes, bytes]:
    """(txids, counts u32, vouts u32) of a block of up to 40 txs: now and then a txid of an earlier block again."""
    known = [t[i : i + 32] for t, _, _ in earlier for i in range(0, len(t), 32)]
    txids = b"".join(rng.choice(known) if known and rng.random() < 0.05 else rng.randbytes(32) for _ in range(rng.randint(0, 40)))
    counts = [rng.randint(0, 3) for _ in range(len(txids) // 32)]
    vouts = b"".join(struct.pack("<I", v) for c in counts for v in rng.sample(range(5), c))
    return txids, struct.pack(f"<{len(counts)}I", *counts), vouts


def _outpoints(rng: random.Random, blocks: list[tuple[bytes, bytes, bytes]], k: int) -> bytes:
    """k outpoints: mostly outputs of the blocks (spent or not, twice sometimes), now and then one of nothing."""
    out = []
    for _ in range(k):
        txids, counts, vouts = rng.choice(blocks)
        if not vouts or rng.random() < 0.2:
            out.append(rng.randbytes(36))
            continue
        out.append(_outpoint_of((txids, counts, vouts), rng.randrange(len(vouts) // 4)))
    return b"".join(out)


def test_native_output_map_matches_the_reference_on_random_blocks_spends_and_rollbacks():
    rng = random.Random(352)
    for _ in range(40):
        ours, theirs, blocks = native.output_map(), reference.block.OutputMap(), []
        for height in range(rng.randint(1, 30)):
            block = _random_block(rng, blocks)
            if rng.random() < 0.3:  # a block loaded from a file: its spent outputs left out
                spent = rng.randbytes((len(block[2]) // 4 + 7) // 8)
                assert ours.add_block(height, *block, spent) == theirs.add_block(height, *block, spent)
                blocks.append(block)
                continue
            blocks.append(block)
            outpoints = _outpoints(rng, blocks, rng.randint(0, 30))
            own, places = ours.spend(height, *block, outpoints)
            assert (own, places) == theirs.spend(height, *block, outpoints)
            assert sorted(struct.unpack(f"<{len(places) // 8}Q", places)) == list(struct.unpack(f"<{len(places) // 8}Q", places))
            if rng.random() < 0.3:  # a rollback: what the block made goes, what it spent comes back
                assert ours.drop_block(height, *block) == theirs.drop_block(height, *block)
                back = [p for p in struct.unpack(f"<{len(places) // 8}Q", places) if p >> 32 != height]
                at = b"".join(_outpoint_of(blocks[p >> 32], p & 0xFFFFFFFF) for p in back)
                assert ours.put(at, struct.pack(f"<{len(back)}Q", *back)) == theirs.put(at, struct.pack(f"<{len(back)}Q", *back))
            assert len(ours) == len(theirs)


def _outpoint_of(block: tuple[bytes, bytes, bytes], ordinal: int) -> bytes:
    txids, counts, vouts = block
    tx = next(i for i, end in enumerate(itertools.accumulate(struct.unpack(f"<{len(counts) // 4}I", counts))) if ordinal < end)
    return txids[32 * tx : 32 * tx + 32] + vouts[4 * ordinal : 4 * ordinal + 4]


@pytest.mark.parametrize(
    ("call", "needle"),
    [
        (lambda m: m.spend(1, b"", b"", b"", b"x" * 35), "outpoints36 must be k x 36 bytes"),
        (lambda m: m.add_block(2**24, b"", b"", b"", b""), "height 16777216 is beyond 2^24 - 1"),
        (lambda m: m.add_block(1, b"x" * 32, b"\x02\x00\x00\x00", b"\x00" * 4, b""), "the counts add up to 2 outputs, vouts holds 1"),
        (lambda m: m.add_block(1, b"x" * 32, b"\x01\x00\x00\x00", b"\x00" * 4, b"\x00\x00"), "spent holds 2 bytes for 1 outputs"),
        (lambda m: m.put(b"x" * 36, struct.pack("<Q", 2**56)), "place (16777216, 0) is beyond 2^24 - 1"),
        (lambda m: m.put(b"x" * 36, b""), "outpoints36 (k x 36) and places (k x u64) do not fit"),
    ],
    ids=["outpoints not of 36 bytes", "a height beyond 24 bits", "counts and vouts that disagree", "a bitmap of the wrong size", "a place beyond 24 bits", "places missing"],
)
def test_native_output_map_refuses_what_the_reference_refuses(call, needle):
    for output_map in (native.output_map(), reference.block.OutputMap()):
        with pytest.raises(ValueError, match=re.escape(needle)):
            call(output_map)


def _mutations(block_bytes: bytes, spent: bytes):
    yield "truncated block", block_bytes[:-1], spent
    yield "trailing byte", block_bytes + b"\x00", spent
    yield "header only", block_bytes[:80], spent
    yield "non-canonical tx count", block_bytes[:80] + b"\xfd" + block_bytes[80:81] + b"\x00" + block_bytes[81:], spent
    yield "absurd tx count", block_bytes[:80] + b"\xfe\xff\xff\xff\x0f" + block_bytes[81:], spent
    yield "truncated spent", block_bytes, spent[:-1]
    yield "trailing spent", block_bytes, spent + b"\x00"
    yield "spent for one tx fewer", block_bytes, bytes([spent[0] - 1]) + spent[1:]
    yield "empty spent", block_bytes, b"\x00"
    for cut in range(81, len(block_bytes), max(1, len(block_bytes) // 97)):
        yield f"cut at {cut}", block_bytes[:cut], spent
    for flip in range(80, len(block_bytes), max(1, len(block_bytes) // 61)):
        yield f"flip {flip}", block_bytes[:flip] + bytes([block_bytes[flip] ^ 0xFF]) + block_bytes[flip + 1 :], spent
    for cut in range(1, len(spent), max(1, len(spent) // 31)):
        yield f"spent cut at {cut}", block_bytes, spent[:cut]


@pytest.mark.parametrize("stage", ["block_tweaks", "block_index"])
def test_broken_blocks_and_spent_data_raise_the_python_loops_errors(stage):
    python_loop = reference.block.tweaks if stage == "block_tweaks" else reference.block.block_index
    block_bytes, spent = _sample("small")
    checked = set()
    for what, b, s in _mutations(block_bytes, spent):
        try:
            expected = python_loop(b, s)
        except (MalformedDataError, PrevoutsError) as exc:
            with pytest.raises(type(exc)):
                getattr(native, stage)(b, s)
            checked.add(type(exc))
            continue
        assert getattr(native, stage)(b, s) == expected, what
    assert checked == {MalformedBlockError, MalformedDataError, PrevoutsError}


def _generated_blocks():
    import blockfactory as bf

    cases = bf.receiving_cases()
    return [bf.build(cases[i : i + 9], height=i) for i in range(0, len(cases), 9)]


@pytest.mark.parametrize("name", ["small", "mainnet", "generated"])
def test_native_block_index_equals_the_reference(name):
    pairs = [(tb.raw, tb.spent_bytes) for tb in _generated_blocks()] if name == "generated" else [_sample(name)]
    for block_bytes, spent in pairs:
        data = native.block_index(block_bytes, spent)
        assert data == reference.block.block_index(block_bytes, spent)
        assert [data.txids[i : i + 32] for i in range(0, len(data.txids), 32)] == [t.txid32 for t in block.tweaks(block_bytes, spent)]
    assert name != "mainnet" or (data.n_tx, len(data.taproot_keys) // 32) == (1412, 2062)


def _block_tweaks():
    block_bytes, spent = _sample("mainnet")
    return lambda: native.block_tweaks(block_bytes, spent)


def _output_map_add_block():
    n = 5000  # txs of 4 outputs: ~10 ms a call
    txids, counts, vouts = os.urandom(32 * n), struct.pack(f"<{n}I", *[4] * n), struct.pack(f"<{4 * n}I", *[v % 4 for v in range(4 * n)])
    maps = [native.output_map() for _ in range(100)]  # made outside the calls (a new map reads os.urandom without the GIL)
    return lambda: maps.pop().add_block(7, txids, counts, vouts, b"")


@pytest.mark.parametrize("work", [_block_tweaks, _output_map_add_block], ids=["block_tweaks", "output_map.add_block"])
def test_block_work_releases_the_gil(work):
    """A Python thread runs while another thread is inside the block loop (the tweaks of a block, or the
    writer's map built from a block's outputs).

    Waits for events, not times. With a 5 s switch interval the calling thread gives the GIL away
    only inside a call that releases it, or when a forced switch falls due (once per 5 s, so in at
    most 2 of the ≤ 100 calls here, each a few ms): the spinner must count inside 3 different calls.
    """
    import threading

    call_work = work()
    call, stop, seen = [0], threading.Event(), set()

    def spin():
        while not stop.is_set():
            if call[0] % 2:
                seen.add(call[0])
            time.sleep(0)  # lets the calling thread take the GIL back as soon as its call returns

    interval = sys.getswitchinterval()
    sys.setswitchinterval(5.0)
    spinner = threading.Thread(target=spin)
    spinner.start()
    try:
        results = []
        while len(seen) < 3 and len(results) < 100:
            call[0] += 1  # odd: inside a call
            results.append(call_work())
            call[0] += 1
    finally:
        stop.set()
        spinner.join()
        sys.setswitchinterval(interval)
    assert len(seen) >= 3, f"Python ran inside {len(seen)} of {len(results)} calls"
    assert all(r == results[0] for r in results)


# ---- misuse: the documented errors ----


SCAN_KEY, SPEND_PUB = WALLETS[1].receiver.scan_key32, WALLETS[1].receiver.spend_pubkey33
OFF_CURVE_X = b"\xff" * 32


@pytest.mark.parametrize(
    ("tweak33", "outputs"),
    [(b"\x02" * 32, [b"\x01" * 32]), (b"\x02" + OFF_CURVE_X, [b"\x01" * 32]), (b"\x04" + b"\x01" * 32, []), (PrivateKey(SCAN_KEY).public_key.format(), [b"\x01" * 31])],
    ids=["tweak 32 bytes", "tweak off the curve", "tweak bad prefix", "output 31 bytes"],
)
def test_scan_tweak_rejects_bad_keys(tweak33, outputs):
    with pytest.raises(InvalidKeyError):
        native.scan_tweak(tweak33, outputs, WALLETS[1].receiver)


def test_scan_tx_rejects_an_output_of_the_wrong_width_even_for_a_non_sp_tx():
    with pytest.raises(InvalidKeyError):
        native.scan_tx([], [b"\x01" * 33], WALLETS[1].receiver)


@pytest.mark.parametrize("scan_key32", [b"\x00" * 32, N.to_bytes(32, "big"), b"\x01" * 31], ids=["zero", "n", "31 bytes"])
def test_shared_secret_rejects_bad_scan_keys(scan_key32):
    with pytest.raises(InvalidKeyError):
        native.shared_secret(PrivateKey(SCAN_KEY).public_key.format(), scan_key32)


def test_send_errors_match_the_reference():
    op = [OutPoint(b"\x11" * 32, 0)]
    key = InputKey(b"\x01" * 32, False)
    neg = InputKey((N - int.from_bytes(key.private_key32, "big")).to_bytes(32, "big"), False)
    good = WALLETS[0].address(None)
    bad = address.SPAddress("sp", 0, b"\x02" + OFF_CURVE_X, good.spend_pubkey33)
    cases = [
        (op, [key], [], SendError),
        ([], [key], [good], SendError),
        (op, [], [good], SendError),
        (op, [InputKey(b"\x00" * 32, False)], [good], InvalidKeyError),
        (op, [InputKey(b"\x01" * 31, True)], [good], InvalidKeyError),
        (op, [key, neg], [good], KeySumZeroError),
        (op, [key], [good] * (scan.K_MAX + 1), KmaxExceededError),
        (op, [key], [bad], InvalidKeyError),
    ]
    for outpoints, keys, recipients, error in cases:
        with pytest.raises(error):
            reference.send.create_outputs(outpoints, keys, recipients)
        with pytest.raises(error):
            native.create_outputs(outpoints, keys, recipients)


def test_a_scanner_refuses_a_bad_spend_key():
    with pytest.raises(InvalidKeyError):
        native._core.Scanner(SCAN_KEY, b"\x02" + OFF_CURVE_X, [])
    with pytest.raises(InvalidKeyError):
        native._core.Scanner(SCAN_KEY, SPEND_PUB, [(1, SPEND_PUB, b"\x00" * 32)])


def test_the_scanner_is_built_once_per_receiver():
    receiver = scan.Receiver(SCAN_KEY, SPEND_PUB, (5,))
    native.scan_tweak(SPEND_PUB, [], receiver)
    first = native._scanners[receiver]
    native.scan_tweak(SPEND_PUB, [], receiver)
    assert native._scanners[receiver] is first
    del receiver, first
    assert not any(r.labels == (0, 5) for r in native._scanners.keys())


def test_release_scanner_closes_the_native_copy_of_the_keys_and_a_later_scan_builds_a_new_one():
    """Cake's v2 fixture (cake-tech/sp_scanner test/scan_block_v2_test.dart): b_scan 0x22…, one payment at k = 0."""
    receiver = scan.Receiver(b"\x22" * 32, bytes.fromhex("023c72addb4fdf09af94f0c94d7fe92a386a7e70cf8a1d85916386bb2535c7b1b1"))
    tweak33 = bytes.fromhex("0302cc2a75db0e06919f9d3312c17c831b68ff1ead95498a529fd366d64921e3c0")
    output32 = bytes.fromhex("46db9bd8d491531b2e783d32e07acb0624093fcdad75573e7e6da39ac21d0c13")
    assert [f.output32 for f in scan.scan_tweak(tweak33, [output32], receiver)] == [output32]
    scanner = native._scanners[receiver]
    native.release_scanner(receiver)
    assert receiver not in native._scanners
    with pytest.raises(ValueError, match="closed"):
        native._core.scan_tweak(scanner, tweak33, [output32])
    scanner.close()  # a second close is harmless
    assert [f.output32 for f in scan.scan_tweak(tweak33, [output32], receiver)] == [output32]
    native.release_scanner(receiver)
