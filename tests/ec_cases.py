"""Batches for the engine-vs-libsecp differential (tests/test_ec_differential.py and
`python -m tests.long.ec_differential`): random tweaks whose outputs are built with coincurve
(libsecp256k1) so that a scan only finds them when b·T, t_k·G and the sums are bit-exact.

Each tx gets one of these output sets, in a random order among random x-only keys:
x(P_0) (the unlabelled k = 0 output), x(P_0) and x(P_1), x(P_0 + L_m) for a label (its y parity
random), or only random keys. The engine under test and the libsecp256k1 engine must return the same
found outputs, and those must be the ones built in. Scans run in the test-only extension
(`sp_scan.native._testing`), where every engine of this CPU and the emulated ones can be picked.
"""

from __future__ import annotations

import functools
import random
import struct
from collections.abc import Iterator
from dataclasses import dataclass

from coincurve import PrivateKey, PublicKey

from sp_scan import crypto, scan
from sp_scan.native import _testing

N = crypto.N
P = 2**256 - 2**32 - 977
KINDS = ("direct", "two", "label", "none")


@dataclass(frozen=True, slots=True)
class Case:
    """One tx: its tweak point, its outputs, and what a scan must find (output x, label)."""

    tweak: PublicKey
    outputs32: list[bytes]
    paid: list[tuple[bytes, int | None]]


def b32(k: int) -> bytes:
    return k.to_bytes(32, "big")


def t_k(ecdh33: bytes, k: int) -> bytes:
    return crypto.tagged_hash(crypto.TAG_SHARED_SECRET, ecdh33 + crypto.ser32(k))


def spend_point(receiver: scan.Receiver, t32: bytes) -> PublicKey | None:
    try:
        return PublicKey.combine_keys([PublicKey(receiver.spend_pubkey33), PublicKey.from_secret(t32)])
    except ValueError:  # infinity, or t outside [1, n)
        return None


def label_points(receiver: scan.Receiver) -> list[tuple[int, PublicKey]]:
    return sorted((m, PublicKey(ser)) for ser, (m, _) in receiver.label_table.items())


def case(rng: random.Random, receiver: scan.Receiver, tweak: PublicKey, kind: str) -> Case:
    """A tx paying `receiver` as `kind` says, with tweak point `tweak`."""
    ecdh = tweak.multiply(receiver.scan_key32).format()
    outputs = [rng.getrandbits(256).to_bytes(32, "big") for _ in range(rng.randrange(0, 3))]
    paid: list[tuple[bytes, int | None]] = []
    p0 = spend_point(receiver, t_k(ecdh, 0))
    if kind == "direct" and p0 is not None:
        paid = [(p0.format()[1:], None)]
    elif kind == "two" and p0 is not None:
        p1 = spend_point(receiver, t_k(ecdh, 1))
        paid = [(p0.format()[1:], None)] + ([(p1.format()[1:], None)] if p1 is not None else [])
    elif kind == "label" and p0 is not None:
        m, lab = rng.choice(label_points(receiver))
        summed = PublicKey.combine_keys([p0, lab])
        paid = [(summed.format()[1:], m)]
    for x, _ in paid:
        outputs.insert(rng.randrange(len(outputs) + 1), x)
    return Case(tweak, outputs, paid)


def random_cases(rng: random.Random, receiver: scan.Receiver, count: int) -> Iterator[Case]:
    """count txs with random tweak points and random kinds."""
    for _ in range(count):
        yield case(rng, receiver, PrivateKey(b32(rng.randrange(1, N))).public_key, rng.choice(KINDS))


def tweak_bytes(point: PublicKey, width: int) -> bytes:
    return point.format() if width == 33 else point.format(compressed=False)[1:]


def scan_with(engine: str, cases: list[Case], receiver: scan.Receiver, width: int, threads: int = 1) -> list:
    """`scan_tweaks_packed` over the cases on `engine`; the raw result tuples."""
    tweaks = b"".join(tweak_bytes(c.tweak, width) for c in cases)
    outputs = b"".join(o for c in cases for o in c.outputs32)
    counts = struct.pack(f"<{len(cases)}I", *(len(c.outputs32) for c in cases))
    if engine == "libsecp256k1":  # the oracle: each batch is scanned once whatever the engines compared
        return list(_oracle(tweaks, width, outputs, counts, receiver, threads, _testing.label_strategy()))
    return _testing.scan_tweaks_packed(engine, tweaks, width, outputs, counts, receiver, threads)


@functools.lru_cache(maxsize=8)
def _oracle(tweaks: bytes, width: int, outputs: bytes, counts: bytes, receiver: scan.Receiver, threads: int,
            strategy: str) -> tuple:
    return tuple(_testing.scan_tweaks_packed("libsecp256k1", tweaks, width, outputs, counts, receiver, threads))


def check(engine: str, cases: list[Case], receiver: scan.Receiver, width: int, threads: int = 1) -> int:
    """Scan on `engine` and on libsecp256k1; assert equal results that find exactly the built-in outputs.

    Returns the found count.
    """
    got = scan_with(engine, cases, receiver, width, threads)
    want = scan_with("libsecp256k1", cases, receiver, width, threads)
    if got != want:
        first = next(i for i, (g, w) in enumerate(zip(got + [None], want + [None])) if g != w)
        raise AssertionError(f"engines differ at result {first}: {engine} {got[first:first + 1]} libsecp {want[first:first + 1]}")
    by_tx: dict[int, list[tuple[bytes, int | None]]] = {}
    for tx, index, _tweak32, label in got:
        by_tx.setdefault(tx, []).append((cases[tx].outputs32[index], label))
    for tx, c in enumerate(cases):
        assert sorted(by_tx.get(tx, []), key=repr) == sorted(c.paid, key=repr), f"tx {tx}: {by_tx.get(tx)} vs {c.paid}"
    return len(got)
