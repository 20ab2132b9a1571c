"""Which output a wallet owns does not depend on the implementation.

Per k the outputs are tried in the transaction's order, each directly, then with the labels,
before the next one (BIP352's receiving loop, libsecp256k1 0.8's silentpayments module): with
`[x(P_0 + L_1), x(P_0)]` (a sender that paid one scan key twice at k = 0) output 0 is the match,
with label 1. The pure-Python reference, the C scan and libsecp256k1 (through btclib-secp256k1)
must return the same outputs, tweaks and labels, in the same k order: the C scan with each label
strategy ("bip", "labelset", the automatic pick), through every entry point (scan_tx, scan_tweak,
scan_tweaks and scan_tweaks_packed with 33- and 64-byte tweaks, the block scan) on the engine in use,
and through scan_tweaks_packed on every engine this CPU runs (sp_scan.native._testing: the vector
cores, their emulated builds and the libsecp256k1 engine).
"""

from __future__ import annotations

import os
import random
import struct
from dataclasses import dataclass

import pytest
from bitcoin.core import COutPoint, CMutableTransaction, CScript, CScriptWitness, CTxIn, CTxInWitness, CTxOut, CTxWitness
from btclib_secp256k1 import silentpayments
from coincurve import PrivateKey, PublicKey

import blockfactory as bf
from sp_scan import block, crypto, native, reference, scan
from sp_scan.wire import TxOut
from sp_scan.native import _testing
from sp_scan.types import OutPoint, TxInput

pytestmark = pytest.mark.skipif(os.environ.get("SP_SCAN_BACKEND") == "reference", reason="SP_SCAN_BACKEND=reference")

STRATEGIES = ("bip", "labelset", "auto")
SIG71 = b"\x30" * 71


@dataclass(frozen=True)
class Tx:
    """A one-input (P2WPKH) tx, its x-only outputs and what a light client is served for it."""

    inputs: list[TxInput]
    input_key33: bytes
    outputs32: list[bytes]
    tweak: PublicKey  # input_hash·A


def spend_input(rng: random.Random) -> tuple[TxInput, bytes]:
    key33 = PrivateKey(rng.randbytes(32)).public_key.format()
    op = OutPoint(rng.randbytes(32), rng.randrange(4))
    return TxInput(op, b"", (SIG71, key33), b"\x00\x14" + crypto.hash160(key33)), key33


def p_k(receiver: scan.Receiver, tweak: PublicKey, k: int, m: int | None) -> bytes:
    """x(P_k), or x(P_k + L_m) for label m, for a tx whose tweak is `tweak`."""
    ecdh33 = tweak.multiply(receiver.scan_key32).format()
    t_k = crypto.tagged_hash(crypto.TAG_SHARED_SECRET, ecdh33 + crypto.ser32(k))
    points = [PublicKey(receiver.spend_pubkey33), PublicKey.from_secret(t_k)]
    if m is not None:
        points.append(PublicKey.from_secret(scan.label_tweak(receiver.scan_key32, m)))
    return PublicKey.combine_keys(points).format()[1:]


def paying_tx(rng: random.Random, receiver: scan.Receiver, layout: list) -> Tx:
    """A tx whose outputs are, in order, x(P_k) for (k, None), x(P_k + L_m) for (k, m), or the given bytes."""
    spend, key33 = spend_input(rng)
    tweak = PublicKey(reference.summary.summarize([spend]).tweak33)
    outputs = [o if isinstance(o, bytes) else p_k(receiver, tweak, *o) for o in layout]
    return Tx([spend], key33, outputs, tweak)


def libsecp_scan(tx: Tx, receiver: scan.Receiver) -> list[tuple[bytes, bytes, bytes | None]]:
    """libsecp256k1 0.8's silentpayments scan of the tx: (output, tweak, label33 or None) in k order."""
    outputs = [o for o in tx.outputs32 if crypto.lift_x(o) is not None]  # libsecp refuses the rest, Core drops them
    if not outputs:
        return []
    summary_bytes = silentpayments.prevouts_summary(tx.inputs[0].outpoint.to_bytes(), pubkeys_bytes=[tx.input_key33])
    labels = {label33: tweak32 for label33, (_, tweak32) in receiver.label_table.items()}
    return silentpayments.scan_outputs(outputs, receiver.scan_key32, summary_bytes, receiver.spend_pubkey33, labels)


def as_libsecp(found: list[scan.FoundOutput], receiver: scan.Receiver) -> list[tuple[bytes, bytes, bytes | None]]:
    label33 = {m: point for point, (m, _) in receiver.label_table.items()}
    return [(f.output32, f.tweak32, None if f.label is None else label33[f.label]) for f in found]


def block_of(txs: list[Tx]) -> bf.TestBlock:
    """A block paying each tx's outputs at vouts 1.. (vout 0 a P2WPKH filler)."""
    ctxs, spent = [], []
    for n, tx in enumerate(txs):
        vins = [CTxIn(COutPoint(i.outpoint.txid32, i.outpoint.vout), CScript(i.script_sig), 0xFFFFFFFD) for i in tx.inputs]
        outs = [CTxOut(bf.amount(n, 0), CScript(bf.P2WPKH_FILLER))]
        outs += [CTxOut(bf.amount(n, v + 1), CScript(b"\x51\x20" + x)) for v, x in enumerate(tx.outputs32)]
        ctx = CMutableTransaction(vins, outs, nVersion=2)
        ctx.wit = CTxWitness([CTxInWitness(CScriptWitness(list(i.witness))) for i in tx.inputs])
        ctxs.append(ctx)
        spent.append([TxOut(bf.amount(n, 100), i.prevout_script) for i in tx.inputs])
    return bf.assemble(ctxs, spent, height=1, prev=b"\x00" * 32)


def packed(txs: list[Tx], width: int) -> tuple[bytes, int, bytes, bytes]:
    """The txs as `scan_tweaks_packed` takes them: tweaks, their width, outputs, counts."""
    tweaks = b"".join(tx.tweak.format() if width == 33 else tx.tweak.format(compressed=False)[1:] for tx in txs)
    counts = struct.pack(f"<{len(txs)}I", *(len(tx.outputs32) for tx in txs))
    return tweaks, width, b"".join(o for tx in txs for o in tx.outputs32), counts


def assert_every_path_agrees(txs: list[Tx], receiver: scan.Receiver) -> list[list[scan.FoundOutput]]:
    """Reference == libsecp256k1 == the C scan on every entry point, strategy and engine; returns the reference's."""
    want = [reference.scan.scan_tx(tx.inputs, tx.outputs32, receiver) for tx in txs]
    for tx, found in zip(txs, want):
        assert as_libsecp(found, receiver) == libsecp_scan(tx, receiver), tx.outputs32
        assert reference.scan.scan_tweak(tx.tweak.format(), tx.outputs32, receiver) == found
    tb = block_of(txs)
    want_block = reference.block.scan(tb.raw, tb.spent_bytes, receiver)
    want_packed = reference.scan.scan_tweaks_packed(*packed(txs, 33), receiver)
    for strategy in STRATEGIES:
        previous = native.set_label_strategy(strategy), _testing.set_label_strategy(strategy)
        try:
            where = f"{native.ec_engine()}, {strategy}"
            assert [native.scan_tx(tx.inputs, tx.outputs32, receiver) for tx in txs] == want, where
            assert [native.scan_tweak(tx.tweak.format(), tx.outputs32, receiver) for tx in txs] == want, where
            assert native.block_scan(tb.raw, tb.spent_bytes, receiver) == want_block, where
            for width in (33, 64):
                tweaks = [packed([tx], width)[0] for tx in txs]
                assert native.scan_tweaks(tweaks, [tx.outputs32 for tx in txs], receiver) == want, where
                assert native.scan_tweaks_packed(*packed(txs, width), receiver, 2) == want_packed, where
                for engine in _testing.ENGINES:
                    got = _testing.scan_tweaks_packed(engine, *packed(txs, width), receiver, 2)
                    assert got == want_packed, f"{engine}, {strategy}, {width}-byte tweaks"
        finally:
            native.set_label_strategy(previous[0])
            _testing.set_label_strategy(previous[1])
    return want


def test_every_engine_core_is_compared_and_libsecp256k1_too():
    assert {"scalar", "libsecp256k1"} <= set(_testing.ENGINES)


# (k, m): x(P_k + L_m), m None for x(P_k); expected: (output index, label) in k order.
LAYOUTS = {
    "labelled before direct (the issue's case)": ([(0, 1), (0, None)], [(0, 1)]),
    "direct before labelled (its mirror)": ([(0, None), (0, 1)], [(0, None)]),
    "two labels, then direct": ([(0, 2), (0, 1), (0, None)], [(0, 2)]),
    "direct between two labels": ([(0, 1), (0, None), (0, 2)], [(0, 1)]),
    "k = 1 first, then k = 0 labelled before direct": ([(1, None), (0, 1), (0, None)], [(1, 1), (0, None)]),
    "k = 1 labelled after k = 1 direct": ([(0, None), (1, None), (1, 0)], [(0, None), (1, None)]),
    "k = 1 labelled before k = 1 direct": ([(0, 1), (1, 0), (1, None)], [(0, 1), (1, 0)]),
    "the same output twice": ([(0, 1), (0, 1), (0, None)], [(0, 1)]),
}


@pytest.mark.parametrize(("layout", "expected"), LAYOUTS.values(), ids=LAYOUTS.keys())
def test_the_first_output_in_tx_order_that_is_p_k_or_p_k_plus_a_label_is_the_match(layout, expected):
    rng = random.Random(repr(layout))
    receiver = scan.Receiver(rng.randbytes(32), PrivateKey(rng.randbytes(32)).public_key.format(), (1, 2))
    tx = paying_tx(rng, receiver, layout)
    (found,) = assert_every_path_agrees([tx], receiver)
    assert [(tx.outputs32.index(f.output32), f.label) for f in found] == expected


def test_the_issues_case_in_a_block_is_vout_1_with_label_1():
    rng = random.Random("block")
    receiver = scan.Receiver(rng.randbytes(32), PrivateKey(rng.randbytes(32)).public_key.format(), (1,))
    tx = paying_tx(rng, receiver, [(0, 1), (0, None)])
    tb = block_of([tx])
    assert [(m.vout, m.found.label) for m in block.scan(tb.raw, tb.spent_bytes, receiver)] == [(1, 1)]
    assert [(m.vout, m.found.label) for m in reference.block.scan(tb.raw, tb.spent_bytes, receiver)] == [(1, 1)]


def collision_layout(rng: random.Random, labels: tuple[int, ...]) -> list:
    """Up to 4 values of k, each paid 1-3 times (directly and with labels), sometimes an output twice,
    sometimes a k left out (scanning stops there), among unrelated keys (some off the curve); shuffled."""
    layout: list = []
    for k in range(rng.randrange(5)):
        if k and rng.random() < 0.15:
            continue
        paid = [(k, m) for m in rng.sample(labels, rng.randint(0, min(2, len(labels))))]
        layout += (paid + [(k, None)]) if not paid or rng.random() < 0.6 else paid
    if layout and rng.random() < 0.2:
        layout.append(rng.choice(layout))
    layout += [rng.randbytes(32) if rng.random() < 0.4 else PrivateKey(rng.randbytes(32)).public_key.format()[1:]
               for _ in range(rng.randrange(4))]
    rng.shuffle(layout)
    return layout or [rng.randbytes(32)]


@pytest.mark.parametrize("labels", [(), (1,), (1, 2, 3, 7), tuple(range(1, 41))], ids=lambda ls: f"{len(ls)}-labels")
def test_generated_collisions_agree_with_the_reference_and_libsecp256k1(labels):
    """The 40-label receiver makes "auto" pick the BIP order, the others the label set."""
    rng = random.Random(f"collisions-{len(labels)}")
    receiver = scan.Receiver(rng.randbytes(32), PrivateKey(rng.randbytes(32)).public_key.format(), labels)
    layouts = [collision_layout(rng, receiver.labels) for _ in range(120)]
    txs = [paying_tx(rng, receiver, layout) for layout in layouts]
    found = assert_every_path_agrees(txs, receiver)
    # The reference found what the rule says, and the corpus holds the case the rule decides.
    decided = 0
    for layout, tx, hits in zip(layouts, txs, found):
        left = [o for o in layout if not isinstance(o, bytes)]
        for k, f in enumerate(hits):
            first = next(o for o in left if o[0] == k)
            assert (f.output32, f.label) == (p_k(receiver, tx.tweak, *first), first[1])
            decided += first[1] is not None and (k, None) in left
            left.remove(first)
        assert all(o[0] != len(hits) for o in left)
    assert decided >= 20
