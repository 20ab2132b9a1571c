"""Test support for `sp-scan wallet`: the test wallet's files, the CLI calls, and what a wallet lists.

Every source's test compares `sp-scan wallet list --json` with `sp-scan index scan --json` over an
index of the same chain and with what the sender paid (kernelchain's records).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import kernelchain as kc
from index_support import wait_until
from sp_scan.wallet import Wallet
from test_cli import invoke, json_lines

W = kc.TEST_WALLET
LABEL_ARGS = [a for m in W.labels for a in ("--label", str(m))]
KEY_ARGS = ["--spend-pubkey", W.spend_pubkey33.hex(), *LABEL_ARGS]

WALLET_CLI = [sys.executable, "-c", "from sp_scan.cli import main; main()", "wallet"]
"""`sp-scan wallet` in a new process."""


def scan_key_file(directory: Path, wallet: kc.Wallet = W) -> Path:
    """A file holding the wallet's scan key (64 hex digits and a newline)."""
    path = directory / f"{wallet.name}.scan"
    path.write_text(wallet.scan_key32.hex() + "\n")
    return path


def create(directory: Path, name: str = "test.wallet", birthday: int = 0, wallet: kc.Wallet = W) -> Path:
    """`sp-scan wallet create` of `wallet` on regtest; returns the wallet file's path."""
    path = directory / name
    labels = [a for m in wallet.labels for a in ("--label", str(m))]
    result = invoke(
        "wallet", "create", str(path), "--network", "regtest", "--scan-key-file", str(scan_key_file(directory, wallet)),
        "--spend-pubkey", wallet.spend_pubkey33.hex(), *labels, "--birthday", str(birthday),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return path


def sync(path: Path, *source: str, wallet: kc.Wallet = W):
    """`sp-scan wallet sync PATH --scan-key-file … SOURCE…` in this process (CliRunner's result)."""
    return invoke("wallet", "sync", str(path), "--scan-key-file", str(scan_key_file(path.parent, wallet)), *source)


def listed(path: Path) -> list[dict]:
    """`sp-scan wallet list --json`: the outputs a source proved."""
    result = invoke("wallet", "list", str(path), "--json")
    assert result.exit_code == 0, result.output
    return json_lines(result.stdout)


def unverified(path: Path) -> list[dict]:
    """`sp-scan wallet list --unverified --json`: the outputs only a server's word holds (BlindBit without --verify-with)."""
    result = invoke("wallet", "list", str(path), "--unverified", "--json")
    assert result.exit_code == 0, result.output
    return json_lines(result.stdout)


def index_scan(db: Path, wallet: kc.Wallet = W) -> list[dict]:
    """`sp-scan index scan --json` of the wallet over the index `db`."""
    labels = [a for m in wallet.labels for a in ("--label", str(m))]
    key = scan_key_file(db.parent, wallet)
    result = invoke("index", "scan", "--db", str(db), "--scan-key-file", str(key), "--spend-pubkey", wallet.spend_pubkey33.hex(), *labels, "--json")
    assert result.exit_code == 0, result.output
    return json_lines(result.stdout)


def paid(chain: kc.KernelChain, wallet: kc.Wallet = W, start: int = 0) -> list[dict]:
    """What the sender paid the wallet on the chain's active branch, as `index scan --json` lists it."""
    return [f.to_json() for f in chain.found(wallet, start)]


def wallet_tip(path: Path) -> int:
    """The wallet's committed synced height; -1 before its first block (or before the file exists)."""
    if not path.exists():
        return -1
    with Wallet.open(path) as w:
        tip = w.tip()
    return tip[0] if tip else -1


def kill_9_while_syncing(path: Path, source: list[str], until, what: str) -> None:
    """Start `sp-scan wallet sync PATH SOURCE…` in a new process and SIGKILL it once `until()` holds."""
    args = [*WALLET_CLI, "sync", str(path), "--scan-key-file", str(scan_key_file(path.parent)), *source]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        wait_until(until, proc, what)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()


def rescan(path: Path, height: int, *source: str, wallet: kc.Wallet = W):
    """`sp-scan wallet rescan PATH --from HEIGHT --scan-key-file … SOURCE…` in this process (CliRunner's result)."""
    return invoke("wallet", "rescan", str(path), "--from", str(height), "--scan-key-file", str(scan_key_file(path.parent, wallet)), *source)
