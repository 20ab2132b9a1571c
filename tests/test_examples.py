"""The runnable examples in examples/, run as a user runs them (a new process, `--examples-python` the interpreter:
by default this one; CI's wheel check gives a fresh venv's, with sp-scan installed from the wheel)."""

from __future__ import annotations

import os
import queue
import subprocess
import threading
from pathlib import Path

import pytest

import kernelchain as kc
import serving
from node_mempool import NodeMempool, wait_for
from spend_support import kernel_verifies, p2wpkh_address
from sp_scan import descriptor
from sp_scan.wallet import Wallet
from sp_scan.wire import TxOut, parse_tx
from test_index_mempool import following, mine

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
W = kc.TEST_WALLET


@pytest.fixture
def python(request) -> str:
    return request.config.getoption("--examples-python")


class Lines:
    """A process's stdout read line by line in a thread; `next` waits for one (a bound in seconds, never a window)."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc, self.lines = proc, queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for text in self.proc.stdout:
            self.lines.put(text.rstrip("\n"))
        self.lines.put(None)

    def next(self, what: str) -> str:
        text = self.lines.get(timeout=120)
        assert text is not None, f"the example ended before {what}: {self.proc.stderr.read()}"
        return text


def coin(txid32: bytes, vout: int) -> str:
    return f"{txid32[::-1].hex()}:{vout}"


def test_the_plugin_sketch_receives_lists_coins_and_signs_through_the_host_keystore(python, kernel_chain, kernel_index, tmp_path):
    desc = tmp_path / "test.desc"
    desc.write_text(str(descriptor.from_keys(W.scan_key32, W.spend_key32, network="test", annotations=(("bh", 0), ("ml", 7)))))
    to, _ = p2wpkh_address(b"plugin")
    env = {**os.environ, "SP_SCAN_KEY": W.scan_key32.hex(), "SP_SCAN_SPEND_KEY": W.spend_key32.hex()}
    args = [python, str(EXAMPLES / "wallet_plugin.py"), str(tmp_path), "--descriptor-file", str(desc), "--network", "regtest", "--source", str(kernel_index), "--pay", f"{to}:20000"]
    done = subprocess.run(args, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = [line.split(" ", 1) for line in done.stdout.splitlines()]
    with Wallet.open(tmp_path / "sp.wallet") as w:
        assert [v for k, v in lines if k == "receive"] == [w.address(), *(w.address(m) for m in (1, 2, 3, 4, 5, 6, 7))]
        unspent = {coin(o.txid32, o.vout): o for o in w.unspent()}
    assert {c.split()[0] for k, c in lines if k == "coin"} == set(unspent)  # listed before the PSBT reserved some
    (signed,) = [v for k, v in lines if k == "signed"]
    tx = parse_tx(bytes.fromhex(signed))
    spent = [unspent[coin(i.outpoint.txid32, i.outpoint.vout)] for i in tx.inputs]
    assert all(kernel_verifies(bytes.fromhex(signed), [TxOut(o.amount, b"\x51\x20" + o.output32) for o in spent]))
    assert any(o.amount == 20_000 for o in tx.outputs)


def test_the_merchant_prints_payments_unconfirmed_arrivals_and_reversals(python, kernel_copy, tmp_path):
    chain, pool = kernel_copy, NodeMempool(kernel_copy)
    db, path = tmp_path / "shop.db", tmp_path / "shop.wallet"
    Wallet.from_keys(path, "regtest", W.scan_key32, W.spend_pubkey33, W.labels).close()
    with following(db, chain, pool) as f, serving.ServerThread(db) as server:
        args = [python, str(EXAMPLES / "merchant.py"), str(path), "--blindbit", server.url, "--mempool-from", str(db), "--interval", "0.05"]
        proc = subprocess.Popen(args, env={**os.environ, "SP_SCAN_KEY": W.scan_key32.hex()}, cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            out = Lines(proc)
            found = chain.found(W)
            paid = []
            while len(paid) < len(found):
                if (text := out.next("the sample chain's payments")).startswith("paid"):
                    paid.append(text.split()[:4])
                else:
                    assert text.startswith("spent"), text
            assert paid == [["paid", coin(x.txid32, x.vout), str(x.amount), "at"] for x in found]
            before = {coin(x.txid32, x.vout): x for x in found}
            reorg = kc.make_reorg(chain)
            pool.chain_moved()
            reversed_, added = set(), coin(reorg.added.txid32, next(p.vout for p in reorg.added.payments if p.wallet == W.name))
            while not (text := out.next("the new branch's payment")).startswith(f"paid {added} "):
                if text.startswith("reversed"):
                    reversed_.add(text.split()[1])
            assert reversed_ == {c for c, x in before.items() if x.height > reorg.fork_height}
            tx = chain.transaction("shop", [chain.reserve.pop()], [("wallet", None), ("other",)])
            pool.accept(tx.tx.serialize())
            wait_for("the payment in the index's mempool", lambda: tx.txid32 in f.listed())  # beside the old branch's txs back in it
            (mine_,) = [p for p in tx.payments if p.wallet == W.name]
            expected = f"unconfirmed {coin(tx.txid32, mine_.vout)} {mine_.amount}"
            while (text := out.next("the unconfirmed payment")) != expected:
                assert text.startswith(("paid", "unconfirmed", "spent")), text  # the new branch's, the old branch's txs in the mempool
            height = mine(chain, pool, [tx])
            while not (text := out.next("the payment mined")).startswith(f"paid {coin(tx.txid32, mine_.vout)} "):
                pass
            assert text.startswith(f"paid {coin(tx.txid32, mine_.vout)} {mine_.amount} at {height}")
        finally:
            proc.terminate()
            proc.wait(60)
    assert proc.returncode == 0, proc.stderr.read()


@pytest.mark.parametrize("example", sorted(EXAMPLES.glob("*.py")), ids=lambda p: p.name)
def test_the_examples_use_only_the_public_api(example):
    """No private module or name, and the library's modules only (`sp_scan.wallet`, `sp_scan.psbt`, errors)."""
    import ast

    for node in ast.walk(ast.parse(example.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sp_scan"):
            assert node.module in ("sp_scan", "sp_scan.wallet", "sp_scan.psbt", "sp_scan.errors"), node.module
            assert not any(a.name.startswith("_") for a in node.names), ast.unparse(node)
        assert not (isinstance(node, ast.Import) and any(a.name.startswith("sp_scan") for a in node.names)), ast.unparse(node)
