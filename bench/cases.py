"""Deterministic inputs for the benches: Core-shaped extraction inputs and adversarial scanning txs.

Every key is derived from a label with SHA256, so two runs time the same bytes.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass

from coincurve import PublicKey

from sp_scan import crypto
from sp_scan.address import SPAddress, labelled_spend_pubkey
from sp_scan.scan import Receiver, label_tweak
from sp_scan.send import InputKey, create_outputs
from sp_scan.types import OutPoint, TxInput

ECDSA_SIG = b"\x01" * 71
"""Dummy low-R/low-S DER signature plus sighash byte, as Core's bench uses (nothing is verified)."""
SCHNORR_SIG = b"\x01" * 64
DUMMY_KEY = b"\x02" * 33
MAX_SCRIPT_SIZE = 10_000
WORST_CASE_DUMMIES = (MAX_SCRIPT_SIZE - 106) // 34  # 291: the scriptSig is then exactly 10,000 bytes


def secret(label: str, i: int = 0) -> bytes:
    """A valid 32-byte secret key derived from (label, i)."""
    digest = hashlib.sha256(f"sp-scan bench/{label}/{i}".encode()).digest()
    return (int.from_bytes(digest, "big") % (crypto.N - 1) + 1).to_bytes(32, "big")


def pubkey33(secret32: bytes) -> bytes:
    return PublicKey.from_secret(secret32).format()


def xonly32(secret32: bytes) -> bytes:
    return pubkey33(secret32)[1:]


def push(data: bytes) -> bytes:
    """A minimal direct push (data up to 75 bytes)."""
    assert len(data) <= 75
    return bytes([len(data)]) + data


def outpoint(label: str, i: int = 0) -> OutPoint:
    return OutPoint(hashlib.sha256(f"sp-scan bench/txid/{label}/{i}".encode()).digest(), i % 4)


@dataclass(frozen=True)
class ExtractCase:
    """One input of a Core bench and the key extraction must return (33 or 32 bytes)."""

    name: str
    txin: TxInput
    expected: bytes


def _p2pkh_script(key33: bytes) -> bytes:
    return b"\x76\xa9\x14" + crypto.hash160(key33) + b"\x88\xac"


def _tap_tweak_output(internal32: bytes, leaf: bytes) -> bytes:
    """The BIP341 output key x for `internal32` committing to one tapscript leaf (version 0xc0)."""
    leaf_hash = crypto.tagged_hash("TapLeaf", b"\xc0" + bytes([len(leaf)]) + leaf)
    tweak = crypto.tagged_hash("TapTweak", internal32 + leaf_hash)
    return PublicKey(b"\x02" + internal32).add(tweak).format()[1:]


@functools.cache
def extract_cases(i: int = 0) -> dict[str, ExtractCase]:
    """Core's five BIP352_GetPubKey inputs (src/bench/bip352.cpp layout), keyed by bench name.

    `i` selects the key (and internal/leaf keys): i = 0 is the per-call case.
    """
    key = pubkey33(secret("extract", i))
    key_hash = crypto.hash160(key)
    op = outpoint("extract", i)
    cases = []

    cases.append(ExtractCase("P2PKH", TxInput(op, push(ECDSA_SIG) + push(key), (), _p2pkh_script(key)), key))

    redeem = b"\x00\x14" + key_hash
    p2sh = b"\xa9\x14" + crypto.hash160(redeem) + b"\x87"
    cases.append(ExtractCase("P2SH_P2WPKH", TxInput(op, push(redeem), (ECDSA_SIG, key), p2sh), key))

    cases.append(ExtractCase("P2WPKH", TxInput(op, b"", (ECDSA_SIG, key), b"\x00\x14" + key_hash), key))

    # Script path: [sig, leaf `<32B> OP_CHECKSIG`, control = leaf version ‖ non-NUMS internal key].
    internal = xonly32(secret("extract/internal", i))
    leaf = push(xonly32(secret("extract/leaf", i))) + b"\xac"
    output = _tap_tweak_output(internal, leaf)
    witness = (SCHNORR_SIG, leaf, b"\xc0" + internal)
    cases.append(ExtractCase("P2TR", TxInput(op, b"", witness, b"\x51\x20" + output), output))

    script_sig = push(DUMMY_KEY) * WORST_CASE_DUMMIES + push(ECDSA_SIG) + push(key)
    assert len(script_sig) == MAX_SCRIPT_SIZE
    cases.append(ExtractCase("P2PKH_WorstCase", TxInput(op, script_sig, (), _p2pkh_script(key)), key))

    # The byte-window search's own worst case at the same size: the key first, then
    # `<33B> OP_DROP` pairs and OP_NOP padding, so a backwards window hashes ~10k windows.
    head = push(ECDSA_SIG) + push(key)
    drops = (MAX_SCRIPT_SIZE - len(head)) // 35
    script_sig = head + (push(DUMMY_KEY) + b"\x75") * drops
    script_sig += b"\x61" * (MAX_SCRIPT_SIZE - len(script_sig))
    assert len(script_sig) == MAX_SCRIPT_SIZE
    cases.append(ExtractCase("P2PKH_KeyFirst", TxInput(op, script_sig, (), _p2pkh_script(key)), key))
    return {c.name: c for c in cases}


def tx_of(name: str, n: int) -> list[ExtractCase]:
    """`n` inputs of the named kind, each with its own key and outpoint (no repeated key flatters a
    variable-time validity check)."""
    return [extract_cases(i)[name] for i in range(1, n + 1)]


@dataclass(frozen=True)
class ScanCase:
    """A transaction to scan and the receiver it is scanned for.

    Attributes:
        inputs: a P2WPKH and a P2TR key-path input.
        outputs32: the taproot output keys, adversarially ordered.
        receiver: scan key, spend key and the change label.
        expected: the x-only outputs that pay the receiver (k order).
    """

    inputs: list[TxInput]
    outputs32: list[bytes]
    receiver: Receiver
    expected: list[bytes]

    @property
    def change_labels(self) -> dict[bytes, bytes]:
        """The label cache libsecp / btclib-wallet take: ser_P(ℓ_0·G) -> ℓ_0."""
        tweak = label_tweak(self.receiver.scan_key32, 0)
        return {pubkey33(tweak): tweak}


@functools.cache
def receiver() -> Receiver:
    return Receiver(secret("scan"), pubkey33(secret("spend")))


@functools.cache
def _random_outputs(n: int) -> tuple[bytes, ...]:
    return tuple(xonly32(secret("random-output", i)) for i in range(n))


@functools.cache
def _inputs_and_keys() -> tuple[list[TxInput], list[InputKey]]:
    a1, a2 = secret("input/p2wpkh"), secret("input/p2tr")
    k1 = pubkey33(a1)
    x2 = xonly32(a2)
    inputs = [
        TxInput(outpoint("scan", 0), b"", (ECDSA_SIG, k1), b"\x00\x14" + crypto.hash160(k1)),
        TxInput(outpoint("scan", 1), b"", (SCHNORR_SIG,), b"\x51\x20" + x2),
    ]
    return inputs, [InputKey(a1, False), InputKey(a2, True)]


@functools.cache
def scan_case(n_outputs: int, n_matches: int = 0, to_change: bool = False) -> ScanCase:
    """A tx with `n_outputs` taproot outputs of which `n_matches` pay the receiver.

    The matches pay the receiver's change address (label m = 0) when `to_change`, else
    the unlabelled one. The random outputs come first and the matches last in reverse
    k order, so a per-output strategy walks every remaining output, label checks
    included, at every k.
    """
    inputs, keys = _inputs_and_keys()
    r = receiver()
    matches = []
    if n_matches:
        spend = labelled_spend_pubkey(r.scan_key32, r.spend_pubkey33, 0) if to_change else r.spend_pubkey33
        address = SPAddress("sp", 0, pubkey33(r.scan_key32), spend)
        matches = create_outputs([i.outpoint for i in inputs], keys, [address] * n_matches)
    outputs = list(_random_outputs(n_outputs - n_matches)) + matches[::-1]
    return ScanCase(inputs, outputs, r, matches)


@dataclass(frozen=True)
class TweakCase:
    """A batch of light-client tweaks, one tx each, scanned for `receiver()` (change label only).

    Attributes:
        tweaks33: input_hash·A per tx (ser_P); tweaks64 the same points as x ‖ y.
        outputs: per tx, its x-only taproot outputs: unrelated keys, and in every PAID-th tx one
            paying the receiver (k = 0, unlabelled) at the end.
        expected: per tx, the x-only outputs that pay the receiver.
    """

    tweaks33: list[bytes]
    tweaks64: list[bytes]
    outputs: list[list[bytes]]
    expected: list[list[bytes]]


@dataclass(frozen=True)
class KeyTxCase:
    """The tweak batch's points as one-input txs for libsecp 0.8's module: per tx its outpoint, and
    outputs where every PAID-th tx pays the receiver under the module's derivation
    ((b_scan·input_hash)·A with A = the point)."""

    outpoints36: list[bytes]
    outputs: list[list[bytes]]
    expected: list[list[bytes]]


PAID = 100


@functools.cache
def tweak_case(n: int, n_outputs: int) -> TweakCase:
    """`n` tweaks with `n_outputs` outputs each; one tx in PAID pays the receiver."""
    r = receiver()
    spend = PublicKey(r.spend_pubkey33)
    tweaks33, tweaks64, outputs, expected = [], [], [], []
    for i in range(n):
        point = PublicKey.from_secret(secret("tweak", i))
        tweaks33.append(point.format())
        tweaks64.append(point.format(compressed=False)[1:])
        outs = [xonly32(secret("tweak-output", i * n_outputs + j)) for j in range(n_outputs)]
        paid = []
        if i % PAID == 0:
            ecdh33 = point.multiply(r.scan_key32).format()
            t_0 = crypto.tagged_hash(crypto.TAG_SHARED_SECRET, ecdh33 + crypto.ser32(0))
            paid = [spend.add(t_0).format()[1:]]
            outs[-1:] = paid
        outputs.append(outs)
        expected.append(paid)
    return TweakCase(tweaks33, tweaks64, outputs, expected)


@functools.cache
def key_tx_case(n: int, n_outputs: int) -> KeyTxCase:
    """`tweak_case(n, n_outputs)`'s points as one-key txs (see KeyTxCase)."""
    c, r = tweak_case(n, n_outputs), receiver()
    spend = PublicKey(r.spend_pubkey33)
    outpoints, outputs, expected = [], [], []
    for i, (key33, outs) in enumerate(zip(c.tweaks33, c.outputs)):
        op = outpoint("key-tx", i).to_bytes()
        outs, paid = list(outs), []
        if i % PAID == 0:
            input_hash = int.from_bytes(crypto.tagged_hash(crypto.TAG_INPUTS, op + key33), "big")
            scalar = input_hash * int.from_bytes(r.scan_key32, "big") % crypto.N
            ecdh33 = PublicKey(key33).multiply(scalar.to_bytes(32, "big")).format()
            paid = [spend.add(crypto.tagged_hash(crypto.TAG_SHARED_SECRET, ecdh33 + crypto.ser32(0))).format()[1:]]
            outs[-1:] = paid
        outpoints.append(op)
        outputs.append(outs)
        expected.append(paid)
    return KeyTxCase(outpoints, outputs, expected)
