"""Test support for the tweak index: in-memory block files, the test wallet, and an index's whole content."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from coincurve import PrivateKey

import blockfactory as bf
from cli_support import Chain
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
