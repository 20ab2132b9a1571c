"""Scanning per transaction: no-match with N outputs, and one 23,250-output tx with K matches.

The receiver always scans with the change label (m = 0). "ours" is `scan_tx`, which
includes extraction and the prevouts summary; libsecp256k1 is fed by our extraction
(`extract.tx_pubkeys`, native when enabled), and btclib-wallet by its own.
"""

from __future__ import annotations

import pytest

from sp_scan import extract, scan

from . import cases, peers
from .ours import impls

NO_MATCH_N = [2, 5, 10, 100, 1000, 2323, 23250]
WORST_N = 23250
WORST_K = [10, 100, 1000, 2323]
SLOW = 20_000  # outputs × matches above which the reference gets a single round
PEER_ROUNDS_MAX_K = 100  # the peers' worst-case rows get 3 rounds up to this K, then 1 (~20-60 s each)


def _info(benchmark, row: str, impl: str) -> None:
    benchmark.extra_info.update(row=row, impl=impl, per=1, unit="us/tx")


def _row(n: int, k: int, to_change: bool) -> str:
    if not k:
        return f"scan no-match N={n}"
    return f"scan worst N={n} K={k}" + (" paid to change" if to_change else "")


def _run(benchmark, fn, args, slow: bool) -> None:
    if slow:
        benchmark.pedantic(fn, args, rounds=1, iterations=1, warmup_rounds=0)
    else:
        benchmark(fn, *args)


CASES = [(n, 0, False) for n in NO_MATCH_N] + [(WORST_N, k, c) for c in (False, True) for k in WORST_K]
IDS = [_row(*c).replace(" ", "_") for c in CASES]


@pytest.mark.parametrize("impl", ["native", "reference"])
@pytest.mark.parametrize(("n", "k", "to_change"), CASES, ids=IDS)
def test_ours(benchmark, n, k, to_change, impl):
    fn = impls(scan, "scan_tx").get(impl)
    if fn is None:
        pytest.skip("native backend not enabled")
    if impl == "reference" and to_change and k > 10:
        pytest.skip("reference: one full label pass per k, minutes at this size")
    c = cases.scan_case(n, k, to_change)
    assert [f.output32 for f in fn(c.inputs, c.outputs32, c.receiver)] == c.expected
    _info(benchmark, _row(n, k, to_change), impl)
    _run(benchmark, fn, (c.inputs, c.outputs32, c.receiver), slow=impl == "reference" and n * k > SLOW)


@pytest.mark.parametrize(("n", "k", "to_change"), CASES, ids=IDS)
def test_libsecp(benchmark, n, k, to_change):
    c = cases.scan_case(n, k, to_change)
    r = c.receiver
    args = (extract.tx_pubkeys, c.inputs, c.outputs32, r.scan_key32, r.spend_pubkey33, c.change_labels)
    if k:  # the libsecp run is the slow one; the match check is the timed call itself
        _info(benchmark, _row(n, k, to_change), "libsecp")
        rounds = 3 if k <= PEER_ROUNDS_MAX_K else 1
        found = benchmark.pedantic(peers.libsecp_scan_tx, args, rounds=rounds, iterations=1)
        assert sorted(found) == sorted(c.expected)
        return
    assert peers.libsecp_scan_tx(*args) == []
    _info(benchmark, _row(n, k, to_change), "libsecp")
    benchmark(peers.libsecp_scan_tx, *args)


@pytest.mark.parametrize(
    ("n", "k", "to_change"),
    [c for c in CASES if c[1] <= PEER_ROUNDS_MAX_K],
    ids=[i for i, c in zip(IDS, CASES) if c[1] <= PEER_ROUNDS_MAX_K],
)
def test_btclib_wallet(benchmark, n, k, to_change):
    """btclib-wallet delegates the curve work to libsecp; above K=100 it is the libsecp row plus overhead."""
    c = cases.scan_case(n, k, to_change)
    r = c.receiver
    args = ([peers.wallet_input(i) for i in c.inputs], c.outputs32, r.scan_key32, r.spend_pubkey33, c.change_labels)
    _info(benchmark, _row(n, k, to_change), "btclib-wallet")
    if k:
        found = benchmark.pedantic(peers.wallet_scan_tx, args, rounds=3, iterations=1)
        assert sorted(found) == sorted(c.expected)
        return
    assert peers.wallet_scan_tx(*args) == []
    benchmark(peers.wallet_scan_tx, *args)
