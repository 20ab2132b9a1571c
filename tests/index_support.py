"""Test support for the tweak index: in-memory block files, the test wallet, and an index's whole content."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from coincurve import PrivateKey

import blockfactory as bf
from cli_support import Chain, NodeServer
from sp_scan.index import BlockFiles, Index
from sp_scan.scan import Receiver

_KEYS = bf.wallet_cases()[0]["given"]["key_material"]
SCAN_HEX = _KEYS["scan_priv_key"]
SPEND_HEX = PrivateKey(bytes.fromhex(_KEYS["spend_priv_key"])).public_key.format().hex()
WALLET = Receiver(bytes.fromhex(SCAN_HEX), bytes.fromhex(SPEND_HEX))
"""The wallet that `cli_support.spending_chain` blocks pay."""


@dataclass(frozen=True)
class MemBlock:
    """A block file held in memory (what BlockFiles needs: a name and load())."""

    name: str
    raw: bytes
    spent: bytes

    def load(self) -> tuple[bytes, bytes]:
        return self.raw, self.spent


def files_of(chain: Chain, stop: int | None = None, start: int = 0) -> BlockFiles:
    """The chain's blocks start..stop as a regtest block-files source."""
    blocks = chain.blocks[start : None if stop is None else stop + 1]
    return BlockFiles([MemBlock(f"block {h}", tb.raw, tb.spent_bytes) for h, tb in enumerate(blocks, start)], "regtest")


def synced(path: Path, chain: Chain, stop: int | None = None) -> Index:
    """A new regtest index at path, synced from the chain's blocks (0..stop)."""
    index = Index.create(path, "regtest")
    index.sync(files_of(chain, stop))
    return index


def write_files(directory: Path, chain: Chain) -> list[Path]:
    """Each block as NNNN.hex with NNNN.spent.hex beside it; returns the block paths."""
    paths = []
    for h, tb in enumerate(chain.blocks):
        path = directory / f"{h:04d}.hex"
        path.write_text(tb.raw.hex() + "\n")
        (directory / f"{h:04d}.spent.hex").write_text(tb.spent_bytes.hex() + "\n")
        paths.append(path)
    return paths


def content(path: Path) -> dict[str, list]:
    """Every row of every table of an index file, in key order: what two equal indexes share."""
    conn = sqlite3.connect(path)
    try:
        return {
            table: conn.execute(f"SELECT * FROM {table} ORDER BY {order}").fetchall()
            for table, order in (("meta", "key"), ("blocks", "height"), ("txloc", "prefix, height, tx"), ("spends", "height, ordinal"))
        }
    finally:
        conn.close()


SYNC = [sys.executable, "-c", "from sp_scan.cli import main; main()", "index", "sync"]
"""`sp-scan index sync` in a new process."""


def committed_tip(path: Path) -> int:
    """The committed tip height of the index at path; -1 while it is empty or not created yet."""
    if not path.exists():
        return -1
    with Index.open(path, readonly=True) as idx:
        tip = idx.tip()
    return tip[0] if tip else -1


def wait_until(condition, proc: subprocess.Popen | None = None, what: str = "the condition", bound: float = 300.0) -> None:
    """Poll `condition()` until it holds: the wait is for an event, `bound` seconds only turns a hang into a failure.

    Raises:
        AssertionError: `proc` exited first, or `bound` passed.
    """
    deadline = time.monotonic() + bound
    while not condition():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the process exited with status {proc.returncode} before {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {bound:g} s")
        time.sleep(0.01)


def kill_9_then_resume(path: Path, server: NodeServer, tip: int, rounds: int, seed: int, delay: float) -> list[int]:
    """SIGKILL a running `sp-scan index sync` (with its workers; --jobs 1 and 2) `rounds` times, each resuming the
    last, then let one run finish. Each kill waits for an event, never for a time: even rounds kill while the
    node holds the block after a random height (the index is then at exactly that height); odd rounds kill as
    soon as the sync has committed a random height, wherever it then is (fetching, computing, committing),
    with `delay` seconds per request slowing the node.

    Returns:
        The index's tip height after each kill (-1 while empty).
    """
    rng, tips = random.Random(seed), []
    slices = [range(tip * r // rounds, max(tip * (r + 1) // rounds, tip * r // rounds + 1)) for r in range(rounds)]
    for round_, heights in enumerate(slices):
        done = tips[-1] if tips else -1
        target = max(rng.choice(heights), done + 1)
        if target >= tip:
            break  # an earlier free-running round got to the end
        held = round_ % 2 == 0
        if held:
            server.hold(target + 1)
        server.httpd.delay = 0 if held else delay
        args = [*SYNC, "--db", str(path), "--rest", server.url, "--jobs", str(1 + round_ // 2 % 2)]
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            wait_until(lambda: committed_tip(path) >= target, proc, f"the sync committed height {target}")
            if held:
                wait_until(server.held.is_set, proc, "a request for the held block")
        finally:
            os.killpg(proc.pid, signal.SIGKILL)  # the sync and its workers, at once
            proc.communicate()
            server.release()
        tips.append(committed_tip(path))
        assert not held or tips[-1] == target, (held, target, tips)
    server.httpd.delay = 0
    done = subprocess.run([*SYNC, "--db", str(path), "--rest", server.url], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return tips
