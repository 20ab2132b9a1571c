"""Extraction, ns per input, named as Core's `BIP352_GetPubKey_*` benches."""

from __future__ import annotations

import pytest

from sp_scan import extract

from . import cases, peers
from .ours import impls

TX_INPUTS = 1000
STANDARD = ["P2PKH", "P2SH_P2WPKH", "P2WPKH", "P2TR"]
ALL = [*STANDARD, "P2PKH_WorstCase", "P2PKH_KeyFirst"]
P2PKH = ["P2PKH", "P2PKH_WorstCase", "P2PKH_KeyFirst"]


def _row(name: str) -> str:
    return f"BIP352_GetPubKey_{name}"


def _info(benchmark, row: str, impl: str, per: int = 1) -> None:
    benchmark.extra_info.update(row=row, impl=impl, per=per, unit="ns/input")


@pytest.mark.parametrize("impl", ["native", "reference"])
@pytest.mark.parametrize("name", ALL)
def test_input_pubkey(benchmark, name, impl):
    fn = impls(extract, "input_pubkey").get(impl)
    if fn is None:
        pytest.skip("native backend not enabled")
    case = cases.extract_cases()[name]
    t = case.txin
    assert fn(t.prevout_script, t.script_sig, t.witness) == case.expected
    _info(benchmark, _row(name), impl)
    benchmark(fn, t.prevout_script, t.script_sig, t.witness)


@pytest.mark.parametrize("impl", ["native", "reference"])
@pytest.mark.parametrize("name", ALL)
def test_tx_pubkeys(benchmark, name, impl):
    """Per input inside one `tx_pubkeys` call over a tx of TX_INPUTS such inputs, each with its own key."""
    fn = impls(extract, "tx_pubkeys").get(impl)
    if fn is None:
        pytest.skip("native backend not enabled")
    inputs = cases.tx_of(name, TX_INPUTS)
    tx = [c.txin for c in inputs]
    assert fn(tx) == [c.expected for c in inputs]
    _info(benchmark, _row(name) + f" (tx of {TX_INPUTS})", impl, TX_INPUTS)
    if impl == "reference" and "P2PKH_" in name:
        benchmark.pedantic(fn, (tx,), rounds=3, iterations=1)
    else:
        benchmark(fn, tx)


@pytest.mark.parametrize("name", ALL)
def test_btclib_wallet(benchmark, name):
    case = cases.extract_cases()[name]
    w = peers.wallet_input(case.txin)
    assert peers.wallet_pubkey(w) == case.expected
    _info(benchmark, _row(name), "btclib-wallet")
    benchmark(peers.wallet_pubkey, w)


@pytest.mark.parametrize("name", P2PKH)
def test_window_search(benchmark, name):
    case = cases.extract_cases()[name]
    t = case.txin
    assert peers.window_pubkey(t.prevout_script, t.script_sig) == case.expected
    _info(benchmark, _row(name), "window")
    benchmark(peers.window_pubkey, t.prevout_script, t.script_sig)
