"""Shared fixtures: the official BIP352 vectors, parsed into library types."""

from __future__ import annotations

import json
from pathlib import Path

from sp_scan.block import parse_witness
from sp_scan.types import OutPoint, TxInput

ROOT = Path(__file__).resolve().parent.parent
VECTORS = ROOT / "vectors" / "bip352" / "send_and_receive_test_vectors.json"
CASES = json.loads(VECTORS.read_text())


def tx_inputs(vin: list[dict]) -> list[TxInput]:
    """Turn a vector's `vin` list into TxInputs."""
    return [
        TxInput(
            OutPoint.from_display(v["txid"], v["vout"]),
            bytes.fromhex(v["scriptSig"]),
            parse_witness(bytes.fromhex(v["txinwitness"])),
            bytes.fromhex(v["prevout"]["scriptPubKey"]["hex"]),
        )
        for v in vin
    ]


def _ids(kind: str) -> tuple[list[tuple[int, dict]], list[str]]:
    params, ids = [], []
    for n, case in enumerate(CASES):
        objs = case[kind]
        for j, obj in enumerate(objs):
            params.append((n, obj))
            suffix = f"-{j}" if len(objs) > 1 else ""
            ids.append(f"{n:02d}-{case['comment']}{suffix}")
    return params, ids


SENDING, SENDING_IDS = _ids("sending")
RECEIVING, RECEIVING_IDS = _ids("receiving")
