"""What users would pick instead of sp-scan, wrapped to take the same inputs.

- `window_pubkey`: the BIP reference's P2PKH search (a 33-byte window slid backwards
  over the raw scriptSig, HASH160 per window).
- `wallet_pubkey` / `wallet_scan_tx`: btclib-wallet's `pub_key_from_input` and
  `scan_transaction_outputs` (which delegates the curve work to libsecp256k1).
- `libsecp_scan_tx`: libsecp256k1 0.8's silentpayments module through btclib-secp256k1
  (`prevouts_summary` + `scan_outputs`), fed by the same extraction as ours.
- `LibsecpC`: a light client's scan of a batch of tweaks on libsecp256k1's public API from C
  (bench/peer_libsecp.c, built here with the system C compiler, bound to the libsecp256k1 in
  coincurve's compiled module): one call per batch, no Python per tweak; the `tweak_mul` and the
  constant-time `ecdh` pipelines. The peer of the tweak-scan rows.
- `libsecp_scan_tweak`: the `tweak_mul` pipeline for one tweak through Python, one coincurve call
  per step: what a Python caller pays per tweak (the peer of the `scan_tweak` loop).
- `libsecp_module_scan_key`: libsecp256k1 0.8's silentpayments module on a one-input tx whose
  key is the tweak point: the module's own per-tx work (summary, (b_scan·input_hash)·A, t_k·G,
  labels) on the same points, the nearest it comes to scanning a tweak; called per tx from Python.

What libsecp256k1 (v0.6.0 in coincurve 21.0.0) documents as constant time: `secp256k1_ecdh` ("Compute
an EC Diffie-Hellman secret in constant time") and, in its README, "signing and public key generation"
(`ec_pubkey_create`, coincurve's `PublicKey.from_secret`). `ec_pubkey_tweak_mul` (`PublicKey.multiply`)
and `ec_pubkey_tweak_add` (`PublicKey.add`) carry no such promise: both run `secp256k1_ecmult`, a
variable-time wNAF multiplication (the scalar's digits choose the table entries and which additions
run), so their time depends on the scalar, b_scan or t_k in a scan. `ec_pubkey_combine`, `parse` and
`serialize` work on points, which a scan derives from secrets.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shlex
import shutil
import subprocess
import sysconfig
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from btclib.script.witness import Witness
from btclib.tx.out_point import OutPoint as WalletOutPoint
from btclib_secp256k1 import silentpayments as libsecp
from coincurve import PublicKey
from btclib_wallet import silent_payments as wallet
from ecc.curves import bytes_from_point, secp256k1

from sp_scan import crypto
from sp_scan.extract import ScriptType, script_type
from sp_scan.scan import Receiver, label_tweak
from sp_scan.types import TxInput


def window_pubkey(prevout_script: bytes, script_sig: bytes) -> bytes | None:
    """The BIP reference's P2PKH rule: last 33-byte window (from the end) whose HASH160 matches."""
    key_hash = prevout_script[3:23]
    sha256, new = hashlib.sha256, hashlib.new
    for end in range(len(script_sig), 32, -1):
        window = script_sig[end - 33 : end]
        if new("ripemd160", sha256(window).digest()).digest() == key_hash and crypto.point(window) is not None:
            return window
    return None


@dataclass(frozen=True)
class WalletInput:
    """An input in btclib's types, built once outside the timed region."""

    prevout_script: bytes
    script_sig: bytes
    witness: Witness
    outpoint: WalletOutPoint


def wallet_input(txin: TxInput) -> WalletInput:
    op = WalletOutPoint(txin.outpoint.txid32[::-1], txin.outpoint.vout)
    return WalletInput(txin.prevout_script, txin.script_sig, Witness(list(txin.witness)), op)


def wallet_pubkey(w: WalletInput) -> bytes | None:
    """btclib-wallet's extraction, serialized like ours (x-only for P2TR, else compressed)."""
    point = wallet.pub_key_from_input(w.prevout_script, w.script_sig, w.witness)
    if point is None:
        return None
    data = bytes_from_point(point, secp256k1)
    return data[1:] if script_type(w.prevout_script) is ScriptType.P2TR else data


def wallet_scan_tx(
    inputs: Sequence[WalletInput], outputs32: Sequence[bytes], scan_key32: bytes, spend33: bytes,
    labels: Mapping[bytes, bytes],
) -> list[bytes]:
    """btclib-wallet's full-node scan: its own extraction, then `scan_transaction_outputs`.

    Returns the found x-only outputs. The segwit v2+ rule is the caller's in btclib-wallet,
    so it is applied here the way a wallet would.
    """
    if any(script_type(w.prevout_script) is ScriptType.WITNESS_UNKNOWN for w in inputs):
        return []
    pub_keys = []
    for w in inputs:
        point = wallet.pub_key_from_input(w.prevout_script, w.script_sig, w.witness)
        if point is not None:
            pub_keys.append((point, w.prevout_script))
    if not pub_keys:
        return []
    found = wallet.scan_transaction_outputs(
        scan_key32, spend33, [w.outpoint for w in inputs], pub_keys, outputs32, labels
    )
    return [f.pub_key for f in found]


def libsecp_scan_tx(
    tx_pubkeys: Callable[[Sequence[TxInput]], list[bytes] | None],
    inputs: Sequence[TxInput], outputs32: Sequence[bytes], scan_key32: bytes, spend33: bytes,
    labels: Mapping[bytes, bytes],
) -> list[bytes]:
    """libsecp256k1 0.8 via btclib-secp256k1, with `tx_pubkeys` (ours) doing the extraction.

    Returns the found x-only outputs.
    """
    keys = tx_pubkeys(inputs)
    if not keys:
        return []
    smallest36 = min(i.outpoint.to_bytes() for i in inputs)
    try:
        summary = libsecp.prevouts_summary(
            smallest36, [k for k in keys if len(k) == 32], [k for k in keys if len(k) == 33]
        )
    except ValueError:  # keys sum to infinity: not an SP transaction
        return []
    return [out for out, _tweak, _label in libsecp.scan_outputs(outputs32, scan_key32, summary, spend33, labels)]


_SHARED_SECRET_TAG = hashlib.sha256(crypto.TAG_SHARED_SECRET.encode()).digest()
_SHARED_SECRET_MIDSTATE = hashlib.sha256(_SHARED_SECRET_TAG + _SHARED_SECRET_TAG)


def libsecp_scan_tweak(
    tweak33: bytes, outputs32: Sequence[bytes], scan_key32: bytes, spend: PublicKey, change: PublicKey
) -> list[bytes]:
    """One tweak scanned through Python, one coincurve call per step: b_scan·T (`PublicKey.multiply`:
    ec_pubkey_tweak_mul, variable time in b_scan), per k t_k (hashlib, tag midstate copied),
    B_spend + t_k·G (ec_pubkey_create, constant time in t_k, then ec_pubkey_combine), and P_k + L_0
    for the change label. Returns the found x-only outputs (k order)."""
    ecdh33 = PublicKey(tweak33).multiply(scan_key32).format()
    todo = set(outputs32)
    found = []
    for k in range(2323):
        if not todo:
            break
        h = _SHARED_SECRET_MIDSTATE.copy()
        h.update(ecdh33 + k.to_bytes(4, "big"))
        p_k = PublicKey.combine_keys([spend, PublicKey.from_secret(h.digest())])
        x = p_k.format()[1:]
        if x not in todo:
            x = PublicKey.combine_keys([p_k, change]).format()[1:]
            if x not in todo:
                break
        todo.discard(x)
        found.append(x)
    return found


PEER_SOURCE = Path(__file__).with_name("peer_libsecp.c")
C_PIPELINES = {"tweak_mul": 0, "ecdh": 1}
"""The C peer's pipelines (bench/peer_libsecp.c): name -> its PEER_* value."""
_CFLAGS = ["-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared", "-pthread", "-fvisibility=hidden"]


def c_compiler() -> list[str] | None:
    """The system C compiler's command ($CC, else the one Python was built with, else cc), or None."""
    cmd = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    return cmd if cmd and shutil.which(cmd[0]) else None


def _build(compiler: list[str]) -> Path:
    """bench/peer_libsecp.c compiled into the temp directory, once per source, compiler and flags."""
    key = hashlib.sha256(PEER_SOURCE.read_bytes() + "\0".join(compiler + _CFLAGS).encode()).hexdigest()[:16]
    out = Path(tempfile.gettempdir()) / "sp-scan-bench" / f"peer_libsecp-{key}.so"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        part = out.with_name(f"{out.name}.{os.getpid()}")
        done = subprocess.run([*compiler, *_CFLAGS, str(PEER_SOURCE), "-o", str(part), "-ldl"], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"building {PEER_SOURCE.name} failed:\n{done.stderr}")
        os.replace(part, out)  # atomic: benches started together share one build
    return out


LIBSECP_ENV = "SP_SCAN_BENCH_LIBSECP"
"""Set to a libsecp256k1 shared library (with the ecdh module) to time the C peer on it instead of coincurve's."""


class LibsecpC:
    """The C peer, built and bound once per process (`LibsecpC.load()`).

    Its libsecp256k1 is the one in coincurve's compiled module, found by name (`dlsym`) in the copy
    this process has loaded: the library sp_scan.native binds, without coincurve's cffi wrappers.
    $SP_SCAN_BENCH_LIBSECP names another build to bind instead (loaded here first).
    """

    def __init__(self, lib: ctypes.CDLL, library: str) -> None:
        self.library = library
        """The path of the libsecp256k1 the peer calls."""
        self._lib = lib
        self._scan = lib.peer_scan
        self._scan.restype = ctypes.c_int
        self._scan.argtypes = [
            ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_void_p,
            ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_uint64),
        ]  # fmt: skip
        self._hash_loop = lib.peer_hash_loop
        self._hash_loop.restype = ctypes.c_int
        self._hash_loop.argtypes = [ctypes.c_size_t, ctypes.POINTER(ctypes.c_uint64)]

    @staticmethod
    @functools.cache
    def load() -> LibsecpC:
        """Build (or reuse) and bind the peer.

        Raises:
            RuntimeError: no C compiler, the build failed, or the library cannot be loaded or lacks a function.
        """
        from coincurve import _libsecp256k1

        compiler = c_compiler()
        if compiler is None:
            raise RuntimeError("no C compiler ($CC, or cc) to build the libsecp256k1 peer")
        library = os.environ.get(LIBSECP_ENV) or _libsecp256k1.__file__
        if library != _libsecp256k1.__file__:
            try:
                ctypes.CDLL(library)  # loaded for good: ctypes never unloads it
            except OSError as exc:
                raise RuntimeError(f"${LIBSECP_ENV}: {exc}") from None
        lib = ctypes.CDLL(str(_build(compiler)))
        lib.peer_bind.restype = ctypes.c_int
        lib.peer_bind.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
        if lib.peer_bind(os.fsencode(library), os.urandom(32)) != 1:
            raise RuntimeError(f"cannot bind libsecp256k1 out of {library}")
        return LibsecpC(lib, library)

    def batch(self, pipeline: str, tweaks: Sequence[bytes], outputs: Sequence[Sequence[bytes]], receiver: Receiver,
              threads: int = 1) -> LibsecpCBatch:
        """A batch laid out once for `run` (tweaks all 33 or all 64 bytes; the receiver's change label)."""
        return LibsecpCBatch(self, C_PIPELINES[pipeline], tweaks, outputs, receiver, threads)

    def tagged_hash_ns(self, n: int = 5_000, rounds: int = 20) -> float:
        """ns per secp256k1_tagged_sha256 of a 37-byte message (the pipelines' t_k): the best of `rounds` loops of n."""
        elapsed, best = ctypes.c_uint64(), None
        for _ in range(rounds):
            if self._hash_loop(n, ctypes.byref(elapsed)) != 1:
                raise RuntimeError("peer_hash_loop failed")
            best = elapsed.value if best is None else min(best, elapsed.value)
        return best / n


class LibsecpCBatch:
    """One batch in the C peer's layout; `run()` is the one timed call (the GIL released, no Python per tweak)."""

    def __init__(self, peer: LibsecpC, pipeline: int, tweaks: Sequence[bytes], outputs: Sequence[Sequence[bytes]],
                 receiver: Receiver, threads: int) -> None:
        widths = {len(t) for t in tweaks}
        if len(widths) != 1 or not widths <= {33, 64}:
            raise ValueError("tweaks must be all 33 or all 64 bytes")
        self._peer, self._outputs = peer, [list(outs) for outs in outputs]
        label33 = PublicKey.from_secret(label_tweak(receiver.scan_key32, 0)).format()
        total = sum(map(len, self._outputs))
        self._k_of = (ctypes.c_int32 * max(total, 1))()
        self._elapsed = ctypes.c_uint64()
        self._args = (
            pipeline, b"".join(tweaks), widths.pop(), len(tweaks), b"".join(o for outs in self._outputs for o in outs),
            (ctypes.c_uint32 * max(len(tweaks), 1))(*map(len, self._outputs)), bytes(receiver.scan_key32),
            bytes(receiver.spend_pubkey33), label33, threads, self._k_of, ctypes.byref(self._elapsed),
        )  # fmt: skip

    def run(self) -> int:
        """Scan the batch in C; returns the call's own wall time in ns (measured inside the C)."""
        result = self._peer._scan(*self._args)
        if result != 1:
            raise RuntimeError(f"peer_scan returned {result}")
        return self._elapsed.value

    def found(self) -> list[list[bytes]]:
        """Per tx, the x-only outputs the last `run` found, in k order."""
        out, j = [], 0
        for outs in self._outputs:
            hits = sorted((self._k_of[j + i], o) for i, o in enumerate(outs) if self._k_of[j + i] >= 0)
            out.append([o for _, o in hits])
            j += len(outs)
        return out


def libsecp_module_scan_key(
    outpoint36: bytes, key33: bytes, outputs32: Sequence[bytes], scan_key32: bytes, spend33: bytes,
    labels: Mapping[bytes, bytes],
) -> list[bytes]:
    """libsecp256k1 0.8's module on a tx with one input key `key33`: the found x-only outputs."""
    summary = libsecp.prevouts_summary(outpoint36, [], [key33])
    return [out for out, _tweak, _label in libsecp.scan_outputs(outputs32, scan_key32, summary, spend33, labels)]


def main(argv: Sequence[str] | None = None) -> None:
    """`python -m bench.peers`: test_tweaks' batch scanned by ours and by the C peer's two pipelines in turn.

    One call of each per round, R rounds, so a neighbour's load falls on all three alike; prints the
    load average, then per implementation the ns per tweak (minimum and median over the rounds) and
    ours / peer, and the peer's tagged hash per call. The found outputs are checked against the case's
    before any call is timed.
    """
    import argparse
    import statistics
    import time

    from sp_scan import native, scan

    from . import cases

    parser = argparse.ArgumentParser(prog="python -m bench.peers", description=main.__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--width", type=int, choices=(33, 64), default=33)
    args = parser.parse_args(argv)
    n = 1000
    c, r = cases.tweak_case(n, 2), cases.receiver()
    tweaks = c.tweaks33 if args.width == 33 else c.tweaks64
    peer = LibsecpC.load()
    batches = {p: peer.batch(p, tweaks, c.outputs, r, args.threads) for p in C_PIPELINES}

    def ours() -> list[list[bytes]]:
        return [[f.output32 for f in fs] for fs in scan.scan_tweaks(tweaks, c.outputs, r, threads=args.threads)]

    assert ours() == c.expected
    calls: dict[str, Callable[[], object]] = {f"ours (scan_tweaks, {native.ec_engine()} engine)": ours}
    for p, batch in batches.items():
        batch.run()
        assert batch.found() == c.expected
        calls[f"libsecp {p} pipeline, C"] = batch.run
    times: dict[str, list[int]] = {name: [] for name in calls}
    load = os.getloadavg()[0]
    for _ in range(args.rounds):
        for name, call in calls.items():
            start = time.perf_counter_ns()
            call()
            times[name].append(time.perf_counter_ns() - start)
    print(f"{args.rounds} rounds of {n} tweaks ({args.width} bytes, {args.threads} thread(s)); libsecp256k1: "
          f"{peer.library}; load average {load:.2f} at the start, {os.getloadavg()[0]:.2f} at the end")
    first = next(iter(times))
    for name, ns in times.items():
        low, mid = min(ns) / n, statistics.median(ns) / n
        ratio = "" if name == first else (
            f"   ours / peer: {min(times[first]) / min(ns):.3f} (min), {statistics.median(times[first]) / statistics.median(ns):.3f} (median)"
        )
        print(f"{name:40} {low / 1e3:7.1f} µs min {mid / 1e3:7.1f} µs median{ratio}")
    print(f"of which t_k by secp256k1_tagged_sha256 (the tag hashed at each call): {peer.tagged_hash_ns():.0f} ns a call, best of 20 loops")


if __name__ == "__main__":
    main()
