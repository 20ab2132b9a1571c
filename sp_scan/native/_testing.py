"""Test-only door to the EC engines, one by one, including their emulated builds.

Only tests, the long-run checks under tests/long and the benches import this module; the library never
does. It loads `_testcore`, the `_core` extension built a second time by setup.py with the engines' test
hooks and the test-only cores (it is installed beside `_core`, and nothing else imports it): "ifma-emu"
is the IFMA core's source over a portable emulation of its 8 lanes and of vpmadd52luq/huq, so the IFMA
core's tests run on every CPU. A core is one of `CORES`
(those this CPU can run); whole scans run on any of `ENGINES`, with "libsecp256k1" as the oracle.

Points cross the per-core helpers as 64 bytes: x then y, each 32 bytes little-endian.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass

from sp_scan import native
from sp_scan.native import _testcore

_testcore.init(native._secp_addresses(), native._ERRORS, "libsecp256k1")


@dataclass(frozen=True, slots=True)
class Core:
    """A lane core built into _testcore: its lanes and the raw limb layout of its field tests."""

    name: str
    lanes: int
    raw_bits: int
    raw_limbs: int


BUILT: dict[str, Core] = {}
"""Every lane core built in, runnable here or not."""
CORES: list[str] = []
"""The lane cores this CPU runs: e.g. ["ifma", "scalar", "ifma-emu"] on an IFMA CPU, ["scalar", "ifma-emu"] elsewhere."""
for _name, _lanes, _runnable, _bits, _limbs in _testcore.cores():
    BUILT[_name] = Core(_name, _lanes, _bits, _limbs)
    if _runnable:
        CORES.append(_name)
ENGINES: list[str] = CORES + ["libsecp256k1"]
"""Engines a whole scan can run on here (`scan_tweaks_packed`)."""

FIELD_OPS = {"mul": 0, "sqr": 1, "inv": 2, "sqrt": 3, "add": 4, "sub": 5, "neg": 6, "mul21": 7, "mul8": 8, "sqr8": 9}
POINT_OPS = {"madd_ct": 0, "madd": 1}
"""Additions of ge_test: the ladders' unified one (p Jacobian) and the complete one (p projective)."""
TIMED = {"ecdh": (0, 32), "spend": (1, 256), "control": (2, 32), "lanes": (3, 256)}


def field(core: str, op: str, a: Sequence[Sequence[int]], b: Sequence[Sequence[int]]) -> list[int]:
    """One field operation per value on raw limbs (core.raw_limbs per value, each < 2^raw_bits).

    Returns the results fully reduced mod p, one per value of a (b pairs with a).
    """
    pack = lambda values: b"".join(limb.to_bytes(8, "little") for v in values for limb in v)  # noqa: E731
    out = _testcore.fe_test(core, FIELD_OPS[op], pack(a), pack(b))
    return [int.from_bytes(out[32 * i : 32 * i + 32], "big") for i in range(len(a))]


def point_add(
    core: str, op: str, p: Sequence[tuple[int, int, int]], q: Sequence[tuple[int, int]]
) -> list[tuple[int, int] | None]:
    """p_i + q_i by one of POINT_OPS, p_i as (X, Y, Z) in that formula's coordinates, q_i affine (x, y).

    Returns the affine sums, None at infinity.
    """
    le = lambda *values: b"".join(v.to_bytes(32, "little") for v in values)  # noqa: E731
    out, inf = _testcore.ge_test(core, POINT_OPS[op], b"".join(le(*v) for v in p), b"".join(le(*v) for v in q))
    coords = [int.from_bytes(out[32 * j : 32 * j + 32], "little") for j in range(2 * len(p))]
    return [None if inf[i] else (coords[2 * i], coords[2 * i + 1]) for i in range(len(p))]


def parse(core: str, points: bytes, width: int) -> tuple[list[bytes], list[bool]]:
    """Parse n points of `width` (33 or 64) bytes; their x‖y (little-endian) and validity."""
    pts, valid = _testcore.parse(core, points, width)
    return [pts[64 * i : 64 * i + 64] for i in range(len(valid))], [bool(v) for v in valid]


def shared_secrets(core: str, scan_key32: bytes, points64: Sequence[bytes], scalars32: Sequence[bytes] | None) -> list[bytes]:
    """ser_P(b·T_i), or ser_P((b·s_i)·T_i) with per-lane scalars; first byte 0 for an invalid s_i."""
    out = _testcore.shared_secrets(core, scan_key32, b"".join(points64), None if scalars32 is None else b"".join(scalars32))
    return [out[33 * i : 33 * i + 33] for i in range(len(points64))]


def spend_points(core: str, spend64: bytes, t32: Sequence[bytes]) -> tuple[list[bytes], list[bytes]]:
    """ser_P(B + t_i·G) (first byte 0: invalid t_i or infinity) and the points' x‖y."""
    p33, pk = _testcore.spend_points(core, spend64, b"".join(t32))
    return [p33[33 * i : 33 * i + 33] for i in range(len(t32))], [pk[64 * i : 64 * i + 64] for i in range(len(t32))]


def label_sums(core: str, points64: Sequence[bytes], labels64: Sequence[bytes]) -> list[list[bytes]]:
    """ser_P(P_i + L_m) for every point and label (first byte 0 at infinity)."""
    out, nl = _testcore.label_sums(core, b"".join(points64), b"".join(labels64)), len(labels64)
    return [[out[33 * (i * nl + m) : 33 * (i * nl + m) + 33] for m in range(nl)] for i in range(len(points64))]


def tweaks(core: str, points64: Sequence[bytes], scalars32: Sequence[bytes]) -> list[bytes]:
    """ser_P(s_i·A_i) on public data (the variable-time path); first byte 0 for s_i = 0 or ≥ n."""
    t33, _ = _testcore.tweaks(core, b"".join(points64), b"".join(scalars32))
    return [t33[33 * i : 33 * i + 33] for i in range(len(points64))]


def key_sums(core: str, key_sets: Sequence[Sequence[bytes]]) -> list[bytes | None]:
    """x‖y (little-endian) of the sum of each set of 33-byte keys, those that are points; None when none
    is or they sum to infinity."""
    blob = b"".join(k for keys in key_sets for k in keys)
    counts = b"".join(len(keys).to_bytes(4, "little") for keys in key_sets)
    sums, found = _testcore.key_sums(core, blob, counts)
    return [sums[64 * i : 64 * i + 64] if f else None for i, f in enumerate(found)]


def timings(core: str, op: str, inputs: Sequence[bytes], points64: Sequence[bytes]) -> list[int]:
    """Ticks (TSC cycles on x86-64) of one operation of `core` per input (constant-time checks).

    op "ecdh": a 32-byte scan key (recoded, then b·T for the 8 points64); "spend": 8 × 32-byte t_i
    (points64[0] + t_i·G); "lanes": 8 × 32-byte k_i (k_i·T_i, recoded per point as in a block scan);
    "control": a 32-byte x for the variable-time Jacobi symbol.
    """
    code, width = TIMED[op]
    blob = b"".join(inputs)
    if len(blob) != width * len(inputs):
        raise ValueError(f"{op} inputs must be {width} bytes each")
    out = _testcore.time(core, code, blob, b"".join(points64))
    return [int.from_bytes(out[8 * i : 8 * i + 8], "little") for i in range(len(inputs))]


def match_timings(outputs32: Sequence[bytes], candidates32: Sequence[bytes]) -> list[int]:
    """Ticks of the scan's output match (`spn_match_x`) per 32-byte candidate x against the x-only outputs."""
    out = _testcore.time_match(b"".join(outputs32), b"".join(candidates32))
    return [int.from_bytes(out[8 * i : 8 * i + 8], "little") for i in range(len(candidates32))]


def set_label_strategy(name: str) -> str:
    """`native.set_label_strategy` for this module's scans; returns the previous one."""
    previous = _testcore.set_label_strategy(native.LABEL_STRATEGIES[name])
    return next(k for k, v in native.LABEL_STRATEGIES.items() if v == previous)


def label_strategy() -> str:
    """The label strategy this module's scans use."""
    current = set_label_strategy("auto")
    set_label_strategy(current)
    return current


_scanners: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _scanner(receiver):
    scanner = _scanners.get(receiver)
    if scanner is None:
        labels = [(m, label33, tweak32) for label33, (m, tweak32) in receiver.label_table.items()]
        scanner = _scanners[receiver] = _testcore.Scanner(receiver.scan_key32, receiver.spend_pubkey33, labels)
    return scanner


def _on(engine: str, fn, *args):
    previous = _testcore.set_ec_engine(engine)
    try:
        return fn(*args)
    finally:
        _testcore.set_ec_engine(previous)


def scan_tweaks_packed(
    engine: str, tweaks: bytes, tweak_width: int, outputs32: bytes, counts: bytes, receiver, threads: int = 1
) -> list[tuple[int, int, bytes, int | None]]:
    """`native.scan_tweaks_packed` on engine `engine` (one of ENGINES)."""
    return _on(engine, _testcore.scan_tweaks_packed, _scanner(receiver), tweaks, tweak_width, outputs32, counts, threads)


def block_tweaks(engine: str, block_bytes: bytes, spent_bytes: bytes) -> list[tuple[bytes, bytes]]:
    """`native.block_tweaks` on engine `engine`: (txid32, tweak33) per eligible tx."""
    return _on(engine, _testcore.block_tweaks, block_bytes, spent_bytes)


def block_scan(engine: str, block_bytes: bytes, spent_bytes: bytes, receiver) -> list[tuple]:
    """`native.block_scan` on engine `engine`: the raw match tuples."""
    return _on(engine, _testcore.block_scan, block_bytes, spent_bytes, _scanner(receiver))
