"""Light-client scanning: a batch of tweaks (one tx each, 2 outputs, change label), time per tweak.

"ours" is `scan.scan_tweaks` over the whole batch (one native call, GIL released) with
1 and 2 threads, and with 64-byte x ‖ y tweaks, on the EC engine in use (`native.ec_engine()`:
the best this CPU runs), and the packed batch (`scan_tweaks_packed`, 33- and 64-byte tweaks) on
every engine this CPU runs, libsecp256k1's included, through the test-only door
(`sp_scan.native._testing`, the same C built with the engine switch); the "scan_tweak loop" row calls
`scan.scan_tweak` once per tweak. Peers: the same scan on libsecp256k1's public API from C
(`peers.LibsecpC`: one call per batch, no Python per tweak), in its `tweak_mul` pipeline (variable-time
b_scan·T) and its constant-time `ecdh` pipeline, each with the same tweak width and thread count as the
row it is the peer of; the `tweak_mul` pipeline through Python, one coincurve call per step
(`peers.libsecp_scan_tweak`), the peer of the `scan_tweak` loop; and libsecp256k1 0.8's
silentpayments module on one-input txs whose key is the tweak point, called per tx from Python
(`peers.libsecp_module_scan_key`: it has no entry point that takes a tweak). Every implementation must
find the case's payments (one tx in 100) before it is timed.
"""

from __future__ import annotations

import pytest
from coincurve import PublicKey

import struct

from sp_scan import native, scan
from sp_scan.native import _testing
from sp_scan.scan import label_tweak

from . import cases, peers
from .ours import impls

N_TWEAKS = 1000
N_OUTPUTS = 2
ROW = f"scan_tweaks {N_TWEAKS} tweaks N={N_OUTPUTS}, per tweak"
VARIANTS = {
    "threads=1": ROW,
    "threads=2": f"{ROW}, threads=2",
    "64-byte": f"{ROW}, 64-byte tweaks",
}
LOOP_ROW = f"{ROW}, scan_tweak loop"
C_PEERS = {pipeline: f"libsecp {pipeline} pipeline, C" for pipeline in peers.C_PIPELINES}
"""The C peer's impl name per pipeline ("libsecp tweak_mul pipeline, C", "libsecp ecdh pipeline, C")."""
PYTHON_PEER = "libsecp tweak_mul pipeline through Python"
ENGINES = [e for e in _testing.ENGINES if not e.endswith("-emu")]
ENGINE_WIDTHS = {33: "", 64: ", 64-byte tweaks"}


def engine_row(engine: str, width: int) -> str:
    """The row of `engine` (a name of `_testing.ENGINES`) on tweaks of `width` bytes."""
    return f"{ROW}, {engine} engine{ENGINE_WIDTHS[width]}"


def _info(benchmark, row: str, impl: str) -> None:
    benchmark.extra_info.update(row=row, impl=impl, per=N_TWEAKS, unit="us/tweak")


def _outputs(found: list[list]) -> list[list[bytes]]:
    return [[f.output32 for f in fs] for fs in found]


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("impl", ["native", "reference"])
def test_ours(benchmark, impl, variant):
    fn = impls(scan, "scan_tweaks").get(impl)
    if fn is None:
        pytest.skip("native backend not enabled")
    if impl == "reference" and variant != "threads=1":
        pytest.skip("the reference runs in the calling thread; its 64-byte parse and engines are not the point")
    c = cases.tweak_case(N_TWEAKS, N_OUTPUTS)
    tweaks = c.tweaks64 if variant == "64-byte" else c.tweaks33
    threads = 2 if variant.endswith("threads=2") else 1
    args, kwargs = (tweaks, c.outputs, cases.receiver()), {"threads": threads}
    assert _outputs(fn(*args, **kwargs)) == c.expected
    _info(benchmark, VARIANTS[variant], impl)
    if impl == "reference":
        benchmark.pedantic(fn, args, kwargs, rounds=3, iterations=1)
    else:
        benchmark(fn, *args, **kwargs)


@pytest.mark.parametrize("width", list(ENGINE_WIDTHS))
@pytest.mark.parametrize("engine", ENGINES)
def test_engine(benchmark, engine, width):
    """The packed batch on one engine (the engine rows: one per engine this CPU runs)."""
    c, r = cases.tweak_case(N_TWEAKS, N_OUTPUTS), cases.receiver()
    tweaks = b"".join(c.tweaks33 if width == 33 else c.tweaks64)
    counts = struct.pack(f"<{N_TWEAKS}I", *map(len, c.outputs))
    outputs = b"".join(o for outs in c.outputs for o in outs)
    found = _testing.scan_tweaks_packed(engine, tweaks, width, outputs, counts, r)
    assert [(tx, c.outputs[tx][i]) for tx, i, _, _ in found] == [(tx, o) for tx, paid in enumerate(c.expected) for o in paid]
    _info(benchmark, engine_row(engine, width), "native")
    benchmark(_testing.scan_tweaks_packed, engine, tweaks, width, outputs, counts, r)


def test_scan_tweak_loop(benchmark):
    if not native.ENABLED:
        pytest.skip("native backend not enabled")
    c, r = cases.tweak_case(N_TWEAKS, N_OUTPUTS), cases.receiver()

    def loop():
        return [scan.scan_tweak(t, o, r) for t, o in zip(c.tweaks33, c.outputs)]

    assert _outputs(loop()) == c.expected
    _info(benchmark, LOOP_ROW, "native")
    benchmark(loop)


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("pipeline", list(C_PEERS))
def test_libsecp_c(benchmark, pipeline, variant):
    """libsecp256k1 from C over the whole batch, per variant of our rows (tweak width, threads)."""
    if peers.c_compiler() is None:
        pytest.skip("no C compiler ($CC, or cc) to build the libsecp256k1 peer")
    peer = peers.LibsecpC.load()
    c = cases.tweak_case(N_TWEAKS, N_OUTPUTS)
    tweaks = c.tweaks64 if variant == "64-byte" else c.tweaks33
    batch = peer.batch(pipeline, tweaks, c.outputs, cases.receiver(), threads=2 if variant == "threads=2" else 1)
    batch.run()
    assert batch.found() == c.expected
    c_times: list[int] = []
    _info(benchmark, VARIANTS[variant], C_PEERS[pipeline])
    benchmark.extra_info["libsecp256k1"] = peer.library
    benchmark(lambda: c_times.append(batch.run()))
    # The C's own clock, for a check that the one ctypes call adds nothing that matters.
    benchmark.extra_info["c_clock_median_us_per_tweak"] = sorted(c_times)[len(c_times) // 2] / 1e3 / N_TWEAKS


def test_libsecp_through_python(benchmark):
    """The tweak_mul pipeline with one coincurve call per step: the peer of the scan_tweak loop."""
    c, r = cases.tweak_case(N_TWEAKS, N_OUTPUTS), cases.receiver()
    spend, change = PublicKey(r.spend_pubkey33), PublicKey.from_secret(label_tweak(r.scan_key32, 0))

    def loop():
        return [peers.libsecp_scan_tweak(t, o, r.scan_key32, spend, change) for t, o in zip(c.tweaks33, c.outputs)]

    assert loop() == c.expected
    _info(benchmark, LOOP_ROW, PYTHON_PEER)
    benchmark(loop)


def test_libsecp_module(benchmark):
    c, k, r = cases.tweak_case(N_TWEAKS, N_OUTPUTS), cases.key_tx_case(N_TWEAKS, N_OUTPUTS), cases.receiver()
    tweak0 = label_tweak(r.scan_key32, 0)
    labels = {PublicKey.from_secret(tweak0).format(): tweak0}

    def loop():
        return [
            peers.libsecp_module_scan_key(op, key33, outs, r.scan_key32, r.spend_pubkey33, labels)
            for op, key33, outs in zip(k.outpoints36, c.tweaks33, k.outputs)
        ]

    assert loop() == k.expected
    _info(benchmark, ROW, "libsecp 0.8")
    benchmark(loop)
